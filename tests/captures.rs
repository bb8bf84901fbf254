//! The host parsers against real captures of the tools they read (nvidia-smi XML, table,
//! `--version`, CSV, `topo -m`, `nvlink -s` and its errors, `/proc/driver/nvidia/version`, nvcc, cuDNN
//! headers).
//!
//! Every test runs over the captures copied into the repository, `tests/fixtures/captures/`
//! (their sources and licences are in its README), on every `cargo test`. Where the team's
//! larger shared collection is at hand, the same tests read it as well: the folder
//! `GPUENV_SHARED_FIXTURES` names (which must then exist), else `../shared/fixtures` beside
//! the repository when it is there. That folder is an extra, never a condition: without it
//! the in-repo run still asserts on every file, and a folder of a kind with no file at all
//! fails, so that a moved directory is not a silent pass. What each file should yield is
//! read from its name (`8x-...` for the GPU count, `driver-535.54.03`, `cuda-12.5.82`,
//! `cudnn-9.6.0`) or from its `.cmd` sidecar.
//!
//! Each test checks every file of its kind and reports all failures at once.

use std::fs;
use std::path::{Path, PathBuf};

use gpuenv::host::parse::*;
use gpuenv::host::{Link, SmiFailure, Throttle};
use gpuenv::model::{ComputeCapability, DriverVersion};

/// The captures kept in the repository.
fn in_repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/captures")
}

/// The shared collection, when there is one: the folder `GPUENV_SHARED_FIXTURES` names (an
/// error when it is not a folder: it was asked for), else `../shared/fixtures` beside the
/// repository if it exists.
fn shared(test: &str) -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("GPUENV_SHARED_FIXTURES").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        assert!(
            dir.is_dir(),
            "GPUENV_SHARED_FIXTURES={} is not a directory: name the shared captures folder, or unset it",
            dir.display()
        );
        return Some(dir);
    }
    let sibling = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures");
    if sibling.is_dir() {
        return Some(sibling);
    }
    eprintln!(
        "note: {test}: no shared captures at {} (nor GPUENV_SHARED_FIXTURES); the in-repo ones only",
        sibling.display()
    );
    None
}

/// Runs `check` over the in-repo captures, then over the shared ones when present; each
/// call returns how many files it read and pushes a line per failure. Panics with every
/// failure of every folder, or prints the counts.
fn over_every_root(test: &str, check: impl Fn(&Path, &mut Vec<String>) -> usize) {
    let mut roots = vec![("in-repo", in_repo())];
    roots.extend(shared(test).map(|d| ("shared", d)));
    let mut failures = Vec::new();
    let mut counts = Vec::new();
    for (label, root) in &roots {
        let mut found = Vec::new();
        let checked = check(root, &mut found);
        assert!(checked > 0, "{test}: no file checked under {}", root.display());
        counts.push(format!("{checked} {label}"));
        failures.extend(found.into_iter().map(|f| format!("{label} {f}")));
    }
    assert!(
        failures.is_empty(),
        "{test}: {} failures:\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
    eprintln!("{test}: {} files ok", counts.join(" + "));
}

/// Every file under `dir` (recursively) whose name ends with `ext`, sorted. Fails when the
/// directory is missing or holds none, so that a moved directory is not a silent pass.
fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
        let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                walk(&path, ext, out);
            } else if path.to_string_lossy().ends_with(ext) {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, ext, &mut out);
    out.sort();
    assert!(!out.is_empty(), "no *{ext} files under {}", dir.display());
    out
}

fn read(path: &Path) -> String {
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    String::from_utf8_lossy(&bytes).into_owned()
}

fn name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `8` for `8x-h100-...`.
fn gpu_count_in_name(name: &str) -> Option<usize> {
    let (n, _) = name.split_once("x-")?;
    n.parse().ok()
}

/// The leading dotted number of `s`: `12.5.82` out of `12.5.82.txt` or `12.5.82-ubuntu`.
fn leading_version(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    s[..end].trim_end_matches('.')
}

/// The version after `marker` in a file name: `535.54.03` for `driver-` in
/// `a100-...-driver-535.54.03-dtd-v12.xml`.
fn version_after<'a>(name: &'a str, marker: &str) -> Option<&'a str> {
    let (_, rest) = name.split_once(marker)?;
    Some(leading_version(rest)).filter(|v| !v.is_empty())
}

#[test]
fn xml_reports() {
    over_every_root("xml_reports", |root, failures| {
        let paths = files(&root.join("host/nvidia-smi-q-x"), ".xml");
        for path in &paths {
            let (name, text) = (name(path), read(path));
            let r = match smi_xml(&text) {
                Ok(r) => r,
                Err(e) => {
                    failures.push(format!("{name}: {e}"));
                    continue;
                }
            };
            let mut fail = |m: String| failures.push(format!("{name}: {m}"));
            if r.gpus.is_empty() {
                fail("no GPUs".into());
            }
            let elements = text.matches("<gpu id=").count();
            if r.gpus.len() != elements {
                fail(format!("{} GPUs read, {elements} <gpu> elements", r.gpus.len()));
            }
            if let Some(n) = gpu_count_in_name(&name).filter(|&n| n != r.gpus.len()) {
                fail(format!("{} GPUs read, the name says {n}", r.gpus.len()));
            }
            for g in &r.gpus {
                if g.name.trim().is_empty() {
                    fail(format!("GPU {} has an empty name", g.index));
                }
                if g.compute_capability.is_some() {
                    fail(format!(
                        "GPU {} has a compute capability the XML cannot carry",
                        g.index
                    ));
                }
                if g.memory_total_mib == Some(0) {
                    fail(format!("GPU {} has 0 MiB", g.index));
                }
                if name.contains("mig-enabled") && g.mig_enabled != Some(true) {
                    fail(format!("GPU {} is not MIG-enabled", g.index));
                }
            }
            // Trimmed documents (partial/) may lack the driver lines; all others have them.
            match (&r.driver.version, text.contains("<driver_version>")) {
                (None, true) => fail("driver version not read".into()),
                (Some(v), _) => {
                    if let Some(expected) = version_after(&name, "driver-").filter(|e| v.as_str() != *e) {
                        fail(format!("driver {v}, the name says {expected}"));
                    }
                }
                (None, false) => {}
            }
            if r.driver.cuda.is_none() && text.contains("<cuda_version>") {
                fail("CUDA version not read".into());
            }
            // Each end of the link, where the document gives a number for it.
            let numeric = |tag: &str| {
                text.split(&format!("<{tag}>"))
                    .skip(1)
                    .any(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
            };
            if numeric("max_host_link_gen") && r.gpus.iter().all(|g| g.pcie_gen_host_max.is_none()) {
                fail("max_host_link_gen not read".into());
            }
            if numeric("max_device_link_gen") && r.gpus.iter().all(|g| g.pcie_gen_device_max.is_none()) {
                fail("max_device_link_gen not read".into());
            }
            // Every complete document says something about the GPU's state.
            if text.contains("<fb_memory_usage>") && r.gpus.iter().any(|g| g.state.is_none()) {
                fail("a GPU without state".into());
            }
            // Spot checks of the files named in the README: a Gen4 card in a Gen3 slot, idle
            // at Gen1; the software power cap active.
            if name.starts_with("geforce-rtx-4090-driver-535.86.05") {
                let g = &r.gpus[0];
                let s = g.state.clone().unwrap_or_default();
                if (
                    g.pcie_gen_device_max,
                    g.pcie_gen_host_max,
                    g.pcie_gen_current,
                    s.pstate.as_deref(),
                ) != (Some(4), Some(3), Some(1), Some("P8"))
                {
                    fail(format!("expected a Gen4 card in a Gen3 slot at Gen1, P8: {g:?}"));
                }
            }
            if name.starts_with("geforce-rtx-3090-driver-590.44.01") {
                let throttle = r.gpus[0].state.as_ref().and_then(|s| s.throttle.clone());
                if throttle != Some(vec![Throttle::SwPowerCap]) {
                    fail(format!("expected the software power cap: {throttle:?}"));
                }
            }
        }
        paths.len()
    });
}

#[test]
fn topologies() {
    over_every_root("topologies", |root, failures| {
        let paths = files(&root.join("host/nvidia-smi-topo-m"), ".txt");
        for path in &paths {
            let (name, text) = (name(path), read(path));
            let mut fail = |m: String| failures.push(format!("{name}: {m}"));
            // The Windows 591.86 capture holds nvidia-smi's own error, not a matrix.
            if text.contains("ERROR:") {
                if let Ok(t) = smi_topo(&text) {
                    fail(format!("an error message parsed as a matrix: {t:?}"));
                }
                continue;
            }
            let t = match smi_topo(&text) {
                Ok(t) => t,
                Err(e) => {
                    fail(e);
                    continue;
                }
            };
            let n = t.gpus.len();
            if n == 0 || t.links.len() != n || t.links.iter().any(|row| row.len() != n) {
                fail(format!(
                    "not a non-empty square matrix: {} labels, rows {:?}",
                    n, t.links
                ));
                continue;
            }
            if let Some(expected) = gpu_count_in_name(&name).filter(|&e| e != n) {
                fail(format!("{n} GPUs, the name says {expected}"));
            }
            for (i, row) in t.links.iter().enumerate() {
                if row[i] != Link::SelfLink {
                    fail(format!("GPU{i} is not X on the diagonal"));
                }
            }
            // `nv18` in the name: every pair is bonded by 18 NVLinks.
            let nv = name
                .split('-')
                .find_map(|w| w.strip_prefix("nv").and_then(|n| n.parse::<u32>().ok()));
            let off_diagonal = || {
                t.links.iter().enumerate().flat_map(|(i, row)| {
                    row.iter()
                        .enumerate()
                        .filter(move |(j, _)| *j != i)
                        .map(|(_, l)| *l)
                })
            };
            if let Some(links) = nv.filter(|&n| off_diagonal().any(|l| l != Link::NvLink(n))) {
                fail(format!("expected NV{links} between every pair: {:?}", t.links));
            }
            // Spot checks of the multi-GPU pastes named in the README.
            if name.starts_with("8x-geforce-rtx-4090-pcie-sys") && off_diagonal().any(|l| l != Link::Sys) {
                fail(format!(
                    "expected SYS between every pair (NIC rows must be ignored): {:?}",
                    t.links
                ));
            }
            if name.starts_with("5x-gpu-mixed") {
                use Link::*;
                let expected = vec![
                    vec![SelfLink, Sys, Sys, Sys, Sys],
                    vec![Sys, SelfLink, Phb, Node, Node],
                    vec![Sys, Phb, SelfLink, Node, Node],
                    vec![Sys, Node, Node, SelfLink, Phb],
                    vec![Sys, Node, Node, Phb, SelfLink],
                ];
                if t.links != expected {
                    fail(format!("matrix {:?}", t.links));
                }
            }
            if name.starts_with("2x-geforce-rtx-5090-phb") && t.links[0][1] != Link::Phb {
                fail(format!("expected PHB: {:?}", t.links));
            }
            // NIC columns and affinity cells, where the header names them.
            let header = text.lines().find(|l| l.contains("GPU0")).unwrap_or("");
            let nic_columns = header
                .split_whitespace()
                .filter(|w| w.starts_with("NIC") || w.starts_with("mlx"))
                .count();
            if t.nics.len() != nic_columns || (nic_columns > 0 && t.nic_links.len() != n) {
                fail(format!(
                    "{nic_columns} NIC columns: {:?} {:?}",
                    t.nics, t.nic_links
                ));
            }
            // Windows leaves the affinity cells empty: none at all, then.
            let expected = if header.contains("NUMA Affinity") && !name.contains("windows") {
                n
            } else {
                0
            };
            if t.numa_affinity.len() != expected {
                fail(format!(
                    "NUMA affinity {:?}, expected {expected} cells",
                    t.numa_affinity
                ));
            }
            if name.starts_with("8x-geforce-rtx-4090-pcie-sys") {
                let numa: Vec<_> = t.numa_affinity.iter().map(|a| a.as_deref()).collect();
                if t.nic_links.get(6) != Some(&vec![Link::Phb, Link::Phb])
                    || numa
                        != [
                            Some("0"),
                            Some("0"),
                            Some("0"),
                            Some("0"),
                            Some("1"),
                            Some("1"),
                            Some("1"),
                            Some("1"),
                        ]
                {
                    fail(format!("NICs {:?}, NUMA {numa:?}", t.nic_links));
                }
            }
        }
        paths.len()
    });
}

#[test]
fn nvlink_statuses() {
    over_every_root("nvlink_statuses", |root, failures| {
        let paths = files(&root.join("host/nvidia-smi-nvlink-s"), ".txt");
        for path in &paths {
            let (name, text) = (name(path), read(path));
            let mut fail = |m: String| failures.push(format!("{name}: {m}"));
            let gpus = match smi_nvlink_status(&text) {
                Ok(g) => g,
                Err(e) => {
                    fail(e);
                    continue;
                }
            };
            // MIG GPUs are left out (links not read); the others are listed.
            let expected = if name.contains("-mig-") {
                0
            } else {
                text.matches("GPU ").count()
            };
            if gpus.len() != expected {
                fail(format!("{} GPUs, expected {expected}: {gpus:?}", gpus.len()));
            }
            let lines = text.matches("Link ").count();
            let read: usize = gpus.iter().map(|g| g.links.len()).sum();
            if read != lines {
                fail(format!("{read} links read, {lines} link lines"));
            }
            // H100 and H200: NVLink 4, 18 links at 26.562 GB/s.
            if (name.starts_with("nvidia-h100-80gb") || name.starts_with("nvidia-h200-linux"))
                && gpus.iter().any(|g| {
                    g.links.len() != 18 || g.links.iter().any(|l| !l.active || l.speed_gb_s != Some(26.562))
                })
            {
                fail(format!("expected 18 active links at 26.562 GB/s: {gpus:?}"));
            }
        }
        paths.len()
    });
}

#[test]
fn failures_by_file_name() {
    over_every_root("failures_by_file_name", |root, failures| {
        let paths: Vec<_> = files(&root.join("host/errors"), ".txt")
            .into_iter()
            .filter(|p| name(p).starts_with("nvidia-smi-"))
            .collect();
        for path in &paths {
            let (name, text) = (name(path), read(path));
            let expected = if name.contains("driver-library-version-mismatch") {
                let nvml_version = version_after(&name, "nvml-")
                    .map(str::to_string)
                    .or_else(|| text.contains("NVML library version").then(|| "(any)".to_string()));
                SmiFailure::DriverLibraryMismatch { nvml_version }
            } else if name.contains("couldnt-communicate") {
                SmiFailure::NoDriver
            } else if name.contains("no-devices") {
                SmiFailure::NoDevices
            } else {
                failures.push(format!("{name}: no expectation for this file name; add one"));
                continue;
            };
            // nvidia-smi prints these on stdout, but wrappers may move them to stderr.
            for got in [smi_failure(Some(9), &text, ""), smi_failure(Some(9), "", &text)] {
                let ok = match (&expected, &got) {
                    (
                        SmiFailure::DriverLibraryMismatch {
                            nvml_version: Some(e),
                        },
                        SmiFailure::DriverLibraryMismatch {
                            nvml_version: Some(g),
                        },
                    ) => e == "(any)" || e == g,
                    _ => expected == got,
                };
                if !ok {
                    failures.push(format!("{name}: expected {expected:?}, got {got:?}"));
                }
            }
        }
        paths.len()
    });
}

#[test]
fn nvcc_versions() {
    over_every_root("nvcc_versions", |root, failures| {
        let paths = files(&root.join("host/nvcc-version"), ".txt");
        for path in &paths {
            let (name, text) = (name(path), read(path));
            let expected = version_after(&name, "cuda-")
                .unwrap_or_else(|| panic!("{name}: no cuda-<version> in the name"));
            match nvcc_version(&text) {
                Some(v) if v.as_str() == expected => {}
                other => failures.push(format!("{name}: expected {expected}, got {other:?}")),
            }
        }
        paths.len()
    });
}

#[test]
fn cudnn_headers() {
    over_every_root("cudnn_headers", |root, failures| {
        let paths = files(&root.join("host/cudnn-version-h"), ".h");
        for path in &paths {
            let (name, text) = (name(path), read(path));
            let expected = version_after(&name, "cudnn-")
                .unwrap_or_else(|| panic!("{name}: no cudnn-<version> in the name"));
            match cudnn_header(&text) {
                Some(v) if v.as_str() == expected => {}
                other => failures.push(format!("{name}: expected {expected}, got {other:?}")),
            }
        }
        paths.len()
    });
}

#[test]
fn proc_driver_versions() {
    over_every_root("proc_driver_versions", |root, failures| {
        let paths = files(&root.join("host/proc-driver-nvidia-version"), ".txt");
        for path in &paths {
            let (name, text) = (name(path), read(path));
            let Some(m) = proc_driver_version(&text) else {
                failures.push(format!("{name}: no version read"));
                continue;
            };
            // The first part of the name that is a version: `565.57.01`, `384.98`, `35.3.1`.
            let expected = name
                .trim_end_matches(".txt")
                .split('-')
                .find(|w| w.parse::<DriverVersion>().is_ok());
            if let Some(e) = expected.filter(|e| m.version.as_str() != *e) {
                failures.push(format!("{name}: version {}, the name says {e}", m.version));
            }
            if m.open != name.starts_with("open-") {
                failures.push(format!("{name}: open = {}", m.open));
            }
            let arch = ["x86_64", "aarch64"].into_iter().find(|a| name.contains(a));
            if m.arch.as_deref() != arch {
                failures.push(format!("{name}: arch {:?}, the name says {arch:?}", m.arch));
            }
        }
        paths.len()
    });
}

#[test]
fn table_and_version_cuda() {
    over_every_root("table_and_version_cuda", |root, failures| {
        let versions = files(&root.join("host/nvidia-smi-version"), ".txt");
        let tables = files(&root.join("host/nvidia-smi"), ".txt");
        for path in &versions {
            let name = name(path);
            let from_version = smi_table_cuda(&read(path));
            if from_version.is_none() {
                failures.push(format!("nvidia-smi-version/{name}: no CUDA version"));
            }
            // The table of the same capture (`<machine>-idle.txt`) must agree.
            let stem = name.trim_end_matches(".txt");
            for table in tables
                .iter()
                .filter(|t| self::name(t).starts_with(&format!("{stem}-")))
            {
                let from_table = smi_table_cuda(&read(table));
                if from_table.is_none() || from_table != from_version {
                    failures.push(format!(
                        "nvidia-smi/{}: CUDA {from_table:?}, --version says {from_version:?}",
                        self::name(table)
                    ));
                }
            }
        }
        for path in &tables {
            if smi_table_cuda(&read(path)).is_none() {
                failures.push(format!("nvidia-smi/{}: no CUDA version", name(path)));
            }
        }
        versions.len() + tables.len()
    });
}

/// `(query fields, format)` from the first line of a `.cmd` sidecar.
fn command_of(csv: &Path) -> Option<(String, String)> {
    let cmd = read(&PathBuf::from(format!("{}.cmd", csv.display())));
    let line = cmd.lines().next()?;
    let arg = |flag: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(flag))
            .map(str::to_string)
    };
    Some((arg("--query-gpu=")?, arg("--format=")?))
}

/// Checks one GPU read by [`smi_csv`] against the raw values of the same row.
fn same_gpu(got: &gpuenv::host::GpuInfo, raw: &dyn Fn(&str) -> String) -> Result<(), String> {
    let index: u32 = raw("index").parse().map_err(|_| "raw index".to_string())?;
    let memory = raw("memory.total");
    let memory = memory.trim_end_matches(" MiB").parse::<u64>().ok();
    let cc = raw("compute_cap").parse::<ComputeCapability>().ok();
    let checks = [
        (got.index == index, "index"),
        (got.name == raw("name"), "name"),
        (got.uuid.as_deref() == Some(raw("uuid").as_str()), "uuid"),
        (
            got.bus_id.as_deref() == Some(raw("pci.bus_id").as_str()),
            "pci.bus_id",
        ),
        (got.memory_total_mib == memory, "memory.total"),
        (got.compute_capability == cc, "compute_cap"),
        (
            got.pcie_gen_max == raw("pcie.link.gen.max").parse().ok(),
            "pcie.link.gen.max",
        ),
        (
            got.pcie_width_current == raw("pcie.link.width.current").parse().ok(),
            "pcie.link.width.current",
        ),
    ];
    match checks.iter().find(|(ok, _)| !ok) {
        Some((_, field)) => Err(format!("{field} differs: {got:?}")),
        None => Ok(()),
    }
}

#[test]
fn query_gpu_csvs() {
    over_every_root("query_gpu_csvs", |root, failures| {
        let ours: Vec<&str> = SMI_QUERY_FIELDS.split(',').collect();
        let mut paths = files(&root.join("host/nvidia-smi-query-gpu"), ".csv");
        paths.extend(files(&root.join("host/errors"), ".csv"));
        let (mut exact, mut projected, mut foreign) = (0, 0, 0);
        for path in &paths {
            let (name, text) = (name(path), read(path));
            let Some((query, format)) = command_of(path) else {
                failures.push(format!("{name}: no readable .cmd sidecar"));
                continue;
            };
            if query == SMI_QUERY_FIELDS {
                exact += 1;
                match smi_csv(&text) {
                    Ok(r) if !r.gpus.is_empty() && r.driver.version.is_some() => {}
                    other => failures.push(format!("{name}: our own query gave {other:?}")),
                }
                continue;
            }
            let fields: Vec<&str> = query.split(',').collect();
            let has_header = !format.contains("noheader");
            let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            // Another query with a header that names all of our fields: pick our columns out
            // of each row, in our order, and check the parse against the raw values.
            let header: Vec<String> = match (has_header, lines.first()) {
                (true, Some(h)) => h
                    .split(", ")
                    .map(|c| c.split(" [").next().unwrap_or(c).trim().to_string())
                    .collect(),
                _ => Vec::new(),
            };
            let columns: Option<Vec<usize>> =
                ours.iter().map(|f| header.iter().position(|h| h == f)).collect();
            let rows_fit = lines
                .iter()
                .skip(1)
                .all(|l| l.split(", ").count() == header.len());
            let Some(columns) = columns.filter(|_| rows_fit && lines.len() > 1) else {
                foreign += 1;
                eprintln!(
                    "note: {name}: another query ({} fields) without all of ours: checked only that it is not read as ours",
                    fields.len()
                );
                // Another query's CSV must be refused, not misread as GPUs.
                if smi_csv(&text).is_ok_and(|r| !r.gpus.is_empty()) {
                    failures.push(format!("{name}: another query's CSV parsed as ours"));
                }
                continue;
            };
            projected += 1;
            for line in &lines[1..] {
                let values: Vec<&str> = line.split(", ").collect();
                let row: Vec<&str> = columns.iter().map(|&c| values[c]).collect();
                let raw = |field: &str| {
                    let at = ours.iter().position(|f| *f == field).expect("one of our fields");
                    row[at].trim().to_string()
                };
                match smi_csv(&row.join(", ")) {
                    Ok(r) if r.gpus.len() == 1 => {
                        if let Err(e) = same_gpu(&r.gpus[0], &raw) {
                            failures.push(format!("{name}: {e}"));
                        }
                        if r.driver.version.as_ref().map(|v| v.as_str())
                            != Some(raw("driver_version").as_str())
                        {
                            failures.push(format!("{name}: driver {:?}", r.driver.version));
                        }
                    }
                    other => failures.push(format!("{name}: projected row gave {other:?}")),
                }
            }
        }
        eprintln!(
            "query_gpu_csvs: {exact} with our exact field list, {projected} projected from a wider query, {foreign} of another query"
        );
        // Another query's CSV is only checked not to be misread; at least one file of each
        // folder must be read column by column, or a change that skips them all would pass.
        if exact + projected == 0 {
            failures.push(format!(
                "no CSV under {} was read column by column ({foreign} of another query)",
                root.display()
            ));
        }
        paths.len()
    });
}
