//! `gpuenv bench` and `gpuenv bench net`: flags to a plan, the plan run, the document
//! printed through `report`.
//!
//! Every flag is read and checked before anything runs; the host is probed as `doctor`
//! probes it (which Python holds a CUDA torch, each GPU's PCIe link), the GPU side runs
//! (`bench::gpus`), then the host side (`bench::run`), and every figure is judged
//! (`bench::judge`) before it is printed. Exit 1 when the bench found something wrong.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};

use super::{CliError, Exit};
use std::sync::Arc;

use crate::bench::gpu::Mode;
use crate::bench::gpus::{self, GpuPlan};
use crate::bench::host::{HostBenchError, net, rdma};
use crate::bench::run::{self, HostPlan, Sizing};
use crate::bench::{BenchDoc, host::download};
use crate::files::{self, Replace};
use crate::host::system::{RealSystem, RecordError, Recording, System};
use crate::host::{HostReport, ProbeOptions};
use crate::report;

/// `gpuenv bench`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: Option<BenchCommand>,
    /// The short run (the default): a 1 GiB disk file and 5 s of random reads, 2 GiB of
    /// memory copied 5 times, 4 TCP streams for 5 s, at most 256 MiB or 20 s of each
    /// download.
    #[arg(long, conflicts_with = "full")]
    quick: bool,
    /// The long run: an 8 GiB disk file and 20 s of random reads, 8 GiB of memory copied
    /// 10 times, 8 TCP streams for 15 s, at most 2 GiB or 60 s of each download.
    #[arg(long)]
    full: bool,
    /// Only the GPUs.
    #[arg(long, conflicts_with = "host_only")]
    gpu_only: bool,
    /// Only the host: disk, memory, network, downloads.
    #[arg(long)]
    host_only: bool,
    /// Burn-in: keep every GPU at full load this long (`90s`, `10m`, `1h`).
    #[arg(long, value_name = "DURATION")]
    burn: Option<String>,
    /// Measure the GPUs inside this image (a local one, through the Docker Engine, with
    /// every GPU as `docker run --gpus all` asks): its `python3`, or the --python given.
    #[arg(long, value_name = "IMAGE")]
    image: Option<String>,
    /// Measure the GPUs with this Python's torch (default: the Python `doctor` finds
    /// holding a CUDA torch); with --image, the Python inside the image.
    #[arg(long, value_name = "PATH")]
    python: Option<String>,
    /// The level of DCGM's diagnostic where `dcgmi` is installed: 1 (quick), 2 (medium),
    /// 3 (long), as `dcgmi diag -r` takes.
    #[arg(long, value_name = "N", default_value_t = 1)]
    dcgm_level: u8,
    /// Keep every raw output in DIR: `host.json` (every program's output, as `doctor
    /// --record` keeps a host's answers, replayable with --host-facts) and `bench.json`
    /// (the results).
    #[arg(long, value_name = "DIR", conflicts_with = "host_facts")]
    record: Option<PathBuf>,
    /// Replay a recorded bench (DIR/host.json or the file): the GPU script, the engines
    /// and the burn-in's sampling are read from the record and judged again; the host's
    /// own measurements are not replayed.
    #[arg(long, value_name = "FILE")]
    host_facts: Option<PathBuf>,
    /// Print the results as a JSON document: the figures, and `judgement` (each figure
    /// against its datasheet, and the GPUs below their peers).
    #[arg(long)]
    json: bool,
    /// Also write the results as a page: FILE.html (or .htm), or FILE.md. Each figure
    /// beside its datasheet figure, the expected share and its source.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// The directory of the disk test (default: the data disk `doctor` names). A test
    /// file is made there and removed afterwards, also on Ctrl-C.
    #[arg(long, value_name = "DIR")]
    path: Option<PathBuf>,
    /// Let the disk test write on the system disk (the filesystem of `/`).
    #[arg(long)]
    allow_system_disk: bool,
    /// The disk test file's size instead of the run's (`512MiB`, `4GiB`, `2GB`; 16 MiB to
    /// 256 GiB). The file is read and written with O_DIRECT, so the page cache serves none
    /// of it whatever its size.
    #[arg(long, value_name = "SIZE")]
    disk_size: Option<String>,
    /// The memory test's size instead of the run's: source and destination of all threads
    /// together (`256MiB`).
    #[arg(long, value_name = "SIZE")]
    memory_size: Option<String>,
    /// Seconds each timed part (random reads, TCP streams, each download) runs instead of
    /// the run's.
    #[arg(long, value_name = "SECONDS")]
    seconds: Option<u64>,
    /// Measure the network to this node, where `gpuenv bench net --listen` runs (default:
    /// loopback, which measures this host's TCP stack only); over TCP, and over RDMA with
    /// perftest's `ib_write_bw` where both nodes have it.
    #[arg(long, value_name = "HOST[:PORT]")]
    peer: Option<String>,
    /// The RDMA device (and port) `ib_write_bw` runs on here: `mlx5_0` or `mlx5_0:1`
    /// (default: the first ACTIVE port under /sys/class/infiniband).
    #[arg(long, value_name = "DEV[:PORT]")]
    rdma_device: Option<String>,
    /// A URL whose download speed is measured (repeatable), instead of the default: a
    /// torch wheel on PyPI.
    #[arg(long, value_name = "URL", conflicts_with = "no_download")]
    download_url: Vec<String>,
    /// An image whose largest layer's download speed is measured from its registry
    /// (repeatable; a mirror's name measures the mirror), instead of the default: the
    /// newest NGC PyTorch image compat-db records.
    #[arg(long, value_name = "IMAGE", conflicts_with = "no_download")]
    download_image: Vec<String>,
    /// A registry to speak plain HTTP to (repeatable; loopback always may).
    #[arg(long, value_name = "HOST")]
    insecure_registry: Vec<String>,
    /// Measure no download.
    #[arg(long)]
    no_download: bool,
}

impl BenchArgs {
    /// `gpuenv bench` with no flag: the quick run of the GPUs and the host.
    fn defaults() -> BenchArgs {
        BenchArgs {
            command: None,
            quick: false,
            full: false,
            gpu_only: false,
            host_only: false,
            burn: None,
            image: None,
            python: None,
            dcgm_level: 1,
            record: None,
            host_facts: None,
            json: false,
            report: None,
            path: None,
            allow_system_disk: false,
            disk_size: None,
            memory_size: None,
            seconds: None,
            peer: None,
            rdma_device: None,
            download_url: Vec::new(),
            download_image: Vec::new(),
            insecure_registry: Vec::new(),
            no_download: false,
        }
    }
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// The network between two nodes: `--listen` on one, `--peer HOST` on the other; TCP
    /// throughput over several streams and round-trip latency, over gpuenv's own protocol,
    /// and RDMA write bandwidth with perftest's `ib_write_bw` where both nodes have it (the
    /// listener starts its server side).
    Net(NetArgs),
}

#[derive(Debug, Args)]
struct NetArgs {
    /// Serve peers on ADDR:PORT (default 0.0.0.0:29571) for --serve-seconds.
    #[arg(long, value_name = "ADDR:PORT", num_args = 0..=1, default_missing_value = "0.0.0.0:29571",
          conflicts_with = "peer", required_unless_present = "peer")]
    listen: Option<String>,
    /// Measure towards the node where `--listen` runs (port 29571 unless given).
    #[arg(long, value_name = "HOST[:PORT]")]
    peer: Option<String>,
    /// How long a listener serves.
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    serve_seconds: u64,
    /// Parallel TCP streams (1 to 64).
    #[arg(long, value_name = "N", default_value_t = 8)]
    streams: u32,
    /// Seconds the streams send, and `ib_write_bw` runs.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    seconds: u64,
    /// The RDMA device (and port) `ib_write_bw` runs on, on this node: `mlx5_0` or
    /// `mlx5_0:1` (default: the first ACTIVE port under /sys/class/infiniband).
    #[arg(long, value_name = "DEV[:PORT]")]
    rdma_device: Option<String>,
    /// Print the results as a JSON document.
    #[arg(long)]
    json: bool,
}

fn bench_error(e: HostBenchError) -> CliError {
    match e {
        HostBenchError::Input(m) => CliError::Usage(m),
        HostBenchError::Environment(m) => CliError::Environment(m),
        HostBenchError::Interrupted(sig) => CliError::Interrupted(sig),
    }
}

/// A size: bytes, or a number with `KiB`/`MiB`/`GiB`/`TiB` (binary) or `KB`/`MB`/`GB`/`TB`
/// (decimal).
pub fn parse_size(flag: &str, text: &str) -> Result<u64, CliError> {
    let t = text.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" | "k" => 1 << 10,
        "mib" | "m" => 1 << 20,
        "gib" | "g" => 1 << 30,
        "tib" | "t" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => u64::MAX,
    };
    let n: Option<f64> = num.parse().ok().filter(|n: &f64| n.is_finite() && *n >= 0.0);
    match n {
        Some(n) if mult != u64::MAX && n * (mult as f64) < 1.8e19 => Ok((n * mult as f64) as u64),
        _ => Err(CliError::Usage(format!(
            "{flag} `{}`: expected a size such as `512MiB`, `4GiB` or `2GB`",
            crate::text::excerpt(text)
        ))),
    }
}

/// A duration: seconds, or a number with `s`, `m` or `h`.
pub fn parse_duration(flag: &str, text: &str) -> Result<Duration, CliError> {
    let t = text.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 's')) => (&t[..i], 1),
        Some((i, 'm')) => (&t[..i], 60),
        Some((i, 'h')) => (&t[..i], 3600),
        _ => (t, 1),
    };
    match num.parse::<u64>().ok().and_then(|n| n.checked_mul(mult)) {
        Some(s) if s > 0 && s <= 7 * 24 * 3600 => Ok(Duration::from_secs(s)),
        _ => Err(CliError::Usage(format!(
            "{flag} `{}`: expected a duration from 1s to 168h, such as `90s`, `10m` or `1h`",
            crate::text::excerpt(text)
        ))),
    }
}

fn real_system(timeout: Duration) -> RealSystem {
    RealSystem {
        timeout,
        // The host probe asks the daemon what it asks in `doctor`; the bench's own
        // containers go through `docker::run_container`.
        docker: Box::new(|| crate::docker::info(Duration::from_secs(5)).map_err(|e| e.to_string())),
    }
}

/// Every flag read and checked, before anything runs.
struct Prepared {
    sizes: run::Sizes,
    burn: Option<Duration>,
    insecure: Vec<String>,
    page_format: Option<report::acceptance::PageFormat>,
    replay: Option<crate::host::system::HostRecord>,
}

fn prepare(args: &BenchArgs) -> Result<Prepared, CliError> {
    let sizing = if args.full { Sizing::Full } else { Sizing::Quick };
    let mut sizes = sizing.sizes();
    if let Some(s) = &args.disk_size {
        sizes.disk_bytes = parse_size("--disk-size", s)?;
    }
    if let Some(s) = &args.memory_size {
        sizes.memory_bytes = parse_size("--memory-size", s)?;
    }
    if let Some(s) = args.seconds {
        if s == 0 || s > 3600 {
            return Err(CliError::Usage(format!("--seconds {s}: expected 1 to 3600")));
        }
        sizes.rand_seconds = s;
        sizes.net_seconds = s;
        sizes.download_seconds = s;
    }
    let burn = args
        .burn
        .as_deref()
        .map(|b| parse_duration("--burn", b))
        .transpose()?;
    if burn.is_some() && args.host_only {
        return Err(CliError::Usage(
            "--burn with --host-only: the burn-in loads the GPUs; drop --host-only".into(),
        ));
    }
    if let Some(image) = &args.image {
        crate::docker::Reference::parse(image).map_err(|e| {
            CliError::Usage(format!(
                "invalid --image `{}`: {}; expected a local image such as `nvcr.io/nvidia/pytorch:25.01-py3`",
                crate::text::excerpt(image),
                e.reason
            ))
        })?;
    }
    if !(1..=3).contains(&args.dcgm_level) {
        return Err(CliError::Usage(format!(
            "--dcgm-level {}: expected 1 (quick), 2 (medium) or 3 (long), as `dcgmi diag -r` takes",
            args.dcgm_level
        )));
    }
    let insecure = super::insecure_registries(&args.insecure_registry, &|k| std::env::var(k).ok())?;
    for image in &args.download_image {
        crate::bench::host::registry::check(image).map_err(bench_error)?;
    }
    if let Some(dev) = &args.rdma_device {
        rdma::parse_device(dev).map_err(CliError::Usage)?;
    }
    let page_format = args.report.as_deref().map(super::report_target).transpose()?;
    if let Some(dir) = &args.record {
        record_target(dir)?;
    }
    let replay = args
        .host_facts
        .as_ref()
        .map(|path| {
            Recording::load(path).map_err(|e| match e {
                RecordError::File(e) => super::stack::read_error(e),
                RecordError::Invalid(m) => CliError::Usage(m),
            })
        })
        .transpose()?;
    Ok(Prepared {
        sizes,
        burn,
        insecure,
        page_format,
        replay,
    })
}

/// What a bench measured: the results, and the host as probed (its GPUs' links judge
/// the figures).
struct Measured {
    doc: BenchDoc,
    host: HostReport,
}

/// Where the bench runs from: `bench` itself stops on a disk it may not write to; `check`
/// lists that as a part not measured and goes on (its verdict then says what is missing).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Caller {
    Bench,
    Check,
}

fn measure(
    db: &crate::db::Db,
    args: &BenchArgs,
    prep: Prepared,
    caller: Caller,
) -> Result<Measured, CliError> {
    let gpu_plan = gpu_plan(args, &prep);
    // The engines run for as long as the largest part may; fio's random reads are timed.
    let mut timeout = host_limit(&prep.sizes);
    if let Some(p) = &gpu_plan {
        timeout = timeout.max(gpus::time_limit(p));
    }
    let recording = args.record.as_ref().map(|_| {
        Arc::new(Recording::capture(
            Box::new(real_system(timeout)),
            format!("recorded by gpuenv {} bench", env!("CARGO_PKG_VERSION")),
        ))
    });
    let replaying = prep.replay.is_some();
    let system: Arc<dyn System> = match (prep.replay, &recording) {
        (Some(record), _) => Arc::new(Recording::replay(record)),
        (None, Some(r)) => r.clone(),
        (None, None) => Arc::new(real_system(timeout)),
    };

    let mut doc = BenchDoc {
        schema_version: report::SCHEMA_VERSION,
        hostname: crate::host::hostname(system.as_ref()).unwrap_or_default(),
        machine_id: crate::host::machine_id(system.as_ref()),
        ..BenchDoc::default()
    };

    // The GPUs, their links and the Pythons, as `doctor` finds them: which torch measures,
    // and what each figure is judged against.
    let probe_opts = ProbeOptions {
        pythons: args
            .python
            .iter()
            .filter(|_| args.image.is_none())
            .cloned()
            .collect(),
        deadline: Duration::from_secs(60),
    };
    let host = match &gpu_plan {
        Some(_) => crate::host::probe(system.clone(), &probe_opts),
        None => HostReport::default(),
    };
    if let Some(plan) = &gpu_plan {
        let measured = gpus::run_gpus(plan, system.clone(), &host, &probe_opts);
        doc.gpus = measured.gpus;
        doc.figures.extend(measured.figures);
        doc.skipped.extend(measured.skipped);
        doc.failures.extend(measured.failures);
        doc.burn = measured.burn;
        if let Some(sig) = crate::interrupt::requested() {
            return Err(CliError::Interrupted(sig));
        }
    }

    if !args.gpu_only && replaying {
        doc.skipped.push(
            "host (disk, memory, network, downloads): measured live by gpuenv itself, so a recorded host does \
             not replay them; the recorded run's bench.json holds its figures"
                .into(),
        );
    } else if !args.gpu_only {
        let plain = real_system(Duration::from_secs(15));
        let disk = match &args.path {
            Some(p) => Ok((p.clone(), "--path".to_string())),
            None => data_disk(&plain),
        };
        // Given either kind, only what was given is measured; neither, both defaults.
        let given = !args.download_url.is_empty() || !args.download_image.is_empty();
        let downloads = if args.no_download || given {
            args.download_url.clone()
        } else {
            download::DEFAULT_URLS.iter().map(|u| u.to_string()).collect()
        };
        let images = if args.no_download || given {
            args.download_image.clone()
        } else {
            newest_ngc_pytorch(db).into_iter().collect()
        };
        let mut plan = HostPlan {
            sizes: prep.sizes,
            disk,
            allow_system_disk: args.allow_system_disk,
            peer: args.peer.clone(),
            images,
            insecure: prep.insecure,
            rdma_device: args.rdma_device.clone(),
            downloads,
        };
        let outcome = match run::run_host(&plan, system.as_ref()) {
            // `check` was not asked where to write: a disk it may not use is a part not
            // measured, and the rest of the host still is.
            Err(HostBenchError::Input(why)) if caller == Caller::Check && plan.disk.is_ok() => {
                plan.disk = Err(format!(
                    "{why} (check runs the bench with its defaults: run `gpuenv bench --json` with the flags this \
                     disk needs, and give its file to check's --bench-results)"
                ));
                run::run_host(&plan, system.as_ref()).map_err(bench_error)?
            }
            other => other.map_err(bench_error)?,
        };
        doc.figures.extend(outcome.figures);
        doc.skipped.extend(outcome.skipped);
    }

    if let (Some(dir), Some(rec)) = (&args.record, &recording) {
        save_record(dir, rec, &doc)?;
    }
    Ok(Measured { doc, host })
}

/// The GPU side's plan, unless `--host-only`.
fn gpu_plan(args: &BenchArgs, prep: &Prepared) -> Option<GpuPlan> {
    (!args.host_only).then(|| GpuPlan {
        mode: if args.full { Mode::Full } else { Mode::Quick },
        // With --image, --python is the interpreter inside it.
        python: args.python.clone().filter(|_| args.image.is_none()),
        image: args
            .image
            .clone()
            .map(|i| (i, args.python.clone().unwrap_or_else(|| "python3".into()))),
        burn_seconds: prep.burn.map(|b| b.as_secs()),
        dcgm_level: args.dcgm_level,
    })
}

/// The longest one engine of the host side may run: fio's random reads are timed, the
/// rest bounded by their sizes.
fn host_limit(sizes: &run::Sizes) -> Duration {
    Duration::from_secs(sizes.rand_seconds.max(60) * 4 + 600)
}

/// `fleet collect --bench`: the bench flags passed on to every node (already checked
/// against the allow-list, parsed here as the node's gpuenv will parse them) read as
/// `bench` reads them, so that a bad value or a clash is refused before any node runs; and
/// how long one node's bench may take. That bound adds what runs one after the other: on
/// the GPU side, gpuenv's script and DCGM's diagnostic (each within the larger of their
/// limits) and the burn-in; on the host side, its longest engine and the two downloads.
pub(super) fn fleet_time_limit(args: &BenchArgs) -> Result<Duration, CliError> {
    if args.command.is_some() {
        return Err(CliError::Usage(
            "--bench-arg: `net` is run by fleet collect itself, not passed on".into(),
        ));
    }
    let prep = prepare(args)?;
    let gpu = gpu_plan(args, &prep)
        .map(|p| {
            let burn = p.burn_seconds.map(crate::bench::burn::time_limit);
            let engines = gpus::time_limit(&GpuPlan {
                burn_seconds: None,
                ..p
            });
            engines * 2 + burn.unwrap_or_default()
        })
        .unwrap_or_default();
    let host = if args.gpu_only {
        Duration::ZERO
    } else {
        host_limit(&prep.sizes) + Duration::from_secs(2 * prep.sizes.download_seconds)
    };
    Ok(gpu + host)
}

/// Runs `gpuenv bench ...`.
pub fn bench(
    db_dir: &Option<PathBuf>,
    args: &BenchArgs,
    out: &mut dyn Write,
    styles: report::Styles,
) -> Result<Exit, CliError> {
    if let Some(BenchCommand::Net(n)) = &args.command {
        return bench_net(db_dir, n, out, styles);
    }
    // Every input is read before anything runs.
    let prep = prepare(args)?;
    let page_format = prep.page_format;
    let db = super::open_db(db_dir)?;
    let Measured { doc, host } = measure(&db, args, prep, Caller::Bench)?;
    let gpu_figures = doc
        .figures
        .iter()
        .filter(|f| f.gpu.is_some() || is_gpu_wide(f.metric))
        .count();

    let m = crate::judge::Measured::judge(&db, &doc, &crate::bench::links_from_host(&host.gpus), false);
    report::bench(out, &doc, &m, args.json, styles)?;
    if let (Some(path), Some(format)) = (&args.report, page_format) {
        let page = report::bench::page(
            format,
            &report::bench::PageInput {
                doc: &doc,
                measured: &m,
                written_at: jiff::Timestamp::now(),
            },
        );
        super::write_page(path, page)?;
    }
    if args.gpu_only && gpu_figures == 0 && doc.burn.is_none() {
        return Err(CliError::Environment(format!(
            "--gpu-only: no GPU figure could be measured: {}",
            doc.skipped.join("; ")
        )));
    }
    Ok(if crate::bench::has_findings(&m) {
        Exit::Findings
    } else {
        Exit::Ok
    })
}

/// A figure of all the GPUs together (the all-reduce), not of one.
fn is_gpu_wide(m: crate::bench::Metric) -> bool {
    m == crate::bench::Metric::NcclBusbw
}

/// `check --order` with an order that asks for measured figures and no `--bench-results`:
/// the quick bench, run here with its defaults, and the host it probed. Nothing is
/// printed; `check` shows the figures with its acceptance.
pub(super) fn measure_for_check(db: &crate::db::Db) -> Result<(BenchDoc, HostReport), CliError> {
    let args = BenchArgs::defaults();
    let prep = prepare(&args)?;
    let m = measure(db, &args, prep, Caller::Check)?;
    Ok((m.doc, m.host))
}

/// The image a stack's container most often starts from: the newest NGC PyTorch release
/// compat-db records (its layers are the largest a training image pulls).
fn newest_ngc_pytorch(db: &crate::db::Db) -> Option<String> {
    db.images
        .iter()
        .filter(|i| i.repository == "nvcr.io/nvidia/pytorch")
        .filter_map(|i| i.tag.as_ref().map(|t| format!("{}:{t}", i.repository)))
        .max()
}

/// The directory of the disk test when `--path` is not given: the data disk as `doctor`
/// names it, from `df -PkT`.
fn data_disk(sys: &dyn System) -> Result<(PathBuf, String), String> {
    let df = sys.run("df", &["-PkT"]);
    if !df.ok() {
        return Err("`df -PkT` failed, so no data disk was found; give --path DIR".into());
    }
    let mut host = crate::host::HostReport {
        mounts: crate::host::parse::df(&df.stdout),
        ..crate::host::HostReport::default()
    };
    crate::host::classify_mounts(sys, &mut host.mounts);
    match crate::judge::data_disk(&host) {
        Some(m) => Ok((
            PathBuf::from(&m.mount),
            format!(
                "the data disk doctor names, {}",
                crate::judge::layout::describe_mount(m)
            ),
        )),
        None => Err("no filesystem to test was found; give --path DIR".into()),
    }
}

/// `--record DIR` checked before anything runs: a directory (or absent), and its two
/// files absent or regular files.
fn record_target(dir: &Path) -> Result<(), CliError> {
    if let Ok(m) = std::fs::metadata(dir) {
        if !m.is_dir() {
            return Err(CliError::Usage(format!(
                "refusing --record `{}`: it is not a directory",
                files::shown(dir)
            )));
        }
    }
    for name in ["host.json", "bench.json"] {
        files::check_target(&dir.join(name), Replace::RegularFile).map_err(super::write_error)?;
    }
    Ok(())
}

fn save_record(dir: &Path, rec: &Recording, doc: &BenchDoc) -> Result<(), CliError> {
    fs_err::create_dir_all(dir).map_err(|source| CliError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    for (name, json) in [
        ("host.json", serde_json::to_string_pretty(&rec.record())),
        ("bench.json", serde_json::to_string_pretty(doc)),
    ] {
        let path = dir.join(name);
        let json = json.map_err(|e| CliError::Write {
            path: path.clone(),
            source: std::io::Error::other(e),
        })?;
        files::write_file(&path, json.as_bytes(), Replace::RegularFile).map_err(super::write_error)?;
    }
    Ok(())
}

fn bench_net(
    db_dir: &Option<PathBuf>,
    args: &NetArgs,
    out: &mut dyn Write,
    styles: report::Styles,
) -> Result<Exit, CliError> {
    if let Some(dev) = &args.rdma_device {
        rdma::parse_device(dev).map_err(CliError::Usage)?;
    }
    if let Some(addr) = &args.listen {
        if args.serve_seconds == 0 || args.serve_seconds > 7 * 24 * 3600 {
            return Err(CliError::Usage(format!(
                "--serve-seconds {}: expected 1 to 604800",
                args.serve_seconds
            )));
        }
        // The listener reads sysfs (its RDMA device) and the socket table (whether its
        // `ib_write_bw` server listens); the server itself is bounded by its session.
        let listener = net::Listener::bind(addr)
            .map_err(bench_error)?
            .with_rdma(rdma::ServerConfig::new(
                Arc::new(real_system(Duration::from_secs(15))),
                args.rdma_device.clone(),
            ));
        let at = listener.local_addr().map_err(bench_error)?;
        // Catches SIGINT/SIGTERM so the loop ends and says so; nothing is held on disk.
        let hold = crate::interrupt::hold().map_err(CliError::Interrupted)?;
        let mut err = std::io::stderr();
        report::bench_listening(&mut err, &at.to_string(), args.serve_seconds)?;
        listener.serve(Duration::from_secs(args.serve_seconds), &|why| {
            let _ = report::bench_refused(&mut std::io::stderr(), &why);
        });
        drop(hold);
        if let Some(sig) = crate::interrupt::requested() {
            return Err(CliError::Interrupted(sig));
        }
        return Ok(Exit::Ok);
    }
    let Some(peer) = &args.peer else {
        return Err(CliError::Usage(
            "bench net: give --listen or --peer HOST[:PORT]".into(),
        ));
    };
    if args.seconds == 0 || args.seconds > 3600 {
        return Err(CliError::Usage(format!(
            "--seconds {}: expected 1 to 3600",
            args.seconds
        )));
    }
    let mut figures = net::measure(&net::PeerPlan {
        peer: peer.clone(),
        streams: args.streams,
        duration: Duration::from_secs(args.seconds),
        pings: 200,
    })
    .map_err(bench_error)?;
    // RDMA where both nodes can: a reason in `skipped` where not, never an error.
    let mut skipped = Vec::new();
    let rdma_system = real_system(Duration::from_secs(args.seconds) + rdma::RUN_MARGIN);
    match rdma::measure(
        &rdma_system,
        &rdma::ClientPlan {
            peer: peer.clone(),
            seconds: args.seconds,
            device: args.rdma_device.clone(),
            program: rdma::PROGRAM.into(),
        },
    ) {
        Ok(f) => figures.push(f),
        Err(why) => skipped.push(format!("network (RDMA): {why}")),
    }
    if let Some(sig) = crate::interrupt::requested() {
        return Err(CliError::Interrupted(sig));
    }
    let plain = real_system(Duration::from_secs(5));
    let doc = BenchDoc {
        schema_version: report::SCHEMA_VERSION,
        hostname: crate::host::hostname(&plain).unwrap_or_default(),
        machine_id: crate::host::machine_id(&plain),
        figures,
        skipped,
        ..BenchDoc::default()
    };
    report::bench(
        out,
        &doc,
        &crate::judge::Measured::judge(&*super::open_db(db_dir)?, &doc, &Default::default(), false),
        args.json,
        styles,
    )?;
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_with_their_units() {
        assert_eq!(parse_size("f", "512MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("f", "2GB").unwrap(), 2_000_000_000);
        assert_eq!(parse_size("f", "1.5GiB").unwrap(), 3 << 29);
        assert_eq!(parse_size("f", "4096").unwrap(), 4096);
        for bad in ["", "x", "-1GiB", "1PB", "1e400", "99999999999TiB"] {
            assert!(parse_size("f", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_read_with_their_units() {
        assert_eq!(parse_duration("d", "10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_duration("d", "90").unwrap(), Duration::from_secs(90));
        for bad in ["", "0s", "m", "10x", "1000h", "-5s"] {
            assert!(parse_duration("d", bad).is_err(), "{bad}");
        }
    }
}
