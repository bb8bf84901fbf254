//! compat-db's second pass (issue 14): each fact the 2026-12 audit found wrong, as it is
//! now, the facts it confirmed, the glibc floor recorded per torch release, and how the
//! database's date shows (`db stats`, `--json`) and speaks up in `query` when it is old.

use gpuenv::db::{Db, Kind};
use serde_json::Value;

use crate::support::{gpuenv, json, query, root};

/// `gpuenv show KIND ID --json`.
fn show(kind: &str, id: &str) -> Value {
    let run = gpuenv(&["show", kind, id, "--json"]);
    assert_eq!(run.code, 0, "{kind} {id}: {}", run.stderr);
    json(&run)
}

fn unverified(v: &Value) -> Vec<String> {
    v["unverified"]
        .as_array()
        .map(|a| a.iter().map(|x| x.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

fn variant<'a>(doc: &'a Value, tag: &str) -> &'a Value {
    doc["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["tag"] == tag)
        .unwrap_or_else(|| panic!("no {tag} variant"))
}

fn sources(v: &Value) -> Vec<String> {
    v["sources"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| s["url"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn every_cuda_13_nvcc_compiles_for_sm_88() {
    let db = Db::embedded().unwrap();
    let thirteen: Vec<_> = db.cuda.iter().filter(|c| c.version.major() == 13).collect();
    assert!(thirteen.len() >= 11, "{}", thirteen.len());
    for c in thirteen {
        let doc = show("cuda", c.version.as_str());
        let sass: Vec<&str> = doc["sass"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        assert!(sass.contains(&"8.8"), "{}: {sass:?}", c.version);
        // The nvcc it was read from is cited: NVIDIA's own wheel on PyPI, by its file or
        // by its release page.
        assert!(
            sources(&doc).iter().any(|u| u.contains("/nvidia_cuda_nvcc-13.")
                || u.starts_with("https://pypi.org/project/nvidia-cuda-nvcc/13.")),
            "{}",
            c.version
        );
    }
}

#[test]
fn the_cuda_13_0_3_that_torch_pins_has_a_record() {
    let doc = show("cuda", "13.0.3");
    assert_eq!(doc["min_driver_linux"], "580.126.20");
    // The runfile's bundled driver is an upper bound of the minimum (no Table 3 row has
    // 13.0 Update 3), so it stays marked, and the note says why.
    assert!(unverified(&doc).contains(&"min_driver_linux".to_string()));
    assert!(
        doc["notes"]
            .as_str()
            .unwrap()
            .contains("bundles in its Linux runfile")
    );
    assert!(
        sources(&doc)
            .iter()
            .any(|u| u.ends_with("cuda_13.0.3_580.126.20_linux.run"))
    );
    for torch in ["2.13.0", "2.14.0", "2.14.1"] {
        assert_eq!(
            variant(&show("torch", torch), "cu130")["cudart"],
            "13.0.3",
            "{torch}"
        );
    }
}

#[test]
fn torch_2_12_0_was_released_on_2026_05_13() {
    let doc = show("torch", "2.12.0");
    assert_eq!(doc["released"], "2026-05-13");
    assert!(!unverified(&doc).contains(&"released".to_string()));
}

#[test]
fn driver_branch_ranges_as_corrected() {
    let r535 = show("driver", "r535");
    assert_eq!(r535["first_version"], "535.43.02");
    assert!(unverified(&r535).is_empty(), "{:?}", unverified(&r535));
    let r580 = show("driver", "r580");
    assert_eq!(r580["latest_version"], "580.142");
    assert!(unverified(&r580).is_empty(), "{:?}", unverified(&r580));
    // 570.26 matches no driver release found: kept as NVIDIA's stated minimum, and marked.
    let r570 = show("driver", "r570");
    assert_eq!(r570["first_version"], "570.26");
    assert_eq!(unverified(&r570), ["first_version"]);
    assert!(
        r570["notes"]
            .as_str()
            .unwrap()
            .contains("no driver 570.26 was found")
    );
    // `--driver 535` is the branch's first release.
    let (_, doc) = query(&["--driver", "535", "--gpu", "H100 SXM", "--torch", "2.4.1"]);
    assert_eq!(doc["readings"][0]["read_as"], "535.43.02");
}

/// torch 1.12.0 to 2.6.0 are tagged manylinux1 (glibc 2.5) but need glibc 2.17; 2.7.0 on
/// need what their manylinux_2_28 tag says. Read from the wheels' symbol versions.
#[test]
fn glibc_floor_of_every_torch_release_is_recorded_from_its_wheel() {
    let db = Db::embedded().unwrap();
    assert_eq!(db.count(Kind::Torch), db.torch.len());
    for t in &db.torch {
        let doc = show("torch", &t.version.to_string());
        let manylinux1 = doc["manylinux"] == "manylinux1_x86_64";
        let want = if manylinux1 { "2.17" } else { "2.28" };
        assert_eq!(doc["glibc"], want, "{}", t.version);
        assert_eq!(doc["glibc_from"], "wheel-symbols", "{}", t.version);
        assert!(
            sources(&doc)
                .iter()
                .any(|u| u.starts_with("https://files.pythonhosted.org/") && u.ends_with(".whl")),
            "{}: the wheel read is cited",
            t.version
        );
        if manylinux1 {
            assert!(t.version < "2.7".parse().unwrap(), "{}", t.version);
        }
    }
}

#[test]
fn a_host_below_glibc_2_17_is_refused_torch_2_5_1_and_2_17_accepted() {
    let stack_of = |doc: &Value| {
        doc["stacks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["torch"] == "2.5.1" && s["variant"] == "cu124" && s["python"] == "3.11")
            .cloned()
            .unwrap()
    };
    let codes = |s: &Value| -> Vec<String> {
        s["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["code"].as_str().unwrap().to_string())
            .collect()
    };
    let (code, doc) = query(&[
        "--torch", "2.5.1", "--cuda", "12.4", "--python", "3.11", "--glibc", "2.16",
    ]);
    assert_eq!(code, 1);
    let s = stack_of(&doc);
    assert_eq!(s["status"], "incompatible");
    let f = s["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "glibc-too-old")
        .unwrap();
    assert_eq!(f["facts"]["needs_glibc"], "2.17");
    assert_eq!(f["facts"]["manylinux"], "manylinux1_x86_64");
    assert_eq!(f["facts"]["needs_glibc_from"], "wheel-symbols");
    assert!(f["source"].as_str().unwrap().ends_with(".whl"), "{f}");
    assert_eq!(s["needs"]["glibc"], "2.17");
    // CentOS 7 has glibc 2.17: the wheels run there.
    for host in [["--glibc", "2.17"], ["--os", "centos7"]] {
        let (_, doc) = query(&[
            "--torch", "2.5.1", "--cuda", "12.4", "--python", "3.11", host[0], host[1],
        ]);
        let s = stack_of(&doc);
        assert!(!codes(&s).contains(&"glibc-too-old".to_string()), "{host:?}");
        assert_eq!(s["status"], "compatible", "{host:?}");
    }
}

/// The facts the audit confirmed against a primary source are no longer marked, and each
/// cites what confirmed it.
#[test]
fn facts_the_audit_confirmed_are_no_longer_unverified() {
    for v in ["1.12.0", "1.12.1"] {
        assert!(
            !unverified(&show("torch", v)).contains(&"pypi_default".to_string()),
            "{v}"
        );
    }
    for (v, tag) in [
        ("2.6.0", "cu124"),
        ("2.8.0", "cu128"),
        ("2.11.0", "cu130"),
        ("2.12.0", "cu130"),
        ("2.13.0", "cu130"),
        ("2.15.0", "cu132"),
    ] {
        let doc = show("torch", v);
        let b = variant(&doc, tag);
        let u = unverified(b);
        assert!(
            !u.contains(&"sass".to_string()) && !u.contains(&"ptx".to_string()),
            "{v} {tag}: {u:?}"
        );
        // No PTX (an empty list is not written out).
        assert!(
            b.get("ptx").is_none_or(|p| p == &serde_json::json!([])),
            "{v} {tag}"
        );
        assert!(sources(b).iter().any(|s| s.ends_with(".whl")), "{v} {tag}");
    }
    let t = show("torch", "2.13.0");
    assert!(unverified(&t).is_empty());
    // The audit read requires_python, pypi_default and the cu130 pins from the wheel; the
    // torchvision pairing (a release date) and triton (a `~=` pin's lower bound) stay marked.
    let t = show("torch", "2.14.1");
    let u = unverified(&t);
    assert!(
        !u.contains(&"requires_python".to_string()) && !u.contains(&"pypi_default".to_string()),
        "{u:?}"
    );
    assert!(unverified(variant(&t, "cu130")).is_empty());
    // triton is a `~=` pin's lower bound and stays marked; torchvision 0.29.2 pins no torch
    // exactly (torch>=2.14.0), so its pairing, by upload day, is marked too.
    let t = show("torch", "2.15.0");
    assert_eq!(
        unverified(&t),
        vec!["torchvision".to_string(), "triton".to_string()]
    );
    assert_eq!(t["torchvision"], "0.29.2");
    assert_eq!(t["requires_python"], ">=3.11");
    assert_eq!(t["pypi_default"], "cu132");
    for c in ["12.3.2", "13.3.0", "13.3.1"] {
        let doc = show("cuda", c);
        assert!(!unverified(&doc).contains(&"min_driver_linux".to_string()), "{c}");
        assert!(sources(&doc).iter().any(|u| u.ends_with("_linux.run")), "{c}");
    }
    assert!(!unverified(&show("driver", "r570")).contains(&"end_of_life".to_string()));
    assert!(unverified(&show("driver", "r595")).is_empty());
    assert!(!unverified(&show("driver", "r470")).contains(&"latest_version".to_string()));
    for c in ["8.8.0.121", "9.19.0.56"] {
        let doc = show("cudnn", c);
        assert!(unverified(&doc).is_empty(), "{c}");
        assert!(
            sources(&doc)
                .iter()
                .any(|u| u.starts_with("https://pypi.org/project/nvidia-cudnn-")),
            "{c}"
        );
    }
    assert!(!unverified(&show("image", "ngc-24.08")).contains(&"torch".to_string()));
}

#[test]
fn every_record_says_when_it_was_checked_and_the_database_is_dated_by_the_newest() {
    let db = Db::from_dir(&root().join("compat-db")).unwrap();
    let newest = db.date().expect("records carry `checked`");
    let all_checked = db.python.iter().all(|r| r.checked.is_some())
        && db.torch.iter().all(|r| r.checked.is_some())
        && db.cuda.iter().all(|r| r.checked.is_some())
        && db.cudnn.iter().all(|r| r.checked.is_some())
        && db.drivers.iter().all(|r| r.checked.is_some())
        && db.gpus.iter().all(|r| r.checked.is_some())
        && db.images.iter().all(|r| r.checked.is_some())
        && db.packages.iter().all(|r| r.checked.is_some());
    assert!(all_checked);
    assert_eq!(
        show("gpu", "H100 SXM")["checked"].as_str().map(str::len),
        Some(10)
    );

    let stats = gpuenv(&["db", "stats", "--json"]);
    assert_eq!(json(&stats)["db_date"], newest.to_string());
    let human = gpuenv(&["db", "stats"]);
    assert!(
        human
            .stdout
            .lines()
            .any(|l| l == format!("date: {newest} (the newest `checked` of its records)")),
        "{}",
        human.stdout
    );
    let (_, doc) = query(&["--gpu", "H100 SXM"]);
    assert_eq!(doc["db_date"], newest.to_string());
    // On a host too: `doctor --json` and `check --json`.
    let host = crate::support::fixture("hosts/single-a100");
    let host = host.to_str().unwrap();
    for args in [
        vec!["doctor", "--json", "--host-facts", host],
        vec!["check", "--json", "--host-facts", host, "--torch", "2.4.1"],
    ] {
        let run = crate::support::gpuenv_env(&root(), &args, &[]);
        assert!(run.code == 0 || run.code == 1, "{args:?}: {}", run.stderr);
        assert_eq!(json(&run)["db_date"], newest.to_string(), "{args:?}");
    }
}

/// A copy of the shipped database whose records were all last checked on 2026-01-15:
/// older than 90 days on any day from 2026-04-16 on, by the real clock.
fn old_db() -> tempfile::TempDir {
    let db = crate::support::trimmed_db(&[]);
    for kind in std::fs::read_dir(db.path()).unwrap() {
        let kind = kind.unwrap().path();
        if !kind.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&kind).unwrap() {
            let f = f.unwrap().path();
            let text = std::fs::read_to_string(&f).unwrap();
            let dated: String = text
                .lines()
                .map(|l| {
                    if l.starts_with("checked = ") {
                        "checked = \"2026-01-15\"".to_string()
                    } else {
                        l.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n");
            std::fs::write(&f, dated + "\n").unwrap();
        }
    }
    db
}

fn answer_codes(doc: &Value) -> Vec<String> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn an_old_database_asked_for_a_newer_torch_says_so_and_does_not_judge_it() {
    let db = old_db();
    let dir = db.path().to_str().unwrap();
    let (code, doc) = query(&["--db", dir, "--torch", "2.16", "--gpu", "H100 SXM"]);
    assert_eq!(code, 1, "nothing the database knows matches: scripts stop");
    assert_eq!(doc["db_date"], "2026-01-15");
    assert_eq!(doc["stacks"], serde_json::json!([]));
    let codes = answer_codes(&doc);
    assert!(codes.contains(&"torch-release-unknown".to_string()), "{codes:?}");
    assert!(codes.contains(&"db-may-be-stale".to_string()), "{codes:?}");
    for f in doc["findings"].as_array().unwrap() {
        if f["code"] == "torch-release-unknown" || f["code"] == "db-may-be-stale" {
            assert_eq!(f["severity"], "warning", "{f}");
            let m = f["message"].as_str().unwrap();
            assert!(m.contains("gpuenv db refresh") && m.contains("--db DIR"), "{m}");
        }
    }
    let human = gpuenv(&["--db", dir, "query", "--torch", "2.16", "--gpu", "H100 SXM"]);
    assert!(
        human.stdout.contains("the torch asked for is not judged"),
        "{}",
        human.stdout
    );
    assert!(human.stdout.contains("db-may-be-stale"), "{}", human.stdout);

    // A driver of a branch newer than any record, with a torch the database knows: the
    // verdict is the rules', and the answer says the database may be behind.
    let (fresh_code, fresh) = query(&["--torch", "2.15.0", "--gpu", "H100 SXM", "--driver", "999.10"]);
    let (old_code, old) = query(&[
        "--db", dir, "--torch", "2.15.0", "--gpu", "H100 SXM", "--driver", "999.10",
    ]);
    assert_eq!(old_code, fresh_code);
    assert_eq!(old["verdict"], fresh["verdict"]);
    assert_eq!(
        old["stacks"].as_array().unwrap().len(),
        fresh["stacks"].as_array().unwrap().len()
    );
    assert!(answer_codes(&old).contains(&"db-may-be-stale".to_string()));
    let human = gpuenv(&[
        "--db", dir, "query", "--torch", "2.15.0", "--gpu", "H100 SXM", "--driver", "999.10",
    ]);
    assert!(human.stdout.contains("warn db-may-be-stale"), "{}", human.stdout);

    // Nothing past the database asked: its age is not mentioned.
    let (_, doc) = query(&[
        "--db",
        dir,
        "--torch",
        "2.15.0",
        "--gpu",
        "H100 SXM",
        "--driver",
        "580.65.06",
    ]);
    assert!(!answer_codes(&doc).contains(&"db-may-be-stale".to_string()));
}

#[test]
fn an_unknown_newer_torch_is_named_as_unknown_not_only_as_no_build() {
    let (code, doc) = query(&["--torch", "2.16.0", "--gpu", "H100 SXM"]);
    assert_eq!(code, 1);
    let codes = answer_codes(&doc);
    assert!(codes.contains(&"torch-release-unknown".to_string()), "{codes:?}");
    assert!(codes.contains(&"no-matching-build".to_string()), "{codes:?}");
    // A pin below the newest that matches nothing is a plain no-build.
    let (_, doc) = query(&["--torch", "==2.3.5", "--gpu", "H100 SXM"]);
    assert!(!answer_codes(&doc).contains(&"torch-release-unknown".to_string()));
}

/// The cuDNN, NCCL and cudart that the builds whose cuDNN column printed `-` ship: read
/// from the wheel itself (1.12 cu102, linked statically) or, marked, from third-party
/// listings (2.13.0 cu129); the builds no source settles keep the keys absent and say why.
#[test]
fn the_cudnn_of_every_torch_build_is_recorded_or_its_absence_explained() {
    for torch in ["1.12.0", "1.12.1"] {
        let doc = show("torch", torch);
        let v = variant(&doc, "cu102");
        assert_eq!(v["cudnn"], "7.6.5.32", "{torch}");
        assert_eq!(v["nccl"], "2.10.3", "{torch}");
        assert_eq!(v["cudart"], "10.2.89", "{torch}");
        // Read from the PyPI wheel (primary), and from release/1.12's build scripts.
        assert!(unverified(v).is_empty(), "{torch}: {:?}", unverified(v));
        let src = sources(v);
        assert!(
            src.iter()
                .any(|u| u.starts_with("https://files.pythonhosted.org/")
                    && u.ends_with(&format!("torch-{torch}-cp310-cp310-manylinux1_x86_64.whl"))),
            "{torch}: {src:?}"
        );
        assert!(
            src.iter()
                .any(|u| u.starts_with("https://github.com/pytorch/builder/blob/")
                    && u.ends_with("/common/install_cuda.sh")),
            "{torch}: {src:?}"
        );
    }
    let cudnn = show("cudnn", "7.6.5.32");
    assert_eq!(cudnn["cuda_majors"], serde_json::json!([9, 10]));
    assert!(
        sources(&cudnn)
            .iter()
            .any(|u| u.starts_with("https://docs.nvidia.com/deeplearning/cudnn/"))
    );

    // 2.13.0 cu129: only third-party environment listings give its pins, so each stays
    // marked.
    let doc = show("torch", "2.13.0");
    let v = variant(&doc, "cu129");
    assert_eq!(v["cudnn"], "9.20.0.48");
    assert_eq!(v["nccl"], "2.29.7");
    assert_eq!(v["cudart"], "12.9.1");
    for key in ["cudnn", "nccl", "cudart"] {
        assert!(unverified(v).contains(&key.to_string()), "{key}");
    }
    assert!(sources(v).iter().any(|u| u.contains("/current-requirements.txt")));

    // No source settles these: the keys stay absent and the notes say what was read.
    for (torch, tag) in [("2.10.0", "cu129"), ("2.15.0", "cu130")] {
        let doc = show("torch", torch);
        let v = variant(&doc, tag);
        for key in ["cudnn", "nccl", "cudart"] {
            assert!(v.get(key).is_none(), "{torch} {tag} {key}");
        }
        let notes = v["notes"].as_str().unwrap();
        assert!(notes.contains("stay unknown"), "{torch} {tag}");
        assert!(notes.contains("generate_binary_build_matrix.py"), "{torch} {tag}");
    }

    // Every other CUDA build records its cuDNN.
    let db = Db::embedded().unwrap();
    let unexplained = [("2.10.0", "cu129"), ("2.15.0", "cu130")];
    for rec in &db.torch {
        let version = rec.version.to_string();
        let doc = show("torch", &version);
        for v in doc["variants"].as_array().unwrap() {
            let tag = v["tag"].as_str().unwrap();
            if tag == "cpu" || unexplained.contains(&(version.as_str(), tag)) {
                continue;
            }
            assert!(v["cudnn"].is_string(), "{version} {tag}");
        }
    }
}

/// The `pytorch/pytorch` tags of torch 2.12.0 to 2.14.1 (runtime and devel, CUDA 12.6, 13.0
/// and 13.2), each found by its full image name, naming the torch and CUDA its tag says and
/// the cuDNN the matching wheel pins; the Python and OS not read from the image stay marked.
#[test]
fn the_pytorch_images_of_torch_2_12_to_2_14_are_found_by_name() {
    let cudnn = |torch: &str, cuda: &str| match (torch, cuda) {
        (_, "12.6") => "9.10.2.21",
        ("2.14.0" | "2.14.1", _) => "9.24.0.43",
        _ => "9.20.0.48",
    };
    let mut n = 0;
    for torch in ["2.12.0", "2.12.1", "2.13.0", "2.14.0", "2.14.1"] {
        for cuda in ["12.6", "13.0", "13.2"] {
            for flavor in ["runtime", "devel"] {
                let tag = format!("{torch}-cuda{cuda}-cudnn9-{flavor}");
                let doc = show("image", &format!("pytorch/pytorch:{tag}"));
                assert_eq!(doc["id"], format!("pytorch-{tag}"));
                assert_eq!(doc["family"], "pytorch");
                assert_eq!(doc["tag"], tag.as_str());
                assert_eq!(doc["torch"], torch, "{tag}");
                assert_eq!(doc["cuda"], cuda, "{tag}");
                assert_eq!(doc["cudnn"], cudnn(torch, cuda), "{tag}");
                assert_eq!(doc["flavors"][0], flavor, "{tag}");
                let marked = unverified(&doc);
                for key in ["python", "os", "cudnn"] {
                    assert!(marked.contains(&key.to_string()), "{tag}: {marked:?}");
                }
                assert!(
                    sources(&doc)
                        .iter()
                        .any(|u| u == &format!("https://pypi.org/project/torch/{torch}/")),
                    "{tag}"
                );
                n += 1;
            }
        }
    }
    assert_eq!(n, 30);
    // No 2.15.0 tag was evidenced: none is recorded.
    let run = gpuenv(&[
        "show",
        "image",
        "pytorch/pytorch:2.15.0-cuda13.2-cudnn9-runtime",
        "--json",
    ]);
    assert_ne!(run.code, 0, "{}", run.stdout);
}

/// Every `nvidia/cuda` release whose `NVIDIA_REQUIRE_CUDA` was read records it as the base
/// Dockerfile sets it: it opens with `cuda>=` the release's own major.minor, and the facts
/// read only in third-party copies (mirrors of NVIDIA's repository) stay marked.
#[test]
fn nvidia_cuda_require_cuda_opens_with_the_release_s_own_cuda() {
    let filled = [
        "11.8.0", "12.0.0", "12.0.1", "12.1.0", "12.1.1", "12.2.0", "12.2.2", "12.3.0", "12.3.1", "12.3.2",
        "12.4.0", "12.4.1", "12.5.0", "12.5.1", "12.6.0", "12.6.1", "12.6.2", "12.6.3", "12.8.0", "12.8.1",
        "12.9.0", "12.9.1", "13.0.0", "13.1.1", "13.2.0",
    ];
    for cuda in filled {
        let doc = show("image", &format!("nvidia-cuda-{cuda}"));
        let mm = cuda.rsplit_once('.').unwrap().0;
        let require = doc["require_cuda"]
            .as_str()
            .unwrap_or_else(|| panic!("{cuda}: no require_cuda"));
        assert!(require.starts_with(&format!("cuda>={mm} ")), "{cuda}: {require}");
        assert!(unverified(&doc).contains(&"require_cuda".to_string()), "{cuda}");
    }
    // Read in NVIDIA's own commits (through a mirror): the pinned copies are cited.
    for (cuda, commit) in [
        ("12.8.0", "61663681e7cc1cd6804521b154d436edf42246fa"),
        ("12.9.0", "5d46571ae3f4b9c6693a57774b4750fd999090ad"),
        ("13.0.0", "7ad4b0af70e5af9fb82ab990df382a0dd7d494dc"),
    ] {
        let doc = show("image", &format!("nvidia-cuda-{cuda}"));
        assert!(
            sources(&doc)
                .iter()
                .any(|u| u.contains(commit)
                    && u.ends_with(&format!("/dist/{cuda}/ubuntu2204/base/Dockerfile"))),
            "{cuda}"
        );
    }
    // No copy was found for these: nothing is guessed.
    for cuda in ["13.0.1", "13.0.2", "13.2.1", "13.3.0"] {
        let doc = show("image", &format!("nvidia-cuda-{cuda}"));
        assert!(doc["require_cuda"].is_null(), "{cuda}");
    }
}

/// The catalog judges the runtime's start from the recorded `NVIDIA_REQUIRE_CUDA`: CUDA 12.8
/// lists forward-compatibility branches (R535 among them) for data-center and professional
/// brands but no GeForce term, so an RTX 4090 on R535 is refused and an H100 started; 12.4.1
/// still lists `brand=geforce` for R535, so the runtime's check passes there.
#[test]
fn the_catalog_judges_the_runtime_start_from_require_cuda() {
    let verdict = |image: &str, gpu: &str| {
        let run = gpuenv(&[
            "show",
            "image",
            image,
            "--driver",
            "535.104.05",
            "--gpu",
            gpu,
            "--json",
        ]);
        let doc = json(&run);
        doc["verdict"]["require"].clone()
    };
    let refused = verdict("nvidia/cuda:12.8.0-runtime-ubuntu22.04", "RTX 4090");
    assert!(refused.is_object(), "{refused}");
    assert_eq!(refused["satisfied"], false, "{refused}");
    let started = verdict("nvidia/cuda:12.8.0-runtime-ubuntu22.04", "H100 SXM");
    assert_eq!(started["satisfied"], true, "{started}");
    let geforce = verdict("nvidia/cuda:12.4.1-runtime-ubuntu22.04", "RTX 4090");
    assert_eq!(geforce["satisfied"], true, "{geforce}");
}

/// NGC PyTorch 23.08: the torch third-party reports quote from inside the image, the CUDA of
/// the month's Triton notes, and the older data-center branches those notes name; none was
/// read on NVIDIA's PyTorch page, so each is marked.
#[test]
fn ngc_23_08_is_recorded_from_the_month_s_notes_and_marked() {
    let doc = show("image", "nvcr.io/nvidia/pytorch:23.08-py3");
    assert_eq!(doc["id"], "ngc-23.08");
    assert_eq!(doc["torch"], "2.1.0a0+29c30b1");
    assert_eq!(doc["cuda"], "12.2.1");
    assert_eq!(doc["min_driver"], "535.54.03");
    assert_eq!(
        doc["forward_compat"],
        serde_json::json!(["450.51", "470.57", "510.47", "525.85"])
    );
    let marked = unverified(&doc);
    for key in ["torch", "cuda", "min_driver", "forward_compat"] {
        assert!(marked.contains(&key.to_string()), "{marked:?}");
    }
    assert!(
        sources(&doc)
            .iter()
            .any(|u| u.ends_with("/triton-inference-server/release-notes/rel-23-08.html"))
    );
}
