//! `gpuenv doctor` and `gpuenv check`: the host report, checks, acceptance.

use std::io::{self, Write};

use super::doc::{CheckDoc, DoctorDoc};
use super::{QueryOpts, SCHEMA_VERSION, Styles, write_json};
use crate::db::Db;
use crate::host::{DockerProbe, HostReport};
use crate::judge::{AcceptVerdict, Acceptance, Check, Measured, Verdict};
use crate::resolve::{Answer, Query};

fn mark(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "pass",
        Verdict::Skip => "skip",
        Verdict::Warn => "warn",
        Verdict::Fail => "FAIL",
    }
}

fn gb(kib: u64) -> f64 {
    kib as f64 * 1024.0 / 1e9
}

/// The facts, one line per subject, each with where it came from.
fn host_lines(out: &mut dyn Write, db: &Db, h: &HostReport) -> io::Result<()> {
    if let Some(name) = &h.hostname {
        writeln!(out, "host:       {name}")?;
    }
    gpu_lines(out, db, h)?;
    cuda_lines(out, h)?;
    python_lines(out, h)?;
    docker_lines(out, h)?;
    system_lines(out, h)
}

/// The GPUs, the driver (user space, kernel module and libraries) and the links.
fn gpu_lines(out: &mut dyn Write, db: &Db, h: &HostReport) -> io::Result<()> {
    if h.gpus.is_empty() {
        writeln!(out, "GPUs:       none visible")?;
    } else {
        let list: Vec<String> = crate::judge::gpu_groups(db, h)
            .iter()
            .map(|g| {
                let rec = g
                    .record
                    .as_ref()
                    .map(|(name, sm)| format!(" = {name} {sm}"))
                    .unwrap_or_default();
                let mem = g.memory_mib.map(|m| format!(", {m} MiB")).unwrap_or_default();
                format!("{}x {}{rec}{mem}", g.count, g.name)
            })
            .collect();
        writeln!(
            out,
            "GPUs:       {}  [{}]",
            list.join("; "),
            h.gpus_source.as_deref().unwrap_or("?")
        )?;
    }
    match (&h.driver, &h.driver_cuda) {
        (Some(d), Some(c)) => writeln!(out, "driver:     {} (CUDA {})  [{}]", d.value, c.value, d.source)?,
        (Some(d), None) => writeln!(out, "driver:     {}  [{}]", d.value, d.source)?,
        _ => writeln!(out, "driver:     none")?,
    }
    if let Some(k) = &h.kernel_module {
        writeln!(
            out,
            "module:     {} ({})  [{}]",
            k.value.version,
            if k.value.open { "open" } else { "proprietary" },
            k.source
        )?;
    }
    for l in &h.driver_libraries {
        writeln!(
            out,
            "library:    {} {}  [{}]",
            l.path,
            l.version.as_deref().unwrap_or("?"),
            l.source
        )?;
    }
    if let Some(t) = &h.topology {
        let l = crate::judge::link_summary(&t.value);
        let (n, pairs) = (l.gpus, l.pairs);
        let text = match l.nvlink {
            0 => format!("PCIe only between the {n} GPUs"),
            k if k == pairs => format!("NVLink between all {pairs} GPU pairs"),
            k => format!("NVLink between {k} of {pairs} GPU pairs, PCIe between the others"),
        };
        writeln!(out, "links:      {text}  [{}]", t.source)?;
        for (i, nic) in t.value.nics.iter().enumerate() {
            let near: Vec<String> = t
                .value
                .nic_links
                .iter()
                .enumerate()
                .filter_map(|(g, row)| {
                    row.get(i)
                        .filter(|l| !matches!(l, crate::host::Link::Sys | crate::host::Link::Soc))
                        .map(|l| {
                            format!(
                                "{} {}",
                                t.value.gpus.get(g).map_or("?", String::as_str),
                                crate::judge::layout::link_word(*l)
                            )
                        })
                })
                .collect();
            writeln!(
                out,
                "NIC:        {}{}: {}  [{}]",
                nic.label,
                nic.device
                    .as_deref()
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default(),
                if near.is_empty() {
                    "no GPU nearer than SYS".to_string()
                } else {
                    near.join(", ")
                },
                t.source
            )?;
        }
    }
    if let Some(n) = &h.nvswitches {
        writeln!(out, "NVSwitch:   {}  [{}]", n.value, n.source)?;
    }
    for g in &h.gpus {
        let Some(s) = &g.state else { continue };
        let mut parts = Vec::new();
        if let Some(u) = s.memory_used_mib {
            parts.push(format!("{u} MiB used"));
        }
        if let Some(u) = s.utilization_pct {
            parts.push(format!("{u}% busy"));
        }
        if let Some(p) = &s.pstate {
            parts.push(p.clone());
        }
        if let Some(t) = s.temperature_c {
            parts.push(format!("{t} C"));
        }
        match (s.power_draw_w, s.power_limit_w) {
            (Some(d), Some(l)) => parts.push(format!("{d:.0}/{l:.0} W")),
            (Some(d), None) => parts.push(format!("{d:.0} W")),
            _ => {}
        }
        if let Some(n) = s.processes.as_ref().map(Vec::len) {
            parts.push(format!("{n} process{}", if n == 1 { "" } else { "es" }));
        }
        if let Some(p) = s.persistence_mode {
            parts.push(format!("persistence {}", if p { "on" } else { "off" }));
        }
        writeln!(out, "GPU {}:      {}  [{}]", g.index, parts.join(", "), s.source)?;
    }
    Ok(())
}

/// CUDA toolkits, cuDNN and NCCL.
fn cuda_lines(out: &mut dyn Write, h: &HostReport) -> io::Result<()> {
    let mut cuda = Vec::new();
    if let Some(n) = &h.nvcc {
        cuda.push(format!("nvcc {} on PATH", n.value));
    }
    for t in &h.toolkits {
        cuda.push(format!(
            "{} at {}{}",
            t.version,
            t.path,
            if t.nvcc { " (with nvcc)" } else { "" }
        ));
    }
    writeln!(
        out,
        "CUDA:       {}",
        if cuda.is_empty() {
            "no toolkit".to_string()
        } else {
            cuda.join("; ")
        }
    )?;
    let libs = |l: &[crate::host::probe::LibFound]| {
        if l.is_empty() {
            "none on the system".to_string()
        } else {
            l.iter()
                .map(|x| format!("{} ({})", x.version.as_deref().unwrap_or("?"), x.path))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    writeln!(out, "cuDNN:      {}", libs(&h.cudnn))?;
    writeln!(out, "NCCL:       {}", libs(&h.nccl))?;
    Ok(())
}

/// Each Python, with its torch or why there is none.
fn python_lines(out: &mut dyn Write, h: &HostReport) -> io::Result<()> {
    if h.pythons.is_empty() {
        writeln!(out, "Python:     none found")?;
    }
    for p in &h.pythons {
        let torch = match (&p.torch, &p.error) {
            (_, Some(e)) => e.clone(),
            (Some(t), _) => format!(
                "torch {} (CUDA {}{}), cuda available: {}{}",
                t.version,
                t.cuda.as_deref().unwrap_or("none"),
                t.cudnn.map(|c| format!(", cuDNN {c}")).unwrap_or_default(),
                t.cuda_available,
                if t.devices.is_empty() {
                    String::new()
                } else {
                    format!(", {} device(s)", t.devices.len())
                }
            ),
            (None, None) => p
                .torch_error
                .clone()
                .map_or("no torch".to_string(), |e| format!("torch does not import: {e}")),
        };
        writeln!(
            out,
            "Python:     {} {} ({}): {torch}",
            p.path,
            p.version.as_deref().unwrap_or("?"),
            p.origin
        )?;
    }
    Ok(())
}

/// Docker, its runtimes and the CDI specs it reads.
fn docker_lines(out: &mut dyn Write, h: &HostReport) -> io::Result<()> {
    match &h.docker {
        Some(DockerProbe::Ok { engine: d }) => {
            let cdi = if d.cdi_spec_dirs.is_empty() {
                String::new()
            } else {
                let specs: Vec<String> = h
                    .cdi_specs
                    .iter()
                    .map(|s| format!("{} ({})", s.path, s.kind.as_deref().unwrap_or("unreadable")))
                    .collect();
                format!(
                    "; CDI specs: {}",
                    if specs.is_empty() {
                        format!("none in {}", d.cdi_spec_dirs.join(", "))
                    } else {
                        specs.join(", ")
                    }
                )
            };
            writeln!(
                out,
                "Docker:     {} (API {}), runtimes: {} (default {}){}{cdi}",
                d.server_version.as_deref().unwrap_or("?"),
                d.api_version.as_deref().unwrap_or("?"),
                d.runtimes.join(", "),
                d.default_runtime.as_deref().unwrap_or("?"),
                h.nvidia_ctk
                    .as_deref()
                    .map(|v| format!("; nvidia-ctk {v}"))
                    .unwrap_or_default()
            )?
        }
        Some(DockerProbe::Error { error }) => writeln!(out, "Docker:     not reachable: {error}")?,
        None => {}
    }
    Ok(())
}

/// The OS, CPU, memory and disks; the overrides and the probes' issues.
fn system_lines(out: &mut dyn Write, h: &HostReport) -> io::Result<()> {
    let os = h.os.as_ref().map(|o| {
        if o.pretty_name.is_empty() {
            format!("{} {}", o.id, o.version_id)
        } else {
            o.pretty_name.clone()
        }
    });
    writeln!(
        out,
        "system:     {}, glibc {}, kernel {}{}",
        os.as_deref().unwrap_or("unknown OS"),
        h.glibc.as_ref().map_or("?".to_string(), |g| g.value.to_string()),
        h.kernel.as_deref().unwrap_or("?"),
        // Printed only where probed, so recorded hosts without the probe read as before.
        h.arch
            .as_ref()
            .map_or(String::new(), |a| format!(", {}", a.value))
    )?;
    if let Some(c) = &h.cpu {
        writeln!(
            out,
            "CPU:        {} ({} logical{})",
            if c.model.is_empty() {
                "unknown model"
            } else {
                &c.model
            },
            c.logical,
            [
                c.physical.map(|p| format!(", {p} cores")),
                c.sockets
                    .map(|s| format!(", {s} socket{}", if s == 1 { "" } else { "s" })),
                c.numa_nodes
                    .map(|n| format!(", {n} NUMA node{}", if n == 1 { "" } else { "s" })),
            ]
            .into_iter()
            .flatten()
            .collect::<String>()
        )?;
    }
    if let Some(m) = h.memory_kib {
        writeln!(out, "memory:     {:.0} GiB", m as f64 / (1024.0 * 1024.0))?;
    }
    for m in h
        .mounts
        .iter()
        .filter(|m| !matches!(m.fstype.as_str(), "tmpfs" | "devtmpfs" | "overlay" | "squashfs"))
    {
        let media = match m.media {
            Some(crate::host::DiskMedia::Nvme) => ", nvme",
            Some(crate::host::DiskMedia::Ssd) => ", ssd",
            Some(crate::host::DiskMedia::Hdd) => ", hdd",
            Some(crate::host::DiskMedia::Network) => ", network",
            None => "",
        };
        writeln!(
            out,
            "disk:       {} {:.0} GB, {:.0} GB free ({} {}{media})",
            m.mount,
            gb(m.size_kib),
            gb(m.avail_kib),
            m.device,
            m.fstype
        )?;
    }
    if let Some(n) = &h.network {
        for p in &n.rdma {
            writeln!(
                out,
                "RDMA:       {}/{} {} {} {}  [{}]",
                p.device,
                p.port,
                p.link_layer.as_deref().unwrap_or("?"),
                p.rate_gbps.map_or("?".to_string(), |r| format!("{r} Gb/s")),
                p.state.as_deref().unwrap_or("?"),
                p.source
            )?;
        }
        for i in &n.interfaces {
            writeln!(
                out,
                "NIC:        {} {} {}{}",
                i.name,
                i.speed_mbps.map_or("speed unknown".to_string(), |s| format!(
                    "{} Gb/s",
                    s as f64 / 1000.0
                )),
                i.operstate.as_deref().unwrap_or("?"),
                i.driver.as_deref().map(|d| format!(" ({d})")).unwrap_or_default()
            )?;
        }
        if let Some(p) = n.peermem {
            writeln!(
                out,
                "GPUDirect:  nvidia_peermem {}  [/proc/modules]",
                if p { "loaded" } else { "not loaded" }
            )?;
        }
    }
    if !h.overrides.is_empty() {
        writeln!(out, "overrides:  {}", h.overrides.join(", "))?;
    }
    for i in &h.issues {
        writeln!(out, "issue:      {}: {}", i.probe, i.message)?;
    }
    Ok(())
}

/// `gpuenv doctor`.
pub fn doctor(
    out: &mut dyn Write,
    db: &Db,
    h: &HostReport,
    checks: &[Check],
    json_out: bool,
    styles: Styles,
) -> io::Result<()> {
    if json_out {
        return write_json(
            out,
            &DoctorDoc {
                schema_version: SCHEMA_VERSION,
                db_date: db.date(),
                host: h.clone(),
                checks: checks.to_vec(),
                overrides: h.overrides.clone(),
            },
        );
    }
    host_lines(out, db, h)?;
    writeln!(out)?;
    writeln!(out, "checks:")?;
    for c in checks {
        write!(out, "  ")?;
        styles.paint(out, mark(c.verdict))?;
        writeln!(out, "  {}: {}", c.id, c.reason)?;
        for f in &c.findings {
            writeln!(out, "          {}: {}", f.code, f.message)?;
        }
    }
    let count = |v| checks.iter().filter(|c| c.verdict == v).count();
    writeln!(
        out,
        "summary: {} fail, {} warn, {} pass, {} skipped",
        count(Verdict::Fail),
        count(Verdict::Warn),
        count(Verdict::Pass),
        count(Verdict::Skip)
    )
}

/// What `check` decided about the machine, beside the answer for the project.
pub struct CheckInput<'a> {
    /// The order's items and the health items.
    pub acceptance: &'a [Acceptance],
    /// The bench results judged, when `--bench-results` gave them.
    pub bench: Option<&'a Measured>,
    /// The `GPUENV_*` overrides used.
    pub overrides: &'a [String],
}

/// `gpuenv check`: the overrides used, acceptance lines, the bench results, then the
/// answer for the project.
pub fn check(
    out: &mut dyn Write,
    q: &Query,
    a: &Answer,
    opts: &QueryOpts,
    input: &CheckInput<'_>,
) -> io::Result<()> {
    let CheckInput {
        acceptance,
        bench,
        overrides,
    } = *input;
    if opts.json {
        return write_json(
            out,
            &CheckDoc {
                answer: super::query::answer_json(q, a, opts),
                acceptance: acceptance.to_vec(),
                accepted: acceptance.iter().all(|x| x.pass),
                overrides: overrides.to_vec(),
                bench: bench.cloned(),
            },
        );
    }
    if !overrides.is_empty() {
        writeln!(
            out,
            "overrides:  {} (facts they replace are not evidence for acceptance)",
            overrides.join(", ")
        )?;
        writeln!(out)?;
    }
    if !acceptance.is_empty() {
        writeln!(out, "acceptance against the order:")?;
        for x in acceptance {
            match (x.verdict, x.overridden_by) {
                (AcceptVerdict::Overridden, Some(var)) => {
                    write!(out, "  ")?;
                    opts.styles.paint(out, "OVER")?;
                    writeln!(
                        out,
                        "  {}: expected {}, found {} from {var} (an override is not evidence)",
                        x.item, x.expected, x.found
                    )?;
                }
                (v, _) => {
                    write!(out, "  ")?;
                    opts.styles
                        .paint(out, if v == AcceptVerdict::Pass { "pass" } else { "FAIL" })?;
                    writeln!(out, "  {}: expected {}, found {}", x.item, x.expected, x.found)?;
                    writeln!(out, "          rule: {}", x.rule)?;
                }
            }
        }
        let (failed, over) = crate::judge::tally(acceptance);
        match (failed, over) {
            (0, 0) => writeln!(out, "accepted: every item holds")?,
            _ => {
                // The items in the way, named on the verdict's line as on the page.
                let named: Vec<&str> = acceptance.iter().filter(|a| !a.pass).map(|a| a.item).collect();
                writeln!(
                    out,
                    "not accepted: {failed} failed, {over} decided by an override ({})",
                    named.join(", ")
                )?
            }
        }
        writeln!(out)?;
    }
    if let Some(m) = bench {
        super::measured::text(out, m, super::measured::Shown::Check, opts.styles)?;
        writeln!(out)?;
    }
    super::query::query(out, q, a, opts)
}
