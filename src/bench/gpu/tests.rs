//! The script's line format, the arithmetic, and the script itself run for real: with a
//! Python that has no torch, and with the stand-in torch of
//! `tests/fixtures/bench/fake-torch` (which takes it through every path, measuring
//! nothing).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;
use crate::host::system::{RealSystem, Recording};

/// A run of the script on 2 GPUs, CONSTRUCTED for this test only to check the parsing
/// and the arithmetic (round numbers whose results are worked out by hand below): not a
/// measurement. A real run's output is kept under tests/fixtures/bench/.
const CONSTRUCTED_2GPU: &str = r#"
NCCL INFO Bootstrap : Using lo:127.0.0.1<0>
{"kind": "header", "script_version": 1, "mode": "quick", "python": "3.12.3", "torch": "2.11.0+cu130", "cuda": "13.0", "cudnn": 91002, "nccl": "2.27.7", "torchvision": "0.26.0+cu130", "burn_seconds": null, "gpus": [{"index": 0, "name": "NVIDIA H200", "cc": "9.0", "memory_bytes": 150754820096, "sm_count": 132, "pci_bus_id": 24}, {"index": 1, "name": "NVIDIA H200", "cc": "9.0", "memory_bytes": 150754820096, "sm_count": 132, "pci_bus_id": 42}]}
{"kind": "matmul", "gpu": 0, "dtype": "bf16", "m": 8192, "n": 8192, "k": 8192, "iters": 100, "seconds": 0.2}
{"kind": "matmul", "gpu": 0, "dtype": "fp8", "m": 8192, "n": 8192, "k": 8192, "iters": 200, "seconds": 0.2, "fast_accum": true, "fp8_format": "e4m3fn"}
{"kind": "matmul", "gpu": 1, "dtype": "tf32", "m": 4096, "n": 4096, "k": 4096, "iters": 125, "seconds": 0.25}
{"kind": "copy", "direction": "d2d", "gpu": 0, "bytes": 1000000000, "iters": 10, "seconds": 5.0}
{"kind": "copy", "direction": "h2d", "gpu": 0, "bytes": 250000000, "iters": 40, "seconds": 0.2, "pinned": true}
{"kind": "copy", "direction": "d2h", "gpu": 1, "bytes": 250000000, "iters": 40, "seconds": 0.25, "pinned": true}
{"kind": "copy", "direction": "p2p", "gpu": 0, "peer": 1, "bytes": 268435456, "iters": 100, "seconds": 0.1, "peer_access": true, "timer": "wall"}
{"kind": "skipped", "what": "matmul fp8", "gpu": 1, "reason": "RuntimeError: \u001b[31mno kernel\u001b[0m"}
{"kind": "all_reduce", "ranks": 2, "gpus": [0, 1], "bytes": 33554432, "dtype": "float32", "op": "sum", "iters": 20, "seconds": 0.02}
{"kind": "all_reduce", "ranks": 2, "gpus": [0, 1], "bytes": 1000000000, "dtype": "float32", "op": "sum", "iters": 20, "seconds": 0.1}
{"kind": "resnet50", "gpu": 1, "batch": 128, "precision": "amp-bf16", "channels_last": true, "steps": 15, "seconds": 0.64, "image_size": 224}
{"kind": "a-kind-of-a-later-script", "gpu": 0}
{"kind": "done", "seconds": 31.5}
"#;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

fn value(run: &GpuRun, metric: Metric, gpu: Option<u32>) -> f64 {
    run.figures
        .iter()
        .find(|f| f.metric == metric && f.gpu == gpu)
        .unwrap_or_else(|| panic!("no {metric:?} of {gpu:?} in {:#?}", run.figures))
        .value
}

/// The options most tests run the script with: the quick pass over every GPU.
const QUICK: GpuOptions = GpuOptions {
    mode: Mode::Quick,
    gpus: None,
};

#[test]
fn the_arithmetic_of_a_constructed_two_gpu_run() {
    let run = parse(CONSTRUCTED_2GPU).unwrap();
    assert!(run.finished);
    assert_eq!(run.header.torch.as_deref(), Some("2.11.0+cu130"));
    assert_eq!(
        run.gpus,
        vec![
            BenchGpu {
                index: 0,
                name: "NVIDIA H200".into(),
                memory_mib: Some(143771),
            },
            BenchGpu {
                index: 1,
                name: "NVIDIA H200".into(),
                memory_mib: Some(143771),
            }
        ]
    );
    // 2 x 8192^3 x 100 / 0.2 s = 549.755813888 TFLOPS.
    assert!(close(value(&run, Metric::MatmulBf16, Some(0)), 549.755_813_888));
    assert!(close(value(&run, Metric::MatmulFp8, Some(0)), 1_099.511_627_776));
    // 2 x 4096^3 x 125 / 0.25 s = 68.719476736.
    assert!(close(value(&run, Metric::MatmulTf32, Some(1)), 68.719_476_736));
    // A device copy counts read plus write: 2 x 10^9 x 10 / 5 s = 4 GB/s.
    assert!(close(value(&run, Metric::MemoryBandwidth, Some(0)), 4.0));
    // 2.5 x 10^8 x 40 / 0.2 s = 50 GB/s; / 0.25 s = 40 GB/s.
    assert!(close(value(&run, Metric::HostToDevice, Some(0)), 50.0));
    assert!(close(value(&run, Metric::DeviceToHost, Some(1)), 40.0));
    let p2p = run
        .figures
        .iter()
        .find(|f| f.metric == Metric::PeerToPeer)
        .unwrap();
    assert_eq!((p2p.gpu, p2p.peer), (Some(0), Some(1)));
    assert!(close(p2p.value, 268_435_456.0 * 100.0 / 0.1 / 1e9));
    // The largest all_reduce: algbw 10^9 / (0.1 s / 20) = 200 GB/s; busbw x 2(2-1)/2 = 200.
    let nccl: Vec<&Figure> = run
        .figures
        .iter()
        .filter(|f| f.metric == Metric::NcclBusbw)
        .collect();
    assert_eq!(nccl.len(), 1);
    assert!(close(nccl[0].value, 200.0));
    assert!(
        nccl[0].detail.contains("1000000000 bytes over 2 ranks"),
        "{}",
        nccl[0].detail
    );
    // 128 x 15 / 0.64 s = 3000 images/s.
    assert!(close(value(&run, Metric::Resnet50, Some(1)), 3000.0));
    // The reason from outside is shown cleaned: no escape sequence reaches a terminal.
    assert_eq!(
        run.skipped,
        vec!["matmul fp8 on GPU 1: RuntimeError: no kernel".to_string()]
    );
    for f in &run.figures {
        assert_eq!(f.engine, Engine::Gpuenv);
        assert_eq!(f.unit, f.metric.unit());
    }
}

#[test]
fn busbw_follows_nccl_tests_for_eight_ranks() {
    let a = AllReduce {
        ranks: 8,
        gpus: (0..8).collect(),
        bytes: 1 << 30,
        iters: 50,
        seconds: 0.25,
        dtype: "float32".into(),
    };
    let alg = (1u64 << 30) as f64 / (0.25 / 50.0) / 1e9;
    assert!(close(algbw(&a).unwrap(), alg));
    assert!(close(busbw(&a).unwrap(), alg * 2.0 * 7.0 / 8.0));
    let one = AllReduce { ranks: 1, ..a };
    assert!(busbw(&one).unwrap_err().contains("1 rank"));
}

fn one_line(line: &str) -> Result<GpuRun, String> {
    let header = r#"{"kind":"header","script_version":1,"gpus":[]}"#;
    parse(&format!("{header}\n{line}\n"))
}

#[test]
fn lines_that_are_not_measurements_are_refused_with_their_number() {
    for (line, why) in [
        (
            r#"{"kind":"matmul","gpu":0,"dtype":"bf16","m":1,"n":1,"k":1,"iters":1,"seconds":0}"#,
            "not a measured time",
        ),
        (
            r#"{"kind":"matmul","gpu":0,"dtype":"bf16","m":1,"n":1,"k":1,"iters":1,"seconds":-2.5}"#,
            "not a measured time",
        ),
        (
            r#"{"kind":"matmul","gpu":0,"dtype":"bf16","m":1,"n":1,"k":1,"iters":0,"seconds":1}"#,
            "iters is 0",
        ),
        (
            r#"{"kind":"matmul","gpu":0,"dtype":"int4","m":1,"n":1,"k":1,"iters":1,"seconds":1}"#,
            "unknown matmul type",
        ),
        (
            r#"{"kind":"matmul","gpu":0,"dtype":"bf16","m":18446744073709551615,"n":18446744073709551615,"k":18446744073709551615,"iters":1,"seconds":1}"#,
            "too large",
        ),
        (
            r#"{"kind":"copy","direction":"p2p","gpu":0,"bytes":1,"iters":1,"seconds":1}"#,
            "without its peer",
        ),
        (
            r#"{"kind":"copy","direction":"sideways","gpu":0,"bytes":1,"iters":1,"seconds":1}"#,
            "not one of its lines",
        ),
        (
            r#"{"kind":"all_reduce","ranks":1,"bytes":8,"iters":1,"seconds":1}"#,
            "1 rank",
        ),
        (
            r#"{"kind":"resnet50","gpu":0,"batch":-1,"precision":"x","steps":1,"seconds":1}"#,
            "not one of its lines",
        ),
        (r#"{"kind":"matmul", "gpu": 0"#, "not one of its lines"),
        (
            r#"{"kind":"heartbeat","gpu":0,"elapsed":-1,"iters":3}"#,
            "not a time",
        ),
    ] {
        let err = one_line(line).unwrap_err();
        assert!(err.starts_with("line 2 of the script's output"), "{line}: {err}");
        assert!(err.contains(why), "{line}: {err}");
    }
}

#[test]
fn an_output_without_a_header_or_of_another_version_is_refused() {
    assert!(parse("").unwrap_err().contains("no header"));
    assert!(
        parse("Traceback (most recent call last):\n")
            .unwrap_err()
            .contains("no header")
    );
    let err = parse(r#"{"kind":"header","script_version":2}"#).unwrap_err();
    assert!(err.contains("script version 2"), "{err}");
    let long = format!(
        "{{\"kind\":\"skipped\",\"what\":\"x\",\"reason\":\"{}\"}}",
        "a".repeat(MAX_LINE)
    );
    assert!(one_line(&long).unwrap_err().contains("longer than"));
}

#[test]
fn how_the_process_ended_is_kept_beside_what_it_printed() {
    let ok = CONSTRUCTED_2GPU;
    let run = read_output("python3", &Outcome::Exited, Some(0), ok, "").unwrap();
    assert!(run.skipped.iter().all(|s| !s.contains("ended")));
    let cut = read_output("python3", &Outcome::TimedOut, None, ok, "").unwrap();
    assert!(
        cut.skipped.last().unwrap().contains("cut off"),
        "{:?}",
        cut.skipped
    );
    let died = read_output(
        "python3",
        &Outcome::Exited,
        Some(1),
        ok,
        "Traceback (most recent call last):\n  File x\nRuntimeError: CUDA error: an illegal memory access\n",
    )
    .unwrap();
    let last = died.skipped.last().unwrap();
    assert!(
        last.contains("status 1") && last.contains("illegal memory access"),
        "{last}"
    );
    let refused = read_output(
        "python3",
        &Outcome::Exited,
        Some(2),
        "",
        "gpuenv bench script: --gpus expects",
    )
    .unwrap_err();
    assert!(
        refused.contains("refused its arguments") && refused.contains("--gpus expects"),
        "{refused}"
    );
    assert!(
        read_output("/no/python", &Outcome::NotFound, None, "", "")
            .unwrap_err()
            .contains("/no/python")
    );
}

#[test]
fn the_options_become_the_scripts_arguments() {
    let quick = GpuOptions {
        mode: Mode::Quick,
        gpus: None,
    };
    assert_eq!(quick.args(), vec!["--quick"]);
    let full = GpuOptions {
        mode: Mode::Full,
        gpus: Some(vec![0, 3]),
    };
    assert_eq!(full.args(), vec!["--full", "--gpus", "0,3"]);
    assert!(full.time_limit() > quick.time_limit());
    assert!(SCRIPT.starts_with(SCRIPT_MARK));
    assert!(SCRIPT.contains(&format!("SCRIPT_VERSION = {SCRIPT_VERSION}")));
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn real(timeout: Duration) -> RealSystem {
    RealSystem {
        timeout,
        docker: Box::new(|| Err("not asked".into())),
    }
}

#[test]
fn the_script_and_its_worker_compile() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("script.py");
    std::fs::write(&file, SCRIPT).unwrap();
    let out = crate::host::system::run_with_timeout(
        "python3",
        &["-m", "py_compile", file.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert!(out.ok(), "{out:?}");
    // The worker runs as `python -c WORKER`: its text is compiled apart.
    let check = "import ast, sys\n\
                 tree = ast.parse(open(sys.argv[1]).read())\n\
                 [w] = [n.value.value for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], 'id', '') == 'WORKER']\n\
                 compile(w, 'WORKER', 'exec')\n\
                 print('ok')";
    let out = crate::host::system::run_with_timeout(
        "python3",
        &["-c", check, file.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert!(out.ok() && out.stdout.trim() == "ok", "{out:?}");
}

#[test]
fn without_torch_the_script_says_so_and_exits_0() {
    // The machine's python3 has no torch (the tests' machines have no GPU). `-I` keeps a
    // user's site-packages out, so the answer does not depend on who runs the test.
    let dir = tempfile::tempdir().unwrap();
    let python = wrapper(dir.path(), "exec python3 -I \"$@\"");
    let sys = real(Duration::from_secs(60));
    let out = run_script(&sys, &python, &["--quick".to_string()]);
    assert!(out.ok(), "{out:?}");
    let run = measure(&sys, &python, &QUICK).unwrap();
    assert!(run.finished);
    assert!(run.figures.is_empty());
    assert_eq!(run.header.torch, None);
    assert_eq!(run.skipped.len(), 1, "{:?}", run.skipped);
    assert!(
        run.skipped[0].starts_with("all: torch is not importable"),
        "{:?}",
        run.skipped
    );
}

/// An executable shell script in `dir` that runs `body`.
fn wrapper(dir: &Path, body: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("python");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

/// A Python that finds the stand-in torch first.
fn fake_torch_python(dir: &Path, env: &str) -> String {
    let fake = root().join("tests/fixtures/bench/fake-torch");
    // `-s`: a user's own site-packages (a real torch) stays out; PYTHONPATH reaches the
    // workers the script starts, too.
    wrapper(
        dir,
        &format!(
            "{env} PYTHONDONTWRITEBYTECODE=1 PYTHONPATH='{}' exec python3 -s \"$@\"",
            fake.display()
        ),
    )
}

#[test]
fn through_the_stand_in_torch_every_path_prints_lines_gpuenv_reads() {
    let dir = tempfile::tempdir().unwrap();
    let python = fake_torch_python(dir.path(), "FAKE_TORCH_GPUS=3");
    let sys = real(Duration::from_secs(120));
    let run = measure(&sys, &python, &QUICK).unwrap();
    assert!(run.finished, "{run:#?}");
    assert!(run.skipped.is_empty(), "{:?}", run.skipped);
    assert_eq!(run.gpus.len(), 3);
    for g in 0..3 {
        for m in [
            Metric::MatmulBf16,
            Metric::MatmulFp16,
            Metric::MatmulTf32,
            Metric::MatmulFp8,
            Metric::MemoryBandwidth,
            Metric::HostToDevice,
            Metric::DeviceToHost,
            Metric::Resnet50,
        ] {
            assert!(value(&run, m, Some(g)) > 0.0);
        }
    }
    // Every ordered pair, and one all_reduce over the three ranks.
    assert_eq!(
        run.figures
            .iter()
            .filter(|f| f.metric == Metric::PeerToPeer)
            .count(),
        6
    );
    let nccl = run
        .figures
        .iter()
        .find(|f| f.metric == Metric::NcclBusbw)
        .unwrap();
    assert!(nccl.detail.contains("over 3 ranks"), "{}", nccl.detail);

    // One GPU of compute capability 8.0: no FP8, no pair, no all_reduce, each said why.
    let python = fake_torch_python(dir.path(), "FAKE_TORCH_GPUS=1 FAKE_TORCH_CC=8.0");
    let run = measure(
        &sys,
        &python,
        &GpuOptions {
            mode: Mode::Quick,
            gpus: Some(vec![0]),
        },
    )
    .unwrap();
    let skipped = run.skipped.join("\n");
    assert!(
        skipped.contains("matmul fp8 on GPU 0: FP8 tensor cores need compute capability 8.9"),
        "{skipped}"
    );
    assert!(skipped.contains("all_reduce: one GPU"), "{skipped}");
    assert!(skipped.contains("copy p2p: one GPU"), "{skipped}");
}

#[test]
fn a_failing_nccl_rank_is_a_reason_and_its_peers_are_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let python = fake_torch_python(dir.path(), "FAKE_TORCH_GPUS=2 FAKE_TORCH_FAIL_RANK=1");
    let sys = real(Duration::from_secs(120));
    let run = measure(&sys, &python, &QUICK).unwrap();
    assert!(run.finished);
    let why = run.skipped.iter().find(|s| s.starts_with("all_reduce:")).unwrap();
    assert!(why.contains("NCCL error: unhandled system error (fake)"), "{why}");
}

#[test]
fn burn_mode_prints_each_gpus_total() {
    let dir = tempfile::tempdir().unwrap();
    let python = fake_torch_python(dir.path(), "FAKE_TORCH_GPUS=2");
    let sys = real(Duration::from_secs(60));
    let out = run_script(&sys, &python, &["--burn".into(), "1".into()]);
    let run = read_output(
        &python,
        &out.outcome,
        out.status.map(i64::from),
        &out.stdout,
        &out.stderr,
    )
    .unwrap();
    assert!(run.finished && run.skipped.is_empty(), "{run:#?}");
    let mut gpus: Vec<u32> = run.burn.iter().map(|m| m.gpu).collect();
    gpus.sort();
    assert_eq!(gpus, vec![0, 1]);
    assert!(run.burn.iter().all(|m| m.seconds >= 1.0 && m.iters > 0));
}

#[test]
fn a_recorded_run_replays_under_the_scripts_name() {
    let dir = tempfile::tempdir().unwrap();
    let python = wrapper(dir.path(), "exec python3 -I \"$@\"");
    let rec = Recording::capture(Box::new(real(Duration::from_secs(60))), "test".into());
    let live = measure(&rec, &python, &QUICK).unwrap();
    let record = rec.record();
    let key = format!("{python} -c <gpu-bench> --quick");
    assert!(record.commands.contains_key(&key), "{:?}", record.commands.keys());
    let replayed = measure(&Recording::replay(record), &python, &QUICK).unwrap();
    assert_eq!(live.skipped, replayed.skipped);
    assert_eq!(live.header, replayed.header);
}

#[test]
fn the_python_doctor_found_with_a_cuda_torch_is_chosen() {
    use crate::host::{PythonEnv, TorchProbe};
    let cpu = PythonEnv {
        path: "/usr/bin/python3".into(),
        torch: Some(TorchProbe {
            version: "2.5.1+cpu".into(),
            ..TorchProbe::default()
        }),
        ..PythonEnv::default()
    };
    let cuda = PythonEnv {
        path: "/opt/venv/bin/python".into(),
        torch: Some(TorchProbe {
            version: "2.11.0+cu130".into(),
            cuda: Some("13.0".into()),
            cuda_available: true,
            ..TorchProbe::default()
        }),
        ..PythonEnv::default()
    };
    assert_eq!(cuda_python(&[cpu.clone(), cuda]), Some("/opt/venv/bin/python"));
    assert_eq!(cuda_python(&[cpu]), None);
}

/// Whether process `pid` is still running (not gone, not a zombie waiting for a reaper).
fn running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .is_some_and(|zombie| !zombie)
}

#[test]
fn a_burn_whose_parent_dies_stops_with_its_workers() {
    // A shell starts the burn in the background, prints its pid and the workers', and
    // exits: as gpuenv killed outright would leave it.
    let dir = tempfile::tempdir().unwrap();
    let python = fake_torch_python(dir.path(), "FAKE_TORCH_GPUS=2");
    let script = dir.path().join("script.py");
    std::fs::write(&script, SCRIPT).unwrap();
    let out = crate::host::system::run_with_timeout(
        "sh",
        &[
            "-c",
            "\"$0\" \"$1\" --burn 120 >/dev/null 2>&1 & sleep 2; echo $!; pgrep -P $! || true",
            &python,
            script.to_str().unwrap(),
        ],
        Duration::from_secs(30),
    );
    let pids: Vec<String> = out.stdout.split_whitespace().map(str::to_string).collect();
    assert!(pids.len() >= 3, "the script and its 2 workers: {out:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|p| running(p)) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let alive: Vec<&String> = pids.iter().filter(|p| running(p)).collect();
    assert!(
        alive.is_empty(),
        "still running after their parent went: {alive:?}"
    );
}

#[test]
fn a_constructed_eight_gpu_run_with_one_slow_gpu_reads_whole() {
    let text =
        std::fs::read_to_string(root().join("tests/fixtures/bench/gpu/constructed-8gpu-slow-gpu5.jsonl"))
            .unwrap();
    let run = parse(&text).unwrap();
    assert!(run.finished && run.skipped.is_empty());
    assert_eq!(run.gpus.len(), 8);
    // 8 GPUs x (4 matmuls, 3 copies, ResNet-50) + 56 ordered pairs + 1 all_reduce.
    assert_eq!(run.figures.len(), 8 * 8 + 56 + 1);
    let bf16 = by_gpu(&run.figures, Metric::MatmulBf16);
    assert_eq!(bf16.len(), 8);
    for (g, v) in &bf16 {
        let want = if *g == 5 { 720.0 * 0.6 } else { 720.0 };
        assert!((v - want).abs() / want < 0.01, "GPU {g}: {v}");
    }
    let mem = by_gpu(&run.figures, Metric::MemoryBandwidth);
    assert!((mem[&0] - 4100.0).abs() < 1.0, "{mem:?}");
    let nccl = run
        .figures
        .iter()
        .find(|f| f.metric == Metric::NcclBusbw)
        .unwrap();
    assert!((nccl.value - 480.0).abs() < 0.5, "{}", nccl.value);
    let resnet = by_gpu(&run.figures, Metric::Resnet50);
    assert!((resnet[&5] - 1800.0).abs() < 1.0, "{resnet:?}");
}
