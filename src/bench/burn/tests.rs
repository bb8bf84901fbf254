//! The burn-in's reading of nvidia-smi's samples and its rules, on recorded sequences
//! (see tests/fixtures/bench/README.md for where each came from) and readings of the
//! health before and after.

use super::*;
use crate::host::{GpuInfo, GpuState, MemoryRepair, XidEvent};
use crate::model::Sourced;

const CLEAN: &str = include_str!("../../../tests/fixtures/bench/burn/constructed-4gpu-clean.csv");
const THERMAL: &str = include_str!("../../../tests/fixtures/bench/burn/constructed-4gpu-thermal-gpu2.csv");

fn host(gpus: u32, ecc: u64, xids: Vec<XidEvent>) -> HostReport {
    HostReport {
        gpus: (0..gpus)
            .map(|index| GpuInfo {
                index,
                name: "NVIDIA H200".into(),
                ecc_uncorrected_volatile: Some(ecc),
                ecc_uncorrected_aggregate: Some(0),
                state: Some(GpuState {
                    source: "test".into(),
                    repair: Some(MemoryRepair {
                        remap_pending: Some(false),
                        remap_failure: Some(false),
                        remapped_uncorrectable: Some(0),
                        ..MemoryRepair::default()
                    }),
                    ..GpuState::default()
                }),
                ..GpuInfo::default()
            })
            .collect(),
        kernel_log: Some(Sourced::new(xids, "journalctl -k")),
        ..HostReport::default()
    }
}

/// What the script printed for a burn-in of `secs` on `gpus`, each at `tflops`.
fn script_run(gpus: &[(u32, f64)], secs: f64) -> GpuRun {
    GpuRun {
        burn: gpus
            .iter()
            .map(|&(gpu, tflops)| {
                let per = 2.0 * 8192f64.powi(3) / 1e12;
                Matmul {
                    gpu,
                    dtype: "bf16".into(),
                    m: 8192,
                    n: 8192,
                    k: 8192,
                    iters: (tflops * secs / per) as u64,
                    seconds: secs,
                    fast_accum: None,
                }
            })
            .collect(),
        finished: true,
        ..GpuRun::default()
    }
}

const FOUR: [u32; 4] = [0, 1, 2, 3];

fn even(t: f64) -> GpuRun {
    script_run(&[(0, t), (1, t), (2, t), (3, t)], 30.0)
}

/// The burn-in of four GPUs for 30 s whose health did not change: only the samples and
/// the load decide.
fn healthy(samples: &[Sample], run: Result<&GpuRun, &str>) -> BurnResult {
    judge(30, &FOUR, &host(4, 0, vec![]), &host(4, 0, vec![]), samples, run)
}

#[test]
fn the_samples_are_read_field_by_field() {
    let (samples, passed) = parse_samples(THERMAL).unwrap();
    assert_eq!((samples.len(), passed), (160, 0));
    let hot = samples
        .iter()
        .find(|s| s.gpu == 2 && s.timestamp == "2026/12/04 19:30:20.120")
        .unwrap();
    assert_eq!(hot.utilization, Some(100));
    assert_eq!(hot.sm_clock_max, Some(1980));
    assert_eq!(hot.temperature, Some(88));
    assert_eq!(hot.power_limit, Some(700.0));
    assert_eq!(hot.active, Some(0x60));
    assert_eq!(
        (hot.hw_thermal, hot.sw_thermal, hot.hw_power_brake),
        (Some(true), Some(true), Some(false))
    );

    // `[N/A]` fields are unknown, a line cut off by the stop is passed over, a line that
    // is not a sample at all refuses the output.
    let csv = "0, 2026/12/04 19:30:01.000, 100, 1980, 1980, 60, [N/A], [N/A], [Not Supported], [N/A], [N/A], [N/A], [N/A]\n1, 2026/12/04 19:30:01.0";
    let (samples, passed) = parse_samples(csv).unwrap();
    assert_eq!((samples.len(), passed), (1, 1));
    assert_eq!(
        (samples[0].power, samples[0].active, samples[0].hw_thermal),
        (None, None, None)
    );
    let err = parse_samples(
        "Failed to initialize NVML: Driver/library version mismatch, a, b, c, d, e, f, g, h, i, j, k, l",
    )
    .unwrap_err();
    assert!(err.contains("line 1"), "{err}");
}

#[test]
fn a_clean_sequence_passes() {
    let (samples, _) = parse_samples(CLEAN).unwrap();
    let r = healthy(&samples, Ok(&even(700.0)));
    assert_eq!(r.verdict, Verdict::Pass, "{:#?}", r.findings);
    assert!(r.findings.is_empty());
    assert_eq!(r.gpus.len(), 4);
    for g in &r.gpus {
        assert_eq!((g.samples, g.samples_under_load, g.thermal_samples), (40, 32, 0));
        assert!(g.sm_clock_median.unwrap() >= 1935);
        // The power cap under full load is counted, not failed.
        assert!(g.power_cap_samples > 0);
        assert!((g.tflops.unwrap() - 700.0).abs() < 1.0);
    }
}

#[test]
fn a_thermal_slowdown_on_one_gpu_fails_naming_it() {
    let (samples, _) = parse_samples(THERMAL).unwrap();
    let r = healthy(&samples, Ok(&even(700.0)));
    assert_eq!(r.verdict, Verdict::Fail);
    let thermal: Vec<&Finding> = r
        .findings
        .iter()
        .filter(|f| f.code == "burn-thermal-slowdown")
        .collect();
    assert_eq!(thermal.len(), 1, "{:#?}", r.findings);
    assert_eq!(thermal[0].gpu, Some(2));
    assert!(
        thermal[0]
            .found
            .starts_with("GPU 2 slowed down for heat in 16 of 32 samples under load"),
        "{}",
        thermal[0].found
    );
    assert!(thermal[0].rule.contains("nvmlClocksEventReasons"));
    // Its clock, half the time near 1400 MHz, is also far below its peers'.
    let slow: Vec<&Finding> = r
        .findings
        .iter()
        .filter(|f| f.code == "burn-slow-clock")
        .collect();
    assert_eq!(slow.len(), 1, "{:#?}", r.findings);
    assert_eq!(slow[0].gpu, Some(2));
    assert!(r.findings.iter().all(|f| f.gpu == Some(2)), "{:#?}", r.findings);
}

#[test]
fn a_gpu_slower_than_its_peers_fails_and_one_within_the_fraction_passes() {
    let (samples, _) = parse_samples(CLEAN).unwrap();
    let slow = script_run(&[(0, 700.0), (1, 690.0), (2, 600.0), (3, 705.0)], 30.0);
    let r = healthy(&samples, Ok(&slow));
    let found: Vec<(&str, Option<u32>)> = r.findings.iter().map(|f| (f.code.as_str(), f.gpu)).collect();
    assert_eq!(found, vec![("burn-slow-matmul", Some(2))]);
    let near = script_run(&[(0, 700.0), (1, 690.0), (2, 640.0), (3, 705.0)], 30.0);
    let r = healthy(&samples, Ok(&near));
    assert_eq!(r.verdict, Verdict::Pass, "{:#?}", r.findings);
}

#[test]
fn new_memory_errors_and_xids_fail_old_ones_do_not() {
    let (samples, _) = parse_samples(CLEAN).unwrap();
    let old = XidEvent {
        xid: 31,
        device: "PCI:0000:18:00".into(),
        text: "pid=1234, name=python, Ch 00000008, intr 00000000".into(),
    };
    let new = XidEvent {
        xid: 48,
        device: "PCI:0000:2a:00".into(),
        text: "An uncorrectable double bit error (DBE) has been detected".into(),
    };
    let before = host(4, 0, vec![old.clone()]);
    let same = judge(
        30,
        &FOUR,
        &before,
        &host(4, 0, vec![old.clone()]),
        &samples,
        Ok(&even(700.0)),
    );
    assert_eq!(same.verdict, Verdict::Pass, "{:#?}", same.findings);

    let mut after = host(4, 0, vec![old.clone(), new]);
    after.gpus[1].ecc_uncorrected_volatile = Some(2);
    if let Some(r) = after.gpus[3].state.as_mut().and_then(|s| s.repair.as_mut()) {
        r.remap_pending = Some(true);
    }
    let r = judge(30, &FOUR, &before, &after, &samples, Ok(&even(700.0)));
    assert_eq!(r.verdict, Verdict::Fail);
    let by = |code: &str| r.findings.iter().filter(|f| f.code == code).collect::<Vec<_>>();
    let mem = by("burn-memory-errors");
    assert_eq!(
        mem.iter().map(|f| f.gpu).collect::<Vec<_>>(),
        vec![Some(1), Some(3)]
    );
    assert!(
        mem[0]
            .found
            .contains("uncorrected ECC errors (volatile) went from 0 to 2")
    );
    assert!(mem[1].found.contains("a pending row remap turned on"));
    let xid = by("burn-xid");
    assert_eq!(xid.len(), 1);
    assert!(
        xid[0].found.contains("gained 1 XID line(s)") && xid[0].found.contains("Xid 48 on PCI:0000:2a:00"),
        "{}",
        xid[0].found
    );
}

#[test]
fn missing_readings_warn_and_a_load_that_did_not_run_fails() {
    let mut unread = host(4, 0, vec![]);
    unread.kernel_log = None;
    let r = judge(30, &FOUR, &unread, &unread, &[], Ok(&even(700.0)));
    assert_eq!(r.verdict, Verdict::Warn, "{:#?}", r.findings);
    assert_eq!(
        r.findings.iter().filter(|f| f.code == "burn-no-samples").count(),
        4
    );
    assert_eq!(
        r.findings
            .iter()
            .filter(|f| f.code == "burn-health-unread")
            .count(),
        1
    );

    let (samples, _) = parse_samples(CLEAN).unwrap();
    let three = script_run(&[(0, 700.0), (1, 700.0), (3, 700.0)], 30.0);
    let r = healthy(&samples, Ok(&three));
    let failed: Vec<Option<u32>> = r
        .findings
        .iter()
        .filter(|f| f.code == "burn-load-failed")
        .map(|f| f.gpu)
        .collect();
    assert_eq!(failed, vec![Some(2)]);
    let r = healthy(&samples, Err("`python3` is not there to run"));
    assert_eq!(r.verdict, Verdict::Fail);
    assert!(r.findings[0].found.contains("is not there to run"));
}

#[test]
fn the_median_is_a_measured_value() {
    assert_eq!(median(&[3, 1, 2]), Some(2));
    assert_eq!(median(&[4, 1, 3, 2]), Some(2));
    assert_eq!(median::<u32>(&[]), None);
    assert_eq!(
        median(&[f64::NAN, 1.0]).map(|v: f64| v.is_nan() || v == 1.0),
        Some(true)
    );
}

#[test]
fn the_result_travels_in_the_bench_document() {
    let (samples, _) = parse_samples(THERMAL).unwrap();
    let r = healthy(&samples, Ok(&even(700.0)));
    let doc = crate::bench::BenchDoc {
        burn: Some(r.clone()),
        ..crate::bench::BenchDoc::default()
    };
    let json = serde_json::to_string(&doc).unwrap();
    let back: crate::bench::BenchDoc = serde_json::from_str(&json).unwrap();
    assert_eq!(back.burn, Some(r));
    // A document without a burn-in reads as before.
    let plain: crate::bench::BenchDoc = serde_json::from_str(r#"{"schema_version": 1}"#).unwrap();
    assert_eq!(plain.burn, None);
}

fn cmd(stdout: &str, status: i32) -> crate::host::system::CmdOutput {
    crate::host::system::CmdOutput {
        outcome: Outcome::Exited,
        status: Some(status),
        stdout: stdout.into(),
        stderr: String::new(),
    }
}

/// A recorded burn-in of 30 s on 4 GPUs: the script's lines, and the sampler's sequence
/// (asked in the old field names where `old` is set, as a driver before 530 wants).
fn recorded(old: bool) -> crate::host::system::HostRecord {
    let mut r = crate::host::system::HostRecord {
        gpuenv_host_record: 1,
        ..Default::default()
    };
    let new_probe = format!("nvidia-smi --query-gpu={FIELDS} --format=csv,noheader,nounits");
    let old_probe = format!("nvidia-smi --query-gpu={FIELDS_OLD} --format=csv,noheader,nounits");
    let fields = if old { FIELDS_OLD } else { FIELDS };
    if old {
        r.commands.insert(
            new_probe,
            cmd(
                "Field \"clocks_event_reasons.active\" is not a valid field to query.\n",
                2,
            ),
        );
        r.commands
            .insert(old_probe, cmd(THERMAL.lines().next().unwrap(), 0));
    } else {
        r.commands
            .insert(new_probe, cmd(THERMAL.lines().next().unwrap(), 0));
    }
    r.commands.insert(
        format!("timeout --signal=INT 60 nvidia-smi --query-gpu={fields} --format=csv,noheader,nounits -l 1"),
        cmd(THERMAL, 124),
    );
    let mut lines = vec![r#"{"kind":"header","script_version":1,"burn_seconds":30,"gpus":[]}"#.to_string()];
    for g in 0..4 {
        lines.push(format!(
            r#"{{"kind":"heartbeat","gpu":{g},"elapsed":5.0,"iters":3000}}"#
        ));
        lines.push(format!(
            r#"{{"kind":"burn","gpu":{g},"dtype":"bf16","m":8192,"n":8192,"k":8192,"iters":19000,"seconds":30.0}}"#
        ));
    }
    lines.push(r#"{"kind":"done","seconds":41.0}"#.into());
    r.commands.insert(
        "/opt/venv/bin/python -c <gpu-bench> --check --gpus 0,1,2,3".into(),
        cmd(
            &[
                r#"{"kind":"header","script_version":1,"mode":"check","gpus":[{"index":0},{"index":1},{"index":2},{"index":3}]}"#,
                r#"{"kind":"done","seconds":4.0}"#,
            ]
            .join("\n"),
            0,
        ),
    );
    r.commands.insert(
        "/opt/venv/bin/python -c <gpu-bench> --burn 30 --gpus 0,1,2,3".into(),
        cmd(&lines.join("\n"), 0),
    );
    r
}

#[test]
fn a_recorded_burn_in_replays_and_fails_on_the_hot_gpu() {
    for old in [false, true] {
        let sys: Arc<dyn System> = Arc::new(crate::host::system::Recording::replay(recorded(old)));
        let opts = BurnOptions {
            seconds: 30,
            gpus: Some(FOUR.to_vec()),
        };
        let r = run(sys, "/opt/venv/bin/python", &opts, &ProbeOptions::default());
        assert_eq!(r.verdict, Verdict::Fail);
        assert!(
            r.sampler.contains(if old {
                "clocks_throttle_reasons.active"
            } else {
                "clocks_event_reasons.active"
            }),
            "{}",
            r.sampler
        );
        let failed: Vec<(&str, Option<u32>)> = r
            .findings
            .iter()
            .filter(|f| f.verdict == Verdict::Fail)
            .map(|f| (f.code.as_str(), f.gpu))
            .collect();
        assert_eq!(
            failed,
            vec![("burn-thermal-slowdown", Some(2)), ("burn-slow-clock", Some(2))],
            "{:#?}",
            r.findings
        );
        // The replayed host has no health readings: said, not passed over.
        assert!(
            r.findings
                .iter()
                .any(|f| f.code == "burn-health-unread" && f.verdict == Verdict::Warn)
        );
        assert!(r.gpus.iter().all(|g| g.tflops.is_some_and(|t| t > 100.0)));
    }
}

#[test]
fn without_nvidia_smi_nothing_is_sampled_and_that_is_said() {
    let mut rec = recorded(false);
    rec.commands.retain(|k, _| !k.contains("nvidia-smi"));
    let sys: Arc<dyn System> = Arc::new(crate::host::system::Recording::replay(rec));
    let opts = BurnOptions {
        seconds: 30,
        gpus: Some(FOUR.to_vec()),
    };
    let r = run(sys, "/opt/venv/bin/python", &opts, &ProbeOptions::default());
    assert_eq!(r.verdict, Verdict::Warn, "{:#?}", r.findings);
    assert!(
        r.findings
            .iter()
            .any(|f| f.code == "burn-sampler" && f.found.contains("nothing was sampled"))
    );
    assert_eq!(r.sampler, "");
}

#[test]
fn a_burn_in_with_no_gpu_does_not_pass() {
    let r = judge(
        30,
        &[],
        &host(0, 0, vec![]),
        &host(0, 0, vec![]),
        &[],
        Ok(&GpuRun::default()),
    );
    assert_eq!(r.verdict, Verdict::Fail);
    assert!(r.findings.iter().any(|f| f.found == "no GPU was found to load"));
}

#[test]
fn a_python_without_a_cuda_torch_ends_the_burn_in_at_once() {
    let mut rec = recorded(false);
    rec.commands.insert(
        "/opt/venv/bin/python -c <gpu-bench> --check --gpus 0,1,2,3".into(),
        cmd(
            &[
                r#"{"kind":"header","script_version":1,"mode":"check","torch":null,"gpus":[]}"#,
                r#"{"kind":"skipped","what":"all","reason":"torch is not importable: ModuleNotFoundError: No module named 'torch'"}"#,
                r#"{"kind":"done","seconds":0.1}"#,
            ]
            .join("\n"),
            0,
        ),
    );
    let sys: Arc<dyn System> = Arc::new(crate::host::system::Recording::replay(rec));
    let opts = BurnOptions {
        seconds: 30,
        gpus: Some(FOUR.to_vec()),
    };
    let r = run(sys, "/opt/venv/bin/python", &opts, &ProbeOptions::default());
    assert_eq!(r.verdict, Verdict::Fail);
    assert_eq!(r.findings.len(), 1, "{:#?}", r.findings);
    assert!(
        r.findings[0].found.contains("sees no GPU")
            && r.findings[0].found.contains("No module named 'torch'"),
        "{}",
        r.findings[0].found
    );
    assert_eq!(r.sampler, "");
}
