//! `gpuenv doctor` and `gpuenv check`: the real probes on this GPU-less machine, record and
//! replay, and recorded hosts with their planted problems.

use serde_json::Value;

use crate::support::{fixture, gpuenv, json};

#[test]
fn smoke_real_probes_on_a_gpu_less_machine() {
    let run = gpuenv(&["doctor"]);
    assert_eq!(
        run.code, 1,
        "no GPU is a failed check\n{}{}",
        run.stdout, run.stderr
    );
    assert!(
        run.stdout.contains("FAIL  gpus-visible: no NVIDIA GPU"),
        "{}",
        run.stdout
    );
    assert!(run.stderr.is_empty(), "{}", run.stderr);
    let run = gpuenv(&["doctor", "--json"]);
    let doc = json(&run);
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["checks"][0]["id"], "gpus-visible");
    assert_eq!(doc["checks"][0]["verdict"], "fail");
    assert!(doc["host"]["gpus"].as_array().unwrap().is_empty());
}

#[test]
fn record_then_replay_gives_the_same_report() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("rec");
    let live = gpuenv(&["doctor", "--json", "--record", rec.to_str().unwrap()]);
    assert!(rec.join("host.json").exists(), "{}", live.stderr);
    let replay = gpuenv(&["doctor", "--json", "--host-facts", rec.to_str().unwrap()]);
    let (a, b) = (json(&live), json(&replay));
    assert_eq!(a["host"], b["host"]);
    assert_eq!(a["checks"], b["checks"]);
}

#[test]
fn a_broken_host_record_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("host.json");
    std::fs::write(&f, "{not json").unwrap();
    let run = gpuenv(&["doctor", "--host-facts", f.to_str().unwrap()]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("is not a gpuenv host record"),
        "{}",
        run.stderr
    );
    let run = gpuenv(&["doctor", "--host-facts", "/nonexistent/host.json"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("cannot read host record `/nonexistent/host.json`: no such file"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_bad_override_is_bad_input() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpuenv"))
        .args(["doctor"])
        .env("GPUENV_DRIVER", "535.x")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("GPUENV_DRIVER=`535.x`"), "{err}");
}

#[allow(dead_code)]
fn host(name: &str) -> String {
    fixture(&format!("hosts/{name}")).to_str().unwrap().to_string()
}

#[allow(dead_code)]
fn check_ids(doc: &Value) -> Vec<(String, String)> {
    doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_string(),
                c["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}
