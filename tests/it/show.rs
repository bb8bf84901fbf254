//! `gpuenv show`: lookups and the JSON contract.

use crate::support::{gpuenv, json};

#[test]
fn gpu_json_contract() {
    let run = gpuenv(&["show", "gpu", "H100 SXM", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = json(&run);
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["kind"], "gpu");
    assert_eq!(doc["name"], "H100 SXM");
    assert_eq!(doc["compute_capability"], "9.0");
    assert!(doc["compute_capability"].is_string());
    assert_eq!(doc["memory_gib"].as_f64(), Some(80.0));
    assert!(doc["memory_gib"].is_number());
    assert!(!doc["sources"].as_array().unwrap().is_empty());
}

#[test]
fn cuda_json_contract() {
    let run = gpuenv(&["show", "cuda", "12.4.0", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = json(&run);
    assert_eq!(doc["kind"], "cuda");
    assert_eq!(doc["min_driver_linux"], "550.54.14");
    assert_eq!(doc["family_min_driver"], "525.60.13");
}

#[test]
fn gpu_by_any_spelling() {
    for name in [
        "h100",
        "H100-SXM5-80GB",
        "NVIDIA H100 80GB HBM3",
        "h100 sxm",
        "H100_SXM",
    ] {
        let run = gpuenv(&["show", "gpu", name, "--json"]);
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        assert_eq!(json(&run)["name"], "H100 SXM", "{name}");
    }
}

/// Each name as `nvidia-smi` prints it (NVIDIA's driver table) finds its own record, and
/// the records it sits beside keep answering to theirs.
#[test]
fn gpu_names_as_nvidia_smi_prints_them() {
    let cases = [
        ("NVIDIA GeForce RTX 5090 D", "RTX 5090 D"),
        ("NVIDIA GeForce RTX 5090 D v2", "RTX 5090 D v2"),
        ("NVIDIA GeForce RTX 5090", "RTX 5090"),
        ("NVIDIA H20-3e", "H20-3e"),
        ("NVIDIA H20", "H20"),
        ("NVIDIA H20 NVL16", "H20 NVL16"),
        ("NVIDIA H800 PCIe", "H800 PCIe"),
        ("NVIDIA H800 NVL", "H800 NVL"),
        ("NVIDIA H800", "H800"),
        ("NVIDIA A800 40GB Active", "A800 40GB Active"),
        ("NVIDIA A800 80GB PCIe", "A800 80GB PCIe"),
        ("NVIDIA RTX 6000D", "RTX 6000D"),
        ("NVIDIA GB10", "GB10"),
        ("NVIDIA RTX PRO 5000 Blackwell", "RTX PRO 5000 Blackwell"),
        (
            "NVIDIA RTX PRO 5000 72GB Blackwell",
            "RTX PRO 5000 72GB Blackwell",
        ),
        ("NVIDIA RTX PRO 4500 Blackwell", "RTX PRO 4500 Blackwell"),
        (
            "NVIDIA RTX PRO 4500 Blackwell Server Edition",
            "RTX PRO 4500 Blackwell Server Edition",
        ),
        ("NVIDIA RTX PRO 4000 Blackwell", "RTX PRO 4000 Blackwell"),
        (
            "NVIDIA RTX PRO 4000 Blackwell SFF Edition",
            "RTX PRO 4000 Blackwell SFF Edition",
        ),
        ("NVIDIA RTX PRO 2000 Blackwell", "RTX PRO 2000 Blackwell"),
        ("NVIDIA GeForce RTX 5070 Ti", "RTX 5070 Ti"),
        ("NVIDIA GeForce RTX 5060 Ti", "RTX 5060 Ti"),
        ("NVIDIA GeForce RTX 4070 Ti SUPER", "RTX 4070 Ti SUPER"),
        ("NVIDIA GeForce RTX 4060 Ti", "RTX 4060 Ti"),
        ("NVIDIA GeForce RTX 3080 Ti", "RTX 3080 Ti"),
        ("NVIDIA GeForce RTX 3080", "RTX 3080"),
        ("NVIDIA GeForce RTX 3070", "RTX 3070"),
        ("NVIDIA RTX A4500", "RTX A4500"),
        ("NVIDIA GeForce GTX 1080 Ti", "GTX 1080 Ti"),
        // The 16 GB boards print the 8 GB board's name; written with the size, their own.
        ("RTX 5060 Ti 16GB", "RTX 5060 Ti 16GB"),
        ("RTX 4060 Ti 16GB", "RTX 4060 Ti 16GB"),
        ("NVIDIA L2", "L2"),
        ("NVIDIA A800-SXM4-40GB", "A800 40GB SXM"),
        ("NVIDIA A800-SXM4-80GB", "A800 80GB SXM"),
        ("NVIDIA A800 80GB PCIe LC", "A800 80GB PCIe LC"),
        ("DGX Spark", "GB10"),
    ];
    for (printed, want) in cases {
        let run = gpuenv(&["show", "gpu", printed, "--json"]);
        assert_eq!(run.code, 0, "{printed}: {}", run.stderr);
        assert_eq!(json(&run)["name"], want, "{printed}");
    }
    // NVIDIA publishes no memory for the H20 NVL16: what is recorded is marked.
    let nvl16 = json(&gpuenv(&["show", "gpu", "H20 NVL16", "--json"]));
    assert!(
        nvl16["unverified"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k == "memory_gib")
    );
    // The SXM H800 keeps the plain name; the PCIe card is another form factor.
    let sxm = json(&gpuenv(&["show", "gpu", "H800", "--json"]));
    assert_eq!(sxm["form_factor"], "sxm");
    let pcie = json(&gpuenv(&["show", "gpu", "H800 PCIe", "--json"]));
    assert_eq!(pcie["form_factor"], "pcie");
    // A written size picks the variant it names and never the other one.
    let big = json(&gpuenv(&["show", "gpu", "RTX PRO 5000 72GB", "--json"]));
    assert_eq!(big["memory_gib"].as_f64(), Some(72.0));
    let run = gpuenv(&["show", "gpu", "A800 40GB PCIe", "--json"]);
    assert_ne!(run.code, 0, "no record is a 40 GB A800 PCIe: {}", run.stdout);
    // GB10 brings an Arm host and sm_121.
    let gb10 = json(&gpuenv(&["show", "gpu", "GB10", "--json"]));
    assert_eq!(gb10["compute_capability"], "12.1");
    assert_eq!(gb10["host_arch"], "aarch64");
}

#[test]
fn versions_by_any_spelling() {
    let cases = [
        (["show", "cuda", "12.4"], "version", "12.4.0"),
        (["show", "cuda", "CUDA 12.4.1"], "version", "12.4.1"),
        (["show", "torch", "2.4.1+cu121"], "version", "2.4.1"),
        (["show", "driver", "535.104.05"], "branch", "535"),
        (["show", "driver", "R535"], "branch", "535"),
        (["show", "python", "3.12.4"], "version", "3.12"),
    ];
    for (args, field, want) in cases {
        let mut a = args.to_vec();
        a.push("--json");
        let run = gpuenv(&a);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        assert_eq!(json(&run)[field].to_string().trim_matches('"'), want, "{args:?}");
    }
}

#[test]
fn human_show_lists_facts_and_sources() {
    let run = gpuenv(&["show", "cuda", "12.4.0"]);
    assert_eq!(run.code, 0);
    assert!(
        run.stdout.starts_with("CUDA 12.4 GA (12.4.0)  [cuda 12.4.0]\n"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .lines()
            .any(|l| l.trim_start().starts_with("min_driver_linux") && l.ends_with("550.54.14"))
    );
    assert!(run.stdout.contains("\nsources:\n  - https://"), "{}", run.stdout);
}

#[test]
fn unknown_name_suggests_the_closest() {
    let run = gpuenv(&["show", "gpu", "H1000"]);
    assert_eq!(run.code, 2);
    assert!(run.stdout.is_empty());
    assert!(
        run.stderr.contains("no gpu record named `H1000`; did you mean"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("`H100 SXM`"), "{}", run.stderr);
}

#[test]
fn unknown_version_is_bad_input() {
    let run = gpuenv(&["show", "cuda", "12.7.0"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("no cuda record named `12.7.0`"),
        "{}",
        run.stderr
    );
    let run = gpuenv(&["show", "torch", "not-a-version"]);
    assert_eq!(run.code, 2);
}

#[test]
fn unknown_kind_is_a_usage_error() {
    let run = gpuenv(&["show", "tpu", "v5e"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("invalid value 'tpu'"), "{}", run.stderr);
    assert!(run.stderr.contains("gpu"), "{}", run.stderr);
}

#[test]
fn list_kind() {
    let run = gpuenv(&["db", "list", "gpu", "--json"]);
    assert_eq!(run.code, 0);
    let doc = json(&run);
    let records = doc["records"].as_array().unwrap();
    assert!(
        records
            .iter()
            .any(|r| r["id"] == "h100-sxm" && r["name"] == "H100 SXM")
    );
}

#[test]
fn help_and_version_succeed() {
    assert_eq!(gpuenv(&["--help"]).code, 0);
    let v = gpuenv(&["--version"]);
    assert_eq!(v.code, 0);
    assert!(v.stdout.starts_with("gpuenv "));
}

#[test]
fn broken_pipe_is_not_an_error() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpuenv"))
        .args(["db", "list", "cuda"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close our end at once: every write of gpuenv then fails with EPIPE.
    drop(child.stdout.take());
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(err.is_empty(), "{err}");
}

/// A record checked more than 90 days before today is shown with a warning, in text and
/// JSON; one checked today is not. The dates are written relative to the real clock.
#[test]
fn a_record_checked_long_ago_is_shown_with_a_warning() {
    let db = crate::support::trimmed_db(&[]);
    let set_checked = |file: &str, date: &str| {
        let path = db.path().join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let dated: Vec<String> = text
            .lines()
            .map(|l| {
                if l.starts_with("checked = ") {
                    format!("checked = \"{date}\"")
                } else {
                    l.to_string()
                }
            })
            .collect();
        std::fs::write(&path, dated.join("\n") + "\n").unwrap();
    };
    let today = gpuenv::db::today().unwrap();
    set_checked("driver/r535.toml", "2025-01-15");
    set_checked("driver/r580.toml", &today.to_string());
    let dir = db.path().to_str().unwrap();

    let old = gpuenv(&["--db", dir, "show", "driver", "535"]);
    assert_eq!(old.code, 0, "{}", old.stderr);
    let warn = old.stdout.lines().nth(1).unwrap_or_default();
    assert!(
        warn.starts_with("  warn: checked 2025-01-15, ") && warn.contains("days ago (more than 90)"),
        "{}",
        old.stdout
    );
    let doc = json(&gpuenv(&["--db", dir, "show", "driver", "535", "--json"]));
    assert_eq!(doc["stale"], true, "{doc}");
    assert!(doc["age_days"].as_i64().unwrap() > 90, "{doc}");
    assert_eq!(doc["checked"], "2025-01-15");

    let fresh = gpuenv(&["--db", dir, "show", "driver", "580"]);
    assert_eq!(fresh.code, 0, "{}", fresh.stderr);
    assert!(!fresh.stdout.contains("warn:"), "{}", fresh.stdout);
    let doc = json(&gpuenv(&["--db", dir, "show", "driver", "580", "--json"]));
    assert_eq!(
        (doc["stale"].clone(), doc["age_days"].clone()),
        (serde_json::json!(false), serde_json::json!(0))
    );
}
