//! `gpuenv check --report FILE`: the acceptance page, HTML or Markdown, written atomically
//! beside stdout (which stays as it was); bad targets refused before any probe; outside
//! text escaped; and the HTML page opened in a real headless browser (Debian's chromium),
//! which must draw the topology grid with no error and no network request.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::support::{derived_host, fixture, gpuenv, run_bounded, services};

const H100: &str = "hosts/8x-h100-nvlink/host.json";

fn host() -> String {
    fixture(H100).to_str().unwrap().to_string()
}

/// `check` on the 8x H100 host with `--report path` and `extra`.
fn check_report(host: &str, path: &Path, extra: &[&str]) -> crate::support::Run {
    let p = path.to_str().unwrap();
    // The recorded host's NVML readings hold no processes or clock-event reasons: unknown
    // health is allowed, so that the page shown is an accepted one.
    let mut args = vec![
        "check",
        "--host-facts",
        host,
        "--expect-gpus",
        "8",
        "--allow-health",
        "unknown",
        "--report",
        p,
    ];
    args.extend_from_slice(extra);
    gpuenv(&args)
}

/// The text of the `<table id="topology">` element.
fn topology_table(html: &str) -> &str {
    let start = html.find("<table id=\"topology\"").expect("a topology table");
    let end = html[start..].find("</table>").expect("the topology table ends") + start;
    &html[start..end]
}

/// Asserts the topology grid holds one link cell per GPU pair and per GPU and NIC.
fn assert_grid(table: &str, gpus: usize) {
    let nics = table.matches("class=\"nic-col\"").count();
    let cells = table.matches("class=\"link ").count();
    assert_eq!(
        cells,
        gpus * gpus + gpus * nics,
        "{gpus} GPUs and {nics} NICs: link cells in\n{table}"
    );
    assert_eq!(table.matches("class=\"gpu-col\"").count(), gpus, "{table}");
    assert_eq!(table.matches("class=\"link link-self\"").count(), gpus, "{table}");
    assert_eq!(
        table.matches("class=\"link link-nv\">NV18<").count(),
        gpus * (gpus - 1),
        "{table}"
    );
}

#[test]
fn html_page_holds_order_topology_and_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("acceptance.html");
    let run = check_report(&host(), &page, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // stdout is what check prints without --report.
    let plain = gpuenv(&[
        "check",
        "--host-facts",
        &host(),
        "--expect-gpus",
        "8",
        "--allow-health",
        "unknown",
    ]);
    assert_eq!(run.stdout, plain.stdout);

    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"), "{}", &html[..200]);
    assert!(
        html.contains("Acceptance report: unknown host"),
        "hostname fallback"
    );
    assert!(html.contains(&format!("gpuenv {}", env!("CARGO_PKG_VERSION"))));
    assert!(html.contains("UTC"));
    // The order: its row and the overall line.
    assert!(
        html.contains("<td>gpus</td><td>8</td><td>8</td><td class=\"verdict pass\">PASS</td>"),
        "acceptance row"
    );
    assert!(html.contains("ACCEPTED: every item holds"));
    // The doctor checks and the stack verdict.
    for id in ["gpus-visible", "driver-module", "gpu-health", "disk-free"] {
        assert!(html.contains(&format!("<td>{id}</td>")), "doctor check {id}");
    }
    assert!(html.contains("compatible ("), "stack verdict");
    // The topology grid, 8x8, with its legend.
    assert_grid(topology_table(&html), 8);
    assert!(html.contains("class=\"legend\""));
    assert!(html.contains("crosses NUMA nodes"));
    // GPU state: unknowns said, not blank.
    assert!(html.contains("<table id=\"gpu-state\">"));
    assert_eq!(html.matches("<td>NVIDIA H100 80GB HBM3</td>").count(), 8);
    assert!(html.contains("<td>unknown</td>"));
    // The machine.
    assert!(html.contains("AMD EPYC 72F3 8-Core Processor"));
    assert!(
        html.contains("<td>&#x2f;data</td>"),
        "the data disk (minijinja escapes `/`)"
    );
    // The evidence: every command and file of the record, in a collapsible block.
    assert!(html.contains("<details class=\"capture\"><summary>nvidia-smi topo -m<"));
    assert!(html.contains("<summary>&#x2f;proc&#x2f;cpuinfo<"));
    assert!(html.contains("NIC Legend:"), "the raw topo -m output");
    // Self-contained: no script, no external resource, a policy that forbids loads.
    assert!(!html.contains("<script"));
    assert!(!html.contains("src="));
    assert!(!html.contains("href="));
    assert!(html.contains("Content-Security-Policy"));
    // Environment variables are not evidence (secrets).
    assert!(!html.contains("CONDA_PREFIX"));
    // Written atomically: no temporary file left beside it.
    assert_alone(dir.path(), "acceptance.html");
}

#[test]
fn markdown_page_has_its_sections_and_tables() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("acceptance.md");
    let run = check_report(&host(), &page, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let md = std::fs::read_to_string(&page).unwrap();
    let lines: Vec<&str> = md.lines().collect();
    assert_eq!(lines[0], "# Acceptance report: unknown host");
    let headings: Vec<&str> = lines.iter().copied().filter(|l| l.starts_with("## ")).collect();
    assert_eq!(
        headings,
        [
            "## The order",
            "## Doctor checks",
            "## Software stack",
            "## GPU topology",
            "## GPU state",
            "## The machine",
            "## Evidence: what the host answered",
        ]
    );
    assert!(lines.contains(&"| gpus | 8 | 8 | **PASS** | at least the number ordered |"));
    assert!(lines.contains(&"**ACCEPTED: every item holds**"));
    // The topology: a header, a separator and a row per GPU, each with 8 GPU cells.
    let topo = table_rows(&lines, "## GPU topology", "## GPU state");
    assert_eq!(topo.len(), 2 + 8, "{topo:#?}");
    for (i, row) in topo[2..].iter().enumerate() {
        assert!(row.starts_with(&format!("| **GPU{i}** |")), "{row}");
        assert_eq!(row.matches(" NV18 |").count(), 7, "{row}");
        assert_eq!(row.matches(" X |").count(), 1, "{row}");
    }
    assert_cells_match_headers(&lines);
    // GPU state rows, and the evidence in fenced blocks.
    assert_eq!(md.matches("| NVIDIA H100 80GB HBM3 |").count(), 8);
    assert!(md.contains("### nvidia-smi topo -m (command)\n\n```text\n[exit status 0]\n"));
    assert!(md.contains("### /proc/cpuinfo (file)"));
    assert!(!md.contains("CONDA_PREFIX"));
}

#[test]
fn other_formats_and_unwritable_targets_are_refused_before_probing() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["acceptance.pdf", "acceptance"] {
        let page = dir.path().join(name);
        let run = check_report(&host(), &page, &[]);
        assert_eq!(run.code, 2, "{name}: {}", run.stderr);
        assert!(run.stderr.contains("--report"), "{}", run.stderr);
        assert!(run.stderr.contains(name), "{}", run.stderr);
        assert!(run.stderr.contains("FILE.html"), "{}", run.stderr);
        assert!(run.stdout.is_empty(), "refused before check ran: {}", run.stdout);
        assert!(!page.exists());
    }
    // Refused before the host is read: a missing --host-facts is not what is reported.
    let run = check_report("/nonexistent/host.json", &dir.path().join("a.pdf"), &[]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("a.pdf"), "{}", run.stderr);
    // A directory named like a page is not replaced.
    let folder = dir.path().join("page.html");
    std::fs::create_dir(&folder).unwrap();
    let run = check_report(&host(), &folder, &[]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("page.html"), "{}", run.stderr);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(folder.is_dir());
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 0);
    // An existing regular file is replaced.
    let page = dir.path().join("again.md");
    std::fs::write(&page, "old").unwrap();
    let run = check_report(&host(), &page, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        std::fs::read_to_string(&page)
            .unwrap()
            .starts_with("# Acceptance report")
    );
}

const HOSTILE: &str = "<script>alert(1)</script>";

/// The 8x H100 host with hostile text in a GPU name, a process name and a raw capture.
fn hostile_host() -> tempfile::TempDir {
    derived_host("8x-h100-nvlink", |r| {
        let gpu = &mut r["nvml"]["gpus"][0];
        gpu["name"] = HOSTILE.into();
        gpu["state"] = serde_json::json!({
            "source": "nvml",
            "memory_used_mib": 1024,
            "processes": [{"pid": 4242, "name": HOSTILE, "used_mib": 1000}],
        });
        r["files"]["/etc/os-release"] =
            format!("PRETTY_NAME=\"Evil </pre>{HOSTILE} ``` `x`\"\nID=ubuntu\nVERSION_ID=\"22.04\"\n").into();
        r["commands"]["nvidia-smi topo -m"]["stderr"] = format!("</pre></details>{HOSTILE}").into();
    })
}

#[test]
fn hostile_text_is_escaped() {
    let h = hostile_host();
    let dir = tempfile::tempdir().unwrap();
    let host = h.path().join("host.json");
    let host = host.to_str().unwrap();

    let page = dir.path().join("a.html");
    let run = check_report(host, &page, &[]);
    assert!(run.code == 0 || run.code == 1, "{}", run.stderr);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("<script"), "unescaped script");
    assert!(!html.contains("alert(1)</"), "unescaped close tag");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;&#x2f;script&gt;"));
    // The capture's `</pre>` did not close the block: one <pre> close per open.
    assert_eq!(html.matches("<pre>").count(), html.matches("</pre>").count());
    assert_eq!(
        html.matches("<details").count(),
        html.matches("</details>").count()
    );
    assert!(
        html.contains("4242 &lt;script&gt;"),
        "the process is listed, escaped"
    );

    let page = dir.path().join("a.md");
    let run = check_report(host, &page, &[]);
    assert!(run.code == 0 || run.code == 1, "{}", run.stderr);
    let md = std::fs::read_to_string(&page).unwrap();
    // Outside a fence, the text is escaped; inside, the fence outlasts its backticks.
    for line in md.lines().filter(|l| l.starts_with('|')) {
        assert!(!line.contains("<script>"), "{line}");
    }
    assert!(md.contains("\\<script\\>alert(1)\\</script\\>"));
    let os = md
        .find("### /etc/os-release (file)")
        .expect("the os-release capture");
    let block = &md[os..];
    assert!(
        block.contains("\n````text\nPRETTY_NAME=\"Evil </pre><script>"),
        "{block}"
    );
}

// ---------------------------------------------------------------------------------------
// A real browser
// ---------------------------------------------------------------------------------------

/// chromium (or chromium-browser) on PATH, when there is one.
fn chromium_on_path() -> Option<PathBuf> {
    ["chromium", "chromium-browser"].into_iter().find_map(|name| {
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

fn chromium() -> PathBuf {
    chromium_on_path()
        .unwrap_or_else(|| panic!("no chromium on PATH, though scripts/test-services installs it"))
}

/// The table rows (lines starting `|`) of a Markdown page between the heading `from` and
/// the heading `to`.
pub fn table_rows<'a>(lines: &[&'a str], from: &str, to: &str) -> Vec<&'a str> {
    lines
        .iter()
        .copied()
        .skip_while(|l| *l != from)
        .take_while(|l| *l != to)
        .filter(|l| l.starts_with('|'))
        .collect()
}

/// Every row of every Markdown table has as many cells as its header (an escaped `\|`
/// inside a cell is not a border).
pub fn assert_cells_match_headers(lines: &[&str]) {
    let borders = |l: &str| l.matches('|').count() - l.matches("\\|").count();
    let mut header = None;
    for l in lines {
        match (l.starts_with('|'), header) {
            (false, _) => header = None,
            (true, None) => header = Some(borders(l)),
            (true, Some(n)) => assert_eq!(borders(l), n, "{l}"),
        }
    }
}

/// `dir` holds `name` and nothing else: a page is written atomically, and no temporary
/// file is left beside it.
pub fn assert_alone(dir: &Path, name: &str) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from(name)]);
}

/// The browser made ready for a page test that needs nothing else of the test services:
/// chromium on PATH is enough; without it, `services` installs it (and fails the test,
/// saying why, when it cannot).
pub fn browser_ready() {
    if chromium_on_path().is_none() {
        services();
    }
}

/// The page's DOM as headless chromium built it, its console on stderr, and the file its
/// network log went to.
pub fn dump_dom(page: &Path, scratch: &Path) -> (crate::support::Run, std::path::PathBuf) {
    let net_log = scratch.join("net.json");
    let dumped = headless(
        page,
        scratch,
        &[
            "--enable-logging=stderr",
            "--v=0",
            &format!("--log-net-log={}", net_log.display()),
            "--dump-dom",
        ],
    );
    (dumped, net_log)
}

/// Runs headless chromium with `args` on the page, bounded (`timeout` ends its whole
/// process group), with a home and profile of its own.
pub fn headless(page: &Path, scratch: &Path, args: &[&str]) -> crate::support::Run {
    let home = scratch.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let url = format!("file://{}", page.display());
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "5", "90"])
        .arg(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
        ])
        .arg(format!("--user-data-dir={}", scratch.join("profile").display()))
        .args(args)
        .arg(&url)
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .current_dir(scratch);
    let b = run_bounded(&mut cmd, Duration::from_secs(120));
    assert!(
        b.run.code == 0,
        "chromium exited {} after {:?}; stderr:\n{}",
        b.run.code,
        b.elapsed,
        b.run.stderr
    );
    b.run
}

/// What chromium said that is an error of the page: a console message (the page has no
/// script, so any is one: a policy violation, a script error), an uncaught exception, or
/// an error line naming the page. Chromium's own noise without a desktop (D-Bus, VA-API)
/// does not name the page.
pub fn page_errors<'a>(stderr: &'a str, page: &Path) -> Vec<&'a str> {
    let name = page.file_name().unwrap().to_str().unwrap();
    stderr
        .lines()
        .filter(|l| {
            l.contains(":CONSOLE")
                || l.contains("Uncaught")
                || (l.contains("ERROR:") && (l.contains(name) || l.contains("file://")))
        })
        .collect()
}

/// No request went out on the page's behalf, by chromium's net log (`--log-net-log`):
/// chromium's own background requests, if any, are keyed to other sites.
pub fn assert_no_request(net_log: &Path) {
    let log = std::fs::read_to_string(net_log).unwrap_or_default();
    assert!(
        !log.is_empty(),
        "chromium wrote no net log at {}",
        net_log.display()
    );
    assert!(
        !log.contains("\"network_isolation_key\":\"file://"),
        "the page made a network request; net log at {}",
        net_log.display()
    );
}

#[test]
fn chromium_renders_the_page_without_errors_or_network() {
    services();
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("acceptance.html");
    let run = check_report(&host(), &page, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let scratch = dir.path().join("chromium");
    std::fs::create_dir_all(&scratch).unwrap();

    // The DOM as the browser built it.
    let (dumped, net_log) = dump_dom(&page, &scratch);
    let dom = &dumped.stdout;
    assert!(
        dom.contains("<table id=\"topology\">"),
        "no topology table in the DOM:\n{dom}"
    );
    assert_grid(topology_table(dom), 8);
    assert!(dom.contains("ACCEPTED: every item holds"));
    let html = std::fs::read_to_string(&page).unwrap();
    let captures = html.matches("<details class=\"capture\">").count();
    assert!(captures > 10, "{captures} captures");
    assert_eq!(dom.matches("<details class=\"capture\">").count(), captures);
    let errors = page_errors(&dumped.stderr, &page);
    assert!(
        errors.is_empty(),
        "chromium reported errors loading the page: {errors:#?}\nall it printed:\n{}",
        dumped.stderr
    );
    assert_no_request(&net_log);

    // A screenshot: written, and more than a blank page.
    let png = scratch.join("page.png");
    headless(
        &page,
        &scratch,
        &[
            &format!("--screenshot={}", png.display()),
            "--window-size=1280,2000",
        ],
    );
    let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("no screenshot at {}: {e}", png.display()));
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(
        bytes.len() > 20_000,
        "a {}-byte screenshot is a blank page",
        bytes.len()
    );
}
