//! `gpuenv bench`'s host path, for real: the disk beside a real fio, memory, the network on
//! loopback between a listener and a peer, downloads from a loopback HTTP server, the
//! parser of real fio captures, and what bad input gets.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use gpuenv::bench::host::{disk, download, fio};
use gpuenv::bench::{Engine, Figure, Metric};
use gpuenv::host::system::{HostRecord, Recording};

use crate::support::{fixture, gpuenv_in, json};

/// Small sizes, so that a run takes seconds.
const SMALL: &[&str] = &[
    "--host-only",
    "--allow-system-disk",
    "--disk-size",
    "64MiB",
    "--memory-size",
    "64MiB",
    "--seconds",
    "1",
    "--json",
];

/// Held by the tests that measure the disk, so that under `cargo test` (threads of one
/// process) they do not run together: each would slow the other's figures.
/// `.config/nextest.toml` keeps them apart under nextest's process per test.
fn disk_lock() -> std::sync::MutexGuard<'static, ()> {
    static DISK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    DISK.lock().unwrap_or_else(|e| e.into_inner())
}

fn figures(doc: &serde_json::Value) -> Vec<Figure> {
    serde_json::from_value(doc["figures"].clone()).expect("figures")
}

fn metrics(figs: &[Figure], engine: Engine) -> Vec<Metric> {
    figs.iter()
        .filter(|f| f.engine == engine)
        .map(|f| f.metric)
        .collect()
}

#[test]
fn host_only_reports_disk_memory_and_loopback_network() {
    let _disk = disk_lock();
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["bench", "--path", dir.path().to_str().unwrap(), "--no-download"];
    args.extend_from_slice(SMALL);
    let run = gpuenv_in(dir.path(), &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = json(&run);
    assert_eq!(doc["schema_version"], 1);
    let figs = figures(&doc);
    let ours = metrics(&figs, Engine::Gpuenv);
    for m in [
        Metric::HostMemoryBandwidth,
        Metric::DiskSeqRead,
        Metric::DiskSeqWrite,
        Metric::DiskRandRead,
        Metric::NetworkTcp,
        Metric::NetworkLatency,
    ] {
        assert!(ours.contains(&m), "{m:?} missing: {figs:?}");
    }
    assert!(
        figs.iter().all(|f| f.value > 0.0 && f.value.is_finite()),
        "{figs:?}"
    );
    assert!(
        figs.iter()
            .any(|f| f.metric == Metric::NetworkTcp && f.detail.starts_with("loopback")),
        "{figs:?}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "the test files are removed"
    );
    // The text report too, through the same run.
    let mut text_args: Vec<&str> = args.iter().copied().filter(|a| *a != "--json").collect();
    text_args.push("--quick");
    let run = gpuenv_in(dir.path(), &text_args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("disk-seq-read"), "{}", run.stdout);
    assert!(run.stdout.contains("skipped:"), "{}", run.stdout);
}

#[test]
fn fio_parser_reads_real_captures() {
    for (job, name) in [
        (fio::FioJob::SeqWrite, "seqwrite"),
        (fio::FioJob::SeqRead, "seqread"),
        (fio::FioJob::RandRead, "randread"),
    ] {
        let path = fixture(&format!("bench/fio-3.33-{name}.json"));
        let text = std::fs::read_to_string(&path).unwrap();
        let raw: serde_json::Value = serde_json::from_str(&text).unwrap();
        let parsed = fio::parse(&text).unwrap();
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].version, "fio-3.33");
        let f = fio::figure(job, &parsed, "x").unwrap();
        assert_eq!(f.engine, Engine::Fio);
        assert_eq!(f.metric, job.metric());
        let j = &raw["jobs"][0];
        let expected = match job {
            fio::FioJob::SeqWrite => j["write"]["bw_bytes"].as_f64().unwrap() / 1e9,
            fio::FioJob::SeqRead => j["read"]["bw_bytes"].as_f64().unwrap() / 1e9,
            fio::FioJob::RandRead => j["read"]["iops"].as_f64().unwrap(),
        };
        assert!(expected > 0.0);
        assert_eq!(f.value, expected, "{name}");
        // Cut anywhere, the document is refused, never half-read.
        for cut in [1, text.len() / 3, text.len() - 2] {
            assert!(fio::parse(&text[..cut]).is_err(), "{name} cut at {cut}");
        }
    }
}

#[test]
fn record_keeps_fio_outputs_that_replay_to_the_same_figures() {
    let _disk = disk_lock();
    crate::support::tool("fio");
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("rec");
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let mut args = vec![
        "bench",
        "--path",
        data.to_str().unwrap(),
        "--record",
        rec.to_str().unwrap(),
        "--no-download",
    ];
    args.extend_from_slice(SMALL);
    let run = gpuenv_in(dir.path(), &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = json(&run);
    let fio_figs: Vec<Figure> = figures(&doc)
        .into_iter()
        .filter(|f| f.engine == Engine::Fio)
        .collect();
    assert_eq!(fio_figs.len(), 3, "{doc}");
    let kept: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(rec.join("bench.json")).unwrap()).unwrap();
    // The record keeps the results; what stdout adds is their judgement, made again from them.
    let mut printed = doc.clone();
    assert!(
        printed.as_object_mut().unwrap().remove("judgement").is_some(),
        "{doc}"
    );
    assert_eq!(kept, printed);
    let record: HostRecord = Recording::load(&rec).unwrap();
    assert_eq!(
        record.commands.keys().filter(|k| k.starts_with("fio ")).count(),
        3
    );
    let replayed = fio::measure(&Recording::replay(record), &data, 64 << 20, 1).unwrap();
    assert_eq!(replayed, fio_figs);
}

#[test]
fn net_listen_and_peer_on_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let mut listener = crate::support::gpuenv_command(
        dir.path(),
        &["bench", "net", "--listen", "127.0.0.1:0", "--serve-seconds", "60"],
        &[],
    )
    .stderr(Stdio::piped())
    .stdout(Stdio::null())
    .spawn()
    .unwrap();
    let mut err = BufReader::new(listener.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line
        .strip_prefix("listening on ")
        .and_then(|l| l.split(' ').next())
        .unwrap_or_else(|| panic!("{line}"))
        .to_string();
    let run = gpuenv_in(
        dir.path(),
        &[
            "bench",
            "net",
            "--peer",
            &addr,
            "--streams",
            "3",
            "--seconds",
            "1",
            "--json",
        ],
    );
    // Garbage sent to the listener is refused, and it keeps serving.
    let mut raw = std::net::TcpStream::connect(&addr).unwrap();
    raw.write_all(b"\x16\x03\x01 hello\n").unwrap();
    let mut answer = String::new();
    raw.read_to_string(&mut answer).unwrap();
    let again = gpuenv_in(dir.path(), &["bench", "net", "--peer", &addr, "--seconds", "1"]);
    let _ = listener.kill();
    let _ = listener.wait();
    let mut rest = String::new();
    let _ = err.read_to_string(&mut rest);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let figs = figures(&json(&run));
    assert_eq!(
        metrics(&figs, Engine::Gpuenv),
        vec![Metric::NetworkTcp, Metric::NetworkLatency]
    );
    assert!(figs[0].detail.starts_with("3 streams"), "{}", figs[0].detail);
    assert!(answer.starts_with("gpuenv-bench-net 1 error"), "{answer}");
    assert!(
        rest.contains("refused") && rest.contains("not a gpuenv bench client"),
        "{rest}"
    );
    assert!(!rest.contains('\x16'), "{rest}");
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(again.stdout.contains("network-tcp"), "{}", again.stdout);
}

#[test]
fn garbage_from_a_peer_is_named_and_exit_3() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let server = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\n\x1b]0;owned\x07\r\n\r\n");
    });
    let dir = tempfile::tempdir().unwrap();
    let run = gpuenv_in(dir.path(), &["bench", "net", "--peer", &addr, "--seconds", "1"]);
    server.join().unwrap();
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("did not answer as `gpuenv bench net --listen`"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("HTTP/1.1 400"), "{}", run.stderr);
    assert!(
        !run.stderr.contains('\x1b') && !run.stderr.contains('\x07'),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty());
    // Nobody listening: the environment, exit 3; a port that is not one: bad input.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let run = gpuenv_in(dir.path(), &["bench", "net", "--peer", &closed, "--seconds", "1"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    let run = gpuenv_in(dir.path(), &["bench", "net", "--peer", "localhost:99999"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
}

/// A loopback HTTP server: answers every request with `status` and `body`.
fn http_server(status: &'static str, body: Vec<u8>) -> (String, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/whl/torch.whl", l.local_addr().unwrap());
    let t = std::thread::spawn(move || {
        if let Ok((mut s, _)) = l.accept() {
            let mut req = [0u8; 4096];
            let _ = s.read(&mut req);
            let head = format!(
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(&body);
        }
    });
    (url, t)
}

#[test]
fn download_from_a_loopback_server() {
    let _disk = disk_lock();
    let (url, t) = http_server("200 OK", vec![7u8; 8 << 20]);
    let f = download::measure(&download::DownloadPlan {
        url: url.clone(),
        max_bytes: 4 << 20,
        max_time: Duration::from_secs(20),
    })
    .unwrap();
    drop(t);
    assert_eq!(f.metric, Metric::Download);
    assert!(f.value > 0.0 && f.value.is_finite());
    // The read stops at its byte bound, not at the end of the 8 MiB body; sizes are
    // written as `crate::files::bytes` writes them, in whole units.
    assert!(f.detail.starts_with(&format!("4 MiB of `{url}`")), "{}", f.detail);

    // Through the command: the figure, or the refusal as a skipped line.
    let (url, t) = http_server("200 OK", vec![1u8; 2 << 20]);
    let (missing, t2) = http_server("404 Not Found", Vec::new());
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "bench",
        "--path",
        dir.path().to_str().unwrap(),
        "--download-url",
        &url,
        "--download-url",
        &missing,
    ];
    args.extend_from_slice(SMALL);
    let run = gpuenv_in(dir.path(), &args);
    t.join().unwrap();
    t2.join().unwrap();
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = json(&run);
    assert_eq!(
        metrics(&figures(&doc), Engine::Gpuenv)
            .iter()
            .filter(|m| **m == Metric::Download)
            .count(),
        1
    );
    let skipped = doc["skipped"].to_string();
    assert!(
        skipped.contains("download") && skipped.contains("404"),
        "{skipped}"
    );

    let run = gpuenv_in(
        dir.path(),
        &[
            "bench",
            "--host-only",
            "--download-url",
            "ftp://x/y",
            "--path",
            ".",
        ],
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
}

fn refused(dir: &Path, args: &[&str], says: &str) {
    let run = gpuenv_in(dir, args);
    assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
    assert!(run.stderr.contains(says), "{args:?}: {}", run.stderr);
    assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
}

#[test]
fn bad_input_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = d.join("file");
    std::fs::write(&file, b"x").unwrap();
    let base = ["bench", "--host-only", "--no-download", "--allow-system-disk"];
    let with = |extra: &[&str]| -> Vec<String> { base.iter().chain(extra).map(|s| s.to_string()).collect() };
    let run_refused = |extra: &[&str], says: &str| {
        let args = with(extra);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        refused(d, &refs, says);
    };
    run_refused(&["--path", d.join("missing").to_str().unwrap()], "does not exist");
    run_refused(&["--path", file.to_str().unwrap()], "is not a directory");
    run_refused(
        &["--path", d.to_str().unwrap(), "--disk-size", "12 parsecs"],
        "--disk-size",
    );
    run_refused(
        &["--path", d.to_str().unwrap(), "--disk-size", "1MiB"],
        "out of range",
    );
    run_refused(&["--path", d.to_str().unwrap(), "--burn", "forever"], "--burn");
    run_refused(
        &["--path", d.to_str().unwrap(), "--record", file.to_str().unwrap()],
        "not a directory",
    );
    // Not enough free space: a file as large as what is free, and the margin does not fit.
    let free = disk::free_bytes(d).unwrap();
    if free <= disk::MAX_FILE_BYTES {
        let size = (free / (1 << 20)).max(16).to_string() + "MiB";
        run_refused(&["--path", d.to_str().unwrap(), "--disk-size", &size], "free");
    }
    // The system disk without --allow-system-disk.
    refused(
        d,
        &["bench", "--host-only", "--no-download", "--path", "/"],
        "system disk",
    );
    assert_eq!(
        std::fs::read_dir(d).unwrap().count(),
        1,
        "only the file the test made"
    );
}

#[test]
fn gpu_only_says_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let run = gpuenv_in(dir.path(), &["bench", "--gpu-only", "--json"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    let doc = json(&run);
    assert!(doc["figures"].as_array().unwrap().is_empty());
    // This machine has no CUDA torch: the script's part says so and what to give.
    let skipped = doc["skipped"].to_string();
    assert!(skipped.contains("no Python with a CUDA torch"), "{skipped}");
    assert!(
        run.stderr.contains("--gpu-only: no GPU figure could be measured"),
        "{}",
        run.stderr
    );
}
