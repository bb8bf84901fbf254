//! `gpuenv doctor` and `gpuenv check`: the real probes on this GPU-less machine, record and
//! replay, and recorded hosts with their planted problems.

use serde_json::Value;

use crate::support::{derived_host, fixture, gpuenv, json, ran};

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
    doctor_at(&host(name), env)
}

/// `doctor --json` on the host record at `path`.
fn doctor_at(path: &str, env: &[(&str, &str)]) -> (i32, Value) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_gpuenv"));
    cmd.args(["doctor", "--json", "--host-facts", path]);
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
    // A narrow link is the PCIe check's, not a health matter.
    assert_eq!(verdict(&doc, "gpu-health"), "pass");
    assert_eq!(verdict(&doc, "pcie-link"), "warn");
    assert!(reason(&doc, "pcie-link").contains("x4 of x16"));
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
    // No nvidia-ctk here: installing the toolkit is the advice.
    assert!(
        reason(&doc, "container-runtime").contains("nvidia-ctk is not installed")
            && reason(&doc, "container-runtime").contains("install nvidia-container-toolkit"),
        "{}",
        reason(&doc, "container-runtime")
    );
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
    // Only the module is known: nothing to compare it with, so no pass.
    assert_eq!(verdict(&doc, "driver-module"), "skip");
    assert!(
        reason(&doc, "driver-module").starts_with(
            "only the loaded proprietary kernel module 535.104.05 is known: neither NVML nor nvidia-smi answered"
        ),
        "{}",
        reason(&doc, "driver-module")
    );
    // An overridden driver is not the user-space driver either.
    let (_, doc) = doctor_json("smi-missing", &[("GPUENV_DRIVER", "535.104.05")]);
    assert_eq!(verdict(&doc, "driver-module"), "skip");
    assert!(
        reason(&doc, "driver-module").contains("comes from GPUENV_DRIVER (an override)"),
        "{}",
        reason(&doc, "driver-module")
    );
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
    // The driver fact fell back to the module; the check compares what user space said.
    assert_eq!(verdict(&doc, "driver-module"), "fail");
    assert_eq!(
        reason(&doc, "driver-module"),
        "the user-space driver 550.127 (the NVML library version nvidia-smi prints) differs from the loaded \
         proprietary kernel module 550.90.07: reboot, or unload and reload the nvidia kernel modules, so that \
         the loaded module matches the installed libraries"
    );
    // Every check that fails for want of a GPU names the mismatch, not "no GPU".
    for id in ["torch-stack", "cuda-available", "container-runtime"] {
        assert_eq!(verdict(&doc, id), "fail", "{id}: {}", reason(&doc, id));
        let r = reason(&doc, id);
        assert!(
            r.contains(
                "no GPU is usable: a driver library/module mismatch (user space 550.127, kernel \
                 module 550.90.07): reboot or reload the nvidia kernel modules"
            ),
            "{id}: {r}"
        );
        assert!(!r.contains("no NVIDIA GPU is visible"), "{id}: {r}");
    }
    assert!(reason(&doc, "cuda-available").contains("(torch says: CUDA initialization"));
    assert!(
        reason(&doc, "cudnn-shadowing").contains("CUDA did not initialise (see cuda-available)"),
        "{}",
        reason(&doc, "cudnn-shadowing")
    );
    // Nothing about the GPUs passes on this host.
    let passing: Vec<String> = check_ids(&doc)
        .into_iter()
        .filter(|(_, v)| v == "pass")
        .map(|(id, _)| id)
        .collect();
    assert_eq!(passing, ["disk-free", "disk-layout"]);
}

/// The mismatch message of drivers that do not print the NVML library version (the
/// shared fixture `nvidia-smi-driver-library-version-mismatch.txt`).
const BARE_MISMATCH: &str = "Failed to initialize NVML: Driver/library version mismatch\n";

/// `ldconfig -p` lines for the driver's libraries, as a Ubuntu host lists them.
const DRIVER_LDCONFIG: &str = "4 libs found in cache `/etc/ld.so.cache'\n\
\tlibnvidia-ml.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnvidia-ml.so.1\n\
\tlibnvidia-ml.so.1 (libc6) => /lib/i386-linux-gnu/libnvidia-ml.so.1\n\
\tlibcuda.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so.1\n\
\tlibcuda.so.1 (libc6) => /lib/i386-linux-gnu/libcuda.so.1\n";

#[test]
fn a_mismatch_without_a_printed_version_is_read_from_the_libraries() {
    // nvml-mismatch, with an nvidia-smi that names no library version, and the driver's
    // libraries resolvable: libcuda.so.1 -> libcuda.so.550.127.
    let dir = derived_host("nvml-mismatch", |r| {
        r["commands"]["nvidia-smi -q -x"]["stdout"] = BARE_MISMATCH.into();
        r["commands"]["ldconfig -p"] = ran(DRIVER_LDCONFIG);
        r["commands"]["readlink -f /lib/x86_64-linux-gnu/libcuda.so.1"] =
            ran("/usr/lib/x86_64-linux-gnu/libcuda.so.550.127\n");
        r["commands"]["readlink -f /lib/x86_64-linux-gnu/libnvidia-ml.so.1"] =
            ran("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.127\n");
    });
    let (code, doc) = doctor_at(dir.path().to_str().unwrap(), &[]);
    assert_eq!(code, 1);
    let libs = doc["host"]["driver_libraries"].as_array().unwrap();
    assert_eq!(libs.len(), 2, "{libs:?}");
    assert_eq!(libs[0]["version"], "550.127");
    assert_eq!(
        libs[0]["path"],
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.127"
    );
    assert_eq!(verdict(&doc, "driver-module"), "fail");
    let r = reason(&doc, "driver-module");
    assert!(
        r.starts_with(
            "the user-space driver 550.127 (/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.127), 550.127 \
             (/usr/lib/x86_64-linux-gnu/libcuda.so.550.127) differs from the loaded proprietary kernel module 550.90.07"
        ),
        "{r}"
    );
    assert!(
        reason(&doc, "gpus-visible")
            .contains("the user-space driver (550.127) differs from the loaded kernel module (550.90.07)"),
        "{}",
        reason(&doc, "gpus-visible")
    );
    let run = gpuenv(&["doctor", "--host-facts", dir.path().to_str().unwrap()]);
    assert!(
        run.stdout.contains(
            "library:    /usr/lib/x86_64-linux-gnu/libcuda.so.550.127 550.127  [readlink -f /lib/x86_64-linux-gnu/libcuda.so.1]"
        ),
        "{}",
        run.stdout
    );
}

#[test]
fn a_reported_mismatch_with_no_version_known_never_passes() {
    // nvidia-smi names no library version and nothing else says it.
    let dir = derived_host("nvml-mismatch", |r| {
        r["commands"]["nvidia-smi -q -x"]["stdout"] = BARE_MISMATCH.into();
    });
    let (code, doc) = doctor_at(dir.path().to_str().unwrap(), &[]);
    assert_eq!(code, 1);
    assert_eq!(verdict(&doc, "driver-module"), "fail");
    assert!(
        reason(&doc, "driver-module").starts_with(
            "NVML reports a driver/library version mismatch with the loaded proprietary kernel module 550.90.07, \
             and the user-space driver's version could not be read"
        ),
        "{}",
        reason(&doc, "driver-module")
    );
    assert!(
        reason(&doc, "cuda-available").contains("(user space unknown, kernel module 550.90.07)"),
        "{}",
        reason(&doc, "cuda-available")
    );

    // NVML alone reports it (nvidia-smi not installed): still the mismatch, not "install
    // the user-space libraries".
    let dir = derived_host("nvml-mismatch", |r| {
        r["commands"].as_object_mut().unwrap().remove("nvidia-smi -q -x");
    });
    let (_, doc) = doctor_at(dir.path().to_str().unwrap(), &[]);
    assert_eq!(verdict(&doc, "driver-module"), "fail");
    assert!(
        reason(&doc, "gpus-visible").starts_with("NVML: Driver/library version mismatch"),
        "{}",
        reason(&doc, "gpus-visible")
    );

    // A printed version that agrees as far as it goes (570.124 beside 570.124.06, as
    // nvidia-smi prints it) is no reason to pass while NVML reports a mismatch.
    let dir = derived_host("nvml-mismatch", |r| {
        r["commands"]["nvidia-smi -q -x"]["stdout"] =
            "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 550.90\n"
                .into();
    });
    let (_, doc) = doctor_at(dir.path().to_str().unwrap(), &[]);
    assert_eq!(verdict(&doc, "driver-module"), "fail");
    assert!(
        reason(&doc, "driver-module")
            .contains("(user space read as 550.90 (the NVML library version nvidia-smi prints))"),
        "{}",
        reason(&doc, "driver-module")
    );
}

#[test]
fn driver_libraries_that_differ_from_the_module_fail_where_nvidia_smi_agrees() {
    let with_lib = |target: &'static str| {
        derived_host("single-a100", move |r| {
            r["commands"]["readlink -f /lib/x86_64-linux-gnu/libcuda.so.1"] = ran(target);
        })
    };
    let dir = with_lib("/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05\n");
    let (code, doc) = doctor_at(dir.path().to_str().unwrap(), &[]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(verdict(&doc, "driver-module"), "pass");
    assert_eq!(
        reason(&doc, "driver-module"),
        "the user-space driver 535.104.05 (nvidia-smi -q -x), 535.104.05 (/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05) \
         matches the loaded proprietary kernel module 535.104.05"
    );
    // Libraries of another driver installed under a running one.
    let dir = with_lib("/usr/lib/x86_64-linux-gnu/libcuda.so.535.129.03\n");
    let (code, doc) = doctor_at(dir.path().to_str().unwrap(), &[]);
    assert_eq!(code, 1);
    assert_eq!(verdict(&doc, "driver-module"), "fail");
    assert!(
        reason(&doc, "driver-module").starts_with(
            "the user-space driver 535.129.03 (/usr/lib/x86_64-linux-gnu/libcuda.so.535.129.03) differs from the loaded"
        ),
        "{}",
        reason(&doc, "driver-module")
    );
    // A link that does not resolve to a versioned file says nothing.
    let dir = with_lib("/lib/x86_64-linux-gnu/libcuda.so.1\n");
    let (_, doc) = doctor_at(dir.path().to_str().unwrap(), &[]);
    assert!(doc["host"].get("driver_libraries").is_none(), "{:#}", doc["host"]);
    assert_eq!(verdict(&doc, "driver-module"), "pass");
}

#[test]
fn a_cuda_torch_without_a_usable_gpu_does_not_pass() {
    // A CPU-only machine with a CUDA build of torch.
    let (code, doc) = doctor_json("no-gpu", &[("GPUENV_TORCH", "2.5.1+cu124")]);
    assert_eq!(code, 1);
    assert_eq!(verdict(&doc, "torch-stack"), "fail");
    assert!(
        reason(&doc, "torch-stack").ends_with(
            "cannot run on a GPU here: no GPU is usable: this machine has no NVIDIA driver or GPU (see gpus-visible)"
        ),
        "{}",
        reason(&doc, "torch-stack")
    );
    assert!(
        reason(&doc, "cuda-available").contains("this machine has no NVIDIA driver or GPU"),
        "{}",
        reason(&doc, "cuda-available")
    );
    // The kernel module without user space: that is the cause named.
    let (_, doc) = doctor_json("smi-missing", &[("GPUENV_TORCH", "2.5.1+cu124")]);
    assert!(
        reason(&doc, "torch-stack").contains(
            "the driver's user-space libraries are missing (only the kernel module 535.104.05 is loaded)"
        ),
        "{}",
        reason(&doc, "torch-stack")
    );
}

#[test]
fn a_gpu_the_database_lacks_keeps_torch_stack_from_passing() {
    let (_, doc) = doctor_json("single-a100", &[]);
    assert_eq!(verdict(&doc, "torch-stack"), "pass");
    // A GPU compat-db lacks, as nvidia-smi would print it (GPUENV_GPUS refuses unknown
    // names, so the recorded host itself is changed).
    let dir = crate::support::derived_host("single-a100", |record| {
        fn rename(v: &mut Value) {
            match v {
                Value::String(s) => {
                    *s = s.replace("<product_name>NVIDIA A100-SXM4-80GB", "<product_name>Zephyr Z9")
                }
                Value::Array(a) => a.iter_mut().for_each(rename),
                Value::Object(o) => o.values_mut().for_each(rename),
                _ => {}
            }
        }
        rename(record);
    });
    let (_, doc) = doctor_at(dir.path().join("host.json").to_str().unwrap(), &[]);
    assert_eq!(verdict(&doc, "gpus-known"), "warn");
    assert_eq!(verdict(&doc, "torch-stack"), "warn");
    assert!(
        reason(&doc, "torch-stack").contains("not checked against Zephyr Z9: not in compat-db"),
        "{}",
        reason(&doc, "torch-stack")
    );
}

#[test]
fn the_toolkit_installed_is_never_to_be_installed() {
    let (code, doc) = doctor_json("ctk-no-runtime", &[]);
    assert_eq!(code, 0, "a warning");
    assert_eq!(verdict(&doc, "container-runtime"), "warn");
    let r = reason(&doc, "container-runtime");
    assert!(!r.contains("install nvidia-container-toolkit"), "{r}");
    assert!(
        r.starts_with(
            "the NVIDIA Container Toolkit is installed (nvidia-ctk 1.14.3), but the `nvidia` runtime is not registered \
             with Docker 28.0.4 (runtimes: io.containerd.runc.v2, runc)"
        ),
        "{r}"
    );
    assert!(
        r.contains("`sudo nvidia-ctk runtime configure --runtime=docker`, then restart dockerd"),
        "{r}"
    );
    assert!(
        r.contains("none there is for nvidia.com/gpu, generate one with `sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`"),
        "{r}"
    );

    // Without CDI in the Engine, only the runtime is missing.
    let dir = derived_host("ctk-no-runtime", |r| {
        r["docker"]["Ok"].as_object_mut().unwrap().remove("cdi_spec_dirs");
    });
    let (_, doc) = doctor_at(dir.path().to_str().unwrap(), &[]);
    assert_eq!(verdict(&doc, "container-runtime"), "warn");
    assert!(!reason(&doc, "container-runtime").contains("cdi generate"));

    // Another vendor's spec does not hand over NVIDIA GPUs.
    let other = derived_host("ctk-no-runtime", |r| {
        r["dirs"]["/etc/cdi"] = serde_json::json!(["amd.json"]);
        r["files"]["/etc/cdi/amd.json"] =
            r#"{"cdiVersion":"0.6.0","kind":"amd.com/gpu","devices":[]}"#.into();
    });
    let (_, doc) = doctor_at(other.path().to_str().unwrap(), &[]);
    assert_eq!(verdict(&doc, "container-runtime"), "warn");
    assert_eq!(doc["host"]["cdi_specs"][0]["kind"], "amd.com/gpu");

    // A generated NVIDIA spec makes CDI work without the runtime.
    let spec = derived_host("ctk-no-runtime", |r| {
        r["dirs"]["/var/run/cdi"] = serde_json::json!(["nvidia.yaml"]);
        r["files"]["/var/run/cdi/nvidia.yaml"] =
            "---\ncdiVersion: 0.5.0\ndevices:\n- name: all\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\nkind: nvidia.com/gpu\n".into();
    });
    let (_, doc) = doctor_at(spec.path().to_str().unwrap(), &[]);
    assert_eq!(
        verdict(&doc, "container-runtime"),
        "pass",
        "{}",
        reason(&doc, "container-runtime")
    );
    assert!(
        reason(&doc, "container-runtime").contains(
            "has CDI devices nvidia.com/gpu (/var/run/cdi/nvidia.yaml): use `--device nvidia.com/gpu=all`"
        ),
        "{}",
        reason(&doc, "container-runtime")
    );
    let run = gpuenv(&["doctor", "--host-facts", spec.path().to_str().unwrap()]);
    assert!(
        run.stdout
            .contains("CDI specs: /var/run/cdi/nvidia.yaml (nvidia.com/gpu)"),
        "{}",
        run.stdout
    );

    // The Engine's own list of CDI devices (Engine 28.2 and later) is as good.
    let listed = derived_host("ctk-no-runtime", |r| {
        r["docker"]["Ok"]["cdi_devices"] = serde_json::json!(["nvidia.com/gpu=0", "nvidia.com/gpu=all"]);
    });
    let (_, doc) = doctor_at(listed.path().to_str().unwrap(), &[]);
    assert_eq!(verdict(&doc, "container-runtime"), "pass");

    // A spec on disk does not count where the Engine has CDI off.
    let off = derived_host("ctk-no-runtime", |r| {
        r["docker"]["Ok"].as_object_mut().unwrap().remove("cdi_spec_dirs");
        r["dirs"]["/etc/cdi"] = serde_json::json!(["nvidia.yaml"]);
        r["files"]["/etc/cdi/nvidia.yaml"] = "kind: nvidia.com/gpu\n".into();
    });
    let (_, doc) = doctor_at(off.path().to_str().unwrap(), &[]);
    assert_eq!(verdict(&doc, "container-runtime"), "warn");
}

#[test]
fn doctor_lists_the_overrides_it_used() {
    let (_, doc) = doctor_json("single-a100", &[("GPUENV_CPUS", "8"), ("GPUENV_NVCC", "12.1")]);
    assert_eq!(
        doc["overrides"],
        serde_json::json!(["GPUENV_NVCC=12.1", "GPUENV_CPUS=8"])
    );
    assert_eq!(doc["host"]["overrides"], doc["overrides"]);
    let (_, doc) = doctor_json("single-a100", &[]);
    assert_eq!(doc["overrides"], serde_json::json!([]));
    let run = crate::support::gpuenv_env(
        &crate::support::root(),
        &["doctor", "--host-facts", &host("single-a100")],
        &[("GPUENV_CPUS", "8")],
    );
    assert!(run.stdout.contains("overrides:  GPUENV_CPUS=8"), "{}", run.stdout);
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
    // The recorded NVML readings hold no processes or clock-event reasons: unknown health
    // is allowed, so that only the planted mismatches fail.
    let (code, doc, human) = check_run(&[
        "--host-facts",
        &h,
        "--allow-health",
        "unknown",
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
            ("disk", true),
            ("health-nvml", true),
            ("health-xid", true),
            ("health-ecc", true),
            ("health-row-remap", true),
            ("health-retired-pages", true),
            ("health-mig", true),
            ("health-processes", true),
            ("health-throttle", true),
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
        "--allow-health",
        "unknown",
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
    let (code, doc, _) = check_run(&[
        "--host-facts",
        &h,
        "--allow-health",
        "unknown",
        "--order",
        order.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    // Seven items ordered, and the eight health items every order holds.
    assert_eq!(doc["acceptance"].as_array().unwrap().len(), 7 + 8);
    std::fs::write(&order, "gpu = \"H100 SXM\"\ncolour = \"green\"\n").unwrap();
    let run = gpuenv(&["check", "--host-facts", &h, "--order", order.to_str().unwrap()]);
    assert_eq!(run.code, 2, "an unknown key in an order is bad input");
    assert!(
        run.stderr.contains(&format!(
            "order `{}` line 2: unknown key `colour`",
            order.display()
        )),
        "{}",
        run.stderr
    );
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

#[test]
fn docker_is_a_status_with_the_engine_or_the_error() {
    let (_, doc) = doctor_json("single-a100", &[]);
    let docker = &doc["host"]["docker"];
    assert_eq!(docker["status"], "ok", "{docker}");
    assert_eq!(docker["engine"]["server_version"], "26.1.3", "{docker}");
    assert_eq!(docker["engine"]["default_runtime"], "nvidia", "{docker}");
    assert!(
        docker.get("Ok").is_none() && docker.get("error").is_none(),
        "{docker}"
    );
    let (_, doc) = doctor_json("no-gpu", &[]);
    let docker = &doc["host"]["docker"];
    assert_eq!(docker["status"], "error", "{docker}");
    assert_eq!(
        docker["error"], "the Docker daemon is not reachable: connection refused",
        "{docker}"
    );
    assert!(
        docker.get("Err").is_none() && docker.get("engine").is_none(),
        "{docker}"
    );
}

#[test]
fn the_system_group_reads_the_kernel_files_of_a_recorded_host() {
    let (_, doc) = doctor_json("2-socket-rdma", &[]);
    let host = &doc["host"];
    assert_eq!(host["hostname"], "gpu-node-07");
    assert_eq!(host["cpu"]["sockets"], 2);
    assert_eq!(host["cpu"]["numa_nodes"], 2);
    let mount = |at: &str| {
        host["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["mount"] == at)
            .unwrap_or_else(|| panic!("no mount {at}: {}", host["mounts"]))
            .clone()
    };
    let root = mount("/");
    assert_eq!(root["disk"], "nvme0n1");
    assert_eq!(root["media"], "nvme");
    assert_eq!(root["media_source"], "device name");
    let data = mount("/data");
    assert_eq!(data["disk"], "sdb");
    assert_eq!(data["media"], "hdd");
    assert_eq!(data["media_source"], "/sys/block/sdb/queue/rotational");
    let shm = mount("/dev/shm");
    assert!(shm.get("disk").is_none() && shm.get("media").is_none(), "{shm}");

    let net = &host["network"];
    let rdma = net["rdma"].as_array().unwrap();
    assert_eq!(rdma.len(), 2, "{net}");
    for (port, dev) in rdma.iter().zip(["mlx5_0", "mlx5_1"]) {
        assert_eq!(port["device"], dev);
        assert_eq!(port["port"], 1);
        assert_eq!(port["link_layer"], "InfiniBand");
        assert_eq!(port["state"], "ACTIVE");
        assert_eq!(port["rate_gbps"], 400.0);
        assert_eq!(port["source"], format!("/sys/class/infiniband/{dev}/ports/1"));
    }
    // docker0 and lo have no device behind them: only the NIC is listed.
    let interfaces = net["interfaces"].as_array().unwrap();
    assert_eq!(interfaces.len(), 1, "{net}");
    assert_eq!(interfaces[0]["name"], "ens1f0np0");
    assert_eq!(interfaces[0]["driver"], "ice");
    assert_eq!(interfaces[0]["speed_mbps"], 25000);
    assert_eq!(interfaces[0]["operstate"], "up");
    assert_eq!(net["peermem"], false);
}

#[test]
fn a_host_recorded_without_kernel_files_has_none_of_their_facts() {
    let (_, doc) = doctor_json("single-a100", &[]);
    let host = &doc["host"];
    assert!(host.get("hostname").is_none(), "{}", host["hostname"]);
    assert!(host.get("network").is_none(), "{}", host["network"]);
    assert!(host["cpu"].get("numa_nodes").is_none(), "{}", host["cpu"]);
}

/// The recorded hosts of three real failures replay through the probe, and the probe reads
/// the facts their checks need: each end's PCIe generation and the GPU's state from
/// `nvidia-smi -q -x`, the whole `topo -m` matrix with NICs and NUMA affinity, NVLinks
/// from `nvidia-smi nvlink -s` and the NVSwitch count from `lspci`. Verdicts are not
/// asserted here.
#[test]
fn acceptance_hosts_replay_their_facts() {
    // A Gen4 card in a Gen3 slot, idle at Gen1.
    let (_, doc) = doctor_json("1x-4090-gen3-slot", &[]);
    let host = &doc["host"];
    assert_eq!(host["gpus_source"], "nvidia-smi -q -x");
    let g = &host["gpus"][0];
    assert_eq!(g["name"], "NVIDIA GeForce RTX 4090");
    assert_eq!(g["pcie_gen_device_max"], 4);
    assert_eq!(g["pcie_gen_host_max"], 3);
    assert_eq!(g["pcie_gen_current"], 1);
    assert_eq!(g["state"]["pstate"], "P8");
    assert_eq!(g["state"]["source"], "nvidia-smi -q -x");
    assert_eq!(g["state"]["processes"], serde_json::json!([]));
    assert!(
        host.get("nvlink").is_none() && host.get("nvswitches").is_none(),
        "one GPU"
    );

    // The same failure on a real capture: a Gen5 card in a Gen4 slot.
    let (_, doc) = doctor_json("1x-rtx-pro-6000-gen4-slot", &[]);
    let g = &doc["host"]["gpus"][0];
    assert_eq!(
        (g["pcie_gen_device_max"].as_u64(), g["pcie_gen_host_max"].as_u64()),
        (Some(5), Some(4))
    );
    assert_eq!(g["state"]["processes"][0]["used_mib"], 65710);

    // Eight GPUs, every pair across the CPU interconnect.
    let (_, doc) = doctor_json("8x-4090-sys", &[]);
    let host = &doc["host"];
    assert_eq!(host["gpus"].as_array().unwrap().len(), 8);
    let topo = &host["topology"]["value"];
    let links = topo["links"].as_array().unwrap();
    assert_eq!(links.len(), 8);
    for (i, row) in links.iter().enumerate() {
        for (j, l) in row.as_array().unwrap().iter().enumerate() {
            assert_eq!(l, if i == j { "self-link" } else { "sys" }, "GPU{i}-GPU{j}");
        }
    }
    assert_eq!(topo["nics"].as_array().unwrap().len(), 2);
    assert_eq!(topo["nic_links"][6], serde_json::json!(["phb", "phb"]));
    assert_eq!(topo["numa_affinity"][0], "0");
    assert_eq!(topo["numa_affinity"][7], "1");
    let nvlink = host["nvlink"]["value"].as_array().unwrap();
    assert_eq!(nvlink.len(), 8);
    assert!(nvlink.iter().all(|g| g["links"].as_array().unwrap().is_empty()));
    assert_eq!(host["nvswitches"]["value"], 0);
    for g in host["gpus"].as_array().unwrap() {
        assert_eq!(g["state"]["pstate"], "P8");
        assert_eq!(g["state"]["processes"], serde_json::json!([]));
    }

    // Four A100s, NVLink between GPU0 and GPU1 only; the list from --query-gpu.
    let (_, doc) = doctor_json("4x-a100-nvlink-one-pair", &[]);
    let host = &doc["host"];
    assert_eq!(host["gpus_source"], "nvidia-smi --query-gpu");
    assert_eq!(host["gpus"].as_array().unwrap().len(), 4);
    assert_eq!(host["gpus"][0]["name"], "NVIDIA A100 80GB PCIe");
    assert_eq!(host["topology"]["value"]["links"][0][1]["nv-link"], 12);
    assert_eq!(host["topology"]["value"]["links"][2][3], "sys");
    let nvlink = host["nvlink"]["value"].as_array().unwrap();
    assert_eq!(nvlink.len(), 4);
    let active = |g: &Value| {
        g["links"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["active"] == true)
            .count()
    };
    assert_eq!(nvlink.iter().map(active).collect::<Vec<_>>(), vec![12, 12, 0, 0]);
    assert_eq!(host["nvlink"]["source"], "nvidia-smi nvlink -s");
    assert_eq!(host["nvswitches"]["value"], 0);
}

/// The three deliveries that passed wrongly before: each now warns, naming what is wrong,
/// and an order that asks for what they lack fails.
#[test]
fn the_three_real_failures_warn() {
    // An RTX 4090 (Gen4) in a Gen3 slot: "full width" was a pass.
    let (_, doc) = doctor_json("1x-4090-gen3-slot", &[]);
    assert_eq!(verdict(&doc, "pcie-link"), "warn");
    assert!(
        reason(&doc, "pcie-link").starts_with("GPU 0 is a PCIe Gen4 card in a Gen3 slot"),
        "{}",
        reason(&doc, "pcie-link")
    );
    // Eight RTX 4090s, every pair across NUMA nodes (SYS): nothing was said.
    let (_, doc) = doctor_json("8x-4090-sys", &[]);
    assert_eq!(verdict(&doc, "gpu-interconnect"), "warn");
    assert!(reason(&doc, "gpu-interconnect").starts_with("28 of 28 GPU pairs have no direct PCIe path"));
    // Four A100s with NVLink on one pair of six: an info line, not a check.
    let (_, doc) = doctor_json("4x-a100-nvlink-one-pair", &[]);
    assert_eq!(verdict(&doc, "gpu-interconnect"), "warn");
    let r = reason(&doc, "gpu-interconnect");
    assert!(
        r.starts_with("NVLink on 1 of 6 GPU pairs (GPU0-GPU1 NV12)"),
        "{r}"
    );
    // GPUs 2 and 3 have no bridge at all: not "a link down".
    assert!(!r.contains("a link is down"), "{r}");

    for (host_name, flag, value) in [
        ("1x-4090-gen3-slot", "--expect-pcie-gen", "4"),
        ("8x-4090-sys", "--expect-nvlink", "all"),
        ("4x-a100-nvlink-one-pair", "--expect-nvlink", "all"),
    ] {
        // No clock-event reasons in these recordings: unknown health allowed, so that the
        // link is the one failure.
        let run = gpuenv(&[
            "check",
            "--host-facts",
            &host(host_name),
            flag,
            value,
            "--allow-health",
            "unknown",
        ]);
        assert_eq!(run.code, 1, "{host_name}: {}", run.stdout);
        assert!(
            run.stdout.contains("not accepted: 1 failed"),
            "{host_name}: {}",
            run.stdout
        );
    }
}

#[test]
fn a_virtio_data_disk_that_says_it_rotates_is_unknown_not_an_hdd() {
    // single-a100 with its data disk on a virtio disk whose rotational flag is 1, as the
    // recorded VM's `vda` says (tests/fixtures/host/sysfs/vm-virtio).
    let dir = derived_host("single-a100", |r| {
        let df = r["commands"]["df -PkT"]["stdout"].as_str().unwrap().to_string();
        assert!(df.contains("/dev/nvme1n1 "), "{df}");
        r["commands"]["df -PkT"]["stdout"] = df.replace("/dev/nvme1n1 ", "/dev/vdb     ").into();
        r["files"]["/sys/block/vdb/queue/rotational"] = "1\n".into();
    });
    let facts = dir.path().join("host.json");
    let doc = json(&gpuenv(&[
        "doctor",
        "--host-facts",
        facts.to_str().unwrap(),
        "--json",
    ]));
    let data = doc["host"]["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mount"] == "/data")
        .unwrap();
    assert_eq!(data["disk"], "vdb");
    assert!(data.get("media").is_none_or(Value::is_null), "{data}");
    assert_eq!(
        data["media_source"],
        "vdb is a virtio disk: its rotational flag does not say what backs it"
    );
    let layout = reason(&doc, "disk-layout");
    assert!(!layout.contains("rotating drive"), "{layout}");
    assert!(
        layout.contains("unknown (vdb is a virtio disk: its rotational flag does not say what backs it)"),
        "the check says why it is unknown: {layout}"
    );
    // The order's data disk type is not judged an HDD either: the item says what it read.
    let run = gpuenv(&[
        "check",
        "--host-facts",
        facts.to_str().unwrap(),
        "--expect-data-disk-type",
        "ssd",
        "--json",
    ]);
    let item = json(&run)["acceptance"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["item"] == "data_disk_type")
        .cloned()
        .unwrap_or_else(|| panic!("no data_disk_type item: {}", run.stdout));
    let found = item["found"].as_str().unwrap();
    assert!(found.contains("virtio disk"), "{found}");
    assert!(!found.to_lowercase().contains("hdd"), "{found}");
}

/// The host's architecture (`uname -m`) decides which torch wheels it can install: an A100
/// behind an Arm server CPU (Ampere Altra) gets PyPI's CPU-only torch 2.4.1, so `check`
/// refuses it there and not on the same host as x86_64. A recorded host without the probe
/// is judged as before (x86_64 assumed, said by the resolver).
#[test]
fn the_host_architecture_decides_the_wheels() {
    let uname = |arch: &'static str| {
        crate::support::derived_host("single-a100", move |record| {
            record["commands"]["uname -m"] = serde_json::json!({
                "outcome": "exited", "status": 0, "stderr": "", "stdout": format!("{arch}\n")
            });
        })
    };
    let run = |dir: &tempfile::TempDir| {
        let h = dir.path().join("host.json");
        check_run(&["--host-facts", h.to_str().unwrap(), "--torch", "2.4.1"])
    };
    let arm = uname("aarch64");
    let (_, doctor) = doctor_at(arm.path().join("host.json").to_str().unwrap(), &[]);
    assert_eq!(
        doctor["host"]["arch"]["value"], "aarch64",
        "{:#}",
        doctor["host"]["arch"]
    );
    assert_eq!(doctor["host"]["arch"]["source"], "uname -m");
    let (code, doc, text) = run(&arm);
    assert_eq!(doc["verdict"], "incompatible", "{text}");
    assert_eq!(code, 1, "{text}");
    assert_eq!(doc["arch"]["name"], "aarch64", "{:#}", doc["arch"]);
    assert_eq!(doc["arch"]["from"], "host (uname -m)", "{:#}", doc["arch"]);
    assert!(
        text.contains("FAIL no-cuda-wheel-for-arch: torch 2.4.1+cu121 has no CUDA wheel for aarch64"),
        "{text}"
    );
    let (code, doc, text) = run(&uname("x86_64"));
    assert_eq!(code, 0, "{text}");
    assert_eq!(doc["arch"]["name"], "x86_64", "{:#}", doc["arch"]);
    assert!(!text.contains("no-cuda-wheel-for-arch"), "{text}");
    let (_, doctor) = doctor_json("single-a100", &[]);
    assert!(doctor["host"].get("arch").is_none(), "{:#}", doctor["host"]);
}
