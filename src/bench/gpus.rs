//! The GPU side of a bench, start to end: the engines people trust where they are
//! installed, gpuenv's own script otherwise, and the burn-in.
//!
//! Owns: which Python or image measures, which engine's figure stands when two measured
//! the same thing (the installed engine's: NVIDIA's tools over gpuenv's script), turning
//! an engine's failure into an [`EngineFailure`], and listing every part not measured
//! with its reason. Must not: print, judge a figure, or talk to a program but through the
//! host seam ([`System`]) and [`crate::docker`], so that `--record` keeps every raw output
//! and a recorded host replays it.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::burn::{self, BurnOptions, BurnResult};
use super::engines::{ExternalEngine, dcgm, nccl_tests, nvbandwidth};
use super::figure::{BenchGpu, Engine, EngineFailure, Figure, Metric};
use super::gpu::{self, GpuOptions, Mode};
use crate::host::system::{Outcome, System};
use crate::host::{HostReport, ProbeOptions};

/// What to measure on the GPUs, and with what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuPlan {
    /// How much the script measures.
    pub mode: Mode,
    /// `--python`: the interpreter whose torch measures; else the one `doctor` found.
    pub python: Option<String>,
    /// `--image`: measure inside this image, with the Python named in the pair.
    pub image: Option<(String, String)>,
    /// `--burn`: seconds of full load on every GPU.
    pub burn_seconds: Option<u64>,
    /// The level of `dcgmi diag -r` (1 quick, 2 medium, 3 long).
    pub dcgm_level: u8,
}

/// What the GPU side gave.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuOutcome {
    /// The GPUs measured.
    pub gpus: Vec<BenchGpu>,
    /// Every figure, each naming its engine.
    pub figures: Vec<Figure>,
    /// What was not measured, and why.
    pub skipped: Vec<String>,
    /// What an engine found wrong.
    pub failures: Vec<EngineFailure>,
    /// The burn-in, when asked for.
    pub burn: Option<BurnResult>,
}

/// Runs the GPU side on a host already probed (`host`: its GPUs, and the Pythons
/// `doctor` found). `sys` runs every program; its timeout must cover the longest part
/// (see [`time_limit`]).
pub fn run_gpus(plan: &GpuPlan, sys: Arc<dyn System>, host: &HostReport, probe: &ProbeOptions) -> GpuOutcome {
    let mut out = GpuOutcome {
        gpus: host
            .gpus
            .iter()
            .map(|g| BenchGpu {
                index: g.index,
                name: g.name.clone(),
                memory_mib: g.memory_total_mib,
            })
            .collect(),
        ..GpuOutcome::default()
    };
    // The engines run on the host's own GPUs; inside an image only the script measures.
    if plan.image.is_none() {
        engines(plan, sys.as_ref(), host, &mut out);
    }

    // The host's own torch: the script's where no image is given, and always the
    // burn-in's (its load and nvidia-smi's sampling run side by side on the host).
    let python = plan
        .python
        .clone()
        .or_else(|| gpu::cuda_python(&host.pythons).map(str::to_string));
    let opts = GpuOptions {
        mode: plan.mode,
        gpus: None,
    };
    let run = match (&plan.image, &python) {
        (Some((image, py)), _) => Some(gpu::measure_in_image(image, py, &opts)),
        (None, Some(py)) => Some(gpu::measure(sys.as_ref(), py, &opts)),
        (None, None) => {
            out.skipped
                .push(format!("GPU (gpuenv's script): {}", no_python(host)));
            None
        }
    };
    match run {
        Some(Ok(run)) => {
            if !run.gpus.is_empty() {
                out.gpus = run.gpus.clone();
            }
            keep_script_figures(&mut out, run.figures);
            out.skipped.extend(run.skipped);
        }
        Some(Err(why)) => out.skipped.push(format!("GPU (gpuenv's script): {why}")),
        None => {}
    }

    if let Some(seconds) = plan.burn_seconds {
        let opts = BurnOptions { seconds, gpus: None };
        out.burn = Some(match &python {
            Some(py) => burn::run(sys.clone(), py, &opts, probe),
            None => burn::not_run(&opts, &no_python(host)),
        });
    }
    out
}

/// Why the script did not run: no Python with a CUDA torch was found.
fn no_python(host: &HostReport) -> String {
    let seen = host.pythons.len();
    format!(
        "no Python with a CUDA torch that sees a GPU was found ({seen} Python{} \
         probed); give --python PATH, or --image IMAGE to measure in a container",
        if seen == 1 { "" } else { "s" }
    )
}

/// The script's figures, less those an installed engine measured: NVIDIA's own tools
/// are what users trust, and two figures of one thing from two engines would make the
/// peer rule compare unlike with unlike.
fn keep_script_figures(out: &mut GpuOutcome, figures: Vec<Figure>) {
    let by_engine: BTreeSet<Metric> = out.figures.iter().map(|f| f.metric).collect();
    let mut dropped: BTreeSet<Metric> = BTreeSet::new();
    for f in figures {
        if by_engine.contains(&f.metric) {
            dropped.insert(f.metric);
        } else {
            out.figures.push(f);
        }
    }
    for m in dropped {
        let engines: BTreeSet<&str> = out
            .figures
            .iter()
            .filter(|f| f.metric == m)
            .map(|f| f.engine.name())
            .collect();
        out.skipped.push(format!(
            "{} by gpuenv's script: {} measured it, and its figures stand",
            super::judge::metric_name(m),
            engines.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
}

/// Each installed engine, run and read. Not installed: a line of `skipped`, and gpuenv's
/// script measures instead.
fn engines(plan: &GpuPlan, sys: &dyn System, host: &HostReport, out: &mut GpuOutcome) {
    for engine in ExternalEngine::ALL {
        let program = engine.program();
        let args = match engine {
            ExternalEngine::Dcgm => dcgm::diag_args(plan.dcgm_level),
            ExternalEngine::NcclTests => match u32::try_from(host.gpus.len()) {
                Ok(n) if n >= 2 => {
                    let smallest = host.gpus.iter().map(|g| g.memory_total_mib).min().flatten();
                    nccl_tests::all_reduce_args(n, nccl_tests::largest_gib(smallest))
                }
                _ => {
                    // One GPU has no bus to measure; none found means nvidia-smi saw none.
                    if sys.run(program, &["--help"]).outcome != Outcome::NotFound {
                        out.skipped.push(format!(
                            "{program}: not run, an all-reduce needs two GPUs and the host probe found {}",
                            host.gpus.len()
                        ));
                    }
                    continue;
                }
            },
            ExternalEngine::Nvbandwidth => Ok(nvbandwidth::args()),
        };
        let args = match args {
            Ok(a) => a,
            Err(e) => {
                out.skipped.push(format!("{program}: {e}"));
                continue;
            }
        };
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let ran = sys.run(program, &argv);
        match ran.outcome {
            Outcome::NotFound => {
                out.skipped.push(format!(
                    "{program} is not installed: {}",
                    match engine {
                        ExternalEngine::Dcgm => "no DCGM diagnostic ran (NVIDIA's datacenter-gpu-manager)",
                        _ => "gpuenv's script measured instead",
                    }
                ));
                continue;
            }
            Outcome::TimedOut => {
                out.skipped.push(format!(
                    "{program} was cut off at its time limit; nothing of it is kept"
                ));
                continue;
            }
            Outcome::Failed(why) => {
                out.skipped.push(format!(
                    "{program} could not be started: {}",
                    crate::text::excerpt(&why)
                ));
                continue;
            }
            Outcome::Exited => {}
        }
        // dcgmi exits non-zero when a test fails and still prints its report, so the
        // report is read whatever the status; a program that printed none failed.
        let read = read_engine(engine, &ran.stdout);
        match read {
            Ok((figures, failures)) => {
                out.figures.extend(figures);
                out.failures.extend(failures);
            }
            Err(e) => {
                let status = ran.status.map_or("none".to_string(), |s| s.to_string());
                let tail = crate::text::excerpt(ran.stderr.trim());
                out.skipped.push(format!(
                    "{program} (exit status {status}): {e}{}",
                    if tail.is_empty() {
                        String::new()
                    } else {
                        format!(" (stderr: {tail})")
                    }
                ));
            }
        }
    }
}

/// An engine's output as figures and failures.
fn read_engine(engine: ExternalEngine, stdout: &str) -> Result<(Vec<Figure>, Vec<EngineFailure>), String> {
    match engine {
        ExternalEngine::Dcgm => {
            let report = dcgm::parse_diag(stdout).map_err(|e| e.to_string())?;
            let mut failures: Vec<EngineFailure> = report
                .failures()
                .into_iter()
                .map(|(test, result)| EngineFailure {
                    engine: Engine::Dcgm,
                    gpu: match &result.entity {
                        dcgm::DiagEntity::Gpus(ids) if ids.len() == 1 => Some(ids[0]),
                        _ => None,
                    },
                    test: test.name.clone(),
                    reason: if result.warnings.is_empty() {
                        "failed".to_string()
                    } else {
                        result.warnings.join("; ")
                    },
                })
                .collect();
            if let Some(err) = &report.runtime_error {
                failures.push(EngineFailure {
                    engine: Engine::Dcgm,
                    gpu: None,
                    test: "diagnostic".into(),
                    reason: format!("could not run: {err}"),
                });
            }
            Ok((report.figures(), failures))
        }
        ExternalEngine::NcclTests => {
            let run = nccl_tests::parse_all_reduce(stdout).map_err(|e| e.to_string())?;
            let failures = run
                .corrupt_rows()
                .into_iter()
                .map(|row| EngineFailure {
                    engine: Engine::NcclTests,
                    gpu: None,
                    test: format!("all_reduce {} B", row.size),
                    reason: format!(
                        "{} elements out of place and {} in place came back wrong: data corruption on a GPU, \
                         link or NIC",
                        row.out_of_place.wrong.unwrap_or(0),
                        row.in_place.wrong.unwrap_or(0)
                    ),
                })
                .chain(run.out_of_bounds.filter(|n| *n > 0).map(|n| EngineFailure {
                    engine: Engine::NcclTests,
                    gpu: None,
                    test: "all_reduce".into(),
                    reason: format!("{n} values out of bounds"),
                }))
                .collect();
            Ok((run.figures(), failures))
        }
        ExternalEngine::Nvbandwidth => {
            let run = nvbandwidth::parse(stdout).map_err(|e| e.to_string())?;
            Ok((run.figures(), Vec::new()))
        }
    }
}

/// How long one program of the GPU side may run: the script's limit, a burn-in's, and a
/// DCGM level 3 (NVIDIA: "long", up to hours on 8 GPUs) capped at two hours.
pub fn time_limit(plan: &GpuPlan) -> std::time::Duration {
    let script = GpuOptions {
        mode: plan.mode,
        gpus: None,
    }
    .time_limit();
    let burn = plan.burn_seconds.map(burn::time_limit).unwrap_or_default();
    let dcgm = std::time::Duration::from_secs(match plan.dcgm_level {
        1 => 5 * 60,
        2 => 30 * 60,
        _ => 2 * 3600,
    });
    script.max(burn).max(dcgm)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::system::{CmdOutput, Recording};

    fn root() -> std::path::PathBuf {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }

    /// A host record that answers the engines with real captures.
    fn replayed(answers: &[(&str, &str)]) -> Arc<dyn System> {
        let mut record = crate::host::system::HostRecord::default();
        for (key, file) in answers {
            let text = std::fs::read_to_string(root().join("tests/fixtures/bench").join(file)).unwrap();
            record.commands.insert(
                key.to_string(),
                CmdOutput {
                    outcome: Outcome::Exited,
                    status: Some(0),
                    stdout: text,
                    stderr: String::new(),
                },
            );
        }
        Arc::new(Recording::replay(record))
    }

    fn host(n: u32) -> HostReport {
        HostReport {
            gpus: (0..n)
                .map(|i| crate::host::GpuInfo {
                    index: i,
                    name: "NVIDIA H100 80GB HBM3".into(),
                    ..crate::host::GpuInfo::default()
                })
                .collect(),
            ..HostReport::default()
        }
    }

    fn plan() -> GpuPlan {
        GpuPlan {
            mode: Mode::Quick,
            python: None,
            image: None,
            burn_seconds: None,
            dcgm_level: 1,
        }
    }

    #[test]
    fn installed_engines_measure_and_each_figure_names_its_engine() {
        let nccl = format!(
            "all_reduce_perf {}",
            nccl_tests::all_reduce_args(8, 1).unwrap().join(" ")
        );
        let nvb = format!("nvbandwidth {}", nvbandwidth::args().join(" "));
        let dcgmi = format!("dcgmi {}", dcgm::diag_args(1).unwrap().join(" "));
        let sys = replayed(&[
            (&nccl, "nccl-tests/h100x8-issue290.txt"),
            (&nvb, "nvbandwidth/v0.5-1gpu.json"),
            (&dcgmi, "dcgm/dcgm-3.1.0-8gpu.json"),
        ]);
        let out = run_gpus(&plan(), sys, &host(8), &ProbeOptions::default());
        let busbw: Vec<&Figure> = out
            .figures
            .iter()
            .filter(|f| f.metric == Metric::NcclBusbw)
            .collect();
        assert_eq!(busbw.len(), 1, "{:?}", out.figures);
        assert_eq!(busbw[0].engine, Engine::NcclTests);
        assert!(
            out.figures
                .iter()
                .any(|f| f.engine == Engine::Nvbandwidth && f.metric == Metric::HostToDevice),
            "{:?}",
            out.figures
        );
        // No Python with a CUDA torch on this host: said, and no figure stands in for it.
        assert!(
            out.skipped
                .iter()
                .any(|s| s.contains("no Python with a CUDA torch")),
            "{:?}",
            out.skipped
        );
        assert!(out.figures.iter().all(|f| f.engine != Engine::Gpuenv));
    }

    #[test]
    fn engines_not_installed_are_listed_and_one_gpu_runs_no_all_reduce() {
        let sys = replayed(&[]);
        let out = run_gpus(&plan(), sys, &host(1), &ProbeOptions::default());
        assert!(out.figures.is_empty());
        let text = out.skipped.join("\n");
        assert!(text.contains("dcgmi is not installed"), "{text}");
        assert!(text.contains("nvbandwidth is not installed"), "{text}");
        assert!(!text.contains("all_reduce_perf"), "{text}");
    }

    #[test]
    fn an_engine_that_prints_garbage_is_skipped_with_its_reason() {
        let nvb = format!("nvbandwidth {}", nvbandwidth::args().join(" "));
        let mut record = crate::host::system::HostRecord::default();
        record.commands.insert(
            nvb,
            CmdOutput {
                outcome: Outcome::Exited,
                status: Some(1),
                stdout: "\u{1b}[31mcuda error\n".into(),
                stderr: "CUDA_ERROR_NO_DEVICE\n".into(),
            },
        );
        let out = run_gpus(
            &plan(),
            Arc::new(Recording::replay(record)),
            &host(1),
            &ProbeOptions::default(),
        );
        let line = out
            .skipped
            .iter()
            .find(|s| s.starts_with("nvbandwidth (exit status 1)"))
            .unwrap_or_else(|| panic!("{:?}", out.skipped));
        assert!(line.contains("CUDA_ERROR_NO_DEVICE"), "{line}");
        assert!(!line.contains('\u{1b}'), "{line}");
    }

    #[test]
    fn script_figures_an_engine_measured_give_way() {
        let mut out = GpuOutcome {
            figures: vec![Figure::new(Metric::NcclBusbw, 480.0, Engine::NcclTests, "x")],
            ..GpuOutcome::default()
        };
        keep_script_figures(
            &mut out,
            vec![
                Figure::new(Metric::NcclBusbw, 470.0, Engine::Gpuenv, "y"),
                Figure::new(Metric::MatmulBf16, 700.0, Engine::Gpuenv, "z").on_gpu(0),
            ],
        );
        assert_eq!(out.figures.len(), 2);
        assert!(
            out.figures
                .iter()
                .all(|f| f.metric != Metric::NcclBusbw || f.engine == Engine::NcclTests)
        );
        assert_eq!(
            out.skipped,
            vec![
                "nccl-busbw by gpuenv's script: all_reduce_perf measured it, and its figures stand"
                    .to_string()
            ]
        );
    }
}
