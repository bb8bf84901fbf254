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
    // The PCIe box is kept, not disqualified: it says the parallelism its links force and
    // the slowdown, and ranks after the NVLink node whose cost is known.
    let pcie = by("cheap-pcie");
    assert_eq!(pcie["reasons"], serde_json::json!([]), "{pcie:#}");
    assert_eq!(pcie["nvlink"], false, "{pcie:#}");
    assert!(
        pcie["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r.as_str().unwrap().contains("PCIe only")),
        "{pcie:#}"
    );
    let parallelism = pcie["parallelism"].as_str().unwrap();
    assert!(parallelism.contains("pipeline parallelism"), "{parallelism}");
    assert!(parallelism.contains("101 s with NVLink, 131 s"), "{parallelism}");
    assert!(
        pcie["cost"].as_f64().unwrap() < by("sxm-node")["cost"].as_f64().unwrap(),
        "cheaper, yet after the node whose links the split wants: {doc:#}"
    );
    // `2.40` with no unit, for 4 GPUs: the whole offer's hour, and said so.
    assert_eq!(pcie["price_unit"], "machine-hour");
    assert_eq!(pcie["price_per_gpu_hour"], 0.6);
    assert!(
        pcie["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r.as_str().unwrap().contains("says only \"per hour\"")),
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

/// Chinese listings, 8 GPUs each, priced per machine-hour or per card-hour in yuan: ranked
/// by the run's cost, not by the price per hour. The H20 rents for about half the H800's
/// hour but computes at about a seventh of its rate, so its run costs about 3.5x as much.
#[test]
fn cny_offers_are_ranked_by_the_runs_cost() {
    let offers = fixture("plan/offers-cny.csv");
    let args = [
        "plan",
        "--model",
        "Llama-2-7B",
        "--method",
        "full",
        "--checkpointing",
        "--tokens",
        "1B",
        "--offers",
        offers.to_str().unwrap(),
    ];
    let run = gpuenv(&[&args[..], &["--json"]].concat());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = json(&run);
    let ranked = doc["offers"].as_array().unwrap();
    let names: Vec<&str> = ranked
        .iter()
        .map(|o| o["offer"]["name"].as_str().unwrap())
        .collect();
    // Run cost known and NVLink as the split wants; then the PCIe boxes whose time leaves the
    // PCIe traffic out, by their cost (the L20 and the RTX 4090 D among them, now that
    // compat-db has their TFLOPS); then the modified 48 GB RTX 4090, whose record has none.
    assert_eq!(
        names,
        [
            "h800-整机",
            "h20-8卡",
            "4090-pcie",
            "4090d-整机",
            "4090-nvlink",
            "l20-整机",
            "4090-48g"
        ],
        "{doc:#}"
    );
    let by = |n: &str| ranked.iter().find(|o| o["offer"]["name"] == n).unwrap();
    let (h800, h20) = (by("h800-整机"), by("h20-8卡"));
    let f = |o: &Value, k: &str| o[k].as_f64().unwrap_or_else(|| panic!("{k}: {o:#}"));
    assert!(f(h20, "price_per_machine_hour") < f(h800, "price_per_machine_hour"));
    let ratio = f(h20, "cost") / f(h800, "cost");
    assert!((3.3..3.6).contains(&ratio), "H20 run / H800 run = {ratio}");
    for o in ranked {
        assert_eq!(o["currency"], "CNY", "{o:#}");
        assert_eq!(o["offer"]["currency"], "CNY", "{o:#}");
        if let Some(cost) = o["cost"].as_f64() {
            // The run's cost: hours x the price of the whole machine for an hour.
            let want = f(o, "hours") * f(o, "price_per_machine_hour");
            assert!((cost - want).abs() < 0.02 * want.max(1.0), "{o:#}");
        }
    }
    assert_eq!(h800["price_unit"], "machine-hour");
    assert_eq!(h800["offer"]["price_per_hour"], 120.0);
    // `¥1.98/卡时`: per card-hour, 8 cards.
    let pcie = by("4090-pcie");
    assert_eq!(pcie["price_unit"], "gpu-hour");
    assert_eq!(pcie["price_per_machine_hour"], 15.84);
    assert_eq!(pcie["offer"]["cpus"], 64);
    // NVLink claimed on cards that have none: said, and judged as PCIe.
    let claimed = by("4090-nvlink");
    assert_eq!(claimed["nvlink"], false, "{claimed:#}");
    assert!(claimed["parallelism"].is_string(), "{claimed:#}");
    let notes = claimed["notes"].to_string();
    assert!(notes.contains("the RTX 4090 has no NVLink"), "{notes}");
    assert!(notes.contains("judged as PCIe"), "{notes}");
    // The 48 GB board modified after sale: its own record, at its 48 GB, and said to be
    // no NVIDIA product.
    let modded = by("4090-48g");
    assert_eq!(modded["gpu"], "RTX 4090 48GB");
    assert_eq!(modded["memory_gib"], 48.0);
    let notes = modded["notes"].to_string();
    assert!(
        notes.contains("read as the RTX 4090 48GB, a modified board")
            && notes.contains("not an NVIDIA product"),
        "{modded:#}"
    );
    // No TFLOPS figure: named, placed last, no cost.
    assert_eq!(modded["unranked_on_time"], true, "{modded:#}");
    assert!(modded.get("cost").is_none(), "{modded:#}");
    assert!(
        modded["notes"].to_string().contains("unranked on time"),
        "{modded:#}"
    );
    // The RTX 4090 D is timed by a third party's BF16 figure (147.09 dense): 6 x 6.74B x 1B
    // FLOPs over 8 GPUs at 40% is 23.9 h, and the plan says the figure is unverified.
    let d = by("4090d-整机");
    assert!(d.get("unranked_on_time").is_none(), "{d:#}");
    assert!((23.5..24.5).contains(&f(d, "hours")), "{d:#}");
    let notes = d["notes"].to_string();
    assert!(
        notes.contains("unverified") && notes.contains("bf16_tflops 147.09"),
        "{d:#}"
    );
    // The L20's figure is a third party's too.
    assert!(by("l20-整机")["notes"].to_string().contains("bf16_tflops 119.5"));
    // The L20's dense BF16 (119.5 TFLOPS) times it: 6 x 6.74B x 1B FLOPs over 8 GPUs at 40%.
    let l20 = by("l20-整机");
    assert!(l20.get("unranked_on_time").is_none(), "{l20:#}");
    assert!((29.0..30.0).contains(&f(l20, "hours")), "{l20:#}");
    assert!(h800.get("unranked_on_time").is_none(), "{h800:#}");
    // The order is for the pick, the H800 node, with what its listing says.
    let order = doc["order"].as_str().unwrap();
    for want in [
        "# For the offer `h800-整机`.",
        "gpu = \"H800\"\ngpus = 8\n",
        "cpus = 192\n",
        "memory = \"2048GiB\"\n",
        "disk = \"8000GB\"\n",
        "nvlink = \"all\"\n",
    ] {
        assert!(order.contains(want), "{want}: {order}");
    }
    // On a terminal: the costs carry their currency, and the unranked offer says so.
    let human = gpuenv(&args);
    assert!(
        human
            .stdout
            .contains("1. h800-整机: 8x H800, CNY 120.00/machine-hour (CNY 15.00/GPU-hour), run "),
        "{}",
        human.stdout
    );
    assert!(human.stdout.contains("unranked on time"), "{}", human.stdout);
}

/// Offers in two currencies: each ranked within its own, and the plan says that costs are
/// not compared across them.
#[test]
fn costs_in_two_currencies_are_not_compared() {
    let dir = tempfile::tempdir().unwrap();
    let offers = dir.path().join("offers.toml");
    std::fs::write(
        &offers,
        "[[offer]]\nname = \"cn-dear\"\ngpu = \"8x H100 SXM\"\nprice_per_hour = \"¥200/台/时\"\n\n\
         [[offer]]\nname = \"us\"\ngpu = \"8x H100 SXM\"\nprice_per_hour = \"$2.49/GPU/hr\"\n\n\
         [[offer]]\nname = \"cn-cheap\"\ngpu = \"8x H100 SXM\"\nprice_per_hour = 150\ncurrency = \"RMB\"\n\
         price_unit = \"machine-hour\"\n",
    )
    .unwrap();
    let (_, doc) = plan(&[
        "--params",
        "7B",
        "--tokens",
        "1B",
        "--offers",
        offers.to_str().unwrap(),
    ]);
    let names: Vec<&str> = doc["offers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["offer"]["name"].as_str().unwrap())
        .collect();
    // The US offer's CNY-free number (19.92 an hour) is below both, and still not first: the
    // file names CNY first, and costs are ranked within a currency.
    assert_eq!(names, ["cn-cheap", "cn-dear", "us"], "{doc:#}");
    assert_eq!(doc["offers"][2]["currency"], "USD");
    assert_eq!(doc["offers"][2]["price_per_machine_hour"], 19.92);
    let note = doc["offers_note"].as_str().unwrap();
    assert!(
        note.contains("CNY, USD") && note.contains("never across"),
        "{note}"
    );
}

/// plan -> --order-out -> check --order on the recorded 8x RTX 4090 host (PCIe only, every
/// pair across the CPU interconnect): the order asks no NVLink a 4090 cannot have, and the
/// host passes on its interconnect; an offer's listed CPUs that the host lacks fail it.
#[test]
fn the_order_for_rtx_4090s_asks_no_nvlink() {
    let dir = tempfile::tempdir().unwrap();
    let order = dir.path().join("order.toml");
    let run = gpuenv(&[
        "plan",
        "--model",
        "Llama-2-7B",
        "--method",
        "full",
        "--checkpointing",
        "--gpu",
        "8x RTX 4090",
        "--gpus",
        "8",
        "--shard",
        "zero3",
        "--order-out",
        order.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = std::fs::read_to_string(&order).unwrap();
    assert!(!text.contains("nvlink"), "{text}");
    assert!(text.contains("topology = \"pcie\""), "{text}");
    // The floor is no newer stack's: the driver the recorded host has (535) meets it.
    assert!(!text.contains("595.45.04\"\n"), "{text}");
    assert!(text.contains("# The driver floor comes from torch "), "{text}");
    let check = |order: &std::path::Path| check_on("hosts/8x-4090-sys/host.json", order);
    let (code, doc) = check(&order);
    assert_eq!(doc["accepted"], true, "{doc:#}");
    assert_eq!(code, 0);
    let items = doc["acceptance"].to_string();
    assert!(items.contains("topology"), "{items}");
    // Through an offer: its listed 64 CPUs go into the order, and the host's 32 fail it,
    // while its links still pass.
    let offers = dir.path().join("offers.csv");
    std::fs::write(
        &offers,
        "name,gpu,driver,price_per_hour,interconnect,ram,disk,cpus\n4090,8卡 RTX 4090,535,¥1.98/卡时,NVLink,512GB,2TB,64核\n",
    )
    .unwrap();
    let run = gpuenv(&[
        "plan",
        "--model",
        "Llama-2-7B",
        "--method",
        "full",
        "--checkpointing",
        "--offers",
        offers.to_str().unwrap(),
        "--order-out",
        order.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = std::fs::read_to_string(&order).unwrap();
    assert!(text.contains("cpus = 64\n") && !text.contains("nvlink"), "{text}");
    let (code, doc) = check(&order);
    assert_eq!(code, 1, "{doc:#}");
    let failed: Vec<&str> = doc["acceptance"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["pass"] == false)
        .map(|a| a["item"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["cpus"], "{doc:#}");
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
    let (code, doc) = check_on("hosts/8x-h100-nvlink/host.json", &order);
    assert_eq!(doc["accepted"], true, "{doc:#}");
    assert_eq!(code, 0);
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

/// `check --order ORDER --json` on a recorded host: its exit code and document. The
/// recordings hold no kernel log, processes or clock-event reasons, so their health items
/// are unknown; allowed here, where the order's items are what is judged.
fn check_on(host: &str, order: &std::path::Path) -> (i32, Value) {
    let host = fixture(host);
    let run = gpuenv(&[
        "check",
        "--host-facts",
        host.to_str().unwrap(),
        "--order",
        order.to_str().unwrap(),
        "--allow-health",
        "unknown",
        "--json",
    ]);
    (run.code, json(&run))
}

/// Bad input exits 2 and names the field; nothing is written.
#[test]
fn bad_input_names_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("config.json");
    std::fs::write(&broken, r#"{"model_type": "llama", "hidden_size": 4096}"#).unwrap();
    let offers = dir.path().join("offers.csv");
    std::fs::write(&offers, "gpu,count\n,8\n").unwrap();
    // Crafted shapes that once wrapped in release builds ("0 parameters", "fits 3x H100").
    let huge = dir.path().join("huge.json");
    std::fs::write(
        &huge,
        r#"{"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096, "num_hidden_layers": 4294967295,
            "num_attention_heads": 32, "intermediate_size": 11008}"#,
    )
    .unwrap();
    let wide = dir.path().join("wide.json");
    std::fs::write(
        &wide,
        r#"{"model_type": "llama", "vocab_size": 4294967295, "hidden_size": 4294967295, "num_hidden_layers": 1,
            "num_attention_heads": 1, "intermediate_size": 1}"#,
    )
    .unwrap();
    let out = dir.path().join("order.toml");
    for (args, says) in [
        (vec!["--model", huge.to_str().unwrap()], "num_hidden_layers"),
        (vec!["--model", wide.to_str().unwrap()], "hidden_size"),
        (vec!["--params", "7B", "--seq-len", "4294967295"], "--seq-len"),
        (vec!["--params", "7B", "--batch", "0"], "--batch"),
        (vec!["--params", "7B", "--tp", "0"], "--tp"),
        (vec!["--params", "7B", "--engine", "vllm"], "--engine"),
        (
            vec!["--params", "7B", "--method", "inference", "--trainer", "unsloth"],
            "--trainer",
        ),
        (
            vec![
                "--params",
                "7B",
                "--method",
                "inference",
                "--engine",
                "vllm",
                "--gpu-memory-utilization",
                "1.5",
            ],
            "--gpu-memory-utilization",
        ),
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
