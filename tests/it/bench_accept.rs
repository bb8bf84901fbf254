//! Acceptance on measured figures: `check --order` with `bench = true` and the `min_*`
//! floors on recorded bench results (`check --bench-results FILE`), results of another
//! machine refused, and `fleet report` naming the slow node among its bench results.
//!
//! The bench results under `tests/fixtures/bench/results/` are made here, through the
//! readers `gpuenv bench` uses (the GPU script's output parser, nccl-tests' and fio's),
//! from recorded outputs and published figures; [`fixtures_are_what_the_readers_make`]
//! holds them to that (`GPUENV_WRITE_BENCH_FIXTURES=1` writes them again).

use std::path::{Path, PathBuf};

use serde_json::Value;

use gpuenv::bench::engines::nccl_tests;
use gpuenv::bench::figure::BenchGpu;
use gpuenv::bench::host::fio;
use gpuenv::bench::{BenchDoc, Engine, Figure, Metric};

use crate::support::{derived_host, fixture, gpuenv, json};

const H100: &str = "NVIDIA H100 80GB HBM3";

/// The H200 host's machine ID as `doctor` derives it from its recorded `/etc/machine-id`
/// (`tests/fixtures/hosts/8x-h200-nvlink`).
const H200_MACHINE_ID: &str = "146f5f8929ac68285b02f180075ab15f";

/// nvbandwidth's device_to_host_memcpy_sm row on an 8x H100 node, as published in
/// NVIDIA/nvbandwidth issue 24 (https://github.com/NVIDIA/nvbandwidth/issues/24).
const D2H: [f64; 8] = [52.77, 52.77, 52.77, 52.78, 52.76, 52.77, 52.78, 52.77];

/// The diagonal of the "Unidirectional P2P=Disabled Bandwidth Matrix" of an 8x H100 SXM
/// HGX node, each GPU's copy to itself (bytes read plus written), NVIDIA's
/// p2pBandwidthLatencyTest, published in NVIDIA/nccl issue 1264
/// (https://github.com/NVIDIA/nccl/issues/1264), the source memory-bandwidth's efficiency
/// record cites.
const COPY_TO_ITSELF: [f64; 8] = [
    2474.76, 2512.44, 2498.88, 2499.38, 2499.63, 2514.71, 2504.76, 2503.38,
];

/// GPU 0 to GPUs 1 to 6 in the "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix"
/// of the same issue (the peer-to-peer-nvlink record's source).
const P2P_FROM_0: [f64; 6] = [371.02, 376.65, 376.60, 376.82, 375.59, 375.94];

/// ml-engineering's "Maximum Achievable Matmul FLOPS" for H100 SXM, BF16 and FP8
/// (https://github.com/stas00/ml-engineering/blob/master/compute/accelerator/README.md), as
/// the matmul-bf16 and matmul-fp8 records cite them: one figure per model, so every GPU
/// gets it.
const MATMUL_BF16: f64 = 794.5;
const MATMUL_FP8: f64 = 1402.6;

fn results(name: &str) -> PathBuf {
    fixture(&format!("bench/results/{name}"))
}

/// An 8x H100 SXM node at published figures: see `tests/fixtures/bench/README.md`.
fn h100_healthy() -> BenchDoc {
    let mut figures = Vec::new();
    for g in 0..8u32 {
        let i = g as usize;
        figures.push(
            Figure::new(
                Metric::MatmulBf16,
                MATMUL_BF16,
                Engine::Gpuenv,
                "constructed: ml-engineering's maximum achievable BF16 matmul of H100 SXM",
            )
            .on_gpu(g),
        );
        figures.push(
            Figure::new(
                Metric::MatmulFp8,
                MATMUL_FP8,
                Engine::Gpuenv,
                "constructed: ml-engineering's maximum achievable FP8 (e4m3) matmul of H100 SXM",
            )
            .on_gpu(g),
        );
        figures.push(
            Figure::new(
                Metric::MemoryBandwidth,
                COPY_TO_ITSELF[i],
                Engine::Gpuenv,
                "constructed: p2pBandwidthLatencyTest's copy of the GPU to itself, NVIDIA/nccl#1264",
            )
            .on_gpu(g),
        );
        figures.push(
            Figure::new(
                Metric::DeviceToHost,
                D2H[i],
                Engine::Nvbandwidth,
                "constructed: nvbandwidth device_to_host_memcpy_sm, NVIDIA/nvbandwidth#24",
            )
            .on_gpu(g),
        );
    }
    for (i, v) in P2P_FROM_0.iter().enumerate() {
        figures.push(
            Figure::new(
                Metric::PeerToPeer,
                *v,
                Engine::Gpuenv,
                "constructed: p2pBandwidthLatencyTest's unidirectional P2P writes, NVIDIA/nccl#1264",
            )
            .on_gpu(0)
            .to_peer(i as u32 + 1),
        );
    }
    let nccl = std::fs::read_to_string(fixture("bench/nccl-tests/h100x8-issue290.txt")).unwrap();
    figures.extend(nccl_tests::parse_all_reduce(&nccl).unwrap().figures());
    for (job, name) in [
        (fio::FioJob::SeqRead, "seqread"),
        (fio::FioJob::SeqWrite, "seqwrite"),
    ] {
        let text = std::fs::read_to_string(fixture(&format!("bench/fio-3.33-{name}.json"))).unwrap();
        figures.push(fio::figure(job, &fio::parse(&text).unwrap(), "the project's own capture").unwrap());
    }
    BenchDoc {
        schema_version: gpuenv::report::SCHEMA_VERSION,
        hostname: "h100-node-01".into(),
        machine_id: None,
        gpus: (0..8)
            .map(|index| BenchGpu {
                index,
                name: H100.into(),
                memory_mib: None,
            })
            .collect(),
        figures,
        skipped: vec![
            "host-to-device: no published H100 figure of pinned copies through the copy engine (constructed results)"
                .into(),
        ],
        burn: None,
        failures: Vec::new(),
    }
}

/// The constructed 8x H200 run with a slow GPU 5, read by the GPU script's parser.
fn h200_slow_gpu5() -> BenchDoc {
    let text = std::fs::read_to_string(fixture("bench/gpu/constructed-8gpu-slow-gpu5.jsonl")).unwrap();
    let run = gpuenv::bench::gpu::parse(&text).unwrap();
    BenchDoc {
        schema_version: gpuenv::report::SCHEMA_VERSION,
        hostname: "h200-node-01".into(),
        machine_id: Some(H200_MACHINE_ID.into()),
        gpus: run.gpus,
        figures: run.figures,
        skipped: run.skipped,
        burn: None,
        failures: Vec::new(),
    }
}

#[test]
fn fixtures_are_what_the_readers_make() {
    for (name, doc) in [
        ("h100x8-healthy.json", h100_healthy()),
        ("h200x8-slow-gpu5.json", h200_slow_gpu5()),
    ] {
        let want = serde_json::to_string_pretty(&doc).unwrap() + "\n";
        let path = results(name);
        if std::env::var_os("GPUENV_WRITE_BENCH_FIXTURES").is_some() {
            std::fs::write(&path, &want).unwrap();
        }
        let got = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            got == want,
            "{name} differs from what the readers make of its sources; GPUENV_WRITE_BENCH_FIXTURES=1 writes it again"
        );
    }
}

// ---------------------------------------------------------------------------------------
// check --bench-results
// ---------------------------------------------------------------------------------------

/// The recorded 8x H100 host with a host name, as its bench results name it.
fn h100_host(hostname: &str) -> tempfile::TempDir {
    derived_host("8x-h100-nvlink", |r| {
        r["files"]["/proc/sys/kernel/hostname"] = format!("{hostname}\n").into();
    })
}

/// An order file in a directory that lives as long as it.
struct Order {
    dir: tempfile::TempDir,
}

impl Order {
    fn new(text: &str) -> Order {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("order.toml"), text).unwrap();
        Order { dir }
    }

    fn path(&self) -> String {
        self.dir.path().join("order.toml").to_str().unwrap().to_string()
    }
}

/// The recorded hosts' NVML readings hold no processes or clock-event reasons, and their
/// persistence mode is unknown: those health facts are allowed unknown in these orders,
/// so that what decides acceptance is what the tests are about (the health items have
/// their tests in `health.rs`).
const UNKNOWN_HEALTH: &str = "health_allow = [\"unknown\"]\n";

/// `check --host-facts HOST --order ORDER --bench-results FILE --json`, and its text run.
fn check(host: &Path, order: &str, bench: &Path) -> (i32, Value, String) {
    let order = Order::new(order);
    let mut args = vec![
        "check".to_string(),
        "--host-facts".into(),
        host.to_str().unwrap().into(),
        "--order".into(),
        order.path(),
        "--bench-results".into(),
        bench.to_str().unwrap().into(),
    ];
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let text = gpuenv(&a);
    args.push("--json".into());
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = gpuenv(&a);
    assert_eq!(run.code, text.code, "{}{}", run.stderr, text.stderr);
    if run.code == 2 {
        return (run.code, Value::Null, run.stderr);
    }
    (run.code, json(&run), text.stdout)
}

fn item<'a>(doc: &'a Value, key: &str) -> &'a Value {
    doc["acceptance"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["item"] == key)
        .unwrap_or_else(|| panic!("no item {key} in {doc:#}"))
}

#[test]
fn bench_true_on_a_healthy_recorded_run_is_accepted() {
    let host = h100_host("h100-node-01");
    let (code, doc, text) = check(
        host.path(),
        &format!("gpus = 8\nbench = true\n{UNKNOWN_HEALTH}"),
        &results("h100x8-healthy.json"),
    );
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["accepted"], true);
    let bench = item(&doc, "bench");
    assert_eq!(bench["verdict"], "pass", "{bench}");
    assert!(
        bench["found"]
            .as_str()
            .unwrap()
            .starts_with("39 figures judged against the datasheet, every one a pass"),
        "{bench}"
    );
    // The figures beside their datasheets, in the JSON.
    let b = &doc["bench"];
    assert_eq!(b["counts_for_acceptance"], true);
    assert_eq!(b["hostname"], "h100-node-01");
    assert!(b["outliers"].as_array().unwrap().is_empty(), "{b:#}");
    let figures = b["figures"].as_array().unwrap();
    assert_eq!(figures.len(), 41);
    let nccl = figures
        .iter()
        .find(|f| f["figure"]["metric"] == "nccl-busbw")
        .unwrap();
    assert_eq!(nccl["verdict"], "pass");
    assert_eq!(nccl["efficiency"], "nccl-busbw-hopper");
    assert_eq!(nccl["figure"]["engine"], "nccl-tests");
    // D2H against the link the host reports (Gen5 x16).
    let d2h = figures
        .iter()
        .find(|f| f["figure"]["metric"] == "device-to-host")
        .unwrap();
    assert_eq!(d2h["datasheet_fact"], "pcie_link Gen5 x16", "{d2h}");
    // The disk figures have no datasheet: unknown, and no reason to refuse.
    let disk = figures
        .iter()
        .find(|f| f["figure"]["metric"] == "disk-seq-read")
        .unwrap();
    assert_eq!(disk["verdict"], "unknown");
    // And in text: each figure beside its datasheet.
    assert!(
        text.contains("bench results of h100-node-01 (the order's measured items are judged on them): 41 figures, 39 pass, 0 warn, 0 fail, 2 unknown"),
        "{text}"
    );
    assert!(
        text.contains("  pass  GPU 0 matmul-bf16                   794.5 TFLOPS   80% of 989.5 TFLOPS (H100 SXM bf16_tflops)"),
        "{text}"
    );
    assert!(text.contains("accepted: every item holds"), "{text}");
}

#[test]
fn the_slow_gpu_of_eight_is_named_and_not_accepted() {
    let host = fixture("hosts/8x-h200-nvlink");
    let (code, doc, text) = check(
        &host,
        &format!("bench = true\n{UNKNOWN_HEALTH}"),
        &results("h200x8-slow-gpu5.json"),
    );
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["accepted"], false);
    let bench = item(&doc, "bench");
    assert_eq!(bench["verdict"], "fail");
    let found = bench["found"].as_str().unwrap();
    assert!(
        found.starts_with(
            "GPU 5 matmul-bf16: 432.0 TFLOPS is 40% below the median 720.0 TFLOPS of 8 GPUs of this machine"
        ),
        "{found}"
    );
    // Only GPU 5 is named, against its peers and against its datasheet.
    for g in [0, 1, 2, 3, 4, 6, 7] {
        assert!(!found.contains(&format!("GPU {g} ")), "GPU {g} named: {found}");
    }
    assert!(
        found.contains("GPU 5 matmul-bf16 432 TFLOPS: fail, 44% of the datasheet's 989.5 TFLOPS"),
        "{found}"
    );
    let outliers = doc["bench"]["outliers"].as_array().unwrap();
    assert!(!outliers.is_empty());
    assert!(
        outliers.iter().all(|o| o["gpu"] == 5 || o["peer"] == 5),
        "{outliers:#?}"
    );
    assert!(text.contains("below their peers:\n  FAIL  GPU 5 "), "{text}");
    assert!(
        text.contains("not accepted: 1 failed, 0 decided by an override (bench)"),
        "{text}"
    );
}

#[test]
fn results_without_a_measured_order_are_shown_and_decide_nothing() {
    let host = fixture("hosts/8x-h200-nvlink");
    let (code, doc, text) = check(
        &host,
        &format!("gpus = 8\n{UNKNOWN_HEALTH}"),
        &results("h200x8-slow-gpu5.json"),
    );
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["accepted"], true);
    assert_eq!(doc["bench"]["counts_for_acceptance"], false);
    assert!(!doc["bench"]["outliers"].as_array().unwrap().is_empty());
    assert!(
        doc["acceptance"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["item"] != "bench"),
        "{doc:#}"
    );
    assert!(
        text.contains("shown only: the order asks for no measured figure"),
        "{text}"
    );
}

#[test]
fn an_order_for_figures_without_results_is_not_accepted() {
    // The false ACCEPTED this ends: an order of `bench = true` alone was accepted on the
    // host's health.
    let host = fixture("hosts/8x-h100-nvlink/host.json");
    let order = Order::new(&format!("bench = true\n{UNKNOWN_HEALTH}"));
    let order_path = order.path();
    for args in [
        vec!["--order", order_path.as_str()],
        vec!["--expect-bench", "--allow-health", "unknown"],
        vec!["--expect-min-nccl-busbw", "350", "--allow-health", "unknown"],
    ] {
        let mut a = vec!["check", "--host-facts", host.to_str().unwrap()];
        a.extend(args.iter().copied());
        let text = gpuenv(&a);
        a.push("--json");
        let run = gpuenv(&a);
        assert_eq!(run.code, 1, "{args:?}: {}", run.stdout);
        assert_eq!(text.code, 1);
        let doc = json(&run);
        assert_eq!(doc["accepted"], false, "{args:?}");
        let failed: Vec<&Value> = doc["acceptance"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["pass"] == false)
            .collect();
        assert_eq!(failed.len(), 1, "{failed:#?}");
        assert_eq!(failed[0]["found"], "no bench results");
        assert!(
            failed[0]["rule"]
                .as_str()
                .unwrap()
                .contains("gpuenv check --bench-results FILE"),
            "{}",
            failed[0]
        );
        assert!(doc.get("bench").is_none());
        assert!(text.stdout.contains("FAIL  "), "{}", text.stdout);
    }
}

/// A copy of the healthy H100 results, edited.
fn edited(dir: &Path, name: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let mut doc: Value =
        serde_json::from_str(&std::fs::read_to_string(results("h100x8-healthy.json")).unwrap()).unwrap();
    edit(&mut doc);
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    path
}

/// The figures without those of `metric`.
fn without(doc: &mut Value, metric: &str) {
    doc["figures"]
        .as_array_mut()
        .unwrap()
        .retain(|f| f["metric"] != metric);
}

#[test]
fn each_floor_passes_above_fails_below_and_is_no_pass_unmeasured() {
    let host = h100_host("h100-node-01");
    let dir = tempfile::tempdir().unwrap();
    // A TCP figure to a peer node, for the network floor: 11.8 GB/s, 94.4 Gb/s on a 100G
    // link (constructed for this test).
    let bench = edited(dir.path(), "with-net.json", |d| {
        d["figures"].as_array_mut().unwrap().push(serde_json::json!({
            "metric": "network-tcp", "value": 11.8, "unit": "GB/s", "engine": "gpuenv",
            "detail": "8 streams to 10.0.0.12:29571, 118 GB confirmed by the peer in 10 s; payload bytes only"
        }));
    });
    let fio_read = h100_healthy()
        .figures
        .iter()
        .find(|f| f.metric == Metric::DiskSeqRead)
        .unwrap()
        .value;
    let fio_write = h100_healthy()
        .figures
        .iter()
        .find(|f| f.metric == Metric::DiskSeqWrite)
        .unwrap()
        .value;
    // Each floor: a value under the figure, one over it, the metric it reads, and what
    // the found text names.
    let floors: [(&str, String, String, &str, &str); 7] = [
        (
            "min_matmul_tflops",
            "\"0.7PFLOPS\"".into(),
            "1500".into(),
            "",
            "lowest GPU 0: 1402.6 TFLOPS (matmul-fp8",
        ),
        (
            "min_memory_bandwidth",
            "\"2.4TB/s\"".into(),
            "\"2.5TB/s\"".into(),
            "memory-bandwidth",
            "lowest GPU 0: 2474.76 GB/s",
        ),
        (
            "min_nccl_busbw",
            "450".into(),
            "\"500GB/s\"".into(),
            "nccl-busbw",
            "476.53 GB/s (nccl-busbw, nccl-tests",
        ),
        (
            "min_p2p_bandwidth",
            "370".into(),
            "375".into(),
            "peer-to-peer",
            "slowest pair GPU 0 -> GPU 1: 371.02 GB/s",
        ),
        (
            "min_disk_read",
            format!("\"{}MB/s\"", (fio_read * 1000.0 * 0.9).floor()),
            format!("\"{}MB/s\"", (fio_read * 1000.0 * 1.1).ceil()),
            "disk-seq-read",
            "(disk-seq-read, fio",
        ),
        (
            "min_disk_write",
            format!("{}", fio_write * 0.9),
            format!("{}", fio_write * 1.1),
            "disk-seq-write",
            "(disk-seq-write, fio",
        ),
        (
            "min_network",
            "\"90G\"".into(),
            "\"100G\"".into(),
            "network-tcp",
            "94.4 Gb/s (network-tcp, gpuenv",
        ),
    ];
    for (key, above, below, metric, names) in floors {
        let (code, doc, _) = check(host.path(), &format!("{key} = {above}\n{UNKNOWN_HEALTH}"), &bench);
        let a = item(&doc, key);
        assert_eq!(
            (code, &a["verdict"]),
            (0, &Value::from("pass")),
            "{key} above: {a}"
        );
        assert!(a["found"].as_str().unwrap().contains(names), "{key}: {a}");
        let (code, doc, _) = check(host.path(), &format!("{key} = {below}\n{UNKNOWN_HEALTH}"), &bench);
        let a = item(&doc, key);
        assert_eq!(
            (code, &a["verdict"]),
            (1, &Value::from("fail")),
            "{key} below: {a}"
        );
        assert!(a["found"].as_str().unwrap().contains(names), "{key}: {a}");
        // The metric not measured: never a pass.
        let missing = edited(dir.path(), &format!("no-{key}.json"), |d| {
            if metric.is_empty() {
                for m in ["matmul-bf16", "matmul-fp16", "matmul-tf32", "matmul-fp8"] {
                    without(d, m);
                }
            } else {
                without(d, metric);
            }
        });
        let (code, doc, _) = check(
            host.path(),
            &format!("{key} = {above}\n{UNKNOWN_HEALTH}"),
            &missing,
        );
        let a = item(&doc, key);
        assert_eq!(
            (code, &a["verdict"]),
            (1, &Value::from("fail")),
            "{key} missing: {a}"
        );
        assert!(
            a["found"].as_str().unwrap().starts_with("not measured: "),
            "{key}: {a}"
        );
    }
}

#[test]
fn results_of_another_machine_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let order = format!("bench = true\n{UNKNOWN_HEALTH}");
    // Another machine ID than the H200 host's.
    let other_id = dir.path().join("other-id.json");
    let mut doc: Value =
        serde_json::from_str(&std::fs::read_to_string(results("h200x8-slow-gpu5.json")).unwrap()).unwrap();
    doc["machine_id"] = "00000000000000000000000000000000".into();
    std::fs::write(&other_id, doc.to_string()).unwrap();
    let (code, _, stderr) = check(&fixture("hosts/8x-h200-nvlink"), &order, &other_id);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("invalid --bench-results `"), "{stderr}");
    assert!(stderr.contains("other-id.json`: it was measured on another machine (machine ID 00000000000000000000000000000000 there, 146f5f8929ac68285b02f180075ab15f here)"), "{stderr}");
    // Another host name, and no machine IDs.
    let host = h100_host("h100-node-02");
    let (code, _, stderr) = check(host.path(), &order, &results("h100x8-healthy.json"));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("it was measured on `h100-node-01`, and this host is `h100-node-02`"),
        "{stderr}"
    );
    // The right name, other GPUs.
    let renamed = edited(dir.path(), "h200-name.json", |d| {
        d["hostname"] = "h200-node-01".into()
    });
    let (code, _, stderr) = check(&fixture("hosts/8x-h200-nvlink"), &order, &renamed);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("it measured 8x NVIDIA H100 80GB HBM3, and this host has 8x NVIDIA H200"),
        "{stderr}"
    );
    // A host that gives no name and no ID cannot be matched at all.
    let (code, _, stderr) = check(
        &fixture("hosts/8x-h100-nvlink/host.json"),
        &order,
        &results("h100x8-healthy.json"),
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("cannot be told to be of this machine"),
        "{stderr}"
    );
}

#[test]
fn a_file_that_is_not_bench_results_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let host = h100_host("h100-node-01");
    let doctor = gpuenv(&["doctor", "--host-facts", host.path().to_str().unwrap(), "--json"]);
    let cases: [(&str, String, &str); 4] = [
        (
            "doctor.json",
            doctor.stdout,
            "a `gpuenv doctor --json` report, not bench results",
        ),
        (
            "cut.json",
            "{\"schema_version\": 1, \"figures\": [".into(),
            "not JSON",
        ),
        (
            "newer.json",
            std::fs::read_to_string(results("h100x8-healthy.json"))
                .unwrap()
                .replacen("\"schema_version\": 1", "\"schema_version\": 9", 1),
            "written by a newer gpuenv (schema_version 9; this one reads 1)",
        ),
        (
            "units.json",
            std::fs::read_to_string(results("h100x8-healthy.json"))
                .unwrap()
                .replacen("\"unit\": \"TFLOPS\"", "\"unit\": \"GFLOPS\"", 1),
            "figure 1 (matmul-bf16) is in `GFLOPS`",
        ),
    ];
    for (name, text, says) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let page = dir.path().join(format!("{name}.html"));
        let run = gpuenv(&[
            "check",
            "--host-facts",
            host.path().to_str().unwrap(),
            "--expect-bench",
            "--bench-results",
            path.to_str().unwrap(),
            "--report",
            page.to_str().unwrap(),
        ]);
        assert_eq!(run.code, 2, "{name}: {}", run.stderr);
        assert!(
            run.stderr.contains(&format!("{name}`: {says}")),
            "{name}: {}",
            run.stderr
        );
        assert!(run.stdout.is_empty(), "{name}: nothing printed");
        assert!(!page.exists(), "{name}: nothing written");
    }
    let run = gpuenv(&[
        "check",
        "--host-facts",
        host.path().to_str().unwrap(),
        "--bench-results",
        dir.path().join("absent.json").to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("cannot read bench results `"),
        "{}",
        run.stderr
    );
}

#[test]
fn the_acceptance_page_shows_the_figures_beside_the_datasheet() {
    let dir = tempfile::tempdir().unwrap();
    let host = fixture("hosts/8x-h200-nvlink");
    let order = Order::new(&format!("bench = true\n{UNKNOWN_HEALTH}"));
    for name in ["page.html", "page.md"] {
        let page = dir.path().join(name);
        let run = gpuenv(&[
            "check",
            "--host-facts",
            host.to_str().unwrap(),
            "--order",
            &order.path(),
            "--bench-results",
            results("h200x8-slow-gpu5.json").to_str().unwrap(),
            "--report",
            page.to_str().unwrap(),
        ]);
        assert_eq!(run.code, 1, "{}", run.stderr);
        let text = std::fs::read_to_string(&page).unwrap();
        if name.ends_with(".html") {
            assert!(text.contains("<h2 id=\"bench\">Measured figures</h2>"), "{text}");
            assert!(
                text.contains("<tr class=\"figure\"><td>GPU 5 matmul-bf16</td><td>432.0 TFLOPS</td><td>989.5 TFLOPS (H200 SXM bf16_tflops)</td><td>44%</td><td class=\"verdict fail\">FAIL</td><td>gpuenv"),
                "{text}"
            );
            assert!(
                text.contains("<tr class=\"figure\"><td>GPU 0 matmul-bf16</td><td>720.0 TFLOPS</td><td>989.5 TFLOPS (H200 SXM bf16_tflops)</td><td>73%</td><td class=\"verdict pass\">pass</td>"),
                "{text}"
            );
            assert!(text.contains("<ul id=\"bench-outliers\">\n<li class=\"fail\">GPU 5 matmul-bf16: 432.0 TFLOPS is 40% below the median"), "{text}");
            assert!(
                text.contains("NOT ACCEPTED: 1 failed, 0 decided by an override (bench)"),
                "{text}"
            );
        } else {
            let headings: Vec<&str> = text.lines().filter(|l| l.starts_with("## ")).collect();
            assert_eq!(
                &headings[..3],
                ["## The order", "## Measured figures", "## Doctor checks"]
            );
            assert!(text.contains("| GPU 5 matmul-bf16 | 432.0 TFLOPS | 989.5 TFLOPS (H200 SXM bf16\\_tflops) | 44% | **FAIL** | gpuenv"), "{text}");
            assert!(
                text.contains("### Below their peers\n\n- GPU 5 matmul-bf16: 432.0 TFLOPS is 40% below"),
                "{text}"
            );
            crate::report_page::assert_cells_match_headers(&text.lines().collect::<Vec<_>>());
        }
    }
}

// ---------------------------------------------------------------------------------------
// fleet report
// ---------------------------------------------------------------------------------------

/// Three 8x H100 nodes, a `doctor --json` report and bench results each; node 3 measured
/// every figure at 80% of the others (constructed: a node held to a lower power limit).
fn three_nodes() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for n in 1..=3 {
        let name = format!("h100-node-0{n}");
        let host = h100_host(&name);
        let run = gpuenv(&["doctor", "--host-facts", host.path().to_str().unwrap(), "--json"]);
        assert!(run.code == 0 || run.code == 1, "{}", run.stderr);
        std::fs::write(dir.path().join(format!("{name}.json")), &run.stdout).unwrap();
        edited(dir.path(), &format!("{name}.bench.json"), |d| {
            d["hostname"] = name.clone().into();
            if n == 3 {
                for f in d["figures"].as_array_mut().unwrap() {
                    f["value"] = (f["value"].as_f64().unwrap() * 0.8).into();
                }
            }
        });
    }
    dir
}

#[test]
fn fleet_report_names_the_slow_node() {
    let dir = three_nodes();
    let run = gpuenv(&["fleet", "report", dir.path().to_str().unwrap(), "--json"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let doc = json(&run);
    assert!(doc["problems"].as_array().unwrap().is_empty(), "{doc:#}");
    let nodes = doc["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3, "bench results are no nodes of their own");
    for n in nodes {
        assert!(
            n["bench"]["file"].as_str().unwrap().ends_with(".bench.json"),
            "{n:#}"
        );
    }
    assert_eq!(nodes[2]["worst"], "fail");
    let slow = doc["bench_outliers"].as_array().unwrap();
    assert!(!slow.is_empty());
    assert!(slow.iter().all(|o| o["who"] == "h100-node-03"), "{slow:#?}");
    let bf16 = slow.iter().find(|o| o["metric"] == "matmul-bf16").unwrap();
    assert_eq!(bf16["median"], 794.5);
    assert_eq!(bf16["peers"], 3);
    assert!(
        bf16["rule"]
            .as_str()
            .unwrap()
            .starts_with("635.6 TFLOPS is 20% below the median 794.5 TFLOPS of 3 nodes"),
        "{bf16}"
    );
    let text = gpuenv(&["fleet", "report", dir.path().to_str().unwrap()]);
    assert_eq!(text.code, 1);
    assert!(
        text.stdout.contains("bench: results of 3 of 3 nodes"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains("slower than the other nodes:\n  FAIL  h100-node-03 matmul-bf16: 635.6 TFLOPS is 20% below the median 794.5 TFLOPS of 3 nodes"),
        "{}",
        text.stdout
    );
    // Without node 3's results, nobody is slow.
    std::fs::remove_file(dir.path().join("h100-node-03.bench.json")).unwrap();
    let doc = json(&gpuenv(&[
        "fleet",
        "report",
        dir.path().to_str().unwrap(),
        "--json",
    ]));
    assert!(doc["bench_outliers"].as_array().unwrap().is_empty(), "{doc:#}");
}

#[test]
fn fleet_report_judges_each_node_on_its_results_and_lists_results_of_no_node() {
    let dir = three_nodes();
    // Results whose node's report is not among the inputs.
    edited(dir.path(), "h100-node-09.bench.json", |d| {
        d["hostname"] = "h100-node-09".into()
    });
    let order = Order::new(&format!("gpus = 8\nbench = true\n{UNKNOWN_HEALTH}"));
    let page = dir.path().join("fleet.html");
    let run = gpuenv(&[
        "fleet",
        "report",
        dir.path().to_str().unwrap(),
        "--order",
        &order.path(),
        "--json",
        "--report",
        page.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let doc = json(&run);
    let asked: Vec<&str> = doc["order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["item"].as_str().unwrap())
        .collect();
    assert_eq!(asked, ["gpus", "bench"]);
    let nodes = doc["nodes"].as_array().unwrap();
    for n in &nodes[..2] {
        assert_eq!(n["acceptance"]["verdict"], "pass", "{n:#}");
        // The recorded host's data disk is of unknown media: doctor warns, no more.
        assert_eq!(n["worst"], "warn", "{n:#}");
    }
    assert_eq!(nodes[2]["worst"], "fail");
    let failed = nodes[2]["acceptance"]["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0]["item"], "bench");
    assert!(
        failed[0]["found"]
            .as_str()
            .unwrap()
            .contains("GPU 0 matmul-bf16 635.6 TFLOPS: warn, 64% of the datasheet's 989.5 TFLOPS"),
        "{}",
        failed[0]
    );
    let problems = doc["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0]["file"]
            .as_str()
            .unwrap()
            .ends_with("h100-node-09.bench.json")
    );
    assert!(
        problems[0]["message"].as_str().unwrap().starts_with(
            "bench results of `h100-node-09`: no `doctor --json` report among the inputs is of that machine"
        ),
        "{}",
        problems[0]
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("<h2 id=\"slow-section\">Slower than the other nodes</h2>"),
        "{html}"
    );
    assert!(
        html.contains("<li class=\"fail\">h100-node-03 matmul-bf16: 635.6 TFLOPS is 20% below"),
        "{html}"
    );
    assert!(html.contains("SLOWER THAN THE OTHERS"), "{html}");
    // A node without results, under an order that asks for figures: not accepted.
    std::fs::remove_file(dir.path().join("h100-node-01.bench.json")).unwrap();
    let doc = json(&gpuenv(&[
        "fleet",
        "report",
        dir.path().to_str().unwrap(),
        "--order",
        &order.path(),
        "--json",
    ]));
    let n1 = &doc["nodes"][0];
    assert_eq!(n1["node"], "h100-node-01");
    assert_eq!(
        n1["acceptance"]["failed"][0]["found"], "no bench results",
        "{n1:#}"
    );
}

#[test]
fn fleet_results_are_matched_by_machine_id_and_a_slow_gpu_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let host = fixture("hosts/8x-h200-nvlink");
    let run = gpuenv(&["doctor", "--host-facts", host.to_str().unwrap(), "--json"]);
    std::fs::write(dir.path().join("node.json"), &run.stdout).unwrap();
    // The results name no host, only the machine ID: matched by it.
    let mut doc: Value =
        serde_json::from_str(&std::fs::read_to_string(results("h200x8-slow-gpu5.json")).unwrap()).unwrap();
    doc["hostname"] = "".into();
    std::fs::write(dir.path().join("results.json"), doc.to_string()).unwrap();
    let page = dir.path().join("fleet.md");
    let run = gpuenv(&[
        "fleet",
        "report",
        dir.path().to_str().unwrap(),
        "--json",
        "--report",
        page.to_str().unwrap(),
    ]);
    let out = json(&run);
    assert!(out["problems"].as_array().unwrap().is_empty(), "{out:#}");
    let node = &out["nodes"][0];
    assert_eq!(node["node"], "h200-node-01");
    let bench = &node["bench"];
    assert!(
        bench["file"].as_str().unwrap().ends_with("results.json"),
        "{node:#}"
    );
    assert_eq!(
        (&bench["figures"], &bench["fail"], &bench["warn"]),
        (&Value::from(121), &Value::from(4), &Value::from(1)),
        "{bench:#}"
    );
    assert!(
        bench["outliers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["gpu"] == 5)
    );
    // One node: nothing to compare it with; its slow GPU is named, and without an order
    // decides nothing.
    assert!(out["bench_outliers"].as_array().unwrap().is_empty());
    assert_eq!(node["worst"], "warn");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let md = std::fs::read_to_string(&page).unwrap();
    assert!(
        md.contains("| **a GPU below its peers**; GPU 5 matmul-bf16: 432.0 TFLOPS is 40% below"),
        "{md}"
    );
    crate::report_page::assert_cells_match_headers(&md.lines().collect::<Vec<_>>());
    // Results of a machine with another ID are no node's.
    doc["machine_id"] = "ffffffffffffffffffffffffffffffff".into();
    std::fs::write(dir.path().join("results.json"), doc.to_string()).unwrap();
    let out = json(&gpuenv(&[
        "fleet",
        "report",
        dir.path().to_str().unwrap(),
        "--json",
    ]));
    assert!(out["nodes"][0].get("bench").is_none(), "{out:#}");
    assert!(
        out["problems"][0]["message"].as_str().unwrap().starts_with(
            "bench results of a host without a name (machine ID ffffffff): no `doctor --json` report"
        ),
        "{out:#}"
    );
}
