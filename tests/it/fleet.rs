//! `gpuenv fleet report`: `doctor --json` reports of recorded hosts merged, the drift
//! between them, the files left out; and `host.machine_id`, the ID a fleet can key on.

use std::path::Path;

use serde_json::Value;

use crate::support::{derived_host, fixture, gpuenv, json};

/// `gpuenv doctor --host-facts HOST --json`, written to `DIR/NAME.json`.
fn report(dir: &Path, host: &str, name: &str) {
    let facts = fixture(&format!("hosts/{host}"));
    let run = gpuenv(&["doctor", "--host-facts", facts.to_str().unwrap(), "--json"]);
    assert!(run.code == 0 || run.code == 1, "{host}: {}", run.stderr);
    std::fs::write(dir.join(format!("{name}.json")), &run.stdout).unwrap();
}

/// Four recorded hosts, one report each, in a temporary directory.
fn four_nodes() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for h in [
        "8x-h100-nvlink",
        "2-socket-rdma",
        "single-a100",
        "7x-a100-40gb-driver-525",
    ] {
        report(dir.path(), h, h);
    }
    dir
}

fn fleet(dir: &Path) -> (i32, Value) {
    let run = gpuenv(&["fleet", "report", dir.to_str().unwrap(), "--json"]);
    (run.code, json(&run))
}

/// The drift of `kind`, as `value -> nodes`.
fn drift<'a>(doc: &'a Value, kind: &str) -> Option<&'a Value> {
    doc["drift"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["kind"] == kind)
}

fn nodes_with<'a>(d: &'a Value, value: &str) -> Vec<&'a str> {
    d["values"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["value"] == value)
        .unwrap_or_else(|| panic!("no value {value} in {d}"))["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect()
}

#[test]
fn fleet_report_sees_the_planted_drift() {
    let dir = four_nodes();
    let (code, doc) = fleet(dir.path());
    assert_eq!(code, 0, "every node only warns: {doc}");
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["worst"], "warn");
    assert!(doc["problems"].as_array().unwrap().is_empty(), "{doc}");
    let nodes: Vec<&str> = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["node"].as_str().unwrap())
        .collect();
    // Sorted by file; the host with a host name is keyed by it, the others by file.
    assert_eq!(
        nodes,
        [
            "gpu-node-07",
            "7x-a100-40gb-driver-525",
            "8x-h100-nvlink",
            "single-a100"
        ]
    );
    let rdma_node = &doc["nodes"][0];
    assert_eq!(rdma_node["hostname"], "gpu-node-07");
    assert_eq!(rdma_node["rdma"], true);
    assert_eq!(rdma_node["gpu_count"], 8);
    assert_eq!(rdma_node["driver_branch"], 550);

    let branch = drift(&doc, "driver-branch").expect("driver branches differ");
    assert!(
        branch["what_it_breaks"]
            .as_str()
            .unwrap()
            .starts_with("usually fine")
    );
    assert_eq!(nodes_with(branch, "550"), ["gpu-node-07", "8x-h100-nvlink"]);
    assert_eq!(nodes_with(branch, "525"), ["7x-a100-40gb-driver-525"]);
    assert_eq!(nodes_with(branch, "535"), ["single-a100"]);

    let model = drift(&doc, "gpu-model").expect("GPU models differ");
    assert!(
        model["what_it_breaks"]
            .as_str()
            .unwrap()
            .starts_with("a heterogeneous job")
    );
    assert_eq!(
        nodes_with(model, "NVIDIA A100-SXM4-40GB"),
        ["7x-a100-40gb-driver-525"]
    );
    let count = drift(&doc, "gpu-count").expect("GPU counts differ");
    assert_eq!(nodes_with(count, "8"), ["gpu-node-07", "8x-h100-nvlink"]);
    assert_eq!(nodes_with(count, "1"), ["single-a100"]);

    let rdma = drift(&doc, "rdma").expect("RDMA on one node only");
    assert_eq!(nodes_with(rdma, "active"), ["gpu-node-07"]);

    let torch = drift(&doc, "torch").expect("torch differs");
    assert!(torch["what_it_breaks"].as_str().unwrap().contains("fail or hang"));
    assert_eq!(nodes_with(torch, "2.4.1"), ["single-a100"]);
    assert_eq!(nodes_with(torch, "none"), ["7x-a100-40gb-driver-525"]);
    assert!(drift(&doc, "nccl").is_some(), "torch's NCCL differs");
    assert!(drift(&doc, "torch-cuda").is_some(), "torch's CUDA differs");
    assert!(drift(&doc, "failing-checks").is_none(), "no node fails a check");

    // The text: a row per node, the drift, no problem.
    let run = gpuenv(&["fleet", "report", dir.path().to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.starts_with("4 nodes\n"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("warn  gpu-node-07  8x NVIDIA H100 80GB HBM3, driver 550.90.07"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("\ndriver-branch: usually fine"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("left out"), "{}", run.stdout);
}

#[test]
fn fleet_report_exits_with_the_worst_nodes_code() {
    let dir = four_nodes();
    report(dir.path(), "no-gpu", "no-gpu");
    let (code, doc) = fleet(dir.path());
    assert_eq!(code, 1, "a node fails a check: {doc}");
    assert_eq!(doc["worst"], "fail");
    let fails = drift(&doc, "failing-checks").expect("a failing node is named");
    let failing = fails["values"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["nodes"][0] == "no-gpu")
        .unwrap();
    assert!(
        failing["value"].as_str().unwrap().contains("gpus-visible"),
        "{fails}"
    );
    // Files named one by one read the same.
    let a = dir.path().join("single-a100.json");
    let b = dir.path().join("no-gpu.json");
    let run = gpuenv(&[
        "fleet",
        "report",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(run.code, 1);
    assert_eq!(json(&run)["nodes"].as_array().unwrap().len(), 2);
}

#[test]
fn fleet_report_names_each_bad_file_and_merges_the_rest() {
    let dir = four_nodes();
    let p = dir.path();
    // A query document, a truncated report, a second report of gpu-node-07, a report of an
    // older schema, one of a newer schema, and a file that is not JSON.
    let q = gpuenv(&["query", "--gpu", "H100", "--json"]);
    std::fs::write(p.join("a-query.json"), &q.stdout).unwrap();
    let full = std::fs::read_to_string(p.join("single-a100.json")).unwrap();
    std::fs::write(p.join("b-truncated.json"), &full[..full.len() / 2]).unwrap();
    std::fs::copy(p.join("2-socket-rdma.json"), p.join("z-again.json")).unwrap();
    for (name, v) in [("c-old", 0), ("d-new", 99)] {
        let mut doc: Value = serde_json::from_str(&full).unwrap();
        doc["schema_version"] = v.into();
        doc["host"]["hostname"] = name.into();
        std::fs::write(p.join(format!("{name}.json")), doc.to_string()).unwrap();
    }
    std::fs::write(p.join("e-binary.json"), b"\x00\x01").unwrap();
    std::fs::write(p.join("notes.txt"), "not a report, not read").unwrap();
    let (code, doc) = fleet(p);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["nodes"].as_array().unwrap().len(), 4, "{doc}");
    let problems: Vec<(String, String)> = doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let file = Path::new(p["file"].as_str().unwrap())
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (file, p["message"].as_str().unwrap().to_string())
        })
        .collect();
    let said = |file: &str, words: &str| {
        let hits: Vec<_> = problems.iter().filter(|(f, _)| f == file).collect();
        assert_eq!(hits.len(), 1, "{file}: one line\n{problems:#?}");
        assert!(hits[0].1.contains(words), "{file}: {}", hits[0].1);
    };
    said("a-query.json", "not a `gpuenv doctor --json` report");
    said("b-truncated.json", "not JSON");
    said("c-old.json", "an older gpuenv (schema_version 0");
    said("d-new.json", "a newer gpuenv (schema_version 99");
    said("e-binary.json", "NUL byte");
    said("z-again.json", "a second report of node `gpu-node-07`");
    assert_eq!(problems.len(), 6, "{problems:#?}");
    // An unreadable file named on the command line is one more line.
    let run = gpuenv(&["fleet", "report", p.to_str().unwrap(), "/nonexistent/r.json"]);
    assert_eq!(run.code, 0);
    assert!(run.stdout.contains("left out:\n"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("/nonexistent/r.json: cannot read report `/nonexistent/r.json`: no such file"),
        "{}",
        run.stdout
    );
}

#[test]
fn fleet_report_with_no_readable_report_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("broken.json"), "{").unwrap();
    let (code, doc) = fleet(dir.path());
    assert_eq!(code, 2, "{doc}");
    assert!(doc["nodes"].as_array().unwrap().is_empty());
    assert_eq!(doc["problems"].as_array().unwrap().len(), 1);
    let empty = tempfile::tempdir().unwrap();
    let run = gpuenv(&["fleet", "report", empty.path().to_str().unwrap()]);
    assert_eq!(run.code, 2);
    assert!(run.stdout.contains("no report could be read"), "{}", run.stdout);
    let run = gpuenv(&["fleet", "report"]);
    assert_eq!(run.code, 2, "a path is required");
}

/// `doctor` on a recorded host whose `/etc/machine-id` is `id`.
fn machine_id_of(id: &str) -> (String, String) {
    let dir = derived_host("single-a100", |r| {
        r["files"]["/etc/machine-id"] = format!("{id}\n").into();
    });
    let run = gpuenv(&["doctor", "--host-facts", dir.path().to_str().unwrap(), "--json"]);
    let doc = json(&run);
    (
        doc["host"]["machine_id"].as_str().unwrap().to_string(),
        run.stdout,
    )
}

#[test]
fn machine_id_is_derived_stable_and_never_the_raw_id() {
    let raw = "4f3c2a1b0e9d8c7b6a5f4e3d2c1b0a99";
    let (a, text) = machine_id_of(raw);
    let (again, _) = machine_id_of(raw);
    let (other, _) = machine_id_of("00112233445566778899aabbccddeeff");
    assert_eq!(a, again, "the same machine, the same ID");
    assert_ne!(a, other, "another machine, another ID");
    assert_eq!(a.len(), 32);
    assert!(
        !text.to_lowercase().contains(raw),
        "the raw machine-id is in doctor --json"
    );
    // Nor is it on the acceptance page, which shows every other raw answer of the host.
    let dir = derived_host("single-a100", |r| {
        r["files"]["/etc/machine-id"] = format!("{raw}\n").into();
    });
    let page = dir.path().join("page.md");
    let run = gpuenv(&[
        "check",
        "--host-facts",
        dir.path().join("host.json").to_str().unwrap(),
        "--report",
        page.to_str().unwrap(),
    ]);
    let page = std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{e}: {}", run.stderr));
    assert!(
        !page.contains(raw),
        "the raw machine-id is on the acceptance page"
    );
    // A host without the file has no machine_id.
    let facts = fixture("hosts/single-a100");
    let doc = json(&gpuenv(&[
        "doctor",
        "--host-facts",
        facts.to_str().unwrap(),
        "--json",
    ]));
    assert!(doc["host"].get("machine_id").is_none());
}
