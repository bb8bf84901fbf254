//! `gpuenv bench net` and `gpuenv bench --peer` over RDMA, end to end between two gpuenv
//! processes on loopback, with a stand-in `ib_write_bw` on `PATH`
//! (`tests/fixtures/bench/perftest/stand-in.sh`: it checks the options, takes and connects
//! to the agreed TCP port, and prints real captures). No RDMA hardware is needed: what is
//! tested is gpuenv's side, the session, the command lines and the reading of the report.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use gpuenv::bench::{Engine, Figure, Metric};

use crate::support::{fixture, gpuenv_command, gpuenv_env, json};

/// A directory holding `ib_write_bw`: a wrapper of the stand-in expecting `-d mlx5_1`.
fn stand_in_bin(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = fixture("bench/perftest/stand-in.sh");
    let wrapper = format!(
        "#!/bin/sh\nexport STANDIN_DEVICE=mlx5_1\nexec sh {} \"$@\"\n",
        script.display()
    );
    let path = bin.join("ib_write_bw");
    std::fs::write(&path, wrapper).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// `PATH` with `bin` first.
fn path_with(bin: &Path) -> String {
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default())
}

/// A listener on loopback with `path` as its `PATH`; its address.
fn listener(dir: &Path, path: &str, extra: &[&str]) -> (Child, String) {
    let mut args = vec![
        "bench",
        "net",
        "--listen",
        "127.0.0.1:0",
        "--serve-seconds",
        "120",
    ];
    args.extend_from_slice(extra);
    let mut child = gpuenv_command(dir, &args, &[("PATH", path)])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line
        .strip_prefix("listening on ")
        .and_then(|l| l.split(' ').next())
        .unwrap_or_else(|| panic!("{line}"))
        .to_string();
    // The rest of what it says is drained so that it never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut rest = String::new();
        while err.read_line(&mut rest).unwrap_or(0) > 0 {}
    });
    (child, addr)
}

fn figures(doc: &serde_json::Value) -> Vec<Figure> {
    serde_json::from_value(doc["figures"].clone()).expect("figures")
}

fn skipped(doc: &serde_json::Value) -> Vec<String> {
    serde_json::from_value(doc["skipped"].clone()).expect("skipped")
}

#[test]
fn rdma_between_two_nodes_through_the_listener() {
    let dir = tempfile::tempdir().unwrap();
    let path = path_with(&stand_in_bin(dir.path()));
    let (mut l, addr) = listener(dir.path(), &path, &["--rdma-device", "mlx5_1"]);
    let net = gpuenv_env(
        dir.path(),
        &[
            "bench",
            "net",
            "--peer",
            &addr,
            "--streams",
            "1",
            "--seconds",
            "1",
            "--rdma-device",
            "mlx5_1:1",
            "--json",
        ],
        &[("PATH", &path)],
    );
    // `gpuenv bench --peer` takes the same path through the host bench.
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let bench = gpuenv_env(
        dir.path(),
        &[
            "bench",
            "--host-only",
            "--path",
            data.to_str().unwrap(),
            "--allow-system-disk",
            "--disk-size",
            "16MiB",
            "--memory-size",
            "16MiB",
            "--seconds",
            "1",
            "--no-download",
            "--peer",
            &addr,
            "--rdma-device",
            "mlx5_1",
            "--record",
            dir.path().join("rec").to_str().unwrap(),
            "--json",
        ],
        &[("PATH", &path)],
    );
    let _ = l.kill();
    let _ = l.wait();

    assert_eq!(net.code, 0, "{}", net.stderr);
    let doc = json(&net);
    let rdma: Vec<Figure> = figures(&doc)
        .into_iter()
        .filter(|f| f.metric == Metric::NetworkRdma)
        .collect();
    assert_eq!(rdma.len(), 1, "{doc}");
    assert_eq!(rdma[0].engine, Engine::Perftest);
    assert_eq!(rdma[0].unit, "GB/s");
    // The stand-in prints a real capture: 181.46 Gb/s, 22.6825 GB/s.
    assert!((rdma[0].value - 22.6825).abs() < 1e-9, "{}", rdma[0].value);
    assert!(
        rdma[0].detail.contains("from mlx5_1 port 1 to its mlx5_1"),
        "{}",
        rdma[0].detail
    );
    assert!(skipped(&doc).is_empty(), "{doc}");

    assert_eq!(bench.code, 0, "{}", bench.stderr);
    let doc = json(&bench);
    assert!(
        figures(&doc)
            .iter()
            .any(|f| f.metric == Metric::NetworkRdma && f.engine == Engine::Perftest),
        "{doc}"
    );
    assert!(!skipped(&doc).iter().any(|s| s.contains("RDMA")), "{doc}");
    // The record keeps the client's raw report, under its command line.
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("rec/host.json")).unwrap()).unwrap();
    let runs: Vec<&String> = record["commands"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.starts_with("ib_write_bw -d mlx5_1 -p "))
        .collect();
    assert_eq!(runs.len(), 1, "{record}");
    assert!(
        runs[0].ends_with(" -s 1048576 -q 1 -D 1 -F --report_gbits 127.0.0.1"),
        "{}",
        runs[0]
    );
    assert!(
        record["commands"][runs[0].as_str()]["stdout"]
            .as_str()
            .unwrap()
            .contains("181.46"),
        "{record}"
    );
}

#[test]
fn rdma_missing_on_either_side_is_a_skip_line_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let with = path_with(&stand_in_bin(dir.path()));
    // A PATH without ib_write_bw: gpuenv's own measurement needs no other program.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let without = empty.display().to_string();

    let (mut l, addr) = listener(dir.path(), &with, &["--rdma-device", "mlx5_1"]);
    let here = gpuenv_env(
        dir.path(),
        &[
            "bench",
            "net",
            "--peer",
            &addr,
            "--streams",
            "1",
            "--seconds",
            "1",
            "--json",
        ],
        &[("PATH", &without)],
    );
    let _ = l.kill();
    let _ = l.wait();
    let (mut l, addr) = listener(dir.path(), &without, &[]);
    let there = gpuenv_env(
        dir.path(),
        &[
            "bench",
            "net",
            "--peer",
            &addr,
            "--streams",
            "1",
            "--seconds",
            "1",
            "--rdma-device",
            "mlx5_1",
        ],
        &[("PATH", &with)],
    );
    let _ = l.kill();
    let _ = l.wait();

    assert_eq!(here.code, 0, "{}", here.stderr);
    let doc = json(&here);
    assert_eq!(
        skipped(&doc),
        ["network (RDMA): perftest's ib_write_bw is not installed here"]
    );
    assert!(figures(&doc).iter().any(|f| f.metric == Metric::NetworkTcp));
    assert_eq!(there.code, 0, "{}", there.stderr);
    assert!(
        there.stdout.contains("skipped: network (RDMA): peer `")
            && there
                .stdout
                .contains("perftest's ib_write_bw is not installed there"),
        "{}",
        there.stdout
    );
}

#[test]
fn an_rdma_device_that_is_not_one_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &[
            "bench",
            "net",
            "--listen",
            "127.0.0.1:0",
            "--rdma-device",
            "mlx5_0;reboot",
        ][..],
        &[
            "bench",
            "net",
            "--peer",
            "127.0.0.1:1",
            "--rdma-device",
            "mlx5_0:0",
        ],
        &["bench", "--host-only", "--rdma-device=-x\u{1b}[2J"],
    ] {
        let run = gpuenv_env(dir.path(), args, &[]);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains("--rdma-device"), "{}", run.stderr);
        assert!(!run.stderr.contains('\u{1b}'), "{}", run.stderr);
        assert!(run.stdout.is_empty(), "{}", run.stdout);
    }
}
