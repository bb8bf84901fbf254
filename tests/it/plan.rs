//! `gpuenv plan` as a user runs it: the published figures through the command, a model
//! named or read from its config, offers ranked with reasons, the order it writes accepted
//! by `check` on a recorded host, and bad input refused with the field named.

use serde_json::Value;

use crate::support::{fixture, gpuenv, json};

fn plan(args: &[&str]) -> (i32, Value) {
    let mut a = vec!["plan"];
    a.extend_from_slice(args);
    a.push("--json");
    let run = gpuenv(&a);
    assert!(matches!(run.code, 0 | 1), "{args:?}: {}", run.stderr);
    (run.code, json(&run))
}

/// The issue's example: 7.5B, mixed-precision AdamW, ZeRO-3 over 64 GPUs: model states of
/// 16 bytes a parameter over 64, 1.875e9 bytes per GPU (ZeRO paper, Figure 1).
#[test]
fn zero3_over_64_gpus_through_the_command() {
    let (_, doc) = plan(&[
        "--params",
        "7.5B",
        "--method",
        "full",
        "--precision",
        "mixed",
        "--optimizer",
        "adamw",
        "--gpus",
        "64",
        "--shard",
        "zero3",
    ]);
    assert_eq!(doc["params"], 7_500_000_000u64);
    let m = &doc["memory"]["per_gpu"];
    let states =
        m["weights"].as_u64().unwrap() + m["gradients"].as_u64().unwrap() + m["optimizer"].as_u64().unwrap();
    // Plus the layer ZeRO-3 gathers, 4 bytes a parameter of it (DeepSpeed's estimator):
    // the 7.5B count alone is guessed as 34 blocks of hidden 4352, 16 x 4352^2 each.
    assert_eq!(states, 1_875_000_000 + 4 * 16 * 4352 * 4352);
    let total: u64 = [
        "weights",
        "gradients",
        "optimizer",
        "activations",
        "kv_cache",
        "overhead",
    ]
    .iter()
    .map(|k| m[k].as_u64().unwrap())
    .sum();
    assert_eq!(m["total"].as_u64().unwrap(), total);
    for f in doc["fits"].as_array().unwrap() {
        assert_eq!(f["count"], 64, "{f}");
        assert!(f["headroom_bytes"].is_i64(), "{f}");
        assert!(f.get("stack").is_some(), "{f}");
    }
    for a in doc["assumptions"].as_array().unwrap() {
        for k in ["what", "value", "source"] {
            assert!(!a[k].as_str().unwrap().is_empty(), "{a}");
        }
    }
    assert!(
        doc["assumptions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["source"].as_str().unwrap().contains("arXiv:1910.02054")),
        "the ZeRO paper is cited"
    );
}

/// A 70B config read offline counts exactly; the same model named from compat-db agrees.
#[test]
fn a_config_and_a_named_model_agree() {
    let config = fixture("plan/llama-2-70b-hf.config.json");
    let (_, from_file) = plan(&[
        "--model",
        config.to_str().unwrap(),
        "--method",
        "qlora",
        "--checkpointing",
    ]);
    assert_eq!(from_file["params"], 68_976_648_192u64);
    let (_, named) = plan(&[
        "--model",
        "meta-llama/Llama-2-70b-hf",
        "--method",
        "qlora",
        "--checkpointing",
    ]);
    assert_eq!(named["params"], from_file["params"]);
    assert_eq!(named["memory"]["per_gpu"], from_file["memory"]["per_gpu"]);
    // QLoRA holds 70B on one 80 GB GPU, not on one 24 GB card.
    let one = |doc: &Value, gpu: &str| {
        doc["fits"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["gpu"] == gpu)
            .cloned()
            .unwrap()
    };
    assert_eq!(one(&named, "A100 80GB SXM")["count"], 1);
    assert!(one(&named, "RTX 4090")["count"].as_u64().unwrap() > 1);
}

/// Offers ranked: fits, then a stack runs, then cost; each one that falls short says why.
#[test]
fn offers_are_ranked_with_reasons() {
    let offers = fixture("plan/offers.csv");
    let (_, doc) = plan(&[
        "--model",
        "Llama-2-13B",
        "--method",
        "lora",
        "--checkpointing",
        "--tokens",
        "2B",
        "--torch",
        "2.4",
        "--cuda",
        "12.1",
        "--offers",
        offers.to_str().unwrap(),
    ]);
    let ranked = doc["offers"].as_array().unwrap();
    let names: Vec<&str> = ranked
        .iter()
        .map(|o| o["offer"]["name"].as_str().unwrap())
        .collect();
    // The cheapest run (old-driver) cannot run torch 2.4 on CUDA 12.1 with driver 470; the
    // cheap PCIe box splits the model over PCIe; the one that does not fit comes last.
    assert_eq!(names, ["sxm-node", "cheap-pcie", "old-driver", "tiny"], "{doc:#}");
    let by = |n: &str| ranked.iter().find(|o| o["offer"]["name"] == n).unwrap();
    assert!(
        by("old-driver")["reasons"][0]
            .as_str()
            .unwrap()
            .starts_with("no stack runs on it: driver 470"),
        "{doc:#}"
    );
    let pcie = by("cheap-pcie");
    assert!(
        pcie["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r.as_str().unwrap().contains("PCIe only")),
        "{pcie:#}"
    );
    assert!(by("tiny")["fits"] == false);
    assert!(
        by("tiny")["reasons"][0]
            .as_str()
            .unwrap()
            .starts_with("does not fit")
    );
    assert!(by("sxm-node")["cost"].as_f64().unwrap() > 0.0);
}

/// plan -> --order-out -> check --order: the order plan writes is one check reads, and the
/// recorded 8x H100 host meets it.
#[test]
fn the_order_plan_writes_is_accepted_by_check() {
    let dir = tempfile::tempdir().unwrap();
    let order = dir.path().join("order.toml");
    let run = gpuenv(&[
        "plan",
        "--params",
        "7B",
        "--gpu",
        "8x H100 SXM",
        "--gpus",
        "8",
        "--shard",
        "zero3",
        "--driver",
        "550.90.07",
        "--python",
        "3.10",
        "--order-out",
        order.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = std::fs::read_to_string(&order).unwrap();
    assert!(text.contains("gpu = \"H100 SXM\"\ngpus = 8\n"), "{text}");
    assert!(text.contains("nvlink = \"all\""), "{text}");
    let host = fixture("hosts/8x-h100-nvlink/host.json");
    let run = gpuenv(&[
        "check",
        "--host-facts",
        host.to_str().unwrap(),
        "--order",
        order.to_str().unwrap(),
        "--json",
    ]);
    let doc = json(&run);
    assert_eq!(doc["accepted"], true, "{doc:#}");
    assert_eq!(run.code, 0);
    // A smaller delivery fails the same order.
    let host = fixture("hosts/7x-a100-40gb-driver-525/host.json");
    let run = gpuenv(&[
        "check",
        "--host-facts",
        host.to_str().unwrap(),
        "--order",
        order.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 1);
}

/// Bad input exits 2 and names the field; nothing is written.
#[test]
fn bad_input_names_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("config.json");
    std::fs::write(&broken, r#"{"model_type": "llama", "hidden_size": 4096}"#).unwrap();
    let offers = dir.path().join("offers.csv");
    std::fs::write(&offers, "gpu,count\n,8\n").unwrap();
    let out = dir.path().join("order.toml");
    for (args, says) in [
        (vec!["--params", "7B", "--method", "swim"], "--method"),
        (vec!["--params", "7Q"], "--params"),
        (vec!["--params", "-7B"], "--params"),
        (vec!["--model", broken.to_str().unwrap()], "no \"vocab_size\""),
        (vec!["--model", "Llama-9-7B"], "Llama-9-7B"),
        (
            vec!["--params", "7B", "--offers", offers.to_str().unwrap()],
            "no GPU (field `gpu`)",
        ),
        (vec!["--params", "7B", "--mfu", "140%"], "--mfu"),
        (vec!["--params", "7B", "--tokens", "many"], "--tokens"),
        (vec![], "plan needs the model"),
    ] {
        let mut a = vec!["plan"];
        a.extend(args.iter().copied());
        a.extend(["--order-out", out.to_str().unwrap()]);
        let run = gpuenv(&a);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{args:?}: {}", run.stderr);
        assert!(!out.exists(), "{args:?} wrote the order");
    }
    // A directory as the order's target is refused before anything runs.
    let run = gpuenv(&[
        "plan",
        "--params",
        "7B",
        "--order-out",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
}
