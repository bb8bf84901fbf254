//! `gpuenv db refresh` against recorded upstream responses served on loopback, and the
//! comparison of the shipped torch records with PyPI.

use std::time::Duration;

use gpuenv::db::Db;
use gpuenv::upstream::{Client, RefreshOptions, compare_torch, torch_facts};

use crate::support::{Replay, fixture, gpuenv, trimmed_db};

fn replay() -> Replay {
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
    let db = trimmed_db(&removed);
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
