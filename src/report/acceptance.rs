//! `gpuenv check --report FILE`: the acceptance page the buyer sends to the vendor, one
//! self-contained HTML or Markdown file.
//!
//! Owns: the page's layout (the templates under `templates/`), the view structs the
//! templates read, and the escaping of every piece of outside text on it. Must not: probe
//! the host, judge anything, or read the clock: the caller hands it the host report, the
//! raw record, the acceptance items, the bench results judged, the doctor checks, the
//! answer and the time; this module only shapes them into strings and rows.
//!
//! Rendering goes through `minijinja` with escaping on by default in both formats: HTML
//! autoescaping for `*.html.j2`, and a Markdown escaper (the formatter below) for
//! `*.md.j2`. Only text this module built to be inserted whole (a code fence chosen longer
//! than any backtick run of its content) is marked safe. The HTML page carries inline CSS
//! only, with a Content-Security-Policy that forbids every load: it opens with no network.

use std::io;
use std::path::Path;

use minijinja::{AutoEscape, Environment, UndefinedBehavior, Value};
use serde::Serialize;

use crate::db::Db;
use crate::host::system::{CmdOutput, HostRecord, Outcome};
use crate::host::{DiskMedia, DockerProbe, GpuInfo, HostReport, Link, Topology};
use crate::judge::{AcceptVerdict, Acceptance, Check, Verdict};
use crate::resolve::{Answer, Query};

const HTML_TEMPLATE: &str = include_str!("templates/acceptance.html.j2");
const MD_TEMPLATE: &str = include_str!("templates/acceptance.md.j2");

/// The most of one raw capture the page holds; the rest is cut, and the page says so.
pub const CAPTURE_CAP: usize = 512 * 1024;

/// What the report file is written as, from its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageFormat {
    /// `.html` or `.htm`.
    Html,
    /// `.md`.
    Markdown,
}

impl PageFormat {
    /// The format `path`'s extension names (case-insensitive), or why it names none: the
    /// message says what is expected.
    pub fn from_path(path: &Path) -> Result<PageFormat, String> {
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        match ext.as_str() {
            "html" | "htm" => Ok(PageFormat::Html),
            "md" => Ok(PageFormat::Markdown),
            "" => Err("it has no extension; expected FILE.html (or .htm) or FILE.md".into()),
            other => Err(format!(
                "`.{}` is not a report format; expected FILE.html (or .htm) or FILE.md",
                crate::text::excerpt(other)
            )),
        }
    }
}

/// Everything the page shows, as the caller computed it.
pub struct PageInput<'a> {
    /// The compat-db (its date).
    pub db: &'a Db,
    /// The host as probed or replayed.
    pub host: &'a HostReport,
    /// The raw answers behind it, when there are any.
    pub record: Option<&'a HostRecord>,
    /// The order's items, judged.
    pub acceptance: &'a [Acceptance],
    /// The bench results judged, when `--bench-results` gave them.
    pub bench: Option<&'a crate::judge::Measured>,
    /// The doctor checks.
    pub checks: &'a [Check],
    /// The project's query on this host.
    pub query: &'a Query,
    /// Its answer.
    pub answer: &'a Answer,
    /// When the page is written.
    pub written_at: jiff::Timestamp,
}

/// Renders the page.
pub fn page(format: PageFormat, input: &PageInput<'_>) -> io::Result<String> {
    let view = PageView::new(input);
    let env = environment();
    let name = match format {
        PageFormat::Html => "acceptance.html.j2",
        PageFormat::Markdown => "acceptance.md.j2",
    };
    env.get_template(name)
        .and_then(|t| t.render(Value::from(minijinja::value::Serde(&view))))
        .map_err(|e| io::Error::other(format!("the report page did not render: {e:#}")))
}

/// The template environment: both templates, and the fleet page's
/// ([`super::fleet_page`]), which is written the same way; strict about undefined names,
/// escaping by the template's name (`.html.j2` as HTML, `.md.j2` as Markdown).
pub(super) fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_auto_escape_callback(|name| {
        if name.ends_with(".html.j2") || name.ends_with(".htm.j2") {
            AutoEscape::Html
        } else if name.ends_with(".md.j2") {
            AutoEscape::Custom("markdown".into())
        } else {
            AutoEscape::None
        }
    });
    env.set_formatter(|out, state, value| {
        if matches!(state.auto_escape(), AutoEscape::Custom(n) if n == "markdown") && !value.is_safe() {
            let text = if value.is_none() || value.is_undefined() {
                String::new()
            } else {
                value.to_string()
            };
            out.write_str(&markdown_escape(&text))
                .map_err(|_| minijinja::Error::new(minijinja::ErrorKind::WriteFailure, "write"))
        } else {
            minijinja::escape_formatter(out, state, value)
        }
    });
    // The templates are gpuenv's own: a failure here is a bug the tests catch.
    env.add_template("acceptance.html.j2", HTML_TEMPLATE)
        .expect("the HTML report template parses");
    env.add_template("acceptance.md.j2", MD_TEMPLATE)
        .expect("the Markdown report template parses");
    for (name, source) in super::fleet_page::TEMPLATES {
        env.add_template(name, source)
            .expect("the fleet page's templates parse");
    }
    for (name, source) in super::bench::TEMPLATES {
        env.add_template(name, source)
            .expect("the bench page's templates parse");
    }
    env
}

/// Outside text made inert in Markdown (in a paragraph or a table cell): every character
/// Markdown or inline HTML gives a meaning backslash-escaped, line breaks as spaces.
pub fn markdown_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '#' | '~' | '!' | '{' | '}' => {
                out.push('\\');
                out.push(c);
            }
            '&' => out.push_str("&amp;"),
            '\n' | '\r' => out.push(' '),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A backtick fence longer than any run of backticks in `text` (at least three).
pub fn fence_for(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    "`".repeat((longest + 1).max(3))
}

const UNKNOWN: &str = "unknown";

fn known<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| UNKNOWN.to_string(), |v| v.to_string())
}

fn yes_no(v: Option<bool>) -> String {
    known(v.map(|b| if b { "yes" } else { "no" }))
}

fn gb(kib: u64) -> String {
    format!("{:.0} GB", kib as f64 * 1024.0 / 1e9)
}

// ---------------------------------------------------------------------------------------
// The view: what the templates read
// ---------------------------------------------------------------------------------------

#[derive(Serialize)]
struct PageView {
    hostname: String,
    hostname_known: bool,
    written: String,
    version: &'static str,
    db_date: String,
    overrides: Vec<String>,
    order: Vec<OrderRow>,
    order_line: String,
    order_class: &'static str,
    /// The bench results, each figure beside its datasheet.
    bench: Option<super::measured::BenchView>,
    /// Doctor checks that fail, shown beside the verdict: whatever the order says, nobody
    /// reads a green banner above a red check.
    verdict_warnings: Vec<String>,
    checks: Vec<CheckRow>,
    stack: StackView,
    topology: Option<TopoView>,
    topology_absent: String,
    legend: Vec<LegendItem>,
    gpus: Vec<GpuRow>,
    gpus_absent: String,
    machine: Vec<Fact>,
    disks: Vec<DiskRow>,
    rdma: Vec<RdmaRow>,
    interfaces: Vec<IfaceRow>,
    network_facts: Vec<Fact>,
    container: Vec<Fact>,
    issues: Vec<String>,
    captures: Vec<Capture>,
    capture_cap_kib: usize,
}

#[derive(Serialize)]
struct OrderRow {
    item: String,
    expected: String,
    found: String,
    verdict: &'static str,
    class: &'static str,
    rule: String,
}

#[derive(Serialize)]
struct CheckRow {
    id: String,
    verdict: &'static str,
    class: &'static str,
    reason: String,
    findings: Vec<String>,
}

#[derive(Serialize)]
struct StackView {
    query: String,
    verdict: &'static str,
    class: &'static str,
    line: String,
    best: Option<String>,
    install: Option<String>,
}

#[derive(Serialize)]
struct TopoView {
    source: String,
    gpus: Vec<String>,
    nics: Vec<String>,
    rows: Vec<TopoRow>,
    has_cpu: bool,
    has_numa: bool,
}

#[derive(Serialize)]
struct TopoRow {
    label: String,
    cells: Vec<Cell>,
    nic_cells: Vec<Cell>,
    cpu: String,
    numa: String,
}

#[derive(Serialize)]
struct Cell {
    text: String,
    kind: &'static str,
}

#[derive(Serialize)]
struct LegendItem {
    kind: &'static str,
    code: &'static str,
    meaning: &'static str,
}

#[derive(Serialize)]
struct GpuRow {
    index: u32,
    name: String,
    bus_id: String,
    uuid: String,
    memory: String,
    utilization: String,
    pstate: String,
    power: String,
    temperature: String,
    throttle: String,
    persistence: String,
    ecc: String,
    mig: String,
    pcie_gen: String,
    pcie_width: String,
    processes: String,
    source: String,
}

#[derive(Serialize)]
struct Fact {
    name: &'static str,
    value: String,
}

#[derive(Serialize)]
struct DiskRow {
    mount: String,
    device: String,
    fstype: String,
    size: String,
    free: String,
    media: String,
}

#[derive(Serialize)]
struct RdmaRow {
    device: String,
    port: u32,
    link_layer: String,
    state: String,
    rate: String,
}

#[derive(Serialize)]
struct IfaceRow {
    name: String,
    speed: String,
    driver: String,
    state: String,
}

#[derive(Serialize)]
struct Capture {
    title: String,
    kind: &'static str,
    text: String,
    fence: Value,
    cut: Option<String>,
}

impl PageView {
    fn new(input: &PageInput<'_>) -> PageView {
        let h = input.host;
        let hostname = h.hostname.clone().filter(|n| !n.trim().is_empty());
        let (order_line, order_class) = order_line(input.acceptance);
        let (topology, topology_absent) = match &h.topology {
            Some(t) if !t.value.gpus.is_empty() => (Some(topo_view(&t.value, &t.source)), String::new()),
            Some(_) | None => (None, topology_absent(h)),
        };
        PageView {
            hostname_known: hostname.is_some(),
            hostname: hostname.unwrap_or_else(|| "unknown host".into()),
            written: input.written_at.strftime("%Y-%m-%d %H:%M:%S UTC").to_string(),
            version: env!("CARGO_PKG_VERSION"),
            db_date: known(input.db.date()),
            overrides: h.overrides.clone(),
            order: input.acceptance.iter().map(order_row).collect(),
            order_line,
            order_class,
            bench: input
                .bench
                .map(|m| super::measured::view(m, super::measured::Shown::Check)),
            verdict_warnings: input
                .checks
                .iter()
                .filter(|c| c.verdict == Verdict::Fail)
                .map(|c| format!("doctor check {} fails: {}", c.id, c.reason))
                .collect(),
            checks: input.checks.iter().map(check_row).collect(),
            stack: stack_view(input.query, input.answer),
            topology,
            topology_absent,
            legend: LEGEND
                .iter()
                .map(|&(kind, code, meaning)| LegendItem { kind, code, meaning })
                .collect(),
            gpus: h.gpus.iter().map(gpu_row).collect(),
            gpus_absent: match &h.gpu_failure {
                Some(f) => format!("no GPU list: {}", serde_json::to_string(f).unwrap_or_default()),
                None => "no GPU visible".into(),
            },
            machine: machine_facts(h),
            disks: h
                .mounts
                .iter()
                .filter(|m| !matches!(m.fstype.as_str(), "tmpfs" | "devtmpfs" | "overlay" | "squashfs"))
                .map(|m| DiskRow {
                    mount: m.mount.clone(),
                    device: m.device.clone(),
                    fstype: m.fstype.clone(),
                    size: gb(m.size_kib),
                    free: gb(m.avail_kib),
                    media: known(m.media.map(|d| match d {
                        DiskMedia::Nvme => "NVMe",
                        DiskMedia::Ssd => "SSD",
                        DiskMedia::Hdd => "HDD",
                        DiskMedia::Network => "network",
                    })),
                })
                .collect(),
            rdma: h
                .network
                .iter()
                .flat_map(|n| &n.rdma)
                .map(|p| RdmaRow {
                    device: p.device.clone(),
                    port: p.port,
                    link_layer: known(p.link_layer.clone()),
                    state: known(p.state.clone()),
                    rate: known(p.rate_gbps.map(|r| format!("{r} Gb/s"))),
                })
                .collect(),
            interfaces: h
                .network
                .iter()
                .flat_map(|n| &n.interfaces)
                .map(|i| IfaceRow {
                    name: i.name.clone(),
                    speed: known(i.speed_mbps.map(|s| format!("{s} Mb/s"))),
                    driver: known(i.driver.clone()),
                    state: known(i.operstate.clone()),
                })
                .collect(),
            network_facts: vec![Fact {
                name: "GPUDirect RDMA (nvidia_peermem)",
                value: match &h.network {
                    Some(n) => known(n.peermem.map(|p| if p { "loaded" } else { "not loaded" })),
                    None => UNKNOWN.into(),
                },
            }],
            container: container_facts(h),
            issues: h
                .issues
                .iter()
                .map(|i| format!("{}: {}", i.probe, i.message))
                .collect(),
            captures: input.record.map(captures).unwrap_or_default(),
            capture_cap_kib: CAPTURE_CAP / 1024,
        }
    }
}

fn order_line(acceptance: &[Acceptance]) -> (String, &'static str) {
    if acceptance.is_empty() {
        return (
            "no order given (neither --order nor an --expect-* flag): nothing to accept".into(),
            "none",
        );
    }
    let (failed, over) = crate::judge::tally(acceptance);
    if failed == 0 && over == 0 {
        ("ACCEPTED: every item holds".into(), "pass")
    } else {
        // The items that stand in the way, named where the verdict is read.
        let named: Vec<&str> = acceptance.iter().filter(|a| !a.pass).map(|a| a.item).collect();
        (
            format!(
                "NOT ACCEPTED: {failed} failed, {over} decided by an override ({})",
                named.join(", ")
            ),
            "fail",
        )
    }
}

fn order_row(x: &Acceptance) -> OrderRow {
    let (verdict, class) = match x.verdict {
        AcceptVerdict::Pass => ("PASS", "pass"),
        AcceptVerdict::Fail => ("FAIL", "fail"),
        AcceptVerdict::Overridden => ("OVERRIDDEN", "over"),
    };
    let rule = match x.overridden_by {
        Some(var) => format!("{} (found from {var}: an override is not evidence)", x.rule),
        None => x.rule.clone(),
    };
    OrderRow {
        item: x.item.to_string(),
        expected: x.expected.clone(),
        found: x.found.clone(),
        verdict,
        class,
        rule,
    }
}

fn check_row(c: &Check) -> CheckRow {
    let (verdict, class) = match c.verdict {
        Verdict::Pass => ("pass", "pass"),
        Verdict::Skip => ("skip", "skip"),
        Verdict::Warn => ("warn", "warn"),
        Verdict::Fail => ("FAIL", "fail"),
    };
    CheckRow {
        id: c.id.to_string(),
        verdict,
        class,
        reason: c.reason.clone(),
        findings: c
            .findings
            .iter()
            .map(|f| format!("{}: {}", f.code, f.message))
            .collect(),
    }
}

fn stack_view(q: &Query, a: &Answer) -> StackView {
    let (word, detail) = super::query::verdict_summary(a);
    let best = super::query::best_summary(a);
    StackView {
        query: super::query::describe(q),
        verdict: word,
        class: match word {
            "compatible" => "pass",
            "conditional" => "cond",
            _ => "fail",
        },
        line: format!("{word}{detail}"),
        install: best.as_ref().map(|(_, i)| i.clone()),
        best: best.map(|(b, _)| b),
    }
}

/// The kinds of link, fastest first, with what each colour means.
const LEGEND: [(&str, &str, &str); 8] = [
    (
        "nv",
        "NV#",
        "NVLink: a bonded set of # links between the GPUs, the fastest path",
    ),
    ("pix", "PIX", "PCIe through at most one PCIe switch"),
    (
        "pxb",
        "PXB",
        "PCIe through several PCIe switches, not the host bridge",
    ),
    ("phb", "PHB", "PCIe through a PCIe host bridge (the CPU)"),
    (
        "node",
        "NODE",
        "PCIe and the interconnect between host bridges within one NUMA node",
    ),
    (
        "sys",
        "SYS",
        "PCIe and the CPU interconnect: crosses NUMA nodes (QPI/UPI/Infinity Fabric), the slowest path",
    ),
    (
        "soc",
        "SOC",
        "through the CPU socket-level link (older drivers' SYS)",
    ),
    ("self", "X", "the device itself"),
];

fn cell(l: Link) -> Cell {
    let (text, kind) = match l {
        Link::SelfLink => ("X".to_string(), "self"),
        Link::NvLink(n) => (format!("NV{n}"), "nv"),
        Link::Pix => ("PIX".into(), "pix"),
        Link::Pxb => ("PXB".into(), "pxb"),
        Link::Phb => ("PHB".into(), "phb"),
        Link::Node => ("NODE".into(), "node"),
        Link::Sys => ("SYS".into(), "sys"),
        Link::Soc => ("SOC".into(), "soc"),
    };
    Cell { text, kind }
}

fn topo_view(t: &Topology, source: &str) -> TopoView {
    let at = |v: &[Option<String>], i: usize| known(v.get(i).cloned().flatten());
    TopoView {
        source: source.to_string(),
        gpus: t.gpus.clone(),
        nics: t
            .nics
            .iter()
            .map(|n| match &n.device {
                Some(d) if *d != n.label => format!("{} ({d})", n.label),
                _ => n.label.clone(),
            })
            .collect(),
        rows: t
            .gpus
            .iter()
            .enumerate()
            .map(|(i, label)| TopoRow {
                label: label.clone(),
                cells: t
                    .links
                    .get(i)
                    .map(|r| r.iter().copied().map(cell).collect())
                    .unwrap_or_default(),
                nic_cells: t
                    .nic_links
                    .get(i)
                    .map(|r| r.iter().copied().map(cell).collect())
                    .unwrap_or_default(),
                cpu: at(&t.cpu_affinity, i),
                numa: at(&t.numa_affinity, i),
            })
            .collect(),
        has_cpu: !t.cpu_affinity.is_empty(),
        has_numa: !t.numa_affinity.is_empty(),
    }
}

fn topology_absent(h: &HostReport) -> String {
    match h.gpus.len() {
        0 => "No topology: no GPU is visible.".into(),
        1 => "No topology: one GPU, so there are no links between GPUs to draw.".into(),
        n => format!(
            "Topology unknown: the host did not report how its {n} GPUs are connected (nvidia-smi topo -m)."
        ),
    }
}

fn gpu_row(g: &GpuInfo) -> GpuRow {
    let s = g.state.as_ref();
    let total = known(g.memory_total_mib);
    let used = known(s.and_then(|s| s.memory_used_mib));
    let pcie = |cur: Option<u32>, max: Option<u32>| format!("{} / {}", known(cur), known(max));
    GpuRow {
        index: g.index,
        name: g.name.clone(),
        bus_id: known(g.bus_id.clone()),
        uuid: known(g.uuid.clone()),
        memory: format!("{used} / {total} MiB"),
        utilization: known(s.and_then(|s| s.utilization_pct).map(|u| format!("{u}%"))),
        pstate: known(s.and_then(|s| s.pstate.clone())),
        power: format!(
            "{} / {}",
            known(s.and_then(|s| s.power_draw_w).map(|w| format!("{w:.0} W"))),
            known(s.and_then(|s| s.power_limit_w).map(|w| format!("{w:.0} W")))
        ),
        temperature: known(s.and_then(|s| s.temperature_c).map(|t| format!("{t} °C"))),
        throttle: known(s.and_then(|s| s.throttle.as_ref()).map(|t| {
            if t.is_empty() {
                "none".to_string()
            } else {
                t.iter()
                    .map(|r| {
                        serde_json::to_value(r)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_string))
                    })
                    .map(|r| r.unwrap_or_else(|| "?".into()))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        })),
        persistence: yes_no(s.and_then(|s| s.persistence_mode)),
        ecc: match g.ecc_enabled {
            None => UNKNOWN.into(),
            Some(false) => "off".into(),
            Some(true) => format!(
                "on; uncorrected: {} volatile, {} aggregate",
                known(g.ecc_uncorrected_volatile),
                known(g.ecc_uncorrected_aggregate)
            ),
        },
        mig: known(g.mig_enabled.map(|m| if m { "enabled" } else { "disabled" })),
        pcie_gen: format!(
            "{} (card {}, slot {})",
            pcie(g.pcie_gen_current, g.pcie_gen_max),
            known(g.pcie_gen_device_max),
            known(g.pcie_gen_host_max)
        ),
        pcie_width: pcie(g.pcie_width_current, g.pcie_width_max).replace(" / ", "x / ") + "x",
        processes: known(s.and_then(|s| s.processes.as_ref()).map(|p| {
            if p.is_empty() {
                "none".to_string()
            } else {
                p.iter()
                    .map(|p| {
                        format!(
                            "{} {}{}",
                            p.pid,
                            p.name,
                            p.used_mib.map(|m| format!(" ({m} MiB)")).unwrap_or_default()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            }
        })),
        source: known(s.map(|s| s.source.clone())),
    }
}

fn machine_facts(h: &HostReport) -> Vec<Fact> {
    let cpu = h.cpu.as_ref();
    let os = h.os.as_ref().map(|o| {
        if o.pretty_name.is_empty() {
            format!("{} {}", o.id, o.version_id)
        } else {
            o.pretty_name.clone()
        }
    });
    let driver = h.driver.as_ref().map(|d| match &h.driver_cuda {
        Some(c) => format!("{} (CUDA {}) [{}]", d.value, c.value, d.source),
        None => format!("{} [{}]", d.value, d.source),
    });
    vec![
        Fact {
            name: "CPU model",
            value: known(cpu.map(|c| c.model.clone()).filter(|m| !m.is_empty())),
        },
        Fact {
            name: "logical CPUs",
            value: known(cpu.map(|c| c.logical)),
        },
        Fact {
            name: "physical cores",
            value: known(cpu.and_then(|c| c.physical)),
        },
        Fact {
            name: "sockets",
            value: known(cpu.and_then(|c| c.sockets)),
        },
        Fact {
            name: "NUMA nodes",
            value: known(cpu.and_then(|c| c.numa_nodes)),
        },
        Fact {
            name: "memory",
            value: known(
                h.memory_kib
                    .map(|m| format!("{:.0} GiB", m as f64 / (1024.0 * 1024.0))),
            ),
        },
        Fact {
            name: "driver",
            value: known(driver),
        },
        Fact {
            name: "kernel module",
            value: known(h.kernel_module.as_ref().map(|k| {
                format!(
                    "{} ({})",
                    k.value.version,
                    if k.value.open { "open" } else { "proprietary" }
                )
            })),
        },
        Fact {
            name: "NVSwitches",
            value: known(h.nvswitches.as_ref().map(|n| n.value)),
        },
        Fact {
            name: "OS",
            value: known(os),
        },
        Fact {
            name: "kernel",
            value: known(h.kernel.clone()),
        },
        Fact {
            name: "glibc",
            value: known(h.glibc.as_ref().map(|g| g.value.to_string())),
        },
    ]
}

fn container_facts(h: &HostReport) -> Vec<Fact> {
    let mut out = Vec::new();
    match &h.docker {
        Some(DockerProbe::Ok { engine: d }) => {
            out.push(Fact {
                name: "Docker Engine",
                value: format!(
                    "{} (API {})",
                    known(d.server_version.clone()),
                    known(d.api_version.clone())
                ),
            });
            out.push(Fact {
                name: "runtimes",
                value: if d.runtimes.is_empty() {
                    "none".into()
                } else {
                    d.runtimes.join(", ")
                },
            });
            out.push(Fact {
                name: "default runtime",
                value: known(d.default_runtime.clone()),
            });
            out.push(Fact {
                name: "CDI spec directories",
                value: if d.cdi_spec_dirs.is_empty() {
                    "none reported".into()
                } else {
                    d.cdi_spec_dirs.join(", ")
                },
            });
        }
        Some(DockerProbe::Error { error }) => out.push(Fact {
            name: "Docker Engine",
            value: format!("not reachable: {error}"),
        }),
        None => out.push(Fact {
            name: "Docker Engine",
            value: UNKNOWN.into(),
        }),
    }
    out.push(Fact {
        name: "nvidia-ctk",
        value: known(h.nvidia_ctk.clone()),
    });
    out.push(Fact {
        name: "CDI specs",
        value: if h.cdi_specs.is_empty() {
            "none".into()
        } else {
            h.cdi_specs
                .iter()
                .map(|s| format!("{} ({})", s.path, s.kind.as_deref().unwrap_or("unreadable")))
                .collect::<Vec<_>>()
                .join(", ")
        },
    });
    out
}

/// One capture, cut to [`CAPTURE_CAP`] bytes (at a character boundary).
fn capture(title: String, kind: &'static str, text: String) -> Capture {
    let (text, cut) = if text.len() > CAPTURE_CAP {
        let mut end = CAPTURE_CAP;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        (
            text[..end].to_string(),
            Some(format!(
                "cut at {} KiB of {} KiB",
                CAPTURE_CAP / 1024,
                text.len().div_ceil(1024)
            )),
        )
    } else {
        (text, None)
    };
    Capture {
        fence: Value::from_safe_string(fence_for(&text)),
        title,
        kind,
        text,
        cut,
    }
}

fn command_text(c: &CmdOutput) -> String {
    let how = match &c.outcome {
        Outcome::Exited => format!("exit status {}", known(c.status)),
        Outcome::NotFound => "not found".into(),
        Outcome::TimedOut => "timed out".into(),
        Outcome::Failed(why) => format!("could not start: {why}"),
    };
    let mut text = format!("[{how}]\n");
    text.push_str(&c.stdout);
    if !c.stderr.is_empty() {
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str("[stderr]\n");
        text.push_str(&c.stderr);
    }
    text
}

/// Every raw answer of the record, commands first; environment variables are left out
/// (they may hold secrets), and so is `/etc/machine-id`, which machine-id(5) says is
/// confidential.
fn captures(r: &HostRecord) -> Vec<Capture> {
    let mut out = Vec::new();
    for (cmd, o) in &r.commands {
        out.push(capture(cmd.clone(), "command", command_text(o)));
    }
    for (path, text) in &r.files {
        if path == "/etc/machine-id" {
            continue;
        }
        out.push(capture(
            path.clone(),
            "file",
            text.clone().unwrap_or_else(|| "[absent]".into()),
        ));
    }
    for (dir, names) in &r.dirs {
        out.push(capture(
            format!("{dir}/"),
            "directory",
            names.as_ref().map_or_else(|| "[absent]".into(), |n| n.join("\n")),
        ));
    }
    if let Some(n) = &r.nvml {
        out.push(capture(
            "NVML".into(),
            "library",
            serde_json::to_string_pretty(n).unwrap_or_default(),
        ));
    }
    if let Some(d) = &r.docker {
        out.push(capture(
            "Docker Engine /info".into(),
            "daemon",
            serde_json::to_string_pretty(d).unwrap_or_default(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_by_extension() {
        assert_eq!(PageFormat::from_path(Path::new("a.html")), Ok(PageFormat::Html));
        assert_eq!(PageFormat::from_path(Path::new("a.HTM")), Ok(PageFormat::Html));
        assert_eq!(PageFormat::from_path(Path::new("a.md")), Ok(PageFormat::Markdown));
        assert!(
            PageFormat::from_path(Path::new("a.pdf"))
                .unwrap_err()
                .contains(".pdf")
        );
        assert!(PageFormat::from_path(Path::new("a")).is_err());
    }

    #[test]
    fn fences_outlast_backtick_runs() {
        assert_eq!(fence_for("plain"), "```");
        assert_eq!(fence_for("a ```` b ` c"), "`````");
    }

    #[test]
    fn markdown_text_is_inert() {
        assert_eq!(markdown_escape("<script>|`x`*\n"), "\\<script\\>\\|\\`x\\`\\* ");
    }

    #[test]
    fn html_template_escapes_and_markdown_escapes() {
        let env = environment();
        let html = env
            .render_named_str("t.html.j2", "{{ x }}", minijinja::context! { x => "<script>" })
            .unwrap();
        assert_eq!(html, "&lt;script&gt;");
        let md = env
            .render_named_str("t.md.j2", "{{ x }}", minijinja::context! { x => "<b>|" })
            .unwrap();
        assert_eq!(md, "\\<b\\>\\|");
    }

    #[test]
    fn captures_are_capped() {
        let c = capture("big".into(), "file", "é".repeat(CAPTURE_CAP));
        assert!(c.text.len() <= CAPTURE_CAP);
        assert!(c.cut.unwrap().contains("cut at 512 KiB"));
    }
}
