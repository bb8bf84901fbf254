//! `gpuenv db refresh` against recorded upstream responses served on loopback, and the
//! comparison of the shipped torch records with PyPI.

use std::time::Duration;

use gpuenv::db::Db;
use gpuenv::upstream::{Client, RefreshOptions, compare_torch, torch_facts};

use crate::support::{Replay, fixture, gpuenv, trimmed_db};

pub(crate) fn replay() -> Replay {
    Replay::start(fixture("upstream"), None)
}

#[test]
fn shipped_torch_records_agree_with_recorded_pypi() {
    let server = replay();
    let client = Client::new(None, Duration::from_secs(10)).unwrap();
    let opts = RefreshOptions {
        pypi: server.url.parse().unwrap(),
        pytorch_index: None,
        ..RefreshOptions::default()
    };
    let (facts, _) = torch_facts(&client, &opts).unwrap();
    let db = Db::embedded().unwrap();
    let mut with_metadata = 0;
    for rec in &db.torch {
        let f = facts
            .iter()
            .find(|f| f.version == rec.version)
            .unwrap_or_else(|| panic!("torch {} is not on the recorded PyPI", rec.version));
        let changes = compare_torch(rec, f);
        assert!(
            changes.is_empty(),
            "torch {} disagrees with PyPI: {changes:#?}",
            rec.version
        );
        // Python tags are always compared; pins where PyPI served metadata.
        assert!(!f.python.is_empty(), "{}", rec.version);
        if let Some(b) = &f.default {
            with_metadata += 1;
            if let Some(tag) = b.variant() {
                assert_eq!(rec.pypi_default, tag, "{}", rec.version);
            }
        }
    }
    // Every release PyPI lists since 1.12.0 has a record, and all but the two whose
    // metadata no mirror serves (2.14.1, 2.15.0) were checked on their pins.
    assert_eq!(facts.len(), db.torch.len());
    assert_eq!(with_metadata, db.torch.len() - 2);
}

#[test]
fn refresh_proposes_exactly_the_missing_records() {
    let server = replay();
    let removed = ["torch/2.15.0.toml", "torch/2.12.1.toml", "torch/2.1.2.toml"];
    // The images of a removed release go too: a database that names a torch it has no
    // record of is refused before anything is read.
    let images: Vec<String> = std::fs::read_dir(crate::support::root().join("compat-db/image"))
        .unwrap()
        .map(|e| format!("image/{}", e.unwrap().file_name().to_string_lossy()))
        .filter(|f| {
            ["2.15.0", "2.12.1", "2.1.2"]
                .iter()
                .any(|v| f.starts_with(&format!("image/pytorch-{v}-")))
        })
        .collect();
    let mut gone: Vec<&str> = removed.to_vec();
    gone.extend(images.iter().map(String::as_str));
    let db = trimmed_db(&gone);
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("proposals");
    let run = gpuenv(&[
        "db",
        "refresh",
        "--db",
        db.path().to_str().unwrap(),
        "--pypi",
        &server.url,
        "--pytorch-index",
        &format!("{}whl/", server.url),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let mut written: Vec<String> = std::fs::read_dir(out.join("torch"))
        .unwrap()
        .map(|e| format!("torch/{}", e.unwrap().file_name().to_string_lossy()))
        .collect();
    written.sort();
    let mut expected: Vec<String> = removed.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(written, expected);
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        1,
        "only torch/ is written"
    );
    assert!(run.stdout.contains("new records proposed: 3"), "{}", run.stdout);
    assert!(
        run.stdout.contains("changed records proposed: 0"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("PyTorch wheel index: unreachable"),
        "{}",
        run.stdout
    );

    // The proposals are records: copied back, the database lints clean.
    for f in &removed {
        std::fs::copy(out.join(f), db.path().join(f)).unwrap();
    }
    let lint = gpuenv(&["db", "lint", "--db", db.path().to_str().unwrap()]);
    assert_eq!(lint.code, 0, "{}", lint.stdout);

    // What PyPI states is in the proposal: pins of 2.1.2, tags of 2.15.0.
    let p = std::fs::read_to_string(out.join("torch/2.1.2.toml")).unwrap();
    assert!(p.contains("pypi_default = \"cu121\""), "{p}");
    assert!(p.contains("cudnn = \"8.9.2.26\""), "{p}");
    assert!(p.contains("nccl = \"2.18.1\""), "{p}");
    let p = std::fs::read_to_string(out.join("torch/2.15.0.toml")).unwrap();
    assert!(p.contains("\"cp315t\""), "{p}");
    assert!(
        p.contains("\"pypi_default\""),
        "the assumed default is marked unverified: {p}"
    );
}

#[test]
fn nothing_to_propose_writes_nothing() {
    let server = replay();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("proposals");
    let run = gpuenv(&[
        "db",
        "refresh",
        "--pypi",
        &server.url,
        "--no-pytorch-index",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["proposals"].as_array().unwrap().len(), 0);
    assert_eq!(doc["pytorch_index"], "not asked");
    assert!(!out.exists());
}

#[test]
fn network_failure_exits_3_and_writes_nothing() {
    // Nothing listens on a port we just bound and released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let db = trimmed_db(&["torch/2.15.0.toml"]);
    let out = db.path().join("proposals");
    let run = gpuenv(&[
        "db",
        "refresh",
        "--db",
        db.path().to_str().unwrap(),
        "--pypi",
        &format!("http://127.0.0.1:{port}"),
        "--no-pytorch-index",
        "--timeout",
        "5",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr
            .contains(&format!("cannot fetch `http://127.0.0.1:{port}/simple/torch/`")),
        "{}",
        run.stderr
    );
    assert!(!out.exists());
}

#[test]
fn server_error_mid_run_exits_3_and_leaves_nothing_half_written() {
    let server = Replay::start(fixture("upstream"), Some("torchaudio"));
    let db = trimmed_db(&["torch/2.15.0.toml"]);
    let out = db.path().join("proposals");
    let run = gpuenv(&[
        "db",
        "refresh",
        "--db",
        db.path().to_str().unwrap(),
        "--pypi",
        &server.url,
        "--no-pytorch-index",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(run.stderr.contains("HTTP 500"), "{}", run.stderr);
    assert!(!out.exists());
    let leftovers: Vec<_> = std::fs::read_dir(db.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_non_empty_out_dir_is_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("keep.txt"), "mine").unwrap();
    let run = gpuenv(&[
        "db",
        "refresh",
        "--pypi",
        "http://127.0.0.1:9/",
        "--out",
        tmp.path().to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("is not empty"), "{}", run.stderr);
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("keep.txt")).unwrap(),
        "mine"
    );
}

#[test]
fn a_bad_url_is_bad_input() {
    let run = gpuenv(&["db", "refresh", "--pypi", "ftp://example.org"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("invalid --pypi `ftp://example.org`: expected an http(s) URL"),
        "{}",
        run.stderr
    );
}

/// The CUDA toolkits and cuDNN releases of a copy of compat-db that the recorded PyPI has
/// and it lacks: records removed here are proposed back, and nothing else.
pub(crate) const TOOLKITS_REMOVED: [&str; 4] = [
    "cuda/13.4.2.toml",
    "cuda/13.5.0.toml",
    "cudnn/9.28.0.42.toml",
    "cudnn/9.28.1.4.toml",
];

pub(crate) fn refresh_into(
    db: &std::path::Path,
    out: &std::path::Path,
    server: &Replay,
    json: bool,
) -> crate::support::Run {
    let mut args = vec![
        "db",
        "refresh",
        "--db",
        db.to_str().unwrap(),
        "--pypi",
        &server.url,
        "--no-pytorch-index",
        "--out",
        out.to_str().unwrap(),
    ];
    if json {
        args.push("--json");
    }
    gpuenv(&args)
}

fn files_under(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for kind in std::fs::read_dir(dir).unwrap() {
        let kind = kind.unwrap();
        for f in std::fs::read_dir(kind.path()).unwrap() {
            out.push(format!(
                "{}/{}",
                kind.file_name().to_string_lossy(),
                f.unwrap().file_name().to_string_lossy()
            ));
        }
    }
    out.sort();
    out
}

#[test]
fn refresh_proposes_exactly_the_missing_toolkits_and_cudnn_releases() {
    let server = replay();
    let db = trimmed_db(&TOOLKITS_REMOVED);
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("proposals");
    let run = refresh_into(db.path(), &out, &server, false);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    // Exactly the removed records: not 12.9.1, 13.0.2, 13.0.3 or 13.4.1, which compat-db
    // has; not 13.4.0rc1 (a pre-release), the 11.7 line (components only, but recorded),
    // cuDNN 9.4.0.58 (older than the newest record) or 9.1.0.70.post1.
    assert_eq!(files_under(&out), TOOLKITS_REMOVED.map(String::from).to_vec());
    assert!(
        run.stdout
            .contains("new records proposed: 4 (torch 0, CUDA 2, cuDNN 2)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("  + cuda/13.5.0.toml (pending: min_driver_linux, sass)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("  + cudnn/9.28.1.4.toml (pending: cuda_majors)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("CUDA toolkit releases read from PyPI: 6 (cuda-toolkit); cuDNN releases: 6"),
        "{}",
        run.stdout
    );

    // What PyPI states is in the proposal; what it cannot state is pending, not guessed.
    let p = std::fs::read_to_string(out.join("cuda/13.4.2.toml")).unwrap();
    assert!(p.contains("label = \"CUDA 13.4 Update 2\""), "{p}");
    assert!(p.contains("released = \"2026-09-16\""), "{p}");
    assert!(p.contains("pending = [\"min_driver_linux\", \"sass\"]"), "{p}");
    assert!(
        p.contains("nvidia-cuda-nvcc==13.4.92.*"),
        "the meta-package's pins: {p}"
    );
    assert!(!p.contains("min_driver_linux ="), "{p}");
    assert!(!p.contains("sass ="), "{p}");
    let p = std::fs::read_to_string(out.join("cuda/13.5.0.toml")).unwrap();
    assert!(p.contains("no PEP 658 metadata was served"), "{p}");
    let p = std::fs::read_to_string(out.join("cudnn/9.28.0.42.toml")).unwrap();
    assert!(p.contains("pending = [\"cuda_majors\"]"), "{p}");
    assert!(!p.contains("cuda_majors ="), "{p}");
    assert!(p.contains("nvidia-cudnn-cu13, nvidia-cudnn-cu12"), "{p}");

    // The proposals are records: moved into the copy, it lints clean.
    for f in &TOOLKITS_REMOVED {
        std::fs::copy(out.join(f), db.path().join(f)).unwrap();
    }
    let lint = gpuenv(&["db", "lint", "--db", db.path().to_str().unwrap()]);
    assert_eq!(lint.code, 0, "{}{}", lint.stdout, lint.stderr);

    // ... and then there is nothing left to propose.
    let again = scratch.path().join("again");
    let run = refresh_into(db.path(), &again, &server, false);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("new records proposed: 0"), "{}", run.stdout);
    assert!(!again.exists());
}

#[test]
fn the_json_summary_lists_toolkit_and_cudnn_proposals_beside_torch() {
    let server = replay();
    let db = trimmed_db(&["torch/2.15.0.toml", "cuda/13.5.0.toml", "cudnn/9.28.1.4.toml"]);
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("proposals");
    let run = refresh_into(db.path(), &out, &server, true);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let got: Vec<(String, String, Vec<String>)> = doc["proposals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["file"].as_str().unwrap().to_string(),
                p["kind"].as_str().unwrap().to_string(),
                p["pending"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|k| k.as_str().unwrap().to_string())
                    .collect(),
            )
        })
        .collect();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        got,
        vec![
            (
                "cuda/13.5.0.toml".into(),
                "cuda".into(),
                s(&["min_driver_linux", "sass"])
            ),
            ("cudnn/9.28.1.4.toml".into(), "cudnn".into(), s(&["cuda_majors"])),
            ("torch/2.15.0.toml".into(), "torch".into(), vec![]),
        ]
    );
    assert_eq!(doc["cuda_releases"], 6);
    assert_eq!(doc["cudnn_releases"], 6);
    assert_eq!(doc["cudnn_older_unrecorded"], 1);
}

/// A proposed toolkit moved into the database lints clean, yet `query` does not answer as
/// if its pending facts were known: a torch build on its CUDA line is not judged
/// compatible on any driver, and the answer says why (`cuda-facts-pending`).
#[test]
fn a_proposed_toolkit_with_pending_facts_is_never_judged_compatible() {
    let server = replay();
    let db = trimmed_db(&["cuda/13.5.0.toml"]);
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("proposals");
    let run = refresh_into(db.path(), &out, &server, false);
    assert_eq!(run.code, 0, "{}", run.stderr);
    std::fs::copy(out.join("cuda/13.5.0.toml"), db.path().join("cuda/13.5.0.toml")).unwrap();
    // A torch build on CUDA 13.5, as a curator would add it once such wheels appear.
    let torch = db.path().join("torch/2.15.0.toml");
    let mut text = std::fs::read_to_string(&torch).unwrap();
    text.push_str(
        "\n[[variants]]\ntag = \"cu135\"\ncuda = \"13.5\"\nsass = [\"7.5\", \"8.0\", \"8.6\", \"9.0\", \"10.0\", \"12.0\"]\n\
         ptx = []\nindex_url = \"https://download.pytorch.org/whl/cu135\"\nplatforms = [\"x86_64\"]\n",
    );
    std::fs::write(&torch, text).unwrap();
    let dir = db.path().to_str().unwrap();
    let lint = gpuenv(&["db", "lint", "--db", dir]);
    assert_eq!(lint.code, 0, "{}{}", lint.stdout, lint.stderr);

    for driver in ["580.65.06", "620.70.06", "999.99"] {
        let run = gpuenv(&[
            "query", "--db", dir, "--torch", "2.15.0", "--cuda", "13.5", "--gpu", "H100 SXM", "--driver",
            driver, "--json",
        ]);
        let doc: serde_json::Value =
            serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}{}", run.stdout, run.stderr));
        let stacks = doc["stacks"].as_array().unwrap();
        let cu135: Vec<&serde_json::Value> = stacks.iter().filter(|s| s["variant"] == "cu135").collect();
        assert!(!cu135.is_empty(), "{}", run.stdout);
        for s in &cu135 {
            assert_ne!(s["status"], "compatible", "driver {driver}: {s}");
            let codes: Vec<&str> = s["findings"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|f| f["code"].as_str())
                .collect();
            assert!(
                codes.contains(&"cuda-facts-pending"),
                "driver {driver}: {codes:?}"
            );
            assert!(s["needs"].get("driver_native").is_none(), "{s}");
        }
        assert_ne!(doc["verdict"], "compatible", "driver {driver}: {}", run.stdout);
    }
    // The human answer names the pending facts.
    let run = gpuenv(&[
        "query",
        "--db",
        dir,
        "--torch",
        "2.15.0",
        "--cuda",
        "13.5",
        "--gpu",
        "H100 SXM",
        "--driver",
        "620.70.06",
    ]);
    assert!(
        run.stdout.contains("min_driver_linux, sass pending"),
        "{}{}",
        run.stdout,
        run.stderr
    );
}
