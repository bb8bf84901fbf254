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
    assert_eq!(code, 1, "no node fails, but torch and NCCL drift: {doc}");
    assert_eq!(
        doc["failing_drift"],
        serde_json::json!(["nccl", "torch", "torch-cuda"])
    );
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
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("\ndrift that breaks multi-node jobs: nccl, torch, torch-cuda (exit 1;"),
        "{}",
        run.stdout
    );
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

/// Two reports of `single-a100` in a new directory, `a.json` as recorded and `b.json`
/// edited by `edit` (its `doctor --json` document).
fn two_reports(edit: impl FnOnce(&mut Value)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    report(dir.path(), "single-a100", "a");
    let text = std::fs::read_to_string(dir.path().join("a.json")).unwrap();
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    edit(&mut doc);
    std::fs::write(dir.path().join("b.json"), doc.to_string()).unwrap();
    dir
}

#[test]
fn nccl_drift_exits_1_unless_allowed() {
    let dir = two_reports(|d| d["host"]["pythons"][0]["torch"]["nccl"] = "2.21.5".into());
    let (code, doc) = fleet(dir.path());
    assert_eq!(code, 1, "{doc}");
    assert_eq!(doc["failing_drift"], serde_json::json!(["nccl"]));
    let nccl = drift(&doc, "nccl").unwrap();
    assert_eq!(nccl["breaks_jobs"], true);
    assert_eq!(nccl["allowed"], false);

    let (code, doc, _) = fleet_with(dir.path(), &["--allow-drift", "nccl"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["failing_drift"], serde_json::json!([]));
    assert_eq!(drift(&doc, "nccl").unwrap()["allowed"], true);
    let run = gpuenv(&[
        "fleet",
        "report",
        dir.path().to_str().unwrap(),
        "--allow-drift",
        "nccl",
    ]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(
        run.stdout
            .contains("allowed by --allow-drift nccl: it does not fail the report"),
        "{}",
        run.stdout
    );
    // Allowing another kind leaves NCCL failing; a kind that never fails is refused.
    let (code, _, _) = fleet_with(dir.path(), &["--allow-drift", "torch"]);
    assert_eq!(code, 1);
    let run = gpuenv(&[
        "fleet",
        "report",
        dir.path().to_str().unwrap(),
        "--allow-drift",
        "gpu-count",
    ]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(
        run.stderr.contains("invalid --allow-drift `gpu-count`"),
        "{}",
        run.stderr
    );
}

#[test]
fn finer_facts_drift_each_with_what_it_breaks() {
    let dir = two_reports(|d| {
        let h = &mut d["host"];
        h["driver"]["value"] = "535.183.01".into();
        h["toolkits"][0]["version"] = "12.6.2".into();
        h["cudnn"][0]["version"] = "8".into();
        h["os"]["pretty_name"] = "Ubuntu 24.04.1 LTS".into();
        h["kernel"] = "6.8.0-45-generic".into();
    });
    let (code, doc) = fleet(dir.path());
    assert_eq!(code, 0, "none of these fails the report: {doc}");
    for (kind, a, b, says) in [
        ("driver", "535.104.05", "535.183.01", "NCCL"),
        ("cuda-toolkit", "12.4.1", "12.6.2", "extension"),
        ("cudnn", "9", "8", "may not load"),
        ("os", "Ubuntu 22.04.4 LTS", "Ubuntu 24.04.1 LTS", "glibc"),
        ("kernel", "5.15.0-105-generic", "6.8.0-45-generic", "RDMA"),
    ] {
        let d = drift(&doc, kind).unwrap_or_else(|| panic!("no {kind} drift: {doc}"));
        assert_eq!(nodes_with(d, a), ["a"], "{kind}");
        assert_eq!(nodes_with(d, b), ["b"], "{kind}");
        assert!(
            d["what_it_breaks"].as_str().unwrap().contains(says),
            "{kind}: {d}"
        );
        assert_eq!(d["breaks_jobs"], false, "{kind}");
    }
    assert!(drift(&doc, "driver-branch").is_none(), "one branch: {doc}");
}

#[test]
fn one_host_name_on_two_machines_is_two_rows_and_their_drift() {
    let a_id = "aaaaaaaa11111111aaaaaaaa11111111";
    let b_id = "bbbbbbbb22222222bbbbbbbb22222222";
    let dir = tempfile::tempdir().unwrap();
    report(dir.path(), "single-a100", "recorded");
    let text = std::fs::read_to_string(dir.path().join("recorded.json")).unwrap();
    std::fs::remove_file(dir.path().join("recorded.json")).unwrap();
    let write = |name: &str, id: &str, torch: &str| {
        let mut doc: Value = serde_json::from_str(&text).unwrap();
        doc["host"]["hostname"] = "localhost".into();
        doc["host"]["machine_id"] = id.into();
        doc["host"]["pythons"][0]["torch"]["version"] = torch.into();
        std::fs::write(dir.path().join(format!("{name}.json")), doc.to_string()).unwrap();
    };
    write("a", a_id, "2.4.1");
    write("b", b_id, "2.5.1");
    // The first machine reported again: the only duplicate.
    write("c", a_id, "2.4.1");
    // Its ID under another host name: a clone of its image, a machine of its own.
    write("d", a_id, "2.4.1");
    let clone = dir.path().join("d.json");
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&clone).unwrap()).unwrap();
    doc["host"]["hostname"] = "clone".into();
    std::fs::write(&clone, doc.to_string()).unwrap();
    let (code, doc) = fleet(dir.path());
    assert_eq!(code, 1, "torch differs: {doc}");
    let names: Vec<&str> = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["node"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["localhost (aaaaaaaa)", "localhost (bbbbbbbb)", "clone"]);
    let torch = drift(&doc, "torch").expect("torch differs between the two machines");
    assert_eq!(nodes_with(torch, "2.4.1"), ["localhost (aaaaaaaa)", "clone"]);
    assert_eq!(nodes_with(torch, "2.5.1"), ["localhost (bbbbbbbb)"]);
    let problems = doc["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{doc}");
    let said = problems[0]["message"].as_str().unwrap();
    assert!(problems[0]["file"].as_str().unwrap().ends_with("c.json"), "{doc}");
    assert!(
        said.contains("a second report of node `localhost`") && said.contains("the same machine ID"),
        "{said}"
    );
    let run = gpuenv(&["fleet", "report", dir.path().to_str().unwrap()]);
    assert!(run.stdout.contains("3 nodes\n"), "{}", run.stdout);
    assert!(!run.stdout.contains("no drift"), "{}", run.stdout);
    assert!(
        run.stdout.contains("  2.5.1: localhost (bbbbbbbb)\n"),
        "{}",
        run.stdout
    );
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
    assert_eq!(code, 1, "the four nodes' torch and NCCL drift: {doc}");
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
    assert_eq!(run.code, 1);
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

// ---------------------------------------------------------------------------------------
// Each node judged: the order and the project's stack
// ---------------------------------------------------------------------------------------

/// `fleet report DIR extra... --json`.
fn fleet_with(dir: &Path, extra: &[&str]) -> (i32, Value, String) {
    let mut args = vec!["fleet", "report", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.push("--json");
    let run = gpuenv(&args);
    let doc = json(&run);
    (run.code, doc, run.stderr)
}

/// The node keyed `name` of a fleet document.
fn node<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == name)
        .unwrap_or_else(|| panic!("no node {name} in {doc}"))
}

/// An order file in a directory of its own (a `*.json` beside the reports would be read).
fn order_file(text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("order.toml");
    std::fs::write(&path, text).unwrap();
    let path = path.to_str().unwrap().to_string();
    (dir, path)
}

#[test]
fn an_order_fails_the_nodes_without_what_was_ordered() {
    let dir = four_nodes();
    // These reports were recorded before `doctor` read the kernel log, row remaps, retired
    // pages, processes and clock-event reasons: their health is unknown, which fails
    // acceptance unless the order allows unknowns, as this one does.
    let (_o, order) = order_file("gpus = 8\nhealth_allow = [\"unknown\"]\n");
    let (code, doc, stderr) = fleet_with(dir.path(), &["--order", &order]);
    assert_eq!(code, 1, "two nodes hold fewer than 8 GPUs: {stderr}\n{doc}");
    assert_eq!(doc["worst"], "fail");
    assert_eq!(
        doc["order"],
        serde_json::json!([{"item": "gpus", "expected": "8"}])
    );
    for n in ["gpu-node-07", "8x-h100-nvlink"] {
        let a = &node(&doc, n)["acceptance"];
        assert_eq!(a["verdict"], "pass", "{n}: {a}");
        assert_eq!(a["failed"], serde_json::json!([]), "{n}");
        assert_eq!(node(&doc, n)["worst"], "warn", "{n}: its checks only warn");
    }
    for (n, found) in [("single-a100", "1"), ("7x-a100-40gb-driver-525", "7")] {
        let a = &node(&doc, n)["acceptance"];
        assert_eq!(a["verdict"], "fail", "{n}: {a}");
        assert_eq!(
            a["failed"],
            serde_json::json!([{"item": "gpus", "expected": "8", "found": found, "verdict": "fail"}]),
            "{n}"
        );
        assert_eq!(node(&doc, n)["worst"], "fail", "{n}: the order counts in worst");
    }
    assert!(doc.get("stack_asked").is_none(), "no stack flag, no stack: {doc}");
    assert!(node(&doc, "single-a100").get("stack").is_none());

    // The two 8-GPU nodes alone pass: the exit is the order's.
    let eight = tempfile::tempdir().unwrap();
    for f in ["2-socket-rdma.json", "8x-h100-nvlink.json"] {
        std::fs::copy(dir.path().join(f), eight.path().join(f)).unwrap();
    }
    let (code, doc, _) = fleet_with(eight.path(), &["--order", &order]);
    assert_eq!(code, 0, "{doc}");

    // A flag given with the file replaces the file's item (the flags and the file are read
    // as `check` reads them).
    // The four nodes' torch drift is allowed (repeatable), so the exit is the order's.
    let (code, doc, _) = fleet_with(
        dir.path(),
        &[
            "--order",
            &order,
            "--expect-gpus",
            "1",
            "--allow-drift",
            "nccl",
            "--allow-drift",
            "torch",
            "--allow-drift",
            "torch-cuda",
        ],
    );
    assert_eq!(code, 0, "every node holds at least one GPU: {doc}");
    assert_eq!(doc["order"][0]["expected"], "1");

    // The text: a line per node, the failing item said.
    let run = gpuenv(&["fleet", "report", dir.path().to_str().unwrap(), "--order", &order]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    for line in [
        "\norder: gpus 8\n",
        "\n  gpu-node-07: order: accepted\n",
        "\n  single-a100: order: gpus expected 8, found 1\n",
        "\n  7x-a100-40gb-driver-525: order: gpus expected 8, found 7\n",
        "\nFAIL  single-a100  1x NVIDIA A100-SXM4-80GB",
    ] {
        assert!(run.stdout.contains(line), "{line:?} in\n{}", run.stdout);
    }

    // Without an order the document is what it was: no field of the judgments.
    let (_, plain, _) = fleet_with(dir.path(), &[]);
    assert!(
        plain.get("order").is_none() && plain.get("stack_asked").is_none(),
        "{plain}"
    );
    for n in plain["nodes"].as_array().unwrap() {
        assert!(n.get("acceptance").is_none() && n.get("stack").is_none(), "{n}");
    }
}

#[test]
fn expect_gpu_accepts_only_the_model_ordered() {
    let dir = four_nodes();
    // Recorded before `doctor` read every health fact: unknowns allowed.
    let (code, doc, stderr) = fleet_with(dir.path(), &["--expect-gpu", "H100", "--allow-health", "unknown"]);
    assert_eq!(code, 1, "{stderr}\n{doc}");
    for n in ["gpu-node-07", "8x-h100-nvlink"] {
        assert_eq!(node(&doc, n)["acceptance"]["verdict"], "pass", "{n}: {doc}");
    }
    for (n, found) in [
        ("single-a100", "1x NVIDIA A100-SXM4-80GB"),
        ("7x-a100-40gb-driver-525", "7x NVIDIA A100-SXM4-40GB"),
    ] {
        let failed = &node(&doc, n)["acceptance"]["failed"];
        assert_eq!(failed.as_array().unwrap().len(), 1, "{n}: {failed}");
        assert_eq!(failed[0]["item"], "gpu");
        assert_eq!(failed[0]["expected"], "H100");
        assert_eq!(failed[0]["found"], found, "{n}");
    }
    let run = gpuenv(&[
        "fleet",
        "report",
        dir.path().to_str().unwrap(),
        "--expect-gpu",
        "H100",
        "--allow-health",
        "unknown",
    ]);
    assert!(
        run.stdout
            .contains("\n  single-a100: order: gpu expected H100, found 1x NVIDIA A100-SXM4-80GB\n"),
        "{}",
        run.stdout
    );
}

/// Three nodes: a Blackwell workstation on driver 590, an A100 node on 525, an H100 node
/// on 550.
fn three_drivers() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for h in [
        "1x-rtx-pro-6000-gen4-slot",
        "7x-a100-40gb-driver-525",
        "8x-h100-nvlink",
    ] {
        report(dir.path(), h, h);
    }
    dir
}

const CUDA_13: [&str; 4] = ["--torch", "2.9", "--cuda", "13.0"];

#[test]
fn the_stack_is_judged_on_each_node_as_check_judges_it() {
    let dir = three_drivers();
    let (code, doc, stderr) = fleet_with(dir.path(), &CUDA_13);
    assert_eq!(code, 1, "two drivers are too old for CUDA 13: {stderr}\n{doc}");
    assert_eq!(doc["stack_asked"], "torch ==2.9.*, CUDA ==13.0");
    let new = &node(&doc, "1x-rtx-pro-6000-gen4-slot")["stack"];
    assert_eq!(new["verdict"], "compatible", "{new}");
    assert!(new["best"].as_str().unwrap().starts_with("torch 2.9."), "{new}");
    assert!(new["best"].as_str().unwrap().contains("+cu130"), "{new}");
    assert!(new["why_not"].is_null(), "{new}");
    let old = &node(&doc, "7x-a100-40gb-driver-525")["stack"];
    assert_eq!(old["verdict"], "incompatible", "{old}");
    assert!(old["best"].is_null(), "{old}");
    let why = old["why_not"].as_str().unwrap();
    assert!(why.contains("driver-too-old"), "{why}");
    assert!(why.contains("525.147.05"), "{why}");
    assert_eq!(node(&doc, "7x-a100-40gb-driver-525")["worst"], "fail");
    assert!(doc.get("order").is_none(), "no order given: {doc}");

    // Each node's verdict is `check`'s on the same host with the same flags.
    for h in [
        "1x-rtx-pro-6000-gen4-slot",
        "7x-a100-40gb-driver-525",
        "8x-h100-nvlink",
    ] {
        let facts = fixture(&format!("hosts/{h}"));
        let mut args = vec!["check", "--host-facts", facts.to_str().unwrap(), "--json"];
        args.extend_from_slice(&CUDA_13);
        let check = json(&gpuenv(&args));
        assert_eq!(node(&doc, h)["stack"]["verdict"], check["verdict"], "{h}");
    }

    // The node whose driver runs it, alone: exit 0 (it only warns in doctor's checks).
    let one = tempfile::tempdir().unwrap();
    let f = "1x-rtx-pro-6000-gen4-slot.json";
    std::fs::copy(dir.path().join(f), one.path().join(f)).unwrap();
    let (code, doc, _) = fleet_with(one.path(), &CUDA_13);
    assert_eq!(code, 0, "{doc}");

    // The text: the question, then a line per node.
    let mut args = vec!["fleet", "report", dir.path().to_str().unwrap()];
    args.extend_from_slice(&CUDA_13);
    let run = gpuenv(&args);
    assert!(
        run.stdout.contains("\nstack: torch ==2.9.*, CUDA ==13.0\n"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("\n  1x-rtx-pro-6000-gen4-slot: stack: compatible, best torch 2.9."),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("\n  7x-a100-40gb-driver-525: stack: incompatible: the closest build, torch 2.9."),
        "{}",
        run.stdout
    );
}

#[test]
fn a_bad_order_or_flag_exits_2_before_any_report_is_read() {
    let dir = four_nodes();
    let out = tempfile::tempdir().unwrap();
    let page = out.path().join("fleet.html");
    let page_arg = page.to_str().unwrap().to_string();
    let (_b, bad) = order_file("gpus = \"many\"\ncolour = \"red\"\n");
    let (_e, empty) = order_file("# nothing ordered yet\n");
    let missing = out.path().join("no-such-order.toml");
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec!["--order", &bad],
            vec!["order.toml` line 1, key `gpus`", "line 2: unknown key `colour`"],
        ),
        (vec!["--order", &empty], vec!["--order", "names no item"]),
        (
            vec!["--order", missing.to_str().unwrap()],
            vec!["no-such-order.toml", "no such file"],
        ),
        (vec!["--expect-gpus", "eight"], vec!["--expect-gpus `eight`"]),
        (vec!["--expect-gpu", "Z9000"], vec!["--expect-gpu", "Z9000"]),
        (vec!["--expect-driver", ">=abc"], vec!["--expect-driver"]),
        (vec!["--torch", "banana"], vec!["--torch"]),
    ];
    for (flags, said) in cases {
        let mut args = vec![
            "fleet",
            "report",
            dir.path().to_str().unwrap(),
            "--report",
            &page_arg,
        ];
        args.extend_from_slice(&flags);
        let run = gpuenv(&args);
        assert_eq!(run.code, 2, "{flags:?}: {}", run.stderr);
        for words in said {
            assert!(
                run.stderr.contains(words),
                "{flags:?}: {words:?} in {}",
                run.stderr
            );
        }
        assert!(
            run.stdout.is_empty(),
            "{flags:?}: nothing printed: {}",
            run.stdout
        );
        assert!(!page.exists(), "{flags:?}: nothing written");
    }
    // A page of another format is refused the same way.
    let pdf = out.path().join("fleet.pdf");
    let run = gpuenv(&[
        "fleet",
        "report",
        dir.path().to_str().unwrap(),
        "--report",
        pdf.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("--report") && run.stderr.contains("FILE.html"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty() && !pdf.exists());
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
}

// ---------------------------------------------------------------------------------------
// The fleet page
// ---------------------------------------------------------------------------------------

const HOSTILE: &str = "<script>alert(1)</script>";

/// The four nodes, one more whose host name is hostile markup, and a file left out.
fn page_fleet() -> tempfile::TempDir {
    let dir = four_nodes();
    let text = std::fs::read_to_string(dir.path().join("single-a100.json")).unwrap();
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    doc["host"]["hostname"] = HOSTILE.into();
    std::fs::write(dir.path().join("z-hostile.json"), doc.to_string()).unwrap();
    std::fs::write(dir.path().join("zz-broken.json"), "{").unwrap();
    dir
}

/// `fleet report` of [`page_fleet`] with the order and a stack, writing `page`.
fn fleet_page(dir: &Path, page: &Path) -> crate::support::Run {
    // Recorded before `doctor` read every health fact: unknowns allowed.
    let (_o, order) = order_file("gpus = 8\nhealth_allow = [\"unknown\"]\n");
    gpuenv(&[
        "fleet",
        "report",
        dir.to_str().unwrap(),
        "--order",
        &order,
        "--torch",
        "2.4",
        "--report",
        page.to_str().unwrap(),
    ])
}

#[test]
fn fleet_html_page_holds_each_node_the_drift_and_the_files_left_out() {
    let dir = page_fleet();
    let out = tempfile::tempdir().unwrap();
    let page = out.path().join("fleet.html");
    let run = fleet_page(dir.path(), &page);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"), "{}", &html[..200]);
    assert!(html.contains("<h1>Fleet report: 5 nodes</h1>"));
    assert!(html.contains(&format!("gpuenv {}", env!("CARGO_PKG_VERSION"))));
    assert!(html.contains("UTC"));
    assert!(html.contains("Order: gpus 8"), "the order asked");
    assert!(html.contains("Stack asked: torch ==2.4.*"), "the stack asked");
    assert_eq!(html.matches("<tr class=\"node\">").count(), 5);
    assert!(html.contains("<td class=\"verdict fail\">FAIL</td>"));
    assert!(html.contains("NOT ACCEPTED"));
    assert!(html.contains("gpus: expected 8, found 7"));
    assert!(html.contains(">ACCEPTED<"));
    assert!(html.contains(">compatible<"), "the stack on a node");
    // The drift, grouped by what it breaks, each kind a table of its own.
    assert!(html.contains("<h3>a multi-node job will fail or hang</h3>"));
    assert!(html.contains("<h3>a heterogeneous job</h3>"));
    assert!(html.contains("id=\"drift-driver-branch\""));
    // The file left out.
    assert_eq!(html.matches("<tr class=\"problem\">").count(), 1);
    assert!(html.contains("zz-broken.json"));
    // Outside text escaped: the hostile host name is a node, as text.
    assert!(!html.contains("<script"), "unescaped script");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;&#x2f;script&gt;"));
    // Self-contained, as the acceptance page: no script, no load, a policy forbidding any.
    assert!(!html.contains("src="));
    assert!(!html.contains("href="));
    assert!(html.contains("Content-Security-Policy\" content=\"default-src 'none'"));
    // stdout is the text report, as without --report.
    assert!(run.stdout.starts_with("5 nodes\n"), "{}", run.stdout);
    // Written atomically: nothing left beside it.
    crate::report_page::assert_alone(out.path(), "fleet.html");
}

#[test]
fn fleet_markdown_page_has_its_sections_and_tables() {
    let dir = page_fleet();
    let out = tempfile::tempdir().unwrap();
    let page = out.path().join("fleet.md");
    let run = fleet_page(dir.path(), &page);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let md = std::fs::read_to_string(&page).unwrap();
    let lines: Vec<&str> = md.lines().collect();
    assert_eq!(lines[0], "# Fleet report: 5 nodes");
    let headings: Vec<&str> = lines.iter().copied().filter(|l| l.starts_with("## ")).collect();
    assert_eq!(
        headings,
        ["## Nodes", "## Drift between nodes", "## Files left out"]
    );
    let groups: Vec<&str> = lines.iter().copied().filter(|l| l.starts_with("### ")).collect();
    assert_eq!(
        groups,
        [
            "### a multi-node job will fail or hang",
            "### usually fine, but named",
            "### a heterogeneous job",
            "### RDMA on some nodes only",
        ]
    );
    // A row per node, each with the header's cells; the judgments in its last two.
    let nodes = crate::report_page::table_rows(&lines, "## Nodes", "## Drift between nodes");
    assert_eq!(nodes.len(), 2 + 5, "{nodes:#?}");
    assert!(nodes[0].ends_with("| order | stack |"), "{}", nodes[0]);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("| 7x-a100-40gb-driver-525 | **FAIL** |")
                && l.contains(
                    "| **NOT ACCEPTED**; gpus: expected 8, found 7 | **compatible**; best: torch 2.4."
                )),
        "{md}"
    );
    crate::report_page::assert_cells_match_headers(&lines);
    // The hostile name escaped; the file left out listed.
    assert!(md.contains("\\<script\\>alert(1)\\</script\\>"), "{md}");
    assert!(!md.contains("<script>"));
    assert!(md.contains("zz-broken.json | not JSON"), "{md}");
}

#[test]
fn chromium_renders_the_fleet_page_without_errors_or_network() {
    use crate::report_page::{assert_no_request, browser_ready, dump_dom, page_errors};
    browser_ready();
    let dir = page_fleet();
    let out = tempfile::tempdir().unwrap();
    let page = out.path().join("fleet.html");
    let run = fleet_page(dir.path(), &page);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let scratch = out.path().join("chromium");
    std::fs::create_dir_all(&scratch).unwrap();
    let (dumped, net_log) = dump_dom(&page, &scratch);
    let dom = &dumped.stdout;
    // The rows as the browser built them: a row per node, per drift value, per file left
    // out; and the hostile name stayed text (no script element was made of it).
    assert_eq!(dom.matches("<tr class=\"node\">").count(), 5, "{dom}");
    let html = std::fs::read_to_string(&page).unwrap();
    let values = html.matches("<tr class=\"drift-value\">").count();
    assert!(values >= 8, "{values} drift rows");
    assert_eq!(dom.matches("<tr class=\"drift-value\">").count(), values);
    assert_eq!(dom.matches("<tr class=\"problem\">").count(), 1);
    assert!(!dom.contains("<script"), "a script element in the DOM");
    assert!(dom.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{dom}");
    let errors = page_errors(&dumped.stderr, &page);
    assert!(
        errors.is_empty(),
        "chromium reported errors loading the page: {errors:#?}\nall it printed:\n{}",
        dumped.stderr
    );
    assert_no_request(&net_log);
}
