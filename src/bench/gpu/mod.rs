//! gpuenv's own GPU measurements: an embedded Python script that measures through torch,
//! and here, in Rust, everything done with what it measured.
//!
//! Owns: the script ([`SCRIPT`], run as `python -c`), the format of what it prints (one
//! JSON object a line: [`Line`]), reading that output (total and bounded: every line is
//! checked, none can panic or overflow), and all the arithmetic: FLOPs and seconds to
//! TFLOPS, bytes and seconds to GB/s, nccl-tests' bus bandwidth, images a second. It runs
//! the script through the host seam ([`crate::host::system::System`], so `--record` keeps
//! and replays its output as for `doctor`) or inside an image through
//! [`crate::docker::run_container`]. Must not: judge a figure (against the datasheet or
//! peers: that is the bench judge), print, or talk to the Docker Engine but through
//! `docker`.
//!
//! Units (as [`crate::bench::figure`] fixes them): decimal GB/s, 10^9 bytes a second;
//! TFLOPS, 10^12 floating-point operations a second, a multiply-add counted as two, so
//! an m x k by k x n product is 2mnk operations.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::figure::{BenchGpu, Engine, Figure, Metric};
use crate::host::system::{CmdOutput, Outcome, System};

/// The script, run as `python -c SCRIPT [--quick|--full] [--gpus 0,1] [--burn SECONDS]`.
pub const SCRIPT: &str = include_str!("script.py");

/// The first line of [`SCRIPT`]: what a recorded host keys its run by
/// ([`crate::host::system::command_key`]), so a record stays replayable when the script
/// improves.
pub const SCRIPT_MARK: &str = "# gpuenv's GPU bench script";

/// The version of the line format [`SCRIPT`] prints and this module reads.
pub const SCRIPT_VERSION: u32 = 1;

/// The most lines of the script's output read: a run on 8 GPUs prints about a hundred,
/// an hour's burn-in on 8 GPUs about six thousand heartbeats.
pub const MAX_LINES: usize = 100_000;

/// The longest line read (the header of 8 GPUs is under 3 KiB).
pub const MAX_LINE: usize = 64 << 10;

/// How much the script measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Sizes that fit a 16 GB GPU, about a quarter second a figure: under a minute on
    /// one GPU.
    Quick,
    /// Larger sizes and longer runs: steadier figures.
    Full,
}

/// What to measure, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuOptions {
    /// How much.
    pub mode: Mode,
    /// The GPUs (nvidia-smi's indices); all when `None`.
    pub gpus: Option<Vec<u32>>,
}

impl GpuOptions {
    /// The script's arguments for a measurement run.
    pub fn args(&self) -> Vec<String> {
        let mut args = vec![match self.mode {
            Mode::Quick => "--quick".to_string(),
            Mode::Full => "--full".to_string(),
        }];
        args.extend(gpus_args(self.gpus.as_deref()));
        args
    }

    /// How long a run may take before it is cut off: generous for 8 GPUs (the script
    /// itself stops each NCCL run after 150 s in quick mode, 300 s in full).
    pub fn time_limit(&self) -> Duration {
        match self.mode {
            Mode::Quick => Duration::from_secs(10 * 60),
            Mode::Full => Duration::from_secs(30 * 60),
        }
    }
}

/// `--gpus 0,1,2`, or nothing for all.
pub(crate) fn gpus_args(gpus: Option<&[u32]>) -> Vec<String> {
    match gpus {
        Some(g) if !g.is_empty() => vec![
            "--gpus".to_string(),
            g.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
        ],
        _ => Vec::new(),
    }
}

/// The header line: what ran, and on which GPUs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// The line format's version.
    #[serde(default)]
    pub script_version: u32,
    /// `quick` or `full`.
    #[serde(default)]
    pub mode: String,
    /// The Python's version.
    #[serde(default)]
    pub python: String,
    /// `torch.__version__`; `None` when torch is not importable.
    #[serde(default)]
    pub torch: Option<String>,
    /// `torch.version.cuda`.
    #[serde(default)]
    pub cuda: Option<String>,
    /// `torch.backends.cudnn.version()`.
    #[serde(default)]
    pub cudnn: Option<i64>,
    /// `torch.cuda.nccl.version()`.
    #[serde(default)]
    pub nccl: Option<String>,
    /// torchvision's version, when importable.
    #[serde(default)]
    pub torchvision: Option<String>,
    /// The burn-in's length, in burn mode.
    #[serde(default)]
    pub burn_seconds: Option<f64>,
    /// Every GPU measured.
    #[serde(default)]
    pub gpus: Vec<ScriptGpu>,
}

/// A GPU as torch describes it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScriptGpu {
    /// torch's index, which is nvidia-smi's (the script sets `CUDA_DEVICE_ORDER=PCI_BUS_ID`).
    pub index: u32,
    /// The device's name.
    #[serde(default)]
    pub name: Option<String>,
    /// Compute capability (`9.0`).
    #[serde(default)]
    pub cc: Option<String>,
    /// Memory, bytes.
    #[serde(default)]
    pub memory_bytes: Option<u64>,
    /// Streaming multiprocessors.
    #[serde(default)]
    pub sm_count: Option<u32>,
    /// PCI bus number.
    #[serde(default)]
    pub pci_bus_id: Option<u32>,
    /// The device's UUID.
    #[serde(default)]
    pub uuid: Option<String>,
    /// Why its properties could not be read.
    #[serde(default)]
    pub error: Option<String>,
}

/// A timed run of `C = A @ B`, `iters` times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Matmul {
    /// The GPU.
    pub gpu: u32,
    /// `bf16`, `fp16`, `tf32` or `fp8`.
    pub dtype: String,
    /// Rows of A.
    pub m: u64,
    /// Columns of B.
    pub n: u64,
    /// The inner dimension.
    pub k: u64,
    /// Products timed.
    pub iters: u64,
    /// Their time.
    pub seconds: f64,
    /// FP8 only: whether `_scaled_mm` ran with fast accumulation.
    #[serde(default)]
    pub fast_accum: Option<bool>,
}

/// Which way a copy went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Within one GPU's memory.
    D2d,
    /// Pinned host memory to the GPU.
    H2d,
    /// The GPU to pinned host memory.
    D2h,
    /// One GPU to another.
    P2p,
}

/// A timed run of one copy, `iters` times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Copy {
    /// Which way.
    pub direction: Direction,
    /// The GPU (the source, for a peer copy).
    pub gpu: u32,
    /// The destination GPU of a peer copy.
    #[serde(default)]
    pub peer: Option<u32>,
    /// One copy's size.
    pub bytes: u64,
    /// Copies timed.
    pub iters: u64,
    /// Their time.
    pub seconds: f64,
    /// Peer copies: whether the two GPUs can reach each other's memory directly.
    #[serde(default)]
    pub peer_access: Option<bool>,
}

/// A timed run of NCCL all_reduce over `ranks` GPUs, one process each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AllReduce {
    /// Processes (GPUs).
    pub ranks: u32,
    /// The GPUs, rank by rank.
    #[serde(default)]
    pub gpus: Vec<u32>,
    /// The buffer each rank reduces.
    pub bytes: u64,
    /// Collectives timed.
    pub iters: u64,
    /// The slowest rank's time for them.
    pub seconds: f64,
    /// The element type (`float32`).
    #[serde(default)]
    pub dtype: String,
}

/// A timed run of ResNet-50 training steps on synthetic images.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resnet50 {
    /// The GPU.
    pub gpu: u32,
    /// Images a step.
    pub batch: u64,
    /// `amp-bf16`.
    pub precision: String,
    /// Whether the model and images were channels-last.
    #[serde(default)]
    pub channels_last: bool,
    /// Steps timed.
    pub steps: u64,
    /// Their time.
    pub seconds: f64,
}

/// A burn-in's heartbeat: matmuls done so far on one GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Heartbeat {
    /// The GPU.
    pub gpu: u32,
    /// Seconds since its load started.
    pub elapsed: f64,
    /// Products done.
    pub iters: u64,
}

/// Something the script could not measure, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    /// What (`matmul fp8`, `all_reduce`, `all`).
    pub what: String,
    /// On which GPU, when on one.
    #[serde(default)]
    pub gpu: Option<u32>,
    /// Why.
    pub reason: String,
}

/// One line the script prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Line {
    /// What ran, on which GPUs.
    Header(Header),
    /// A matmul run.
    Matmul(Matmul),
    /// A copy run.
    Copy(Copy),
    /// An all_reduce run.
    AllReduce(AllReduce),
    /// A ResNet-50 run.
    Resnet50(Resnet50),
    /// A burn-in heartbeat.
    Heartbeat(Heartbeat),
    /// A burn-in's end on one GPU: a matmul run as long as the burn-in.
    Burn(Matmul),
    /// Not measured.
    Skipped(Skipped),
    /// The script finished.
    Done {
        /// Its whole run.
        seconds: f64,
    },
    /// A kind a newer script prints: read past.
    #[serde(other)]
    Unknown,
}

/// Everything a run of the script gave.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuRun {
    /// Its header.
    pub header: Header,
    /// The GPUs measured.
    pub gpus: Vec<BenchGpu>,
    /// Every figure, computed from its lines.
    pub figures: Vec<Figure>,
    /// What was not measured, and why, one sentence each.
    pub skipped: Vec<String>,
    /// Burn mode: each GPU's whole run.
    pub burn: Vec<Matmul>,
    /// Burn mode: the heartbeats.
    pub heartbeats: Vec<Heartbeat>,
    /// Whether the script printed its last line (`done`).
    pub finished: bool,
}

/// Reads the script's standard output. Lines that are not JSON objects (what torch,
/// NCCL or an image's entrypoint print) are passed over; a line that is one must be a
/// valid line of [`Line`]'s format with finite, positive measurements, or the whole
/// output is refused with the line's number and why.
pub fn parse(stdout: &str) -> Result<GpuRun, String> {
    let mut run = GpuRun::default();
    let mut header = None;
    let mut all_reduce: Vec<AllReduce> = Vec::new();
    for (i, line) in stdout.lines().enumerate() {
        let no = i + 1;
        if no > MAX_LINES {
            return Err(format!("the script printed more than {MAX_LINES} lines"));
        }
        let line = line.trim();
        if !line.starts_with('{') {
            continue;
        }
        if line.len() > MAX_LINE {
            return Err(format!(
                "line {no} of the script's output is longer than {MAX_LINE} bytes"
            ));
        }
        let parsed: Line = serde_json::from_str(line).map_err(|e| {
            format!(
                "line {no} of the script's output is not one of its lines ({}): {}",
                crate::text::excerpt(&e.to_string()),
                crate::text::excerpt(line)
            )
        })?;
        let bad = |why: String| format!("line {no} of the script's output: {why}");
        match parsed {
            Line::Header(h) => {
                if h.script_version != SCRIPT_VERSION {
                    return Err(bad(format!(
                        "script version {} where gpuenv reads version {SCRIPT_VERSION}",
                        h.script_version
                    )));
                }
                header = Some(h);
            }
            Line::Matmul(m) => {
                let t = tflops(&m).map_err(bad)?;
                let metric = matmul_metric(&m.dtype).ok_or_else(|| {
                    bad(format!(
                        "unknown matmul type `{}`",
                        crate::text::excerpt(&m.dtype)
                    ))
                })?;
                run.figures.push(
                    Figure::new(
                        metric,
                        t,
                        Engine::Gpuenv,
                        format!(
                            "{}x{}x{} {}{}, {} iterations in {:.3} s (torch)",
                            m.m,
                            m.n,
                            m.k,
                            m.dtype,
                            match m.fast_accum {
                                Some(true) => ", fast accumulation",
                                _ => "",
                            },
                            m.iters,
                            m.seconds
                        ),
                    )
                    .on_gpu(m.gpu),
                );
            }
            Line::Copy(c) => run.figures.push(copy_figure(&c).map_err(bad)?),
            Line::AllReduce(a) => {
                busbw(&a).map_err(bad)?;
                all_reduce.push(a);
            }
            Line::Resnet50(r) => {
                let v = images_per_second(&r).map_err(bad)?;
                run.figures.push(
                    Figure::new(
                        Metric::Resnet50,
                        v,
                        Engine::Gpuenv,
                        format!(
                            "batch {}, {}{}, 224x224 synthetic images, {} steps in {:.3} s (torch, torchvision)",
                            r.batch,
                            crate::text::excerpt(&r.precision),
                            if r.channels_last {
                                ", channels_last"
                            } else {
                                ""
                            },
                            r.steps,
                            r.seconds
                        ),
                    )
                    .on_gpu(r.gpu),
                );
            }
            Line::Heartbeat(h) => {
                if !(h.elapsed.is_finite() && h.elapsed >= 0.0) {
                    return Err(bad("a heartbeat's elapsed time is not a time".into()));
                }
                run.heartbeats.push(h);
            }
            Line::Burn(m) => {
                tflops(&m).map_err(bad)?;
                run.burn.push(m);
            }
            Line::Skipped(s) => run.skipped.push(skipped_sentence(&s)),
            Line::Done { .. } => run.finished = true,
            Line::Unknown => {}
        }
    }
    let header = header.ok_or_else(|| "the script printed no header line".to_string())?;
    // nccl-tests reports each size; the bandwidth a machine is judged by is the plateau,
    // reached at the largest message, so that one is the figure.
    if let Some(a) = all_reduce.iter().max_by_key(|a| a.bytes) {
        let bus = busbw(a)?;
        let alg = algbw(a)?;
        run.figures.push(Figure::new(
            Metric::NcclBusbw,
            bus,
            Engine::Gpuenv,
            format!(
                "all_reduce {} {} bytes over {} ranks, {} iterations in {:.3} s, algbw {:.1} GB/s (torch.distributed, NCCL)",
                crate::text::excerpt(&a.dtype),
                a.bytes,
                a.ranks,
                a.iters,
                a.seconds,
                alg
            ),
        ));
    }
    run.gpus = header
        .gpus
        .iter()
        .map(|g| BenchGpu {
            index: g.index,
            name: crate::text::excerpt(g.name.as_deref().unwrap_or("")),
            memory_mib: g.memory_bytes.map(|b| b >> 20),
        })
        .collect();
    run.header = header;
    Ok(run)
}

/// What a script line's `skipped` says, as one sentence, its text from outside cleaned.
fn skipped_sentence(s: &Skipped) -> String {
    let what = crate::text::excerpt(&s.what);
    let why = crate::text::excerpt(&s.reason);
    match s.gpu {
        Some(g) => format!("{what} on GPU {g}: {why}"),
        None => format!("{what}: {why}"),
    }
}

fn matmul_metric(dtype: &str) -> Option<Metric> {
    Some(match dtype {
        "bf16" => Metric::MatmulBf16,
        "fp16" => Metric::MatmulFp16,
        "tf32" => Metric::MatmulTf32,
        "fp8" => Metric::MatmulFp8,
        _ => return None,
    })
}

/// A measured time: finite and above zero.
fn seconds(s: f64) -> Result<f64, String> {
    if s.is_finite() && s > 0.0 {
        Ok(s)
    } else {
        Err(format!("`{s}` is not a measured time in seconds"))
    }
}

/// A count or size: above zero.
fn positive(what: &str, v: u64) -> Result<u64, String> {
    if v > 0 { Ok(v) } else { Err(format!("{what} is 0")) }
}

/// The product of counts, exact in u128 (each factor is below 2^64, and four of them
/// could overflow u128, so the multiplication is checked), as f64.
fn product(factors: &[u64]) -> Result<f64, String> {
    factors
        .iter()
        .try_fold(1u128, |acc, &f| acc.checked_mul(u128::from(f)))
        .map(|p| p as f64)
        .ok_or_else(|| "sizes too large to multiply".to_string())
}

/// Dense TFLOPS: an m x k by k x n product is 2mnk floating-point operations (a
/// multiply-add counted as two, as every datasheet counts it).
pub fn tflops(m: &Matmul) -> Result<f64, String> {
    let ops = product(&[
        2,
        positive("m", m.m)?,
        positive("n", m.n)?,
        positive("k", m.k)?,
        positive("iters", m.iters)?,
    ])?;
    Ok(ops / seconds(m.seconds)? / 1e12)
}

/// Decimal GB/s of `iters` transfers of `bytes` each.
pub fn gb_per_second(bytes: u64, iters: u64, secs: f64) -> Result<f64, String> {
    let moved = product(&[positive("bytes", bytes)?, positive("iters", iters)?])?;
    Ok(moved / seconds(secs)? / 1e9)
}

/// A copy's figure. A copy within one GPU's memory reads every byte and writes it again:
/// its bandwidth counts both, as nvbandwidth's and NVIDIA's device-memory figures do (so
/// it compares with the datasheet's memory bandwidth). A copy between host and GPU, or
/// between two GPUs, counts the bytes that crossed the link once.
pub fn copy_figure(c: &Copy) -> Result<Figure, String> {
    let once = gb_per_second(c.bytes, c.iters, c.seconds)?;
    let (metric, value, how) = match c.direction {
        Direction::D2d => (
            Metric::MemoryBandwidth,
            once * 2.0,
            "device-to-device copy, bytes read plus bytes written",
        ),
        Direction::H2d => (Metric::HostToDevice, once, "pinned host to device"),
        Direction::D2h => (Metric::DeviceToHost, once, "device to pinned host"),
        Direction::P2p => (
            Metric::PeerToPeer,
            once,
            match c.peer_access {
                Some(true) => "peer to peer, direct access",
                Some(false) => "peer to peer, no direct access (through the host)",
                None => "peer to peer",
            },
        ),
    };
    let f = Figure::new(
        metric,
        value,
        Engine::Gpuenv,
        format!(
            "{how}, {} bytes x {} in {:.3} s (torch)",
            c.bytes, c.iters, c.seconds
        ),
    )
    .on_gpu(c.gpu);
    match (c.direction, c.peer) {
        (Direction::P2p, Some(p)) => Ok(f.to_peer(p)),
        (Direction::P2p, None) => Err("a peer copy without its peer".into()),
        _ => Ok(f),
    }
}

/// nccl-tests' algorithm bandwidth: the buffer's size over one collective's time.
pub fn algbw(a: &AllReduce) -> Result<f64, String> {
    let per = seconds(a.seconds)? / positive("iters", a.iters)? as f64;
    Ok(positive("bytes", a.bytes)? as f64 / per / 1e9)
}

/// nccl-tests' bus bandwidth of an all_reduce: algbw x 2(n-1)/n, the share of the data
/// each rank's link carries in the ring algorithm, so that the figure compares with the
/// hardware's link bandwidth whatever the number of ranks (nccl-tests, doc/PERFORMANCE.md,
/// "AllReduce": <https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md>).
pub fn busbw(a: &AllReduce) -> Result<f64, String> {
    if a.ranks < 2 {
        return Err(format!("an all_reduce over {} rank(s) moves no data", a.ranks));
    }
    let n = f64::from(a.ranks);
    Ok(algbw(a)? * 2.0 * (n - 1.0) / n)
}

/// Training throughput: images of every step over the steps' time.
pub fn images_per_second(r: &Resnet50) -> Result<f64, String> {
    let images = product(&[positive("batch", r.batch)?, positive("steps", r.steps)?])?;
    Ok(images / seconds(r.seconds)?)
}

/// What a run of the script gave, from how its process ended: the parsed output, with a
/// sentence in `skipped` when it did not finish (cut off, or failed part way). An error
/// when nothing usable came: the program is missing, refused its arguments, or printed
/// no header.
pub fn read_output(
    python: &str,
    outcome: &Outcome,
    status: Option<i64>,
    stdout: &str,
    stderr: &str,
) -> Result<GpuRun, String> {
    let python = crate::text::excerpt(python);
    let tail = stderr_tail(stderr);
    match outcome {
        Outcome::NotFound => return Err(format!("`{python}` is not there to run")),
        Outcome::Failed(why) => {
            return Err(format!("cannot run `{python}`: {}", crate::text::excerpt(why)));
        }
        Outcome::Exited if status == Some(2) => {
            return Err(format!(
                "the GPU bench script refused its arguments under `{python}`: {tail}"
            ));
        }
        _ => {}
    }
    let mut run = parse(stdout).map_err(|e| match outcome {
        Outcome::TimedOut => format!("the GPU bench script under `{python}` was cut off: {e}"),
        _ => format!("the GPU bench script under `{python}`: {e}{}", with_tail(&tail)),
    })?;
    match outcome {
        Outcome::TimedOut => run.skipped.push(format!(
            "the GPU bench script was cut off at its time limit: the figures it printed before are kept{}",
            with_tail(&tail)
        )),
        _ if status != Some(0) => run.skipped.push(format!(
            "the GPU bench script ended with status {}: the figures it printed before are kept{}",
            status.map_or("none (killed)".to_string(), |s| s.to_string()),
            with_tail(&tail)
        )),
        _ if !run.finished => run
            .skipped
            .push("the GPU bench script ended without its last line: the figures it printed are kept".into()),
        _ => {}
    }
    Ok(run)
}

fn with_tail(tail: &str) -> String {
    if tail.is_empty() {
        String::new()
    } else {
        format!(" (stderr: {tail})")
    }
}

/// The last non-empty lines of stderr, cleaned and cut to an excerpt: a Python traceback
/// ends with its reason.
fn stderr_tail(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(2)..].join(" | ");
    crate::text::excerpt(&tail)
}

/// Runs the script with `args` under `python` through the seam. The run is bounded by
/// the system's own timeout (build the [`crate::host::system::RealSystem`] for a bench
/// with [`GpuOptions::time_limit`]); its output by [`crate::process::MAX_OUTPUT`].
pub fn run_script(sys: &dyn System, python: &str, args: &[String]) -> CmdOutput {
    let mut all: Vec<&str> = vec!["-c", SCRIPT];
    all.extend(args.iter().map(String::as_str));
    sys.run(python, &all)
}

/// Measures the GPUs with the host's own Python and torch (the Python `doctor` found with
/// a CUDA torch, or `--python`).
pub fn measure(sys: &dyn System, python: &str, opts: &GpuOptions) -> Result<GpuRun, String> {
    let out = run_script(sys, python, &opts.args());
    read_output(
        python,
        &out.outcome,
        out.status.map(i64::from),
        &out.stdout,
        &out.stderr,
    )
}

/// Measures the GPUs inside `image`, run through the Docker Engine with every GPU (as
/// `docker run --gpus all`), its `python` (`python3` in most images) running the script.
pub fn measure_in_image(image: &str, python: &str, opts: &GpuOptions) -> Result<GpuRun, String> {
    let mut cmd = vec![python.to_string(), "-c".to_string(), SCRIPT.to_string()];
    cmd.extend(opts.args());
    let spec = crate::docker::ContainerSpec {
        image: image.to_string(),
        cmd,
        gpus: true,
        timeout: opts.time_limit(),
        output_cap: crate::process::MAX_OUTPUT,
        purpose: "gpuenv bench: the GPU measurements".to_string(),
    };
    let ran = crate::docker::run_container(&spec).map_err(|e| e.to_string())?;
    let outcome = if ran.timed_out {
        Outcome::TimedOut
    } else {
        Outcome::Exited
    };
    let shown = format!("{python} in {image}");
    read_output(&shown, &outcome, ran.status, &ran.stdout, &ran.stderr)
}

/// The Python `doctor` found holding a torch that sees a GPU: the first of `pythons` in
/// doctor's order; `None` with no such Python.
pub fn cuda_python(pythons: &[crate::host::PythonEnv]) -> Option<&str> {
    pythons
        .iter()
        .find(|p| {
            p.torch
                .as_ref()
                .is_some_and(|t| t.cuda.is_some() && t.cuda_available)
        })
        .map(|p| p.path.as_str())
}

/// The figures of one metric by GPU: the last one measured of each.
pub fn by_gpu(figures: &[Figure], metric: Metric) -> BTreeMap<u32, f64> {
    figures
        .iter()
        .filter(|f| f.metric == metric)
        .filter_map(|f| f.gpu.map(|g| (g, f.value)))
        .collect()
}

#[cfg(test)]
mod tests;
