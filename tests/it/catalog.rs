//! `show image NAME --driver D --gpu G`: an image judged on a target from compat-db's
//! catalog, without pulling it, by the rules `verify` applies to the image itself.

use crate::support::{gpuenv, gpuenv_in, json, root, trimmed_db};

fn codes(v: &serde_json::Value) -> Vec<(String, String)> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["code"].as_str().unwrap().to_string(),
                f["severity"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn has(v: &serde_json::Value, code: &str, severity: &str) -> bool {
    codes(v).contains(&(code.to_string(), severity.to_string()))
}

/// The torch of the image on the target, and the codes of its findings.
fn torch(v: &serde_json::Value) -> (String, Vec<String>) {
    let s = &v["torch_on_target"][0];
    (
        s["status"].as_str().unwrap().to_string(),
        s["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["code"].as_str().unwrap().to_string())
            .collect(),
    )
}

/// A copy of compat-db whose NGC 24.08 record says what its release notes say of the
/// cuda-compat it ships and of NVIDIA_REQUIRE_CUDA, so the test holds whatever the shipped
/// record says.
fn db_with_24_08() -> tempfile::TempDir {
    let db = trimmed_db(&[]);
    let path = db.path().join("image/ngc-24.08.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with("forward_compat") || line.starts_with("require_cuda") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
        if line.starts_with("min_driver") {
            out.push_str("forward_compat = [\"470.57\", \"525.85\", \"535.86\", \"545.23\"]\n");
            out.push_str("require_cuda = \"cuda>=9.0\"\n");
        }
    }
    std::fs::write(&path, out).unwrap();
    db
}

fn judged(db: &std::path::Path, name: &str, target: &[&str]) -> (i32, serde_json::Value) {
    let mut args = vec!["--db", db.to_str().unwrap(), "show", "image", name, "--json"];
    args.extend_from_slice(target);
    let run = gpuenv_in(&root(), &args);
    assert!(run.code == 0 || run.code == 1, "{}: {}", run.code, run.stderr);
    (run.code, json(&run))
}

#[test]
fn ngc_on_an_older_data_center_driver_runs_through_its_cuda_compat() {
    let db = db_with_24_08();
    let (code, doc) = judged(
        db.path(),
        "nvcr.io/nvidia/pytorch:24.08-py3",
        &["--driver", "535.104.05", "--gpu", "H100 SXM"],
    );
    assert_eq!(code, 0);
    assert_eq!(doc["kind"], "image");
    assert_eq!(doc["id"], "ngc-24.08");
    let v = &doc["verdict"];
    assert_eq!(v["covers"], serde_json::json!(["catalog", "target"]));
    assert_eq!(v["origin"]["transport"], "catalog");
    assert!(has(v, "image-forward-compat", "info"), "{v}");
    assert!(has(v, "image-starts", "info"), "{v}");
    assert_eq!(v["failed"], false);
    // torch is judged on the driver the compat library provides, which meets 12.6 natively.
    let (_, found) = torch(v);
    let drivers: Vec<&String> = found.iter().filter(|c| c.starts_with("driver-")).collect();
    assert_eq!(drivers, ["driver-native"], "{found:?}");
    assert!(doc["db_date"].is_string());
}

#[test]
fn a_geforce_card_gets_no_forward_compatibility() {
    let db = db_with_24_08();
    // R535 is a branch 24.08's compat serves, but not for an RTX 4090: CUDA sees 535
    // itself, which runs 12.6 only through minor-version compatibility.
    let (code, doc) = judged(
        db.path(),
        "pytorch:24.08-py3",
        &["--driver", "535.104.05", "--gpu", "4090"],
    );
    assert_eq!(code, 0);
    let v = &doc["verdict"];
    assert!(has(v, "image-forward-compat", "warning"), "{v}");
    let (status, found) = torch(v);
    assert_eq!(status, "conditional");
    assert!(
        found.contains(&"driver-minor-version-compat".to_string()),
        "{found:?}"
    );
    // On R470 nothing bridges 12.6 for it: the verdict fails, and exits 1.
    let (code, doc) = judged(
        db.path(),
        "24.08-py3",
        &["--driver", "470.82.01", "--gpu", "RTX 3090"],
    );
    assert_eq!(code, 1);
    let (status, found) = torch(&doc["verdict"]);
    assert_eq!(status, "incompatible");
    assert!(found.contains(&"driver-too-old".to_string()), "{found:?}");
    // The same driver on a data-center board is served by the compat library.
    let (code, doc) = judged(
        db.path(),
        "24.08",
        &["--driver", "470.82.01", "--gpu", "A100 80GB SXM"],
    );
    assert_eq!(code, 0, "{doc}");
    assert!(has(&doc["verdict"], "image-forward-compat", "info"));
}

#[test]
fn a_release_older_than_the_one_named_is_not_served() {
    let db = db_with_24_08();
    // `535` reads as R535's first release, 535.43.02: older than the 535.86 the notes name.
    let (_, doc) = judged(db.path(), "ngc-24.08", &["--driver", "535", "--gpu", "8x H800"]);
    let v = &doc["verdict"];
    assert!(has(v, "image-forward-compat", "warning"), "{v}");
    let msg = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "image-forward-compat")
        .unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("from 535.86") && msg.contains("535.43.02 is older"),
        "{msg}"
    );
}

#[test]
fn what_the_record_does_not_say_is_not_judged() {
    let db = trimmed_db(&[]);
    let path = db.path().join("image/ngc-24.08.toml");
    let text: String = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("forward_compat") && !l.starts_with("require_cuda"))
        .map(|l| {
            let l = if l.starts_with("unverified") {
                l.replace(", \"forward_compat\"", "")
                    .replace("\"forward_compat\", ", "")
            } else {
                l.to_string()
            };
            format!("{l}\n")
        })
        .collect();
    std::fs::write(&path, text).unwrap();
    let (_, doc) = judged(
        db.path(),
        "24.08-py3",
        &["--driver", "535.104.05", "--gpu", "H100 SXM"],
    );
    let v = &doc["verdict"];
    // No NVIDIA_REQUIRE_CUDA recorded: no word that the runtime starts it.
    assert!(!codes(v).iter().any(|(c, _)| c == "image-starts"), "{v}");
    assert!(v.get("require").is_none());
    assert_eq!(
        codes(v)
            .iter()
            .filter(|(c, s)| c == "catalog-fact-missing" && s == "warning")
            .count(),
        2,
        "{v}"
    );
    // No compat branches recorded: the compat library is not counted.
    assert!(!codes(v).iter().any(|(c, _)| c == "image-forward-compat"));
}

#[test]
fn the_human_report_shows_the_record_then_the_verdict() {
    let db = db_with_24_08();
    let run = gpuenv_in(
        &root(),
        &[
            "--db",
            db.path().to_str().unwrap(),
            "show",
            "image",
            "pytorch:24.08-py3",
            "--driver",
            "470.82.01",
            "--gpu",
            "RTX 3090",
        ],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stdout
            .starts_with("nvcr.io/nvidia/pytorch:24.08-py3  [image ngc-24.08]")
    );
    assert!(
        run.stdout
            .contains("target:     the target given: driver 470.82.01, 1x RTX 3090")
    );
    assert!(run.stdout.trim_end().ends_with("verdict: FAIL"), "{}", run.stdout);
}

#[test]
fn image_names_are_read_as_people_write_them() {
    for name in [
        "24.08-py3",
        "24.08",
        "pytorch:24.08-py3",
        "nvidia/pytorch:24.08-py3",
        "nvcr.io/nvidia/pytorch:24.08-py3",
        "docker://nvcr.io/nvidia/pytorch:24.08-py3",
        "nvcr.io/nvidia/pytorch:24.08-py3@sha256:0123456789abcdef",
        "NGC 24.08",
    ] {
        let run = gpuenv(&["show", "image", name, "--json"]);
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        assert_eq!(json(&run)["id"], "ngc-24.08", "{name}");
    }
    for (name, id) in [
        (
            "docker.io/pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime",
            "pytorch-2.8.0-cuda12.8-cudnn9-runtime",
        ),
        ("cuda:12.4.1-cudnn-runtime-ubuntu22.04", "nvidia-cuda-12.4.1"),
    ] {
        let run = gpuenv(&["show", "image", name, "--json"]);
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        assert_eq!(json(&run)["id"], id, "{name}");
    }
    // Another repository's tag is not this image.
    for name in ["tensorflow:24.08-py3", "nvcr.io/nvidia/tensorflow:24.08-tf2-py3"] {
        let run = gpuenv(&["show", "image", name]);
        assert_eq!(run.code, 2, "{name}");
        assert!(run.stderr.contains(name), "{}", run.stderr);
    }
}

#[test]
fn a_target_is_only_for_images_and_bad_flags_are_bad_input() {
    let run = gpuenv(&["show", "gpu", "H100", "--driver", "535"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("show image"), "{}", run.stderr);
    let run = gpuenv(&["show", "image", "24.08-py3", "--driver", "five"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("--driver"), "{}", run.stderr);
    let run = gpuenv(&["show", "image", "24.08-py3", "--gpu", "Z9000"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("Z9000"), "{}", run.stderr);
}

#[test]
fn the_shipped_24_08_record_names_the_branches_its_compat_serves() {
    let (code, doc) = judged(
        &root().join("compat-db"),
        "pytorch:24.08-py3",
        &["--driver", "535.104.05", "--gpu", "H100 SXM"],
    );
    assert_eq!(code, 0);
    let f = doc["verdict"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "image-forward-compat")
        .unwrap()
        .clone();
    assert_eq!(f["severity"], "info");
    // The record marks its branches unverified (read in the same month's Triton notes),
    // and the finding carries that.
    assert_eq!(f["unverified"], true);
    assert!(f["message"].as_str().unwrap().contains("535.86 or later R535"));
    let human = gpuenv(&[
        "show",
        "image",
        "24.08",
        "--driver",
        "535.104.05",
        "--gpu",
        "H100 SXM",
    ]);
    assert!(human.stdout.contains("[unverified data]"), "{}", human.stdout);
}
