//! `gpuenv query`: golden cases for every rule and its boundary, on the shipped database.

use serde_json::Value;

use crate::support::{gpuenv, query};

/// The stack of a build on a Python.
fn stack<'a>(doc: &'a Value, torch: &str, variant: &str, python: &str) -> &'a Value {
    doc["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["torch"] == torch && s["variant"] == variant && s["python"] == python)
        .unwrap_or_else(|| panic!("no stack {torch}+{variant} py{python} in {doc:#}"))
}

fn codes(s: &Value) -> Vec<String> {
    s["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_string())
        .collect()
}

fn has(s: &Value, code: &str, status: &str) {
    assert!(
        codes(s).contains(&code.to_string()),
        "expected {code} in {:#}",
        s["findings"]
    );
    assert_eq!(s["status"], status, "{:#}", s["findings"]);
}

#[test]
fn json_contract() {
    let (code, doc) = query(&["--torch", "2.4.1", "--gpu", "H100 SXM", "--driver", "550.54.14"]);
    assert_eq!(code, 0);
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["verdict"], "compatible");
    let s = &doc["stacks"][0];
    for field in [
        "torch", "variant", "python", "cuda", "cudnn", "status", "findings", "install", "needs",
    ] {
        assert!(!s[field].is_null(), "stack lacks `{field}`: {s:#}");
    }
    let f = &s["findings"][0];
    for field in ["code", "severity", "message", "facts"] {
        assert!(!f[field].is_null(), "finding lacks `{field}`: {f:#}");
    }
    assert!(doc["suggestions"].is_array());
}

#[test]
fn driver_native_boundary_one_patch_below_and_at() {
    // CUDA 12.4 needs 550.54.14 natively; the 12.x family floor is 525.60.13.
    let (_, at) = query(&[
        "--torch",
        "2.5.1",
        "--cuda",
        "12.4",
        "--python",
        "3.11",
        "--driver",
        "550.54.14",
    ]);
    has(
        stack(&at, "2.5.1", "cu124", "3.11"),
        "driver-native",
        "compatible",
    );
    let (_, below) = query(&[
        "--torch",
        "2.5.1",
        "--cuda",
        "12.4",
        "--python",
        "3.11",
        "--driver",
        "550.54.13",
    ]);
    has(
        stack(&below, "2.5.1", "cu124", "3.11"),
        "driver-minor-version-compat",
        "conditional",
    );
}

#[test]
fn family_floor_boundary_one_patch_below_and_at() {
    let (_, at) = query(&[
        "--torch",
        "2.5.1",
        "--cuda",
        "12.4",
        "--python",
        "3.11",
        "--driver",
        "525.60.13",
    ]);
    has(
        stack(&at, "2.5.1", "cu124", "3.11"),
        "driver-minor-version-compat",
        "conditional",
    );
    let (code, below) = query(&[
        "--torch",
        "2.5.1",
        "--cuda",
        "12.4",
        "--python",
        "3.11",
        "--driver",
        "525.60.12",
    ]);
    assert_eq!(code, 1);
    has(
        stack(&below, "2.5.1", "cu124", "3.11"),
        "driver-too-old",
        "incompatible",
    );
}

#[test]
fn update_rows_do_not_raise_the_bar() {
    // 12.4 Update 1 needs 550.54.15, but a 12.4 build runs natively on the GA driver.
    let (_, doc) = query(&[
        "--torch",
        "2.5.1",
        "--cuda",
        "12.4",
        "--python",
        "3.11",
        "--driver",
        "550.54.14",
    ]);
    assert_eq!(
        stack(&doc, "2.5.1", "cu124", "3.11")["needs"]["driver_native"],
        "550.54.14"
    );
}

#[test]
fn sm86_runs_on_an_sm80_build() {
    // torch 1.12.1+cu102 ships sm_37..sm_70: a T4 (7.5) runs the 7.0 SASS.
    let (_, doc) = query(&[
        "--torch", "1.12.1", "--cuda", "10.2", "--python", "3.10", "--gpu", "T4",
    ]);
    has(stack(&doc, "1.12.1", "cu102", "3.10"), "gpu-sass", "compatible");
    // An A10 (8.6) on a build whose newest SASS is 8.0 runs it too.
    let (_, doc) = query(&[
        "--torch", "2.0.1", "--cuda", "11.7", "--python", "3.10", "--gpu", "A10",
    ]);
    let s = stack(&doc, "2.0.1", "cu117", "3.10");
    has(s, "gpu-sass", "compatible");
    let f = s["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "gpu-sass")
        .unwrap();
    assert_eq!(f["facts"]["sass"], "sm_86");
}

#[test]
fn no_kernels_for_a_newer_major() {
    let (_, doc) = query(&[
        "--torch", "2.4.1", "--cuda", "12.1", "--python", "3.11", "--gpu", "RTX 5090",
    ]);
    has(
        stack(&doc, "2.4.1", "cu121", "3.11"),
        "gpu-no-kernels",
        "incompatible",
    );
}

#[test]
fn ptx_jit_on_a_newer_gpu() {
    // 2.7.0+cu128 ships compute_120 PTX and SASS up to sm_120: fine on sm_120 natively.
    let (_, doc) = query(&[
        "--torch", "2.7.0", "--cuda", "12.8", "--python", "3.11", "--gpu", "RTX 5090", "--driver", "570.26",
    ]);
    has(stack(&doc, "2.7.0", "cu128", "3.11"), "gpu-sass", "compatible");
}

#[test]
fn forward_compat_datacenter_vs_geforce() {
    // torch 2.11.0+cu130 on driver 535 (CUDA 12.2): below the 13.x floor, but R535 hosts cuda-compat-13-0.
    let (_, h100) = query(&[
        "--torch",
        "2.11.0",
        "--cuda",
        "13.0",
        "--python",
        "3.11",
        "--gpu",
        "H100 SXM",
        "--driver",
        "535.104.05",
    ]);
    has(
        stack(&h100, "2.11.0", "cu130", "3.11"),
        "driver-forward-compat",
        "conditional",
    );
    let (_, geforce) = query(&[
        "--torch",
        "2.11.0",
        "--cuda",
        "13.0",
        "--python",
        "3.11",
        "--gpu",
        "RTX 4090",
        "--driver",
        "535.104.05",
    ]);
    has(
        stack(&geforce, "2.11.0", "cu130", "3.11"),
        "forward-compat-gpu-not-eligible",
        "incompatible",
    );
    // R550 is not a forward-compatibility host at all.
    let (_, r550) = query(&[
        "--torch",
        "2.11.0",
        "--cuda",
        "13.0",
        "--python",
        "3.11",
        "--gpu",
        "H100 SXM",
        "--driver",
        "550.54.14",
    ]);
    has(
        stack(&r550, "2.11.0", "cu130", "3.11"),
        "driver-too-old",
        "incompatible",
    );
}

#[test]
fn driver_branch_must_drive_the_gpu() {
    let (_, doc) = query(&[
        "--torch",
        "2.7.0",
        "--cuda",
        "12.8",
        "--python",
        "3.11",
        "--gpu",
        "RTX 5090",
        "--driver",
        "535.104.05",
    ]);
    has(
        stack(&doc, "2.7.0", "cu128", "3.11"),
        "driver-unsupported-gpu",
        "incompatible",
    );
    // R590 dropped Volta: a V100 is invisible to it.
    let (_, doc) = query(&[
        "--torch",
        "2.7.0",
        "--cuda",
        "12.6",
        "--python",
        "3.11",
        "--gpu",
        "V100 SXM2 16GB",
        "--driver",
        "590.44.01",
    ]);
    has(
        stack(&doc, "2.7.0", "cu126", "3.11"),
        "driver-unsupported-gpu",
        "incompatible",
    );
}

#[test]
fn wheel_tags_decide_not_requires_python() {
    // torch 2.5.0 says Requires-Python >=3.8 but ships no cp38 wheel.
    let (code, doc) = query(&["--torch", "2.5.0", "--python", "3.8"]);
    assert_eq!(code, 1);
    let s = &doc["stacks"][0];
    has(s, "python-no-wheel", "incompatible");
}

#[test]
fn glibc_floor() {
    let (_, doc) = query(&[
        "--torch", "2.7.0", "--cuda", "12.6", "--python", "3.11", "--os", "centos7",
    ]);
    has(
        stack(&doc, "2.7.0", "cu126", "3.11"),
        "glibc-too-old",
        "incompatible",
    );
    let (_, doc) = query(&[
        "--torch", "2.6.0", "--cuda", "12.4", "--python", "3.11", "--os", "centos7",
    ]);
    assert_eq!(stack(&doc, "2.6.0", "cu124", "3.11")["status"], "compatible");
    // Its manylinux1 tag says glibc 2.5, but its libraries need 2.17 (read from the wheel).
    let (_, doc) = query(&[
        "--torch", "2.6.0", "--cuda", "12.4", "--python", "3.11", "--glibc", "2.16",
    ]);
    has(
        stack(&doc, "2.6.0", "cu124", "3.11"),
        "glibc-too-old",
        "incompatible",
    );
    let (_, doc) = query(&[
        "--torch", "2.7.0", "--cuda", "12.6", "--python", "3.11", "--glibc", "2.28",
    ]);
    assert_eq!(stack(&doc, "2.7.0", "cu126", "3.11")["status"], "compatible");
}

#[test]
fn extensions_need_an_nvcc_that_targets_the_gpu() {
    let (_, doc) = query(&[
        "--torch",
        "2.7.0",
        "--cuda",
        "12.6",
        "--python",
        "3.11",
        "--extensions",
        "--gpu",
        "H100 SXM",
    ]);
    let s = stack(&doc, "2.7.0", "cu126", "3.11");
    assert!(codes(s).contains(&"extensions-nvcc".to_string()), "{s:#}");
    // CUDA 13 nvcc has no Volta target at all.
    let (_, doc) = query(&[
        "--torch",
        "2.11.0",
        "--cuda",
        "13.0",
        "--python",
        "3.11",
        "--extensions",
        "--gpu",
        "V100 SXM2 16GB",
    ]);
    assert!(codes(stack(&doc, "2.11.0", "cu130", "3.11")).contains(&"nvcc-no-gpu-arch".to_string()));
}

#[test]
fn unknown_facts_are_not_constraints() {
    let (code, doc) = query(&["--torch", "2.4.1", "--cuda", "12.1", "--python", "3.11"]);
    assert_eq!(code, 0);
    let s = stack(&doc, "2.4.1", "cu121", "3.11");
    has(s, "needs-driver", "compatible");
    assert_eq!(s["needs"]["driver_native"], "530.30.02");
    assert_eq!(s["needs"]["driver_minor_compat"], "525.60.13");
    assert!(
        s["needs"]["sass"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "sm_90")
    );
}

#[test]
fn install_line_names_the_index() {
    let (_, doc) = query(&["--torch", "2.4.1", "--cuda", "11.8", "--python", "3.11"]);
    assert_eq!(
        stack(&doc, "2.4.1", "cu118", "3.11")["install"],
        "python3.11 -m pip install torch==2.4.1 torchvision==0.19.1 torchaudio==2.4.1 --index-url https://download.pytorch.org/whl/cu118"
    );
    // PyPI's own wheels are the default build: no index needed.
    let (_, doc) = query(&["--torch", "2.4.1", "--cuda", "12.1", "--python", "3.11"]);
    assert_eq!(
        stack(&doc, "2.4.1", "cu121", "3.11")["install"],
        "python3.11 -m pip install torch==2.4.1 torchvision==0.19.1 torchaudio==2.4.1"
    );
}

#[test]
fn ranking_compatible_first_then_newer_torch() {
    let (_, doc) = query(&["--gpu", "H100 SXM", "--driver", "535.104.05", "--python", "3.11"]);
    let stacks = doc["stacks"].as_array().unwrap();
    let rank = |s: &Value| match s["status"].as_str().unwrap() {
        "compatible" => 0,
        "conditional" => 1,
        _ => 2,
    };
    for w in stacks.windows(2) {
        assert!(
            rank(&w[0]) <= rank(&w[1]),
            "{} before {}",
            w[0]["status"],
            w[1]["status"]
        );
    }
    assert_eq!(stacks[0]["status"], "compatible");
}

#[test]
fn the_new_user_question_gets_a_plain_answer() {
    let run = gpuenv(&[
        "query",
        "--torch",
        "2.7.0",
        "--gpu",
        "RTX 5090",
        "--driver",
        "535.104.05",
    ]);
    assert_eq!(run.code, 1);
    assert!(run.stdout.contains("verdict: incompatible"), "{}", run.stdout);
    assert!(
        run.stdout.contains(
            "driver 535.104.05 (branch R535) does not support Blackwell GPUs: CUDA sees no RTX 5090 at all"
        ),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains(
            "hint: driver >= 570.26 (R570 or newer) -> torch 2.7.0+cu128 runs natively on RTX 5090"
        ),
        "{}",
        run.stdout
    );
    let (_, doc) = query(&["--torch", "2.7.0", "--gpu", "RTX 5090", "--driver", "535.104.05"]);
    assert_eq!(doc["verdict"], "incompatible");
    assert_eq!(doc["suggestions"][0]["kind"], "driver");
    assert_eq!(
        doc["suggestions"][0]["change"],
        "driver >= 570.26 (R570 or newer)"
    );
}

#[test]
fn strict_makes_conditional_fail() {
    let args = [
        "query",
        "--torch",
        "2.5.1",
        "--cuda",
        "12.4",
        "--python",
        "3.11",
        "--driver",
        "535.104.05",
    ];
    assert_eq!(gpuenv(&args).code, 0);
    let mut strict = args.to_vec();
    strict.push("--strict");
    assert_eq!(gpuenv(&strict).code, 1);
}

#[test]
fn multiple_gpus_and_counts() {
    let (_, doc) = query(&[
        "--torch", "2.7.0", "--cuda", "12.8", "--python", "3.11", "--gpu", "H100x8", "--gpu", "RTX 5090",
        "--driver", "570.26",
    ]);
    let s = stack(&doc, "2.7.0", "cu128", "3.11");
    let sass: Vec<&Value> = s["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "gpu-sass")
        .collect();
    assert_eq!(sass.len(), 2, "{s:#}");
    assert!(doc["query"].as_str().unwrap().contains("8x H100 SXM"));
}

#[test]
fn bad_input_exits_2() {
    let cases: [(&[&str], &str); 9] = [
        (&["--gpu", "H1000"], "no gpu record named `H1000`; did you mean"),
        (
            &["--gpu", "8x H1000"],
            "no gpu record named `H1000`; did you mean",
        ),
        (
            &["--driver", "535.x.1"],
            "--driver: invalid driver version `535.x.1`",
        ),
        (
            // R620 has a record but no release known (R565's first, 565.57.01, was added).
            &["--driver", "620"],
            "compat-db knows no release of branch R620; give the full version",
        ),
        (
            &["--torch", ">=2.x"],
            "--torch: invalid version specifier `>=2.x`",
        ),
        (
            &["--python", "three"],
            "--python: invalid version specifier `three`",
        ),
        (&["--os", "windows"], "--os: unknown OS `windows`"),
        (&["--gpu", "H100x0"], "the count must be at least 1"),
        (&["--gpu", "H100x99999999"], "more than the 1024"),
    ];
    for (args, msg) in cases {
        let mut a = vec!["query"];
        a.extend_from_slice(args);
        let run = gpuenv(&a);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(msg), "{args:?}: {}", run.stderr);
        assert!(run.stdout.is_empty());
    }
}

#[test]
fn graph_dot() {
    let run = gpuenv(&[
        "graph",
        "--dot",
        "--torch",
        "2.7.0",
        "--gpu",
        "RTX 5090",
        "--driver",
        "535.104.05",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.starts_with("digraph gpuenv {"));
    assert!(run.stdout.contains("\"torch 2.7.0+cu128\""), "{}", run.stdout);
    assert!(run.stdout.contains("\"does not drive\""), "{}", run.stdout);
    assert!(run.stdout.contains("color=red"));
}

#[test]
fn requirements_file_pins_the_build() {
    let req = crate::support::fixture("project/requirements.txt");
    let (code, doc) = query(&[
        "--requirements",
        req.to_str().unwrap(),
        "--gpu",
        "H100 SXM",
        "--driver",
        "535.104.05",
    ]);
    assert_eq!(code, 0);
    let stacks = doc["stacks"].as_array().unwrap();
    assert!(!stacks.is_empty());
    for s in stacks {
        assert_eq!(s["torch"], "2.4.1");
        assert_eq!(s["variant"], "cu121");
    }
    assert_eq!(doc["verdict"], "compatible");
}

#[test]
fn pyproject_requires_python_and_index() {
    let py = crate::support::fixture("project/pyproject.toml");
    let (code, doc) = query(&["--pyproject", py.to_str().unwrap()]);
    assert_eq!(code, 0);
    for s in doc["stacks"].as_array().unwrap() {
        assert_eq!(s["variant"], "cu124", "the uv index names cu124");
        assert!(s["python"] == "3.12" || s["python"] == "3.13", "{}", s["python"]);
        let torch = s["torch"].as_str().unwrap();
        assert!(torch.starts_with("2.4.") || torch.starts_with("2.5."), "{torch}");
    }
}

#[test]
fn a_broken_requirements_file_names_its_line() {
    let req = crate::support::fixture("project/requirements-broken.txt");
    let run = gpuenv(&["query", "--requirements", req.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("requirements-broken.txt:2:"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty());
    let run = gpuenv(&["query", "--requirements", "/nonexistent/requirements.txt"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("cannot read requirements file `/nonexistent/requirements.txt`: no such file"),
        "{}",
        run.stderr
    );
}

#[test]
fn contradictory_pins_across_files_and_flags_are_an_answer() {
    // A well-formed question that no build answers: incompatible (exit 1) with a stable
    // code, not bad input.
    let req = crate::support::fixture("project/requirements.txt");
    let (code, doc) = query(&["--requirements", req.to_str().unwrap(), "--torch", "2.5.1"]);
    assert_eq!(code, 1);
    assert_eq!(doc["verdict"], "incompatible");
    assert_eq!(doc["findings"][0]["code"], "no-matching-build");
    let msg = doc["findings"][0]["message"].as_str().unwrap();
    assert!(
        msg.contains("no torch build satisfies all of: torch ==2.5.1 (--torch); torch ==2.4.1+cu121"),
        "{msg}"
    );
}

/// Issue 28: on GH200 (a Grace, aarch64 host) torch 2.4 has no CUDA wheel; PyPI's aarch64
/// wheel is a CPU-only build, so "compatible" would cost a day of rented GPUs.
#[test]
fn gh200_torch_2_4_has_no_aarch64_cuda_wheel() {
    let (code, doc) = query(&["--gpu", "GH200", "--torch", "2.4"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["verdict"], "incompatible");
    assert_eq!(doc["arch"]["name"], "aarch64");
    assert!(
        doc["arch"]["from"].as_str().unwrap().contains("GH200"),
        "{:#}",
        doc["arch"]
    );
    let s = stack(&doc, "2.4.1", "cu121", "3.11");
    has(s, "no-cuda-wheel-for-arch", "incompatible");
    let f = s["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "no-cuda-wheel-for-arch")
        .unwrap();
    let m = f["message"].as_str().unwrap();
    assert!(m.contains("installs a CPU-only build"), "{m}");
    assert!(
        m.contains("the first with aarch64 CUDA wheels is torch 2.7.0+cu128"),
        "{m}"
    );
    // The hint names a build that has one.
    let hint = doc["suggestions"][0]["gives"].as_str().unwrap();
    assert!(hint.contains("compatible on GH200"), "{hint}");
}

/// A torch with aarch64 CUDA wheels on its index only (2.9: PyPI's aarch64 wheel is still
/// CPU-only) is compatible, and its install line names the index even for PyPI's default
/// build; from 2.11, PyPI's own aarch64 wheel is the CUDA build.
#[test]
fn gh200_install_line_gets_a_cuda_build() {
    let (code, doc) = query(&["--gpu", "GH200", "--torch", "2.9.1", "--cuda", "12.8"]);
    assert_eq!(code, 0, "{doc:#}");
    let s = stack(&doc, "2.9.1", "cu128", "3.12");
    has(s, "cuda-wheel-for-arch", "compatible");
    let install = s["install"].as_str().unwrap();
    assert!(
        install.ends_with("--index-url https://download.pytorch.org/whl/cu128"),
        "{install}"
    );
    let (_, x86) = query(&["--gpu", "H100 SXM", "--torch", "2.9.1", "--cuda", "12.8"]);
    let install = stack(&x86, "2.9.1", "cu128", "3.12")["install"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        !install.contains("--index-url"),
        "x86_64 gets PyPI's default: {install}"
    );
    assert!(x86.get("arch").is_none(), "no arch given, none claimed: {x86:#}");

    let (code, doc) = query(&["--gpu", "GB200", "--torch", "2.11.0", "--cuda", "13.0"]);
    assert_eq!(code, 0, "{doc:#}");
    let install = stack(&doc, "2.11.0", "cu130", "3.12")["install"]
        .as_str()
        .unwrap();
    assert!(!install.contains("--index-url"), "{install}");
}

#[test]
fn arch_flag_without_a_gpu_that_brings_its_host() {
    let (code, doc) = query(&["--arch", "aarch64", "--gpu", "H100 SXM", "--torch", "2.4.1"]);
    assert_eq!(code, 1, "{doc:#}");
    has(
        stack(&doc, "2.4.1", "cu124", "3.11"),
        "no-cuda-wheel-for-arch",
        "incompatible",
    );
    let (code, doc) = query(&["--arch", "x86_64", "--gpu", "H100 SXM", "--torch", "2.4.1"]);
    assert_eq!(code, 0, "{doc:#}");
    assert!(
        !codes(stack(&doc, "2.4.1", "cu121", "3.11"))
            .iter()
            .any(|c| c.contains("wheel-for-arch"))
    );
}

#[test]
fn arch_aliases_are_read_and_others_refused() {
    let run = gpuenv(&[
        "query", "--arch", "arm64", "--torch", "2.9.1", "--gpu", "H100 SXM",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("read:  --arch arm64: `arm64` is the 64-bit Arm architecture; Linux and wheel tags call it aarch64"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("arch:  aarch64 (--arch)"), "{}", run.stdout);
    let run = gpuenv(&["query", "--arch", "sbsa", "--torch", "2.9.1"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = gpuenv(&["query", "--arch", "riscv64"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("--arch")
            && run.stderr.contains("riscv64")
            && run.stderr.contains("aarch64 (or arm64, sbsa)"),
        "{}",
        run.stderr
    );
    let run = gpuenv(&["query", "--arch", "x86_64", "--gpu", "GH200"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("contradicts") && run.stderr.contains("GH200"),
        "{}",
        run.stderr
    );
    let run = gpuenv(&["query", "--gpu", "H100 SXM", "--torch", "2.4.1"]);
    assert!(
        run.stdout.contains("arch:  not given: x86_64 wheels assumed"),
        "{}",
        run.stdout
    );
}
