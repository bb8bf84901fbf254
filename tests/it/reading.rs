//! Inputs as people write them (GPU names from listings and nvidia-smi, counts, driver
//! branches, bare versions), read the same way by every command; and answers that never
//! pass without the facts.

use serde_json::Value;

use crate::support::{fixture, gpuenv, gpuenv_env, json, query, root};

/// The GPUs and driver of a query as its header says them.
fn header(args: &[&str]) -> String {
    let (_, doc) = query(args);
    doc["query"].as_str().unwrap().to_string()
}

fn host(name: &str) -> String {
    fixture(&format!("hosts/{name}/host.json"))
        .to_string_lossy()
        .into_owned()
}

#[test]
fn gpu_names_as_listings_and_nvidia_smi_write_them() {
    for (written, record) in [
        ("A100 80G SXM4", "A100 80GB SXM"),
        ("A100-80G", "A100 80GB SXM"),
        ("SXM4 A100 80GB", "A100 80GB SXM"),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
        ("A100 80G PCIe", "A100 80GB PCIe"),
        ("A100 40G", "A100 40GB SXM"),
        ("H800 80G", "H800"),
        ("L20 48G", "L20"),
        ("H20 96G", "H20"),
        ("4090 24G", "RTX 4090"),
        ("GeForce RTX 4090", "RTX 4090"),
        ("NVIDIA GeForce RTX 4090 D", "RTX 4090 D"),
        ("RTX5090", "RTX 5090"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("PCIe H100", "H100 PCIe"),
        ("H100 NVL", "H100 NVL"),
        ("Tesla V100-SXM2-32GB", "V100 SXM2 32GB"),
        ("Tesla T4", "T4"),
    ] {
        let h = header(&["--gpu", written]);
        assert_eq!(h, record, "{written}");
    }
}

#[test]
fn a_token_that_contradicts_the_record_is_no_match() {
    for written in [
        "A100 96G",
        "A100 SXM5",
        "RTX 4090 32G",
        "H100 PCIe HBM3",
        "A800 40GB PCIe",
        "H20 192G",
    ] {
        let run = gpuenv(&["query", "--gpu", written]);
        assert_eq!(run.code, 2, "{written}: {}", run.stdout);
        assert!(
            run.stderr.contains("no gpu record named") && run.stderr.contains("did you mean"),
            "{written}: {}",
            run.stderr
        );
        assert!(run.stdout.is_empty());
    }
    // A word that contradicts a neighbour reaches only the GPU it names, never the
    // SXM H800 or the 80 GB A800s.
    assert_eq!(header(&["--gpu", "H800 PCIe"]), "H800 PCIe");
    assert_eq!(header(&["--gpu", "A800 40GB Active"]), "A800 40GB Active");
    // The 40 GB name never reaches the 80 GB part.
    let (_, doc) = query(&["--gpu", "A100 40G"]);
    assert!(
        !doc["query"].as_str().unwrap().contains("80GB"),
        "{}",
        doc["query"]
    );
}

#[test]
fn counts_in_every_common_form_and_what_gpuenv_prints_reads_back() {
    for written in [
        "8x H800",
        "8 x H800",
        "H800x8",
        "H800 x 8",
        "8*H800",
        "H800*8",
        "8×H800",
        "8卡 H800",
        "H800 8卡",
        "8X H800",
    ] {
        assert_eq!(header(&["--gpu", written]), "8x H800", "{written}");
    }
    for (written, h) in [
        ("8*A800", "8x A800 80GB SXM"),
        ("A800*8", "8x A800 80GB SXM"),
        ("8×A800", "8x A800 80GB SXM"),
        ("8卡 A800", "8x A800 80GB SXM"),
        ("2x4090", "2x RTX 4090"),
        ("4x A100 80G PCIe", "4x A100 80GB PCIe"),
    ] {
        assert_eq!(header(&["--gpu", written]), h, "{written}");
        // What the header says is accepted back as input, and means the same.
        assert_eq!(header(&["--gpu", h]), h, "{h}");
    }
    // Mixed machines, repeated or comma-separated.
    assert_eq!(
        header(&["--gpu", "8x H100 SXM, 2x RTX 4090"]),
        "8x H100 SXM, 2x RTX 4090"
    );
    // doctor's own lines read back too.
    assert_eq!(header(&["--gpu", "8x H100 SXM (sm_90)"]), "8x H100 SXM");
    assert_eq!(header(&["--gpu", "8x NVIDIA H100 80GB HBM3"]), "8x H100 SXM");
}

#[test]
fn a_count_or_name_that_does_not_read_is_bad_input() {
    for (written, says) in [
        ("H100x0", "at least 1"),
        ("0x H100", "at least 1"),
        ("H100x99999999", "1024"),
        ("8x H1000", "`H1000`; did you mean"),
        ("8x", "no gpu record named `8x`"),
    ] {
        let run = gpuenv(&["query", "--gpu", written]);
        assert_eq!(run.code, 2, "{written}");
        assert!(run.stderr.contains(says), "{written}: {}", run.stderr);
    }
}

#[test]
fn gpuenv_gpus_reads_as_gpu_does_and_never_makes_an_unknown_gpu() {
    for written in ["8x H800", "H800x8", "8*H800", "8卡 H800"] {
        let run = gpuenv_env(
            &root(),
            &["doctor", "--host-facts", &host("no-gpu"), "--json"],
            &[("GPUENV_GPUS", written)],
        );
        let doc = json(&run);
        let gpus = doc["host"]["gpus"]
            .as_array()
            .unwrap_or_else(|| panic!("{doc:#}"));
        assert_eq!(gpus.len(), 8, "{written}");
        assert!(gpus.iter().all(|g| g["name"] == "H800"), "{written}: {gpus:?}");
    }
    for written in ["8x H1000", "H100x0", "RTX 9999"] {
        let run = gpuenv_env(
            &root(),
            &["doctor", "--host-facts", &host("no-gpu")],
            &[("GPUENV_GPUS", written)],
        );
        assert_eq!(run.code, 2, "{written}: {}", run.stdout);
        assert!(run.stderr.contains("GPUENV_GPUS="), "{}", run.stderr);
        assert!(run.stdout.is_empty());
    }
}

#[test]
fn a_name_covering_several_records_says_which_one_the_query_used() {
    let (_, doc) = query(&["--gpu", "A100", "--driver", "550.54.14"]);
    assert_eq!(doc["query"], "A100 80GB SXM, driver 550.54.14");
    let r = &doc["readings"][0];
    assert_eq!(r["input"], "--gpu");
    assert_eq!(r["given"], "A100");
    assert_eq!(r["read_as"], "A100 80GB SXM");
    let note = r["note"].as_str().unwrap();
    for part in ["names 4 GPUs", "A100 40GB PCIe", "A100 80GB SXM", "`A100`"] {
        assert!(note.contains(part), "{note}");
    }
    let run = gpuenv(&["query", "--gpu", "H100"]);
    assert!(
        run.stdout.contains("read:  --gpu H100: `H100` names 2 GPUs"),
        "{}",
        run.stdout
    );
    // show says the same of the record it shows.
    let run = gpuenv(&["show", "gpu", "A100"]);
    assert!(
        run.stdout
            .starts_with("A100 80GB SXM  [gpu a100-80gb-sxm]\n  read: `A100` names 4 GPUs"),
        "{}",
        run.stdout
    );
    // One record, nothing to explain.
    let run = gpuenv(&["show", "gpu", "A100 80G SXM4"]);
    assert!(!run.stdout.contains("read:"), "{}", run.stdout);
    let (_, doc) = query(&["--gpu", "A100 80G SXM4"]);
    assert_eq!(doc["readings"], serde_json::json!([]));
}

#[test]
fn driver_branches_read_the_same_in_query_and_show() {
    for written in ["535", "R535", "r535", "535.x"] {
        let (_, doc) = query(&["--driver", written, "--gpu", "H100 SXM", "--torch", "2.4.1"]);
        let first = doc["stacks"][0]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["facts"]["driver"].is_string())
            .map(|f| f["facts"]["driver"].clone());
        assert_eq!(first, Some(serde_json::json!("535.43.02")), "{written}");
        let note = doc["readings"][0]["note"].as_str().unwrap();
        assert!(note.contains("earliest R535 release"), "{written}: {note}");
        let run = gpuenv(&["show", "driver", written, "--json"]);
        assert_eq!(run.code, 0, "{written}: {}", run.stderr);
        assert_eq!(json(&run)["branch"], 535, "{written}");
    }
    // A full version is itself, printed as written.
    let (_, doc) = query(&["--driver", "535.104.05", "--gpu", "H100 SXM"]);
    assert_eq!(doc["query"], "H100 SXM, driver 535.104.05");
    assert_eq!(doc["readings"], serde_json::json!([]));
}

/// A branch is read as its first release, and that release is NVIDIA's first tag, not the
/// first toolkit driver: 550.40.07 predates 550.54.14, CUDA 12.4's minimum, so a host typed
/// as `550` is not promised native CUDA 12.4 (the 2026-12b audit's rows 58-59).
#[test]
fn a_branch_reads_as_its_first_tagged_release_below_the_toolkit_driver() {
    let args = [
        "--torch",
        "2.5.1+cu124",
        "--python",
        "3.11",
        "--gpu",
        "H100",
        "--driver",
        "550",
    ];
    let (_, doc) = query(&args);
    let reading = reading_of(&doc, "--driver");
    assert_eq!(reading["read_as"], "550.40.07", "{reading}");
    assert!(
        reading["note"]
            .as_str()
            .unwrap()
            .contains("earliest R550 release"),
        "{reading}"
    );
    let s = &doc["stacks"][0];
    assert_eq!(s["status"], "conditional", "{s:#}");
    let codes: Vec<&str> = s["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"driver-minor-version-compat"), "{codes:?}");
    assert!(!codes.contains(&"driver-native"), "{codes:?}");
    let human = gpuenv(&[&["query"][..], &args[..]].concat());
    assert!(
        human
            .stdout
            .contains("--driver 550: `550` is a branch: read as 550.40.07"),
        "{}",
        human.stdout
    );
    assert!(human.stdout.contains("minor-version"), "{}", human.stdout);

    // R575 likewise: 575.51.02 is below CUDA 12.9's 575.51.03.
    let (_, doc) = query(&["--driver", "575", "--gpu", "H100 SXM"]);
    let reading = reading_of(&doc, "--driver");
    assert_eq!(reading["read_as"], "575.51.02", "{reading}");
}

#[test]
fn bare_versions_mean_a_series() {
    let torches = |args: &[&str]| -> Vec<String> {
        let (_, doc) = query(args);
        let mut v: Vec<String> = doc["stacks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["torch"].as_str().unwrap().to_string())
            .collect();
        v.sort();
        v.dedup();
        v
    };
    for written in ["2.4", "2.4.x", "2.4.*", "==2.4.*"] {
        assert_eq!(torches(&["--torch", written]), ["2.4.0", "2.4.1"], "{written}");
    }
    let all2 = torches(&["--torch", "2"]);
    assert!(
        all2.contains(&"2.0.0".to_string()) && all2.contains(&"2.15.0".to_string()),
        "{all2:?}"
    );
    assert!(!all2.iter().any(|t| t.starts_with("1.")), "{all2:?}");
    assert_eq!(torches(&["--torch", "2.x"]), all2);
    // An operator keeps PEP 440's meaning.
    assert_eq!(torches(&["--torch", "==2.4"]), ["2.4.0"]);
    assert_eq!(torches(&["--torch", "2.4.1"]), ["2.4.1"]);
    let range = torches(&["--torch", ">=2.4,<2.6"]);
    assert_eq!(range, ["2.4.0", "2.4.1", "2.5.0", "2.5.1"]);
    // Python 3 is any 3.x; 3.11.4 is 3.11.
    let (code, doc) = query(&["--python", "3", "--torch", "2.4.1"]);
    assert_eq!(code, 0);
    assert_eq!(doc["verdict"], "compatible");
    let (_, doc) = query(&["--python", "3.11.4", "--torch", "2.4.1"]);
    assert!(
        doc["stacks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["python"] == "3.11")
    );
    // The header shows how each was read.
    let run = gpuenv(&["query", "--torch", "2.4", "--python", "3"]);
    assert!(
        run.stdout.starts_with("query: torch ==2.4.*, Python ==3.*"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("read:  --torch 2.4: `2.4` read as any 2.4.x release"),
        "{}",
        run.stdout
    );
    let (_, doc) = query(&["--torch", "2.4"]);
    assert_eq!(doc["readings"][0]["read_as"], "==2.4.*");
}

#[test]
fn a_question_no_build_answers_is_an_answer_not_bad_input() {
    let (code, doc) = query(&["--torch", "2.6.0", "--cuda", "12.1"]);
    assert_eq!(code, 1);
    assert_eq!(doc["verdict"], "incompatible");
    let codes: Vec<&str> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["no-matching-build", "cuda-no-build"]);
    let changes: Vec<&str> = doc["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["change"].as_str().unwrap())
        .collect();
    for c in [
        "--cuda 11.8 (the cu118 build)",
        "--cuda 12.4 (the cu124 build)",
        "--cuda 12.6 (the cu126 build)",
    ] {
        assert!(changes.contains(&c), "{changes:?}");
    }
    // Text: exit 1, the reason and the hints.
    let run = gpuenv(&["query", "--torch", "2.6.0", "--cuda", "12.1"]);
    assert_eq!(run.code, 1);
    assert!(run.stdout.contains("FAIL cuda-no-build"), "{}", run.stdout);
    assert!(run.stdout.contains("hint: --cuda 12.4"), "{}", run.stdout);
}

#[test]
fn cuda_of_the_driver_is_named_as_such() {
    // 12.2 is what nvidia-smi prints on a 535 driver; no torch build uses it.
    for args in [
        &["--cuda", "12.2", "--torch", "2.4"][..],
        &["--cuda", "12.2"][..],
        &["--cuda", "12.5", "--torch", "2.4.1", "--gpu", "H100"][..],
    ] {
        let (code, doc) = query(args);
        assert_eq!(code, 1, "{args:?}");
        let f = doc["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["code"] == "cuda-no-build")
            .unwrap_or_else(|| panic!("{args:?}: {doc:#}"));
        let msg = f["message"].as_str().unwrap();
        assert!(msg.contains("nvidia-smi shows for the driver"), "{msg}");
        assert!(!doc["suggestions"].as_array().unwrap().is_empty(), "{args:?}");
    }
    let (_, doc) = query(&["--cuda", "12.2", "--torch", "2.4"]);
    let msg = doc["findings"][1]["message"].as_str().unwrap();
    assert!(msg.contains("its builds are for CUDA 11.8, 12.1, 12.4"), "{msg}");
}

#[test]
fn a_host_without_a_driver_or_gpu_never_passes_a_cuda_build() {
    for name in ["no-gpu", "smi-missing", "nvml-mismatch"] {
        let run = gpuenv(&["check", "--host-facts", &host(name), "--torch", "2.4.1", "--json"]);
        assert_eq!(run.code, 1, "{name}: {}", run.stderr);
        let doc = json(&run);
        assert_eq!(doc["verdict"], "incompatible", "{name}");
        assert_eq!(doc["stacks"], serde_json::json!([]), "{name}: no CUDA stack runs");
        // The CPU build may pass.
        let run = gpuenv(&[
            "check",
            "--host-facts",
            &host(name),
            "--torch",
            "2.4.1",
            "--cuda",
            "cpu",
            "--json",
        ]);
        assert_eq!(run.code, 0, "{name}: {}", run.stdout);
        assert_eq!(json(&run)["verdict"], "compatible");
    }
    let run = gpuenv(&["check", "--host-facts", &host("no-gpu"), "--torch", "2.4.1"]);
    assert!(run.stdout.contains("FAIL no-cuda-device"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("no GPU is usable here: this machine has no NVIDIA driver or GPU"),
        "{}",
        run.stdout
    );
    let run = gpuenv(&[
        "check",
        "--host-facts",
        &host("nvml-mismatch"),
        "--torch",
        "2.4.1",
    ]);
    assert!(
        run.stdout
            .contains("a driver library/module mismatch (user space 550.127, kernel module 550.90.07)"),
        "{}",
        run.stdout
    );
}

#[test]
fn a_hint_names_the_smallest_change_within_the_project() {
    // RTX 5090 on R550: R570 is enough, not the newest branch.
    let (code, doc) = query(&["--gpu", "RTX 5090", "--driver", "550.54.14"]);
    assert_eq!(code, 1);
    let driver = doc["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == "driver")
        .unwrap_or_else(|| panic!("{doc:#}"));
    assert!(
        driver["change"].as_str().unwrap().contains("(R570 or newer)"),
        "{driver}"
    );
    // The project says torch>=2.4,<2.6: no hint may name torch 2.7, although it would run.
    let dir = tempfile::tempdir().unwrap();
    let py = dir.path().join("pyproject.toml");
    std::fs::write(
        &py,
        "[project]\nname = \"x\"\nversion = \"0\"\nrequires-python = \">=3.10\"\ndependencies = [\"torch>=2.4,<2.6\"]\n",
    )
    .unwrap();
    let (code, doc) = query(&[
        "--pyproject",
        py.to_str().unwrap(),
        "--gpu",
        "RTX 5090",
        "--driver",
        "570.86.10",
    ]);
    assert_eq!(code, 1);
    for s in doc["suggestions"].as_array().unwrap() {
        let text = format!("{} {}", s["change"], s["gives"]);
        for (i, _) in text.match_indices("torch ") {
            let v: Vec<u32> = text[i + 6..]
                .split(|c: char| !(c.is_ascii_digit() || c == '.'))
                .next()
                .unwrap_or("")
                .split('.')
                .filter_map(|p| p.parse().ok())
                .collect();
            assert!(v < vec![2, 6], "a hint outside torch>=2.4,<2.6: {text}");
        }
    }
    // A --torch flag may be changed by a hint.
    let (_, doc) = query(&["--torch", "2.4.1", "--gpu", "RTX 5090", "--driver", "570.86.10"]);
    assert!(
        doc["suggestions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["kind"] == "torch"),
        "{doc:#}"
    );
}

#[test]
fn a_driver_branch_past_its_end_of_life_gets_a_finding() {
    let (_, doc) = query(&["--gpu", "H100 SXM", "--driver", "535.104.05", "--torch", "2.4.1"]);
    let s = &doc["stacks"][0];
    let f = s["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "driver-end-of-life")
        .unwrap_or_else(|| panic!("{s:#}"));
    assert_eq!(f["severity"], "warning");
    assert_eq!(s["status"], "compatible", "a warning does not change the verdict");
    let (_, doc) = query(&["--gpu", "H100 SXM", "--driver", "580.65.06", "--torch", "2.4.1"]);
    assert!(
        !doc["stacks"][0]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["code"] == "driver-end-of-life")
    );
}

/// R525 and R470 have no exact end of life from NVIDIA, but NVIDIA's forward-compatibility
/// table, which says the branches it does not list are end of life, did not list them on the
/// day it was read: a host on them is warned, with the day and the table cited.
#[test]
fn a_branch_the_supported_list_leaves_out_is_past_its_end_of_life() {
    for (driver, torch, branch) in [
        ("525.147.05", "2.1.2+cu121", "R525"),
        ("470.239.06", "2.0.1+cu118", "R470"),
    ] {
        let (_, doc) = query(&["--driver", driver, "--gpu", "A10", "--torch", torch]);
        let s = &doc["stacks"][0];
        let f = s["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["code"] == "driver-end-of-life")
            .unwrap_or_else(|| panic!("{driver}: {s:#}"));
        assert_eq!(f["severity"], "warning", "{f}");
        assert_eq!(f["facts"]["end_of_life_by"], "2026-12-01", "{f}");
        let m = f["message"].as_str().unwrap();
        assert!(
            m.contains(&format!("driver branch {branch} is past its end of life"))
                && m.contains("2026-12-01"),
            "{m}"
        );
        assert_eq!(
            f["source"], "https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html",
            "{f}"
        );
        let human = gpuenv(&["query", "--driver", driver, "--gpu", "A10", "--torch", torch]);
        assert!(
            human
                .stdout
                .contains(&format!("warn driver-end-of-life: driver branch {branch}")),
            "{}",
            human.stdout
        );
        let show = gpuenv(&["show", "driver", driver]);
        assert!(
            show.stdout.contains("end_of_life_by  2026-12-01"),
            "{}",
            show.stdout
        );
    }
    // A branch the table lists (R590, a forward-compatibility host) is not warned.
    let (_, doc) = query(&["--driver", "590.48.01", "--gpu", "H100 SXM", "--torch", "2.15.0"]);
    assert!(
        !doc["stacks"][0]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["code"] == "driver-end-of-life"),
        "{doc:#}"
    );
}

#[test]
fn the_best_stack_is_what_an_experienced_engineer_would_pick() {
    for (args, newest) in [
        (&["--gpu", "H100 SXM", "--driver", "580.65.06"][..], "3.15"),
        (&["--gpu", "H100 SXM", "--driver", "550.54.14"][..], "3.13"),
        (&["--torch", "2.4.1"][..], "3.12"),
    ] {
        let (_, doc) = query(args);
        let best = &doc["stacks"][0];
        let py = best["python"].as_str().unwrap();
        assert_ne!(
            py, newest,
            "{args:?}: the newest line a build supports is not the default"
        );
        assert!(!py.ends_with('t'), "never free-threaded");
    }
    // Asked for, the newest is what it gets.
    let (_, doc) = query(&["--torch", "2.4.1", "--python", "3.12"]);
    assert_eq!(doc["stacks"][0]["python"], "3.12");
    // The text shows the build's range of Pythons.
    let run = gpuenv(&["query", "--torch", "2.4.1", "--cuda", "12.1"]);
    assert!(
        run.stdout.contains(
            "best: torch 2.4.1+cu121 on Python 3.11 (compatible, native; wheels for Python 3.8-3.12)"
        ),
        "{}",
        run.stdout
    );
}

#[test]
fn native_on_an_older_line_and_newer_through_a_rule_are_both_shown() {
    let (_, doc) = query(&["--gpu", "H100 SXM", "--driver", "550.54.14"]);
    assert_eq!(doc["stacks"][0]["status"], "compatible");
    let newer = &doc["newer_conditional"];
    assert_eq!(newer["status"], "conditional", "{doc:#}");
    let best_torch = doc["stacks"][0]["torch"].as_str().unwrap();
    let v = |s: &str| {
        s.split('.')
            .map(|p| p.parse::<u32>().unwrap())
            .collect::<Vec<_>>()
    };
    assert!(v(newer["torch"].as_str().unwrap()) > v(best_torch));
    let run = gpuenv(&["query", "--gpu", "H100 SXM", "--driver", "550.54.14"]);
    assert!(run.stdout.contains("(compatible, native;"), "{}", run.stdout);
    assert!(run.stdout.contains("\nnewer: torch "), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("the best above runs natively on an older CUDA line"),
        "{}",
        run.stdout
    );
    // Nothing to show when the newest build runs natively.
    let (_, doc) = query(&["--gpu", "H100 SXM", "--driver", "595.45.04"]);
    assert!(doc["newer_conditional"].is_null(), "{}", doc["newer_conditional"]);
}

/// `check --json` on a recorded host with acceptance flags: (exit code, acceptance items).
fn accept(host_name: &str, args: &[&str]) -> (i32, Vec<Value>) {
    let h = host(host_name);
    let mut a = vec!["check", "--host-facts", h.as_str(), "--json"];
    a.extend_from_slice(args);
    let run = gpuenv(&a);
    assert!(
        run.code == 0 || run.code == 1,
        "{args:?}: exit {}: {}",
        run.code,
        run.stderr
    );
    (run.code, json(&run)["acceptance"].as_array().unwrap().clone())
}

#[test]
fn acceptance_takes_any_record_a_name_covers() {
    // single-a100 delivers one A100 80GB SXM4; 7x-a100-40gb-driver-525 seven A100 40GB.
    for (host_name, ordered, pass) in [
        ("single-a100", "A100", true),
        ("single-a100", "A100 80G", true),
        ("single-a100", "A100 SXM4", true),
        ("single-a100", "NVIDIA A100-SXM4-80GB", true),
        ("single-a100", "1x A100", true),
        ("single-a100", "A100 40G", false),
        ("single-a100", "A100 PCIe", false),
        ("single-a100", "8x A100", false),
        ("single-a100", "H100", false),
        ("7x-a100-40gb-driver-525", "A100", true),
        ("7x-a100-40gb-driver-525", "7x A100 40G", true),
        ("7x-a100-40gb-driver-525", "A100 80G", false),
        ("7x-a100-40gb-driver-525", "8x A100", false),
    ] {
        let (_, items) = accept(host_name, &["--expect-gpu", ordered]);
        let gpu = items.iter().find(|i| i["item"] == "gpu").unwrap();
        assert_eq!(gpu["pass"], pass, "{host_name} ordered {ordered}: {gpu:#}");
        assert_eq!(gpu["expected"], ordered);
    }
    let (_, items) = accept("single-a100", &["--expect-gpu", "A100"]);
    let rule = items[0]["rule"].as_str().unwrap();
    assert!(
        rule.contains("any of A100 40GB PCIe, A100 40GB SXM, A100 80GB PCIe, A100 80GB SXM"),
        "{rule}"
    );
    // An unknown name is bad input, as everywhere.
    let run = gpuenv(&[
        "check",
        "--host-facts",
        &host("single-a100"),
        "--expect-gpu",
        "A1000",
    ]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("did you mean"), "{}", run.stderr);
}

#[test]
fn acceptance_reads_driver_branches_and_prints_versions_as_written() {
    // single-a100 runs driver 535.104.05.
    for (ordered, pass) in [
        ("535", true),
        ("R535", true),
        ("r535", true),
        ("535.x", true),
        (">=535", true),
        (">=535.104.05", true),
        (">=535.104.06", false),
        ("550", false),
        ("<535", false),
        (">=525,<550", true),
    ] {
        let (_, items) = accept("single-a100", &["--expect-driver", ordered]);
        let d = items.iter().find(|i| i["item"] == "driver").unwrap();
        assert_eq!(d["pass"], pass, "{ordered}: {d:#}");
        assert_eq!(d["expected"], ordered, "printed as written");
        assert_eq!(d["found"], "535.104.05");
    }
    let run = gpuenv(&[
        "check",
        "--host-facts",
        &host("single-a100"),
        "--expect-driver",
        ">=535.104.05",
    ]);
    assert!(
        run.stdout
            .contains("driver: expected >=535.104.05, found 535.104.05"),
        "{}",
        run.stdout
    );
    // The order file reads the same, a branch also as a bare number.
    let dir = tempfile::tempdir().unwrap();
    for line in ["driver = 535", "driver = \"R535\"", "driver = \"535.x\""] {
        let order = dir.path().join("order.toml");
        std::fs::write(&order, format!("{line}\n")).unwrap();
        let run = gpuenv(&[
            "check",
            "--host-facts",
            &host("single-a100"),
            "--order",
            order.to_str().unwrap(),
            "--json",
        ]);
        let doc = json(&run);
        assert_eq!(doc["acceptance"][0]["pass"], true, "{line}: {doc:#}");
    }
}

#[test]
fn a_huge_count_is_refused_at_once_in_every_place_it_is_read() {
    use crate::support::{assert_bounded, gpuenv_command, run_bounded};
    let deadline = std::time::Duration::from_secs(5);
    for (args, env) in [
        (vec!["query", "--gpu", "H100x99999999"], vec![]),
        (
            vec!["doctor", "--host-facts", "H"],
            vec![("GPUENV_GPUS", "H100x99999999")],
        ),
        (
            vec!["doctor", "--host-facts", "H"],
            vec![("GPUENV_GPUS", "H100x0")],
        ),
        (
            vec!["verify", "docker-archive:/nonexistent", "--gpu", "99999999x H100"],
            vec![],
        ),
    ] {
        let h = host("no-gpu");
        let args: Vec<&str> = args
            .iter()
            .map(|a| if *a == "H" { h.as_str() } else { a })
            .collect();
        let b = run_bounded(&mut gpuenv_command(&root(), &args, &env), deadline);
        assert_bounded(&b, deadline, &[2], &format!("{args:?} {env:?}"));
        assert!(b.run.stdout.is_empty());
    }
}

/// A memory size written in the name chooses the record of that size, in show, query and
/// plan alike; a size no record of the GPU has is bad input naming the sizes there are.
#[test]
fn a_memory_size_in_the_name_chooses_the_record_of_that_size() {
    for written in ["RTX 4060 Ti 16GB", "RTX 4060 Ti 16G", "4060 Ti 16 GB"] {
        assert_eq!(header(&["--gpu", written]), "RTX 4060 Ti 16GB", "{written}");
        let doc = json(&gpuenv(&["show", "gpu", written, "--json"]));
        assert_eq!(doc["memory_gib"], 16.0, "{written}: {doc:#}");
    }
    let run = gpuenv(&["show", "gpu", "RTX 4060 Ti 16GB"]);
    assert!(run.stdout.contains("memory_gib          16.0"), "{}", run.stdout);
    // The plain name is the 8 GB card, and a read: line says the 16 GB one exists.
    let run = gpuenv(&["query", "--gpu", "RTX 4060 Ti"]);
    assert!(
        run.stdout
            .contains("read:  --gpu RTX 4060 Ti: `RTX 4060 Ti` names 2 GPUs")
            && run.stdout.contains("RTX 4060 Ti 16GB"),
        "{}",
        run.stdout
    );
    // plan fits the 16 GB board at 16 GB: a model that needs more than 8 GB fits it alone.
    let run = gpuenv(&[
        "plan",
        "--params",
        "7B",
        "--method",
        "lora",
        "--gpu",
        "RTX 4060 Ti 16GB",
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = json(&run);
    let fit = &doc["fits"][0];
    assert_eq!(fit["gpu"], "RTX 4060 Ti 16GB", "{doc:#}");
    assert_eq!(doc["fits"].as_array().unwrap().len(), 1, "{doc:#}");
    // H20 141G is the H20-3e.
    assert_eq!(header(&["--gpu", "H20 141G"]), "H20-3e");
    assert_eq!(header(&["--gpu", "8x H20 141G"]), "8x H20-3e");
    for command in [
        &["query", "--gpu"][..],
        &["show", "gpu"][..],
        &["plan", "--params", "7B", "--gpu"][..],
    ] {
        let run = gpuenv(&[command, &["RTX 4090 32GB"]].concat());
        assert_eq!(run.code, 2, "{command:?}: {}", run.stdout);
        for want in [
            "no RTX 4090 in compat-db has 32 GB",
            "24 GB: the RTX 4090",
            "48 GB: the RTX 4090 48GB",
        ] {
            assert!(run.stderr.contains(want), "{command:?} {want}: {}", run.stderr);
        }
        assert!(run.stdout.is_empty());
    }
}

/// The 48 GB RTX 4090 sold in China is a board modified after sale: read only where 48 GB
/// is written, and said to be so wherever it is used.
#[test]
fn the_modified_48gb_4090_is_read_only_by_its_size_and_said() {
    for written in ["RTX 4090 48G", "RTX 4090 48GB", "4090 48G", "8卡 4090 48G"] {
        let (_, doc) = query(&["--gpu", written]);
        assert!(
            doc["query"].as_str().unwrap().ends_with("RTX 4090 48GB"),
            "{written}: {}",
            doc["query"]
        );
        let note = doc["readings"].to_string();
        assert!(
            note.contains("a modified board") && note.contains("not an NVIDIA product"),
            "{written}: {note}"
        );
    }
    // NVIDIA's card keeps its plain names, and nvidia-smi's.
    for written in ["RTX 4090", "NVIDIA GeForce RTX 4090", "4090"] {
        let (_, doc) = query(&["--gpu", written]);
        assert_eq!(doc["query"], "RTX 4090", "{written}");
        assert_eq!(doc["readings"], serde_json::json!([]), "{written}");
    }
    let doc = json(&gpuenv(&["show", "gpu", "4090 48G", "--json"]));
    assert!(
        doc["modified"].as_str().unwrap().contains("No NVIDIA warranty"),
        "{doc:#}"
    );
    // plan plans it when asked, and says it rests on a modified board; without --gpu it is
    // never among the GPUs tried.
    let run = gpuenv(&[
        "plan",
        "--params",
        "7B",
        "--method",
        "lora",
        "--gpu",
        "RTX 4090 48G",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("RTX 4090 48GB: a modified board"),
        "{}",
        run.stdout
    );
    let doc = json(&gpuenv(&["plan", "--params", "7B", "--method", "lora", "--json"]));
    let fits = doc["fits"].as_array().unwrap();
    assert!(fits.len() > 50, "{doc:#}");
    assert!(fits.iter().all(|f| f["gpu"] != "RTX 4090 48GB"), "{doc:#}");
}

/// AMD Instinct and Huawei Ascend, which listings offer beside NVIDIA's: refused by name in
/// every command that takes a GPU, never answered with an NVIDIA name.
#[test]
fn gpus_of_other_vendors_are_refused_by_name() {
    let rocm = "AMD Instinct MI300X: not an NVIDIA GPU; gpuenv judges CUDA stacks only (ROCm builds are not covered)";
    let cann =
        "Huawei Ascend 910B: not an NVIDIA GPU; gpuenv judges CUDA stacks only (CANN builds are not covered)";
    for (written, says) in [
        ("MI300X", rocm),
        ("8x AMD Instinct MI300X", rocm),
        ("910B", cann),
        ("8卡 昇腾910B", cann),
        ("Ascend 910B 64G", cann),
    ] {
        for command in [
            &["query", "--gpu"][..],
            &["plan", "--params", "7B", "--gpu"][..],
            &["show", "gpu"][..],
        ] {
            // `show` takes one name, without a count.
            if command[0] == "show" && written.starts_with('8') {
                continue;
            }
            let run = gpuenv(&[command, &[written]].concat());
            assert_eq!(run.code, 2, "{command:?} {written}: {}", run.stdout);
            assert!(run.stderr.contains(says), "{command:?} {written}: {}", run.stderr);
            assert!(!run.stderr.contains("did you mean"), "{}", run.stderr);
            assert!(run.stdout.is_empty());
        }
    }
    for name in ["MI210", "MI250", "MI250X", "MI325X", "Ascend 910C"] {
        let run = gpuenv(&["query", "--gpu", name]);
        assert_eq!(run.code, 2, "{name}");
        assert!(run.stderr.contains("not an NVIDIA GPU"), "{name}: {}", run.stderr);
    }
    // An order naming one is refused before any check runs.
    let dir = tempfile::tempdir().unwrap();
    let order = dir.path().join("order.toml");
    std::fs::write(&order, "gpu = \"MI300X\"\ngpus = 8\n").unwrap();
    let run = gpuenv(&[
        "check",
        "--host-facts",
        &host("no-gpu"),
        "--order",
        order.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(run.stderr.contains(rocm), "{}", run.stderr);
    // The record itself is shown by its kind.
    let run = gpuenv(&["show", "foreign-gpu", "昇腾910B"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("stack    CANN"), "{}", run.stdout);
}

/// The readings a query reports for `input`, by flag.
fn reading_of(doc: &Value, input: &str) -> Value {
    doc["readings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["input"] == input)
        .cloned()
        .unwrap_or_else(|| panic!("no reading of {input}: {doc:#}"))
}

/// Whether every stack of a query's answer has `key` = `want`, and there is one.
fn every_stack(doc: &Value, key: &str, want: &str) -> bool {
    let stacks = doc["stacks"].as_array().unwrap();
    !stacks.is_empty() && stacks.iter().all(|s| s[key] == want)
}

/// Python, torch and CUDA as chats, wheel tags and vendor pages write them; each read
/// differently from how it was written gets a `read:` line.
#[test]
fn versions_as_listings_and_wheel_tags_write_them() {
    for written in ["py310", "cp310", "python3.10", "Python 3.10", "3.10.*", "3.10"] {
        let (code, doc) = query(&["--python", written, "--torch", "2.4.1"]);
        assert_eq!(code, 0, "{written}: {doc:#}");
        assert!(every_stack(&doc, "python", "3.10"), "{written}: {doc:#}");
    }
    let (_, doc) = query(&["--python", "cp310", "--torch", "2.4.1"]);
    assert_eq!(
        reading_of(&doc, "--python")["note"],
        "`cp310` read as Python 3.10"
    );
    for written in ["torch==2.3.1", "torch 2.3.1", "PyTorch 2.3.1", "v2.3.1"] {
        let (code, doc) = query(&["--torch", written]);
        assert_eq!(code, 0, "{written}: {doc:#}");
        assert!(every_stack(&doc, "torch", "2.3.1"), "{written}");
    }
    let (_, doc) = query(&["--cuda", "CUDA 12.1", "--torch", "2.4.1"]);
    assert_eq!(reading_of(&doc, "--cuda")["read_as"], "==12.1");
    // `latest` is the newest torch compat-db has, said; `nightly` is refused, naming it.
    let (code, doc) = query(&["--torch", "latest"]);
    assert_eq!(code, 0);
    let r = reading_of(&doc, "--torch");
    assert_eq!(r["read_as"], "==2.15.0", "{r}");
    assert!(
        r["note"]
            .as_str()
            .unwrap()
            .contains("newest release in compat-db"),
        "{r}"
    );
    let run = gpuenv(&["query", "--torch", "nightly"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("gpuenv judges torch releases"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("2.15.0"), "{}", run.stderr);
    // What cannot be read names the forms that can.
    let run = gpuenv(&["query", "--python", "snake"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("py310, cp310, python3.10"), "{}", run.stderr);
}

#[test]
fn driver_branches_and_cuda_drivers_as_listings_write_them() {
    for written in [
        "550.xx",
        "550.x",
        "R550",
        "550+",
        "driver 550 series",
        "NVIDIA driver R550",
    ] {
        let (code, doc) = query(&["--driver", written, "--gpu", "H100 SXM"]);
        assert_eq!(code, 0, "{written}: {doc:#}");
        assert_eq!(reading_of(&doc, "--driver")["read_as"], "550.40.07", "{written}");
    }
    // "CUDA 12.4 driver": the first driver whose CUDA is 12.4, CUDA 12.4.0's minimum.
    for args in [
        &["--driver-cuda", "12.4"][..],
        &["--driver-cuda", "CUDA 12.4"][..],
        &["--driver", "CUDA 12.4 driver"][..],
    ] {
        let (code, doc) = query(&[args, &["--gpu", "H100 SXM", "--torch", "2.5.1+cu124"][..]].concat());
        assert_eq!(code, 0, "{args:?}: {doc:#}");
        let r = reading_of(&doc, args[0]);
        assert_eq!(r["read_as"], "550.54.14", "{r}");
        assert!(
            r["note"].as_str().unwrap().contains("first whose CUDA is 12.4"),
            "{r}"
        );
        assert_eq!(doc["stacks"][0]["status"], "compatible", "{args:?}");
    }
    let run = gpuenv(&["query", "--driver-cuda", "9.9"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    // An error quotes at most an excerpt of what was written, not all 5,000 characters.
    let long = "5".repeat(5000);
    let run = gpuenv(&["query", "--driver", &long]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.len() < 1500,
        "{} bytes: {}",
        run.stderr.len(),
        &run.stderr[..300]
    );
    assert!(run.stderr.contains("more characters"), "{}", run.stderr);
}

/// Names as Chinese listings and the Hub write them.
#[test]
fn gpu_and_model_names_with_their_market_and_hub_spellings() {
    assert_eq!(header(&["--gpu", "A6000 Ada"]), "RTX 6000 Ada");
    assert_eq!(header(&["--gpu", "RTX A6000"]), "RTX A6000");
    assert_eq!(header(&["--gpu", "8张A100 80G"]), "8x A100 80GB SXM");
    for (model, record) in [
        ("Qwen2.5-72B-Instruct", "qwen2-5-72b"),
        ("gemma-2-9b-it", "gemma-2-9b"),
        ("meta-llama/Llama-2-7b-chat-hf", "llama-2-7b"),
    ] {
        let run = gpuenv(&["plan", "--model", model, "--method", "inference", "--json"]);
        assert_eq!(run.code, 0, "{model}: {}", run.stderr);
        let source = json(&run)["model"]["source"].as_str().unwrap().to_string();
        assert!(source.contains(&format!("model/{record}")), "{model}: {source}");
    }
    // A quantized checkpoint is not its base model.
    let run = gpuenv(&["plan", "--model", "Qwen2.5-72B-Instruct-AWQ", "--json"]);
    assert_eq!(run.code, 2, "{}", run.stdout);
}

/// A price as listings write it, on the command line, its currency kept.
#[test]
fn prices_on_the_command_line_as_listings_write_them() {
    for (price, said) in [
        ("¥14.4/卡时", "at CNY 14.40/GPU-hour"),
        ("40元/时", "at CNY 40.00/GPU-hour"),
        ("$2.1/GPU-hr", "at USD 2.10/GPU-hour"),
        ("2.49", "at 2.49/GPU-hour"),
    ] {
        let run = gpuenv(&[
            "plan", "--params", "7B", "--gpu", "H100 SXM", "--tokens", "1B", "--price", price,
        ]);
        assert_eq!(run.code, 0, "{price}: {}", run.stderr);
        assert!(run.stdout.contains(said), "{price}: {}", run.stdout);
    }
    let run = gpuenv(&["plan", "--params", "7B", "--price", "CNY 320 per machine-hour"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("--offers"), "{}", run.stderr);
    assert!(!run.stderr.contains("\\n"), "{}", run.stderr);
    let run = gpuenv(&["plan", "--params", "7B", "--price", "$2", "--currency", "CNY"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("contradicts"), "{}", run.stderr);
}
