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

fn doctor_json(name: &str, env: &[(&str, &str)]) -> (i32, Value) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_gpuenv"));
    cmd.args(["doctor", "--json", "--host-facts", &host(name)]);
    for (k, _) in std::env::vars() {
        if k.starts_with("GPUENV_") {
            cmd.env_remove(k);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let doc: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{e}: {text} {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap(), doc)
}

fn verdict(doc: &Value, id: &str) -> String {
    check_ids(doc)
        .into_iter()
        .find(|(i, _)| i == id)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no check {id}"))
}

fn reason(doc: &Value, id: &str) -> String {
    doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap()["reason"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn single_gpu_host() {
    let (code, doc) = doctor_json("single-a100", &[]);
    assert_eq!(code, 0);
    assert_eq!(doc["host"]["gpus_source"], "nvidia-smi -q -x");
    assert_eq!(doc["host"]["driver"]["value"], "535.104.05");
    assert_eq!(doc["host"]["driver_cuda"]["value"], "12.2");
    for id in [
        "gpus-visible",
        "driver-module",
        "gpus-known",
        "gpu-health",
        "torch-stack",
        "cuda-available",
        "cudnn-shadowing",
        "container-runtime",
        "disk-free",
    ] {
        assert_eq!(verdict(&doc, id), "pass", "{id}: {}", reason(&doc, id));
    }
    assert_eq!(verdict(&doc, "nvcc-torch"), "warn");
    let torch = doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "torch-stack")
        .unwrap();
    let codes: Vec<&str> = torch["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert!(
        codes.contains(&"driver-native") && codes.contains(&"gpu-sass"),
        "{codes:?}"
    );
}

#[test]
fn eight_gpu_nvlink_host() {
    let (code, doc) = doctor_json("8x-h100-nvlink", &[]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["host"]["gpus"].as_array().unwrap().len(), 8);
    assert_eq!(doc["host"]["gpus_source"], "nvml");
    assert_eq!(doc["host"]["driver_cuda"]["value"], "12.4");
    let links = doc["host"]["topology"]["value"]["links"].as_array().unwrap();
    assert_eq!(links.len(), 8);
    for (i, row) in links.iter().enumerate() {
        for (j, l) in row.as_array().unwrap().iter().enumerate() {
            if i == j {
                assert_eq!(l, "self-link");
            } else {
                assert_eq!(l["nv-link"], 18, "GPU{i}-GPU{j}: {l}");
            }
        }
    }
    assert!(reason(&doc, "gpus-known").contains("8x H100 SXM"));
    assert!(
        reason(&doc, "disk-free").starts_with("/data (/dev/md0, a data disk apart from the system disk)")
    );
    let run = gpuenv(&["doctor", "--host-facts", &host("8x-h100-nvlink")]);
    assert!(
        run.stdout.contains("links:      NVLink between all 28 GPU pairs"),
        "{}",
        run.stdout
    );
}

#[test]
fn mixed_gpus_under_minor_version_compatibility() {
    let (code, doc) = doctor_json("mixed-4090-3090", &[]);
    assert_eq!(code, 0, "warnings do not fail");
    assert_eq!(verdict(&doc, "torch-stack"), "warn");
    assert!(reason(&doc, "gpus-known").contains("1x RTX 4090 (sm_89), 1x RTX 3090 (sm_86)"));
    assert_eq!(verdict(&doc, "gpu-health"), "warn");
    assert!(reason(&doc, "gpu-health").contains("x4 of x16"));
    let torch = doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "torch-stack")
        .unwrap();
    assert!(
        torch["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["code"] == "driver-minor-version-compat")
    );
    // A newer driver, by override, makes it native; the override is reported.
    let (_, doc) = doctor_json("mixed-4090-3090", &[("GPUENV_DRIVER", "570.26")]);
    assert_eq!(verdict(&doc, "torch-stack"), "pass");
    assert_eq!(doc["host"]["overrides"][0], "GPUENV_DRIVER=570.26");
}

#[test]
fn mig_host() {
    let (_, doc) = doctor_json("h100-mig", &[]);
    assert!(
        reason(&doc, "gpu-health").contains("MIG enabled"),
        "{}",
        reason(&doc, "gpu-health")
    );
    assert_eq!(doc["host"]["gpus"][0]["mig_enabled"], true);
    assert_eq!(verdict(&doc, "torch-stack"), "skip");
    assert_eq!(verdict(&doc, "container-runtime"), "warn");
}

#[test]
fn no_gpu_host() {
    let (code, doc) = doctor_json("no-gpu", &[]);
    assert_eq!(code, 1);
    assert_eq!(verdict(&doc, "gpus-visible"), "fail");
    assert_eq!(
        reason(&doc, "gpus-visible"),
        "no NVIDIA GPU: neither NVML nor nvidia-smi is available on this machine"
    );
}

#[test]
fn nvidia_smi_missing_host() {
    let (code, doc) = doctor_json("smi-missing", &[]);
    assert_eq!(code, 1);
    assert!(reason(&doc, "gpus-visible").starts_with(
        "the NVIDIA kernel module 535.104.05 is loaded, but neither NVML nor nvidia-smi answers"
    ));
    assert_eq!(doc["host"]["driver"]["source"], "/proc/driver/nvidia/version");
}

#[test]
fn nvml_mismatch_host() {
    let (code, doc) = doctor_json("nvml-mismatch", &[]);
    assert_eq!(code, 1);
    let r = reason(&doc, "gpus-visible");
    assert!(
        r.contains("Failed to initialize NVML: Driver/library version mismatch"),
        "{r}"
    );
    assert!(
        r.contains("(550.127) differs from the loaded kernel module (550.90.07)"),
        "{r}"
    );
    assert_eq!(doc["host"]["issues"][0]["probe"], "nvml");
}

fn check_run(args: &[&str]) -> (i32, Value, String) {
    let mut a = vec!["check", "--json"];
    a.extend_from_slice(args);
    let run = gpuenv(&a);
    let human = {
        let mut h: Vec<&str> = a.iter().copied().filter(|x| *x != "--json").collect();
        h.retain(|_| true);
        gpuenv(&h).stdout
    };
    (run.code, json(&run), human)
}

#[test]
fn acceptance_fails_exactly_on_the_planted_mismatches() {
    let h = host("7x-a100-40gb-driver-525");
    let (code, doc, human) = check_run(&[
        "--host-facts",
        &h,
        "--expect-gpu",
        "A100 80GB SXM",
        "--expect-gpus",
        "8",
        "--expect-gpu-memory",
        "80",
        "--expect-driver",
        ">=535",
        "--expect-cpus",
        "32",
        "--expect-memory",
        "512",
        "--expect-disk",
        "2000",
    ]);
    assert_eq!(code, 1);
    let items: Vec<(String, bool)> = doc["acceptance"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["item"].as_str().unwrap().to_string(),
                a["pass"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        items,
        [
            ("gpu", false),
            ("gpus", false),
            ("gpu_memory", false),
            ("driver", false),
            ("cpus", true),
            ("memory", true),
            ("disk", true)
        ]
        .map(|(a, b)| (a.to_string(), b))
    );
    assert_eq!(doc["accepted"], false);
    assert!(human.contains("FAIL  gpus: expected 8, found 7"), "{human}");
    assert!(
        human.contains("FAIL  driver: expected >=535, found 525.147.05"),
        "{human}"
    );
    assert!(
        human.contains("FAIL  gpu_memory: expected 80 GB per GPU, found 40.0 GiB (smallest GPU)"),
        "{human}"
    );
}

#[test]
fn acceptance_passes_the_order_delivered() {
    let h = host("8x-h100-nvlink");
    let (code, doc, _) = check_run(&[
        "--host-facts",
        &h,
        "--expect-gpu",
        "H100 SXM",
        "--expect-gpus",
        "8",
        "--expect-gpu-memory",
        "80",
        "--expect-driver",
        ">=535",
        "--expect-cpus",
        "32",
        "--expect-memory",
        "512",
        "--expect-disk",
        "2000",
    ]);
    assert_eq!(code, 0, "{doc:#}");
    assert!(
        doc["acceptance"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["pass"] == true),
        "{doc:#}"
    );
    // The same order as a file.
    let dir = tempfile::tempdir().unwrap();
    let order = dir.path().join("order.toml");
    std::fs::write(&order, "gpu = \"H100 SXM\"\ngpus = 8\ngpu_memory = 80\ndriver = \">=535\"\ncpus = 32\nmemory = 512\ndisk = 2000\n").unwrap();
    let (code, doc, _) = check_run(&["--host-facts", &h, "--order", order.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert_eq!(doc["acceptance"].as_array().unwrap().len(), 7);
    std::fs::write(&order, "gpu = \"H100 SXM\"\ncolour = \"green\"\n").unwrap();
    let run = gpuenv(&["check", "--host-facts", &h, "--order", order.to_str().unwrap()]);
    assert_eq!(run.code, 2, "an unknown key in an order is bad input");
    assert!(run.stderr.contains("unknown field `colour`"), "{}", run.stderr);
}

#[test]
fn check_judges_the_project_on_this_host() {
    let h = host("mixed-4090-3090");
    let (code, doc, _) = check_run(&["--host-facts", &h, "--torch", "2.7.0", "--cuda", "12.8"]);
    assert_eq!(code, 0);
    assert_eq!(doc["verdict"], "conditional");
    let s = &doc["stacks"][0];
    assert_eq!(s["python"], "3.12", "the host's Python");
    assert!(
        s["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["code"] == "driver-minor-version-compat")
    );
    let (code, _, _) = check_run(&[
        "--host-facts",
        &h,
        "--torch",
        "2.7.0",
        "--cuda",
        "12.8",
        "--strict",
    ]);
    assert_eq!(code, 1);
}
