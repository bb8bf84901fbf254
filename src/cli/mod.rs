//! Command-line definitions and dispatch; nothing else lives here.
//!
//! Owns: the clap definitions, turning flags into settings, choosing the database, and the
//! mapping of outcomes to exit codes ([`Exit`]). Must not: hold domain logic or print
//! anything but through `report`. clap types stay in this module.

use std::io::{self, Write};
use std::path::PathBuf;

use clap::{Args, ColorChoice, CommandFactory, Parser, Subcommand, ValueEnum};

mod bench;
mod containers;
mod fleet;
mod host;
mod order;
mod plan;
mod stack;

pub use host::HostArgs;
use order::OrderArgs;
pub use stack::{ProjectArgs, StackArgs};

use crate::db::{self, Db, DbError, Found, Kind, LookupError};
use crate::docker::DockerError;
use crate::interrupt::Signal;
use crate::report;
use crate::resolve::{self, QueryError, Status};
use crate::upstream::{self, RefreshOptions, UpstreamError};

/// Exit codes: part of the contract with users' scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The answer is compatible, or the command succeeded.
    Ok = 0,
    /// The answer is incompatible (or conditional under `--strict`), or lint found problems.
    Findings = 1,
    /// Bad input or usage.
    BadInput = 2,
    /// The environment failed: Docker unreachable, a probe crashed, a registry refused.
    Environment = 3,
    /// SIGINT (Ctrl-C) stopped the run, after what it had made in the daemon was removed:
    /// 128 + 2, as a shell reports a process the signal killed.
    Interrupted = 130,
    /// SIGTERM stopped the run, after what it had made in the daemon was removed: 128 + 15.
    Terminated = 143,
}

impl Exit {
    /// The process exit code.
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// An error that ends a command, with the exit code it maps to.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The database could not be used.
    #[error(transparent)]
    Db(#[from] DbError),
    /// A name matched no record, or several.
    #[error(transparent)]
    Lookup(#[from] LookupError),
    /// Reading upstream failed, or its proposals could not be written.
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// A flag's value is not usable.
    #[error("{0}")]
    Usage(String),
    /// The pins contradict each other or name nothing that exists.
    #[error(transparent)]
    Query(#[from] QueryError),
    /// A daemon, registry or stream failed.
    #[error("{0}")]
    Environment(String),
    /// A project file does not parse.
    #[error(transparent)]
    Input(#[from] crate::project::InputError),
    /// An order file does not read: every problem, a line each.
    #[error(transparent)]
    Order(#[from] crate::judge::OrderError),
    /// Writing the report failed.
    #[error("cannot write output: {0}")]
    Io(#[from] io::Error),
    /// A file could not be written.
    #[error("cannot write `{}`: {source}", crate::files::shown(path))]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// No stack runs on the machine described.
    #[error("{0}")]
    NoStack(String),
    /// No Dockerfile can be written for the stack.
    #[error(transparent)]
    Dockerfile(#[from] crate::dockerfile::DockerfileError),
    /// An image name is malformed.
    #[error(transparent)]
    Reference(#[from] crate::docker::ReferenceError),
    /// Registry credentials could not be read.
    #[error(transparent)]
    Auth(#[from] crate::credentials::AuthError),
    /// The build context could not be made.
    #[error(transparent)]
    Context(#[from] crate::docker::context::ContextError),
    /// The Docker daemon or a registry failed.
    #[error(transparent)]
    Docker(#[from] crate::docker::DockerError),
    /// SIGINT or SIGTERM stopped a bench, after its test files were removed.
    #[error("stopped by {0}; the test files were removed")]
    Interrupted(Signal),
}

impl CliError {
    /// The exit code this error maps to.
    pub fn exit(&self) -> Exit {
        match self {
            // A broken record file is bad input: `--db` names it, or the build embedded it; a
            // record that could not be read for the machine's fault is the environment's.
            CliError::Db(e) if e.is_bad_input() => Exit::BadInput,
            CliError::Db(_) => Exit::Environment,
            CliError::Lookup(_) => Exit::BadInput,
            CliError::Usage(_) => Exit::BadInput,
            CliError::Query(_) => Exit::BadInput,
            CliError::Input(_) => Exit::BadInput,
            CliError::Environment(_) => Exit::Environment,
            CliError::Upstream(UpstreamError::OutDir { .. }) => Exit::BadInput,
            CliError::Upstream(_) => Exit::Environment,
            CliError::Io(_) => Exit::Environment,
            CliError::Write { .. } => Exit::Environment,
            CliError::NoStack(_) => Exit::Findings,
            CliError::Dockerfile(_) => Exit::BadInput,
            CliError::Reference(_) => Exit::BadInput,
            CliError::Auth(e) if e.is_environment() => Exit::Environment,
            CliError::Auth(_) => Exit::BadInput,
            CliError::Context(_) => Exit::BadInput,
            CliError::Order(_) => Exit::BadInput,
            // What an image holds made the daemon fail: the image is at fault.
            CliError::Docker(DockerError::ImageContent { .. }) => Exit::BadInput,
            CliError::Docker(
                DockerError::Interrupted(Signal::Interrupt)
                | DockerError::InterruptedLeaving {
                    signal: Signal::Interrupt,
                    ..
                },
            ) => Exit::Interrupted,
            CliError::Docker(
                DockerError::Interrupted(Signal::Terminate)
                | DockerError::InterruptedLeaving {
                    signal: Signal::Terminate,
                    ..
                },
            ) => Exit::Terminated,
            CliError::Docker(_) => Exit::Environment,
            CliError::Interrupted(Signal::Interrupt) => Exit::Interrupted,
            CliError::Interrupted(Signal::Terminate) => Exit::Terminated,
        }
    }

    /// The message as lines, for the messages that are several lines by design (every
    /// problem of a broken database or order, a failed build and its step's output); `None`
    /// for the one-line ones. Lines may hold text from outside: `report::error` makes each
    /// safe, and shows a line break inside a line as `\n`.
    pub fn lines(&self) -> Option<Vec<String>> {
        match self {
            CliError::Db(e) => e.lines(),
            CliError::Order(e) => Some(e.problems.clone()),
            CliError::Docker(e) => e.lines(),
            _ => None,
        }
    }
}

/// A page (`check --report`, `fleet report --report`) written atomically where it was
/// asked; a failure to make it is a failure to write it.
fn write_page(path: &std::path::Path, page: io::Result<String>) -> Result<(), CliError> {
    let page = page.map_err(|source| CliError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    crate::files::write_file(path, page.as_bytes(), crate::files::Replace::RegularFile).map_err(write_error)
}

/// An output file's error as the command's: a target that must not be replaced is bad
/// input (nothing was written), a write that failed is the environment's.
fn write_error(e: crate::files::WriteError) -> CliError {
    match e {
        crate::files::WriteError::Failed { path, source } => CliError::Write { path, source },
        refused => CliError::Usage(refused.to_string()),
    }
}

/// gpuenv: will this Python + PyTorch + CUDA + driver + GPU stack run?
///
/// Answers from a curated, sourced database compiled into the binary.
/// Exit codes: 0 ok or compatible; 1 incompatible, or problems found;
/// 2 bad input or usage; 3 the environment failed.
#[derive(Debug, Parser)]
#[command(name = "gpuenv", version, about, long_about = None)]
pub struct Cli {
    /// Use the database in DIR (a `compat-db/` layout) instead of the embedded one.
    #[arg(long, global = true, value_name = "DIR")]
    pub db: Option<PathBuf>,

    /// When to colour the marks (pass, FAIL, warn, ...): `auto` colours a stream that is a
    /// terminal, unless NO_COLOR is set (CLICOLOR_FORCE colours it anyway); stdout and
    /// stderr are decided each on its own.
    #[arg(long, global = true, value_name = "WHEN", default_value = "auto")]
    color: ColorChoice,

    #[command(subcommand)]
    command: Command,
}

/// Parses the process's arguments. clap prints its own help and usage errors, coloured by
/// its own rule: `--color` is looked for first, so that `--color never` holds for those
/// too (an unreadable value is left to the parse, which reports it).
pub fn parse() -> Result<Cli, clap::Error> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let mut cmd = Cli::command();
    if let Some(choice) = color_asked(&args) {
        cmd = cmd.color(choice);
    }
    let mut matches = cmd.try_get_matches_from_mut(args)?;
    <Cli as clap::FromArgMatches>::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut cmd))
}

/// The last `--color WHEN` or `--color=WHEN` before `--`, when WHEN is a valid choice.
fn color_asked(args: &[std::ffi::OsString]) -> Option<ColorChoice> {
    let mut asked = None;
    let mut words = args.iter().skip(1).map(|a| a.to_str());
    while let Some(word) = words.next() {
        let value = match word {
            Some("--") => break,
            Some("--color") => words.next().flatten(),
            Some(w) => w.strip_prefix("--color="),
            None => None,
        };
        if let Some(v) = value.and_then(|v| ColorChoice::from_str(v, false).ok()) {
            asked = Some(v);
        }
    }
    asked
}

impl Cli {
    /// What `--color` asks for, as the terminal writers take it.
    pub fn color(&self) -> anstream::ColorChoice {
        match self.color {
            ColorChoice::Auto => anstream::ColorChoice::Auto,
            ColorChoice::Always => anstream::ColorChoice::Always,
            ColorChoice::Never => anstream::ColorChoice::Never,
        }
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Before choosing: from the model and the training method, the GPU memory per GPU
    /// (each term, each assumption with its source), the GPUs it fits on and how many, the
    /// stack for each, the machine, the time and cost, offers ranked, and the order to
    /// accept on delivery (--order-out). Exit 1 when no GPU fits.
    Plan(Box<plan::PlanArgs>),
    /// Many nodes: merge `doctor --json` reports and show what differs between nodes.
    Fleet {
        #[command(subcommand)]
        command: FleetCommand,
    },
    /// Work with the database itself.
    Db {
        #[command(subcommand)]
        command: DbCommand,
    },
    /// Show one record and its sources: `gpuenv show gpu "H100 SXM"`.
    Show(ShowArgs),
    /// Will it run? Every stack (torch build x Python) that works on the machine described,
    /// ranked, with the findings behind each verdict; when none does, why, and what to change.
    Query(Box<QueryArgs>),
    /// What is really inside an image, without running it: torch, CUDA, cuDNN, NCCL,
    /// Python, OS; against its claims (`--expect`, or its tag) and a target (`--driver`,
    /// `--gpu`, or this host). IMAGE: `docker-daemon:NAME` or a bare name,
    /// `docker://REGISTRY/NAME:TAG`, `docker-archive:PATH`, `oci-archive:PATH`, `oci:DIR`.
    /// Exit 1 when a claim or the target check fails.
    Verify(Box<VerifyArgs>),
    /// The compatibility graph a query used, in Graphviz DOT.
    Graph(Box<GraphArgs>),
    /// On the rented host: probe GPUs, driver, toolkits, cuDNN, Pythons and torch, Docker,
    /// CPU, memory and disks, then check them. Exit 1 when a check fails.
    Doctor(Box<DoctorArgs>),
    /// On the rented host: the project's needs (the flags and files of `query`) against
    /// this host, and acceptance against the order (`--expect-*` or `--order FILE`).
    Check(Box<CheckArgs>),
    /// A Dockerfile for the best stack the flags of `query` allow: a base from the image
    /// catalog, Python, pinned torch, the project's requirements, a non-root user, labels,
    /// NVIDIA_REQUIRE_CUDA and a torch check. To stdout, or --out FILE.
    Dockerfile(Box<containers::DockerfileArgs>),
    /// Build that Dockerfile through the Docker Engine (in-memory context, progress on
    /// stderr) and tag the image once every step succeeded. Exit 3 when a step fails.
    Build(Box<containers::BuildArgs>),
    /// Pull IMAGE, or the best catalog image for the stack, with per-layer progress on
    /// stderr and its digest checked against the registry's. Exit 3 when the registry
    /// refuses or fails.
    Pull(Box<containers::PullArgs>),
    /// The completion script of a shell, to stdout, generated from these definitions:
    /// `gpuenv completions bash > ~/.local/share/bash-completion/completions/gpuenv`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Measure the delivered machine, each figure against its datasheet and its peers
    ///
    /// The GPUs (DCGM, nccl-tests and nvbandwidth where installed, else gpuenv's torch
    /// script: matmul, memory, host and peer copies, NCCL all_reduce, ResNet-50; `--burn`
    /// for a burn-in) and the host (data disk by gpuenv and fio, memory, network,
    /// downloads). Every figure names its engine; what could not be measured is listed with
    /// the reason. `bench net` measures between two nodes.
    Bench(Box<bench::BenchArgs>),
    /// The manual page (roff), generated from these definitions: gpuenv's to stdout
    /// (`gpuenv man | man -l -`), or with --out every page, one per command.
    Man(ManArgs),
}

#[derive(Debug, Args)]
struct ManArgs {
    /// Write gpuenv.1 and a page per command (gpuenv-query.1, gpuenv-db-refresh.1, ...) to
    /// DIR, created when missing; pages of those names there are replaced (regular files
    /// only), each atomically.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct VerifyArgs {
    /// The image.
    image: String,
    /// What the image should hold: `torch=2.8,cuda=12.8,python=3.11` (also `cudnn`, `nccl`).
    #[arg(long, value_name = "CLAIMS")]
    expect: Option<String>,
    /// Do not infer claims from well-known tags (pytorch/pytorch, nvidia/cuda, NGC).
    #[arg(long)]
    no_infer: bool,
    /// The target's driver version.
    #[arg(long, value_name = "VERSION")]
    driver: Option<String>,
    /// A target GPU (repeatable, or `NAMExN`).
    #[arg(long, value_name = "NAME")]
    gpu: Vec<String>,
    /// Judge against this host (its probes).
    #[arg(long)]
    host: bool,
    /// Judge against a recorded host.
    #[arg(long, value_name = "FILE")]
    host_facts: Option<std::path::PathBuf>,
    /// Seconds the whole read of the image may take (default 1800): every request to a
    /// registry, every byte of its answers, a credential helper. Any single wait (a
    /// connection, an answer, the next bytes) is given up after 30 s, or this when less.
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<u64>,
    /// A registry gpuenv may speak plain HTTP to (`HOST` or `HOST:PORT`; repeatable; also
    /// GPUENV_INSECURE_REGISTRIES, comma-separated). Loopback IPs and `localhost` need no
    /// listing.
    #[arg(long, value_name = "HOST")]
    insecure_registry: Vec<String>,
    /// A local image: read every layer (the export stream) instead of the paths where
    /// the standard layouts keep what is verified.
    #[arg(long)]
    full: bool,
    /// Write what the image was read to hold as a proposed compat-db record to DIR (new or
    /// empty; laid out as compat-db, `DIR/image/ngc-25.01.toml`), for a curator to review:
    /// the record of the image's NGC release or pytorch/pytorch tag with each fact read
    /// confirmed (out of `unverified`), corrected (both values said) or left as it was,
    /// citing the image by digest (`docker://REGISTRY/REPOSITORY@sha256:...`). The image must
    /// be read with a manifest digest: from a registry or an OCI layout. compat-db itself is
    /// never changed.
    #[arg(long, value_name = "DIR")]
    propose: Option<PathBuf>,
    /// Print a JSON document.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct DoctorArgs {
    #[command(flatten)]
    host: HostArgs,
    /// Also probe this Python interpreter (repeatable).
    #[arg(long, value_name = "PATH")]
    python: Vec<String>,
    /// Warn when the data disk has less free space than this many GB.
    #[arg(long, value_name = "GB", default_value_t = 100.0)]
    min_free_gb: f64,
    /// Print a JSON document.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct CheckArgs {
    #[command(flatten)]
    stack: StackArgs,
    #[command(flatten)]
    project: ProjectArgs,
    #[command(flatten)]
    host: HostArgs,
    /// Also probe this Python interpreter (repeatable; `--python` is the version the
    /// project needs, as in `query`).
    #[arg(long, value_name = "PATH")]
    python_path: Vec<String>,
    #[command(flatten)]
    order: OrderArgs,
    /// This machine's `gpuenv bench --json` results: the order's measured items (`bench =
    /// true`, the `min_*` floors) are judged on them, and every figure is shown beside its
    /// datasheet (also without such an order, where they decide nothing). Results of
    /// another machine (another machine ID or host name, other GPUs) are refused.
    #[arg(long, value_name = "FILE")]
    bench_results: Option<PathBuf>,
    /// Treat a conditional answer as a failure (exit 1).
    #[arg(long)]
    strict: bool,
    /// Print a JSON document.
    #[arg(long)]
    json: bool,
    /// How many builds the table shows (0: all).
    #[arg(long, value_name = "N", default_value_t = 10)]
    limit: usize,
    /// Also write an acceptance page to send to the vendor: FILE.html (or .htm), or
    /// FILE.md. It holds the order's items, the doctor checks, the stack verdict, the GPU
    /// topology and state, the machine and every raw answer of the host as evidence.
    #[arg(long, value_name = "FILE")]
    report: Option<std::path::PathBuf>,
    /// With --report: the doctor check warns when the data disk has less free space than
    /// this many GB.
    #[arg(long, value_name = "GB", default_value_t = 100.0)]
    min_free_gb: f64,
}

#[derive(Debug, Args)]
struct QueryArgs {
    #[command(flatten)]
    stack: StackArgs,
    #[command(flatten)]
    project: ProjectArgs,
    /// Print a JSON document.
    #[arg(long)]
    json: bool,
    /// Also list incompatible stacks with their reasons.
    #[arg(long)]
    all: bool,
    /// Treat a conditional answer as a failure (exit 1).
    #[arg(long)]
    strict: bool,
    /// How many builds the table shows (0: all).
    #[arg(long, value_name = "N", default_value_t = 10)]
    limit: usize,
}

#[derive(Debug, Args)]
struct GraphArgs {
    #[command(flatten)]
    stack: StackArgs,
    #[command(flatten)]
    project: ProjectArgs,
    /// Print Graphviz DOT (the only format).
    #[arg(long)]
    dot: bool,
}

#[derive(Debug, Subcommand)]
enum FleetCommand {
    /// Run `gpuenv doctor --json` on every node through Slurm (`--slurm`), ssh (`--hosts
    /// FILE`) or the pods of `fleet k8s-manifest` (`--kubectl NAME`), and write one report
    /// per node (named by its hostname) into a new folder for `fleet report`. A node that
    /// fails or does not answer in time leaves a file saying why, with the engine's words.
    /// Exit 1 when a node gave no report or has a failing check; 3 when the engine could
    /// not run at all.
    Collect(Box<fleet::CollectArgs>),
    /// Merge `gpuenv doctor --json` reports (each FILE, every `*.json` of each DIR): a row
    /// per node, the drift between nodes (NCCL, torch, driver version and branch, CUDA
    /// toolkit, cuDNN, OS, kernel, GPUs, RDMA, failing checks) with what each breaks, and a line for each file left out.
    /// `gpuenv bench --json` results among them are matched to their node (machine ID, else
    /// host name), judged there, and the nodes compared: a node more than 10% below the
    /// median of the nodes in a figure is named and fails. With the order
    /// (`--order FILE`, `--expect-*`) each node is accepted against it, and with `query`'s
    /// flags the project's stack is judged on each node, as `check` does on one. Exit 1
    /// when a node has a failing check, fails the order or runs no stack, or when drift
    /// that breaks multi-node jobs (NCCL, torch, torch's CUDA) is found and not allowed by
    /// `--allow-drift`; 2 when no report could be read.
    Report(Box<FleetReportArgs>),
    /// A Kubernetes manifest (YAML, to stdout) that runs `gpuenv doctor --json` once on each
    /// GPU node, so that each pod's log (container `gpuenv`) is that node's report: `gpuenv
    /// fleet k8s-manifest --image IMAGE --nodes 4 | kubectl apply -f -`. Its pods carry the
    /// labels `app.kubernetes.io/name=gpuenv-fleet` and `app.kubernetes.io/instance=NAME`.
    /// They use the node's network (its host name, NICs and RDMA devices) and its
    /// /etc/machine-id, so their namespace must allow hostNetwork and hostPath volumes (Pod
    /// Security's `privileged` level). Exit 2 when a value would be refused by Kubernetes.
    K8sManifest(Box<K8sManifestArgs>),
}

/// `fleet k8s-manifest --kind`.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum ManifestKind {
    /// A Job of --nodes pods, one per node, each ending once doctor ran.
    Job,
    /// A DaemonSet: a pod on every matching node, which sleeps once doctor ran.
    #[value(name = "daemonset")]
    DaemonSet,
}

#[derive(Debug, Args)]
struct K8sManifestArgs {
    /// An image with gpuenv on PATH and /bin/sh: your training image with gpuenv installed,
    /// so that the report's torch and NCCL are the ones your jobs run. Without it the pods
    /// run python:3.12-slim and `pip install` this very version of gpuenv from PyPI when
    /// they start: the nodes must reach PyPI, and the torch facts then describe that image,
    /// not yours.
    #[arg(long, value_name = "IMAGE")]
    image: Option<String>,
    /// `job`: a Job (batch/v1) of --nodes pods, at most one per node while they run, that
    /// end once doctor ran; it is stopped after 30 minutes, image pulls included, and
    /// deleted with its pods' logs a day after it finished. `daemonset`: a DaemonSet
    /// (apps/v1) with a pod on every matching node, which holds no GPU and sleeps once
    /// doctor ran, until you delete it (`kubectl delete daemonset NAME`).
    #[arg(long, value_enum, value_name = "KIND", default_value = "job")]
    kind: ManifestKind,
    /// How many nodes the Job probes, a pod each (default 2; a Job only). Say how many GPU
    /// nodes there are: with fewer, the pods left over wait until a node's pod ended, then
    /// report that node again (`fleet report` leaves the second report out); with more,
    /// the rest are not probed. --kind daemonset probes every matching node without counting.
    #[arg(long, value_name = "N")]
    nodes: Option<u32>,
    /// The GPUs each Job pod asks for (`nvidia.com/gpu`, default 8; a Job only): a pod sees
    /// only the GPUs it was given, so ask for all of a node's.
    #[arg(long, value_name = "N")]
    gpus_per_node: Option<u32>,
    /// The Job's or DaemonSet's name, and the pods' `app.kubernetes.io/instance` label,
    /// which `fleet collect --kubectl NAME` finds them by: a DNS-1123 label (lowercase
    /// letters, digits and `-`, at most 63).
    #[arg(long, value_name = "NAME", default_value = crate::fleet::k8s::DEFAULT_NAME)]
    name: String,
    /// The namespace (default: kubectl's current one).
    #[arg(long, value_name = "NS")]
    namespace: Option<String>,
    /// The node label that marks a GPU node, in place of `nvidia.com/gpu.present=true`
    /// (which NVIDIA GPU Feature Discovery, and so the GPU Operator, sets).
    #[arg(long, value_name = "KEY=VALUE")]
    node_selector: Option<String>,
}

#[derive(Debug, Args)]
struct FleetReportArgs {
    /// `doctor --json` reports and `bench --json` results, or directories of them.
    #[arg(required = true, value_name = "DIR|FILE")]
    paths: Vec<PathBuf>,
    // The project's needs, judged on each node's host as `check` judges them, only when
    // one of these flags or files is given: a machine flag (`--gpu`, `--driver`) replaces
    // every node's own fact, as it does in `check`.
    #[command(flatten)]
    stack: StackArgs,
    #[command(flatten)]
    project: ProjectArgs,
    // The order, each node accepted against it.
    #[command(flatten)]
    order: OrderArgs,
    /// Let drift of KIND (a code of the JSON's `drift`: nccl, system-nccl, torch,
    /// torch-cuda) pass: still listed, said to be allowed, no longer exit 1. Repeatable.
    #[arg(long, value_name = "KIND")]
    allow_drift: Vec<String>,
    /// Print a JSON document.
    #[arg(long)]
    json: bool,
    /// Also write a fleet page: FILE.html (or .htm), or FILE.md. It holds a row per node
    /// (its verdict, GPUs, driver, torch and NCCL, RDMA, failing checks, acceptance and
    /// stack), the drift grouped by what it breaks, and the files left out.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum DbCommand {
    /// Check every record: unknown keys, bad values, missing sources, dangling references,
    /// duplicate ids or aliases, overlapping ranges. Exit 1 when any is found.
    Lint {
        /// Print a JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Coverage: records per kind, unverified facts, newest release per kind.
    Stats {
        /// Print a JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Read PyPI (and the PyTorch wheel index, where reachable) for torch releases, CUDA
    /// toolkits (cuda-toolkit, nvidia-cuda-runtime, nvidia-cuda-nvcc) and cuDNN releases
    /// (nvidia-cudnn-cuXX), the NGC registry's `nvidia/pytorch` tags for NGC releases and
    /// NVIDIA's driver index for driver releases (both where reachable), and write proposed
    /// new or changed records to a directory for review; what upstream cannot tell is listed
    /// in a proposal's `pending`, never guessed. Curated records are never changed. Exit 3
    /// when PyPI cannot be read; nothing is then written.
    Refresh(RefreshArgs),
    /// List the records of a kind.
    List {
        /// The kind of record.
        kind: KindArg,
        /// Print a JSON document.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
struct RefreshArgs {
    /// Directory for the proposals; must not exist or be empty.
    #[arg(long, value_name = "DIR", default_value = "compat-db-proposals")]
    out: PathBuf,
    /// Also save every upstream response below DIR (test fixtures).
    #[arg(long, value_name = "DIR")]
    record: Option<PathBuf>,
    /// PyPI's root URL.
    #[arg(long, value_name = "URL", default_value = "https://pypi.org/")]
    pypi: String,
    /// The PyTorch wheel index URL.
    #[arg(long, value_name = "URL", default_value = "https://download.pytorch.org/whl/")]
    pytorch_index: String,
    /// Do not read the PyTorch wheel index.
    #[arg(long)]
    no_pytorch_index: bool,
    /// The registry whose `nvidia/pytorch` tags name NGC's PyTorch releases, read
    /// anonymously (`HOST` or `HOST:PORT`; HTTPS, plain HTTP only on loopback or a host
    /// listed in GPUENV_INSECURE_REGISTRIES).
    #[arg(long, value_name = "HOST", default_value = "nvcr.io")]
    ngc_registry: String,
    /// Do not read the NGC registry's tags.
    #[arg(long)]
    no_ngc: bool,
    /// NVIDIA's driver download index (one folder per Linux x86_64 driver release).
    #[arg(
        long,
        value_name = "URL",
        default_value = "https://download.nvidia.com/XFree86/Linux-x86_64/"
    )]
    driver_index: String,
    /// Do not read NVIDIA's driver index.
    #[arg(long)]
    no_driver_index: bool,
    /// Seconds the whole refresh may take (default 600): every request and every byte of
    /// the answers. Any single wait (a connection, an answer, the next bytes) is given up
    /// after 30 s, or this when less.
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<u64>,
    /// Print a JSON document.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct ShowArgs {
    /// The kind of record.
    kind: KindArg,
    /// A name, alias, version or tag: `h100`, `12.4`, `2.4.1+cu121`, `r535`, `3.12`,
    /// `pytorch:24.08-py3`.
    name: String,
    /// With `show image`: judge the image on a host with this driver, from the catalog's
    /// facts, without pulling it (`535`, `535.104.05`).
    #[arg(long, value_name = "VERSION")]
    driver: Option<String>,
    /// With `show image`: a GPU of that host (repeatable, or `NAMExN`).
    #[arg(long, value_name = "NAME")]
    gpu: Vec<String>,
    /// Print a JSON document.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum KindArg {
    Gpu,
    Cuda,
    Cudnn,
    Torch,
    Driver,
    Python,
    Image,
    Package,
    Framework,
    Model,
    Xid,
    Efficiency,
    ForeignGpu,
}

impl From<KindArg> for Kind {
    fn from(k: KindArg) -> Kind {
        match k {
            KindArg::Gpu => Kind::Gpu,
            KindArg::Cuda => Kind::Cuda,
            KindArg::Cudnn => Kind::Cudnn,
            KindArg::Torch => Kind::Torch,
            KindArg::Driver => Kind::Driver,
            KindArg::Python => Kind::Python,
            KindArg::Image => Kind::Image,
            KindArg::Package => Kind::Package,
            KindArg::Framework => Kind::Framework,
            KindArg::Model => Kind::Model,
            KindArg::Xid => Kind::Xid,
            KindArg::Efficiency => Kind::Efficiency,
            KindArg::ForeignGpu => Kind::ForeignGpu,
        }
    }
}

/// A database chosen on the command line: borrowed when embedded, owned when read from DIR.
enum DbRef {
    Embedded(&'static Db),
    Dir(Box<Db>),
}

impl std::ops::Deref for DbRef {
    type Target = Db;
    fn deref(&self) -> &Db {
        match self {
            DbRef::Embedded(d) => d,
            DbRef::Dir(d) => d,
        }
    }
}

fn open_db(dir: &Option<PathBuf>) -> Result<DbRef, DbError> {
    Ok(match dir {
        Some(d) => DbRef::Dir(Box::new(Db::from_dir(d)?)),
        None => DbRef::Embedded(Db::embedded()?),
    })
}

/// Runs a parsed command line, writing its report to `out` (through `report::SafeText`,
/// so that no text from outside reaches a terminal unmade safe), its marks coloured when
/// `styles` (stdout's, which the binary decides from `--color` and the stream) say so.
pub fn run(cli: Cli, out: &mut dyn Write, styles: report::Styles) -> Result<Exit, CliError> {
    let mut out = report::SafeText::new(out);
    let result = dispatch(&cli, &mut out, styles);
    match result {
        // A reader that went away (`gpuenv ... | head`) is not a failure.
        Err(CliError::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe => Ok(Exit::Ok),
        other => other,
    }
}

fn dispatch(cli: &Cli, out: &mut dyn Write, styles: report::Styles) -> Result<Exit, CliError> {
    match &cli.command {
        Command::Db {
            command: DbCommand::Lint { json },
        } => {
            let files = match &cli.db {
                Some(dir) => db::read_dir(dir)?,
                None => db::embedded_files(),
            };
            let problems = db::lint(&files);
            report::lint(out, &problems, files.len(), *json)?;
            Ok(if problems.is_empty() {
                Exit::Ok
            } else {
                Exit::Findings
            })
        }
        Command::Db {
            command: DbCommand::Stats { json },
        } => {
            let db = open_db(&cli.db)?;
            report::stats(out, &db, *json)?;
            Ok(Exit::Ok)
        }
        Command::Db {
            command: DbCommand::Refresh(args),
        } => refresh(cli, args, out),
        Command::Db {
            command: DbCommand::List { kind, json },
        } => {
            let db = open_db(&cli.db)?;
            let kind = Kind::from(*kind);
            report::list(out, kind, &db.display_names(kind), *json)?;
            Ok(Exit::Ok)
        }
        Command::Query(args) => {
            let db = open_db(&cli.db)?;
            let mut q = args.stack.to_query(&db)?;
            args.project.apply(&db, &mut q)?;
            let answer = resolve::resolve(&*db, &q);
            let opts = report::QueryOpts {
                json: args.json,
                all: args.all,
                limit: args.limit,
                styles,
            };
            report::query(out, &q, &answer, &opts)?;
            Ok(match answer.verdict {
                Status::Compatible => Exit::Ok,
                Status::Conditional if !args.strict => Exit::Ok,
                _ => Exit::Findings,
            })
        }
        Command::Graph(args) => {
            let db = open_db(&cli.db)?;
            let mut q = args.stack.to_query(&db)?;
            args.project.apply(&db, &mut q)?;
            q.want_graph = true;
            let answer = resolve::resolve(&*db, &q);
            // The resolver builds the graph whenever it is asked for one.
            let Some(graph) = answer.graph else {
                return Err(CliError::Environment("the resolver built no graph".into()));
            };
            report::graph_dot(out, &graph)?;
            Ok(Exit::Ok)
        }
        Command::Doctor(args) => {
            let db = open_db(&cli.db)?;
            let host = args.host.report(&args.python, &db)?;
            let checks = crate::judge::doctor(
                &db,
                &host,
                &crate::judge::DoctorOptions {
                    min_free_gb: args.min_free_gb,
                },
            );
            report::doctor(out, &db, &host, &checks, args.json, styles)?;
            Ok(
                if checks.iter().any(|c| c.verdict == crate::judge::Verdict::Fail) {
                    Exit::Findings
                } else {
                    Exit::Ok
                },
            )
        }
        Command::Fleet {
            command: FleetCommand::Collect(args),
        } => fleet::collect(args, out, styles),
        Command::Fleet {
            command: FleetCommand::Report(args),
        } => fleet_report(cli, args, out, styles),
        Command::Fleet {
            command: FleetCommand::K8sManifest(args),
        } => k8s_manifest(args, out),
        Command::Check(args) => check(cli, args, out, styles),
        Command::Plan(args) => {
            let db = open_db(&cli.db)?;
            plan::run(&db, args, out, styles)
        }
        Command::Verify(args) => verify(cli, args, out, styles),
        Command::Dockerfile(args) => containers::dockerfile(&cli.db, args, out),
        Command::Build(args) => containers::build(&cli.db, args, out),
        Command::Pull(args) => containers::pull(&cli.db, args, out),
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut Cli::command(), "gpuenv", &mut script);
            report::generated(out, &script)?;
            Ok(Exit::Ok)
        }
        Command::Man(args) => man(args, out),
        Command::Show(args) => show(cli, args, out, styles),
        Command::Bench(args) => bench::bench(&cli.db, args, out, styles),
    }
}

/// `gpuenv fleet k8s-manifest`: the manifest, or the first value Kubernetes would refuse.
fn k8s_manifest(args: &K8sManifestArgs, out: &mut dyn Write) -> Result<Exit, CliError> {
    use crate::fleet::k8s::{self, Workload};
    if let Some(image) = &args.image {
        // The kubelet reads image names with Docker's grammar, as `pull` does.
        crate::docker::Reference::parse(image).map_err(|e| {
            CliError::Usage(format!(
                "invalid --image `{image}`: {}; expected an image with gpuenv on PATH, such as `registry.example.com/team/train:2025-06`",
                e.reason
            ))
        })?;
    }
    let request = k8s::Request {
        image: args.image.clone(),
        workload: match args.kind {
            ManifestKind::Job => Workload::Job,
            ManifestKind::DaemonSet => Workload::DaemonSet,
        },
        nodes: args.nodes,
        gpus_per_node: args.gpus_per_node,
        name: Some(args.name.clone()),
        namespace: args.namespace.clone(),
        node_selector: args.node_selector.clone(),
    };
    let manifest = k8s::manifest(&request).map_err(|e| CliError::Usage(e.to_string()))?;
    report::k8s_manifest(out, &manifest)?;
    Ok(Exit::Ok)
}

/// The manual pages, generated from the clap definitions: gpuenv's first, then one per
/// command and subcommand (`gpuenv-db-refresh.1`), as `(file name, roff)`.
pub fn man_pages() -> io::Result<Vec<(String, Vec<u8>)>> {
    fn walk(cmd: &clap::Command, pages: &mut Vec<(String, Vec<u8>)>) -> io::Result<()> {
        // Every page says which gpuenv it documents (a subcommand has no version of its own).
        let man = clap_mangen::Man::new(cmd.clone()).source(format!("gpuenv {}", env!("CARGO_PKG_VERSION")));
        let mut page = Vec::new();
        man.render(&mut page)?;
        pages.push((man.get_filename(), page));
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            walk(sub, pages)?;
        }
        Ok(())
    }
    // Built first, so that each subcommand carries its full name (`gpuenv-db-refresh`).
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    let mut pages = Vec::new();
    walk(&cmd, &mut pages)?;
    Ok(pages)
}

/// `gpuenv man`: gpuenv's page to stdout, or every page to `--out DIR`.
fn man(args: &ManArgs, out: &mut dyn Write) -> Result<Exit, CliError> {
    let pages = man_pages()?;
    let Some(dir) = &args.out else {
        let (_, top) = pages
            .first()
            .ok_or_else(|| CliError::Usage("no manual page was made".into()))?;
        report::generated(out, top)?;
        return Ok(Exit::Ok);
    };
    // The error names the folder itself (`cannot write `DIR``), so std's plain error is enough.
    std::fs::create_dir_all(dir).map_err(|source| CliError::Write {
        path: dir.clone(),
        source,
    })?;
    let mut written = Vec::with_capacity(pages.len());
    for (name, page) in &pages {
        let path = dir.join(name);
        crate::files::write_file(&path, page, crate::files::Replace::RegularFile).map_err(write_error)?;
        written.push(crate::files::shown(&path));
    }
    report::written(out, &written)?;
    Ok(Exit::Ok)
}

fn verify(
    cli: &Cli,
    args: &VerifyArgs,
    out: &mut dyn Write,
    styles: report::Styles,
) -> Result<Exit, CliError> {
    use crate::verify::{Target, VerifyError};
    let total = total_deadline(args.timeout, crate::deadline::IMAGE_DEADLINE)?;
    let insecure = insecure_registries(&args.insecure_registry, &|k| std::env::var(k).ok())?;
    let db = open_db(&cli.db)?;
    let reference = crate::image::ImageRef::parse(&args.image).map_err(|e| CliError::Usage(e.to_string()))?;
    if let Some(dir) = &args.propose {
        propose_target(cli, dir, &reference)?;
    }
    let expect = match &args.expect {
        Some(e) => {
            Some(crate::image::parse_expect(e).map_err(|e| CliError::Usage(format!("--expect: {e}")))?)
        }
        None => None,
    };
    // The target: a host's probes, then the flags over them.
    let mut target = Target::default();
    if args.host || args.host_facts.is_some() {
        let host_args = HostArgs {
            host_facts: args.host_facts.clone(),
            ..HostArgs::default()
        };
        target = Target::from_host(&db, &host_args.report(&[], &db)?);
    }
    target_flags(&db, &mut target, args.driver.as_deref(), &args.gpu)?;
    let deadline = crate::deadline::Deadline::new(total, args.timeout.is_some());
    let file_source = !matches!(
        reference,
        crate::image::ImageRef::Daemon(_) | crate::image::ImageRef::Registry(_)
    );
    // Progress while the layers are read, from a registry or an archive (a local image is
    // read by paths, a few quick requests).
    let mode = if matches!(reference, crate::image::ImageRef::Daemon(_)) {
        report::progress::Mode::Quiet
    } else {
        report::progress::Mode::of_stderr(args.json)
    };
    let shown = report::progress::VerifyProgress::new(mode, &args.image);
    let read = crate::verify::read(
        &reference,
        &args.image,
        &deadline,
        &insecure,
        args.full,
        &shown.watch(),
    );
    shown.finish();
    let (image, origin) = read.map_err(|e| match e {
        VerifyError::Input(m) => CliError::Usage(m),
        VerifyError::Environment(m) => CliError::Environment(m),
        // A broken archive the user named is bad input; a broken stream from a daemon or
        // a registry is the environment failing.
        VerifyError::Image(e) if file_source && e.is_bad_input() => CliError::Usage(e.to_string()),
        VerifyError::Image(e) => CliError::Environment(e.to_string()),
        VerifyError::Docker(e) => CliError::Docker(e),
        VerifyError::Registry(e) => CliError::Environment(e.to_string()),
    })?;
    let proposal = match &args.propose {
        Some(dir) => Some(propose(cli, &db, &image.facts(), &origin, dir)?),
        None => None,
    };
    let v = crate::verify::judge(&db, &image, origin, expect, !args.no_infer, &target);
    report::verify_proposing(out, &v, proposal.as_ref(), db.date(), args.json, styles)?;
    Ok(if v.failed { Exit::Findings } else { Exit::Ok })
}

/// `verify --propose DIR`, before anything is read: DIR must be new or empty and outside
/// the database (a proposal is never written into compat-db), and a local image read by
/// paths has no manifest digest to cite.
fn propose_target(
    cli: &Cli,
    dir: &std::path::Path,
    reference: &crate::image::ImageRef,
) -> Result<(), CliError> {
    crate::files::check_new_dir(dir).map_err(|e| CliError::Usage(format!("--propose: {e}")))?;
    if dir.file_name().is_none() {
        return Err(CliError::Usage(format!(
            "--propose `{}` names no folder of its own: give a new folder's name",
            crate::files::shown(dir)
        )));
    }
    // The nearest folder that exists, resolved, against the database's own folders.
    let mut existing = std::path::absolute(dir).map_err(|e| CliError::Usage(format!("--propose: {e}")))?;
    while !existing.exists() {
        if !existing.pop() {
            break;
        }
    }
    let here = existing.canonicalize().unwrap_or(existing);
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("compat-db");
    for db_dir in cli.db.iter().chain(std::iter::once(&shipped)) {
        if let Ok(db_dir) = db_dir.canonicalize() {
            if here.starts_with(&db_dir) {
                return Err(CliError::Usage(format!(
                    "--propose `{}` is inside the database `{}`: proposals go to a folder of their own, for a curator to review and copy",
                    crate::files::shown(dir),
                    crate::files::shown(&db_dir)
                )));
            }
        }
    }
    if let crate::image::ImageRef::Daemon(name) = reference {
        return Err(CliError::Usage(format!(
            "--propose cites the image by the digest of its manifest, which a local image `{name}` does not have: read it from its registry (`docker://{name}`) or an OCI layout (`oci:DIR`)"
        )));
    }
    Ok(())
}

/// The proposal of `verify --propose DIR`, written; the database's record files are linted
/// with it in place first.
fn propose(
    cli: &Cli,
    db: &Db,
    facts: &crate::image::detect::ImageFacts,
    origin: &crate::verify::Origin,
    dir: &std::path::Path,
) -> Result<crate::verify::propose::Proposal, CliError> {
    use crate::verify::propose::{self, ProposeError};
    let files = match &cli.db {
        Some(d) => crate::db::read_dir(d)?,
        None => crate::db::embedded_files(),
    };
    let today = crate::db::today().ok_or_else(|| {
        CliError::Environment("the system clock is before 1970: no `checked` date to write".into())
    })?;
    let inputs = propose::Inputs {
        db,
        files: &files,
        facts,
        origin,
        today,
    };
    let as_cli = |e: ProposeError| match e {
        ProposeError::Input(m) => CliError::Usage(m),
        ProposeError::Environment(m) => CliError::Environment(m),
    };
    let mut p = propose::propose(&inputs).map_err(as_cli)?;
    propose::write(&mut p, dir).map_err(as_cli)?;
    Ok(p)
}

/// `--driver` and `--gpu` over a target, read as `query` reads them: a branch as its
/// earliest release, names by their words. What a flag gives is no longer missing.
fn target_flags(
    db: &Db,
    target: &mut crate::verify::Target,
    driver: Option<&str>,
    gpus: &[String],
) -> Result<(), CliError> {
    if let Some(d) = driver {
        let (driver, reading) = stack::driver_ask(db, "--driver", d)?;
        target.driver = Some(driver);
        target.driver_cuda = None;
        target.readings.extend(reading);
        target.source = "the target given".into();
        target.no_driver = None;
    }
    if !gpus.is_empty() {
        let mut given = Vec::new();
        for g in gpus {
            let (asks, readings) = stack::gpu_asks(db, "--gpu", g)?;
            given.extend(asks.into_iter().map(|a| (a, None)));
            target.readings.extend(readings);
        }
        target.set_gpus(given);
        target.source = "the target given".into();
        target.no_gpu = None;
        target.unknown_gpus.clear();
    }
    Ok(())
}

/// `show`: one record; an image with `--driver`/`--gpu` is also judged on that target from
/// the catalog's facts, as `verify` would judge the image there.
fn show(cli: &Cli, args: &ShowArgs, out: &mut dyn Write, styles: report::Styles) -> Result<Exit, CliError> {
    let db = open_db(&cli.db)?;
    let found: Found<'_> = db.find(args.kind.into(), &args.name)?;
    let judged = args.driver.is_some() || !args.gpu.is_empty();
    let Found::Image(rec) = found else {
        if judged {
            return Err(CliError::Usage(
                "--driver and --gpu judge an image on a target: use them with `show image NAME`".into(),
            ));
        }
        // A GPU name may cover several records: say which one is shown, and why.
        let why = match found {
            Found::Gpu(_) => db.gpu_match(&args.name).ok().and_then(|m| m.why),
            _ => None,
        };
        report::show(out, found, why.as_deref(), crate::db::today(), args.json)?;
        return Ok(Exit::Ok);
    };
    if !judged {
        report::show(out, found, None, crate::db::today(), args.json)?;
        return Ok(Exit::Ok);
    }
    let mut target = crate::verify::Target::default();
    target_flags(&db, &mut target, args.driver.as_deref(), &args.gpu)?;
    let v = crate::verify::catalog::judge(&db, rec, &args.name, &target);
    report::show_judged(out, found, &v, db.date(), args.json, styles)?;
    Ok(if v.failed { Exit::Findings } else { Exit::Ok })
}

/// `--report FILE`: its format from the extension, and the target checked, before any
/// probe runs (bad input writes nothing).
fn report_target(path: &std::path::Path) -> Result<report::acceptance::PageFormat, CliError> {
    let format = report::acceptance::PageFormat::from_path(path)
        .map_err(|why| CliError::Usage(format!("invalid --report `{}`: {why}", crate::files::shown(path))))?;
    crate::files::check_target(path, crate::files::Replace::RegularFile).map_err(write_error)?;
    if path.file_name().is_none() {
        return Err(CliError::Usage(format!(
            "invalid --report `{}`: it names no file",
            crate::files::shown(path)
        )));
    }
    Ok(format)
}

fn check(cli: &Cli, args: &CheckArgs, out: &mut dyn Write, styles: report::Styles) -> Result<Exit, CliError> {
    let page_format = args.report.as_deref().map(report_target).transpose()?;
    let db = open_db(&cli.db)?;
    let expect = args.order.expectation()?;
    // An order file with no item would accept the machine on nothing, as in `fleet report`.
    if let (Some(path), true) = (&args.order.order, expect.is_empty()) {
        return Err(CliError::Usage(format!(
            "invalid --order `{}`: it names no item (expected at least one of {}), so there is nothing to \
             accept the machine against",
            crate::files::shown(path),
            crate::judge::Item::ALL.map(crate::judge::Item::key).join(", ")
        )));
    }

    // Read before the host is probed: a file that is not bench results is bad input, and
    // nothing is probed or written for it.
    let bench = args
        .bench_results
        .as_deref()
        .map(read_bench_results)
        .transpose()?;

    let (host, record) = args
        .host
        .report_with_record(&args.python_path, &db, page_format.is_some())?;
    if let (Some(doc), Some(path)) = (&bench, &args.bench_results) {
        crate::judge::bench::same_machine(&db, doc, &host).map_err(|why| {
            CliError::Usage(format!(
                "invalid --bench-results `{}`: {why}; results of another machine would accept the wrong one: run \
                 `gpuenv bench --json` on this machine",
                crate::files::shown(path)
            ))
        })?;
    }
    // An order that asks for measured figures, and none given: measured here, now, as
    // `gpuenv bench` measures them. A recorded host cannot be; its item says to give them.
    let bench = match bench {
        None if expect.wants_bench() && !args.host.replays() => Some(bench::measure_for_check(&db)?.0),
        given => given,
    };
    let crate::judge::Accepted {
        items: acceptance,
        bench,
    } = crate::judge::accept_measured(&db, &host, &expect, bench.as_ref()).map_err(CliError::Usage)?;

    // The project's needs from the flags and files, on this host.
    let mut q = args.stack.to_query(&db)?;
    args.project.apply(&db, &mut q)?;
    let q = crate::judge::check_query(&db, &host, q).map_err(CliError::Usage)?;
    let answer = resolve::resolve(&*db, &q);
    let opts = report::QueryOpts {
        json: args.json,
        all: false,
        limit: args.limit,
        styles,
    };
    report::check(
        out,
        &q,
        &answer,
        &opts,
        &report::CheckInput {
            acceptance: &acceptance,
            bench: bench.as_ref(),
            overrides: &host.overrides,
        },
    )?;
    if let (Some(path), Some(format)) = (&args.report, page_format) {
        let checks = crate::judge::doctor(
            &db,
            &host,
            &crate::judge::DoctorOptions {
                min_free_gb: args.min_free_gb,
            },
        );
        let page = report::acceptance::page(
            format,
            &report::acceptance::PageInput {
                db: &db,
                host: &host,
                record: record.as_ref(),
                acceptance: &acceptance,
                bench: bench.as_ref(),
                checks: &checks,
                query: &q,
                answer: &answer,
                written_at: jiff::Timestamp::now(),
            },
        );
        write_page(path, page)?;
    }
    let accepted = acceptance.iter().all(|a| a.pass);
    let verdict_ok = match answer.verdict {
        Status::Compatible => true,
        Status::Conditional => !args.strict,
        Status::Incompatible => false,
    };
    Ok(if accepted && verdict_ok {
        Exit::Ok
    } else {
        Exit::Findings
    })
}

/// `--bench-results FILE`: a `gpuenv bench --json` document, within its cap and of this
/// gpuenv's schema; anything else is bad input naming the file and what was expected.
fn read_bench_results(path: &std::path::Path) -> Result<crate::bench::BenchDoc, CliError> {
    let text = crate::files::read_text(path, crate::files::limits::BENCH_RESULTS, "bench results")
        .map_err(stack::read_error)?;
    crate::judge::bench::parse_results(&text, report::SCHEMA_VERSION).map_err(|why| {
        CliError::Usage(format!(
            "invalid --bench-results `{}`: {why}",
            crate::files::shown(path)
        ))
    })
}

/// `fleet report`: every flag and file read, and the page's target checked, before any
/// report is; then each report read, judged and dropped in turn (`fleet::merge_judged`).
fn fleet_report(
    cli: &Cli,
    args: &FleetReportArgs,
    out: &mut dyn Write,
    styles: report::Styles,
) -> Result<Exit, CliError> {
    let page_format = args.report.as_deref().map(report_target).transpose()?;
    let allowed = args
        .allow_drift
        .iter()
        .map(|k| crate::fleet::allowable(k))
        .collect::<Result<Vec<_>, _>>()
        .map_err(CliError::Usage)?;
    let db = open_db(&cli.db)?;
    let expect = args.order.expectation()?;
    // An order file with no item would accept every node on nothing: said, not passed.
    if let (Some(path), true) = (&args.order.order, expect.is_empty()) {
        return Err(CliError::Usage(format!(
            "invalid --order `{}`: it names no item, so there is nothing to accept the nodes against",
            crate::files::shown(path)
        )));
    }
    // The stack is judged only when the project's needs were asked about: without them
    // every node would get the same unasked question, a resolve each, and a verdict
    // beside its row that nobody wanted.
    let stack = if args.stack.is_empty() && args.project.is_empty() {
        None
    } else {
        let mut q = args.stack.to_query(&db)?;
        args.project.apply(&db, &mut q)?;
        Some(q)
    };
    let order = (!expect.is_empty()).then_some(expect);
    let judge = crate::fleet::Judge::new(&db, order, stack).map_err(CliError::Usage)?;
    let (files, problems) = crate::fleet::inputs(&args.paths);
    let mut fleet = crate::fleet::merge_judged(&files, problems, &judge);
    fleet.allow_drift(&allowed);
    report::fleet(out, &fleet, args.json, styles)?;
    if let (Some(path), Some(format)) = (&args.report, page_format) {
        let page = report::fleet_page::page(
            format,
            &report::fleet_page::FleetPageInput {
                db: &db,
                fleet: &fleet,
                written_at: jiff::Timestamp::now(),
            },
        );
        write_page(path, page)?;
    }
    Ok(if fleet.nodes.is_empty() {
        Exit::BadInput
    } else if fleet.worst == Some(crate::judge::Verdict::Fail) || !fleet.failing_drift().is_empty() {
        Exit::Findings
    } else {
        Exit::Ok
    })
}

/// The total of a command's deadline: `--timeout SECONDS`, or the command's default.
pub(crate) fn total_deadline(
    flag: Option<u64>,
    default: std::time::Duration,
) -> Result<std::time::Duration, CliError> {
    match flag {
        None => Ok(default),
        Some(0) => Err(CliError::Usage(
            "invalid --timeout `0`: expected a number of seconds above 0".into(),
        )),
        // Past a day a deadline protects nothing; the cap keeps `Instant` arithmetic sane.
        Some(s) if s > 86_400 => Err(CliError::Usage(format!(
            "invalid --timeout `{s}`: expected at most 86400 seconds (a day)"
        ))),
        Some(s) => Ok(std::time::Duration::from_secs(s)),
    }
}

/// The registries gpuenv's own client may speak plain HTTP to: `--insecure-registry` and
/// `GPUENV_INSECURE_REGISTRIES` (comma-separated), each `HOST` or `HOST:PORT`.
pub(crate) fn insecure_registries(
    flags: &[String],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<String>, CliError> {
    let from_env = env(crate::registry::INSECURE_VAR).unwrap_or_default();
    let mut out = Vec::new();
    let given = flags
        .iter()
        .map(|f| ("--insecure-registry", f.as_str()))
        .chain(from_env.split(',').map(|e| (crate::registry::INSECURE_VAR, e)));
    for (source, entry) in given {
        let entry = entry.trim();
        if entry.is_empty() && source == crate::registry::INSECURE_VAR {
            continue;
        }
        if !host_like(entry) {
            return Err(CliError::Usage(format!(
                "invalid {source} `{}`: expected a registry host, `HOST` or `HOST:PORT` (no scheme, no path)",
                crate::text::excerpt(entry)
            )));
        }
        out.push(entry.to_string());
    }
    Ok(out)
}

/// Whether `entry` is written as a registry host is: `HOST` or `HOST:PORT`, the characters
/// of names, IP addresses and ports only.
fn host_like(entry: &str) -> bool {
    !entry.is_empty()
        && entry.len() <= 255
        && entry
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']' | b'_'))
}

/// A registry host given by `flag`: [`host_like`], and one a URL can be made of.
fn parse_registry_host(flag: &str, text: &str) -> Result<String, CliError> {
    let usable = host_like(text)
        && reqwest::Url::parse(&format!("https://{text}/")).is_ok_and(|u| u.host_str().is_some());
    if !usable {
        return Err(CliError::Usage(format!(
            "invalid {flag} `{}`: expected a registry host, `HOST` or `HOST:PORT` (no scheme, no path)",
            crate::text::excerpt(text)
        )));
    }
    Ok(text.to_string())
}

fn parse_url(flag: &str, text: &str) -> Result<reqwest::Url, CliError> {
    // A base URL must end in `/` for relative paths to extend it rather than replace its
    // last segment.
    let with_slash = if text.ends_with('/') {
        text.to_string()
    } else {
        format!("{text}/")
    };
    let url = reqwest::Url::parse(&with_slash)
        .map_err(|e| CliError::Usage(format!("invalid {flag} `{text}`: {e}; expected an http(s) URL")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(CliError::Usage(format!(
            "invalid {flag} `{text}`: expected an http(s) URL"
        )));
    }
    Ok(url)
}

fn refresh(cli: &Cli, args: &RefreshArgs, out: &mut dyn Write) -> Result<Exit, CliError> {
    let opts = RefreshOptions {
        pypi: parse_url("--pypi", &args.pypi)?,
        pytorch_index: if args.no_pytorch_index {
            None
        } else {
            Some(parse_url("--pytorch-index", &args.pytorch_index)?)
        },
        ngc_registry: if args.no_ngc {
            None
        } else {
            Some(parse_registry_host("--ngc-registry", &args.ngc_registry)?)
        },
        // The registries gpuenv reads over plain HTTP, as for `verify` and `pull`; only
        // the NGC registry is such a read here.
        insecure_registries: if args.no_ngc {
            Vec::new()
        } else {
            insecure_registries(&[], &|k| std::env::var(k).ok())?
        },
        driver_index: if args.no_driver_index {
            None
        } else {
            Some(parse_url("--driver-index", &args.driver_index)?)
        },
        ..RefreshOptions::default()
    };
    let total = total_deadline(args.timeout, crate::deadline::REFRESH_DEADLINE)?;
    let db = open_db(&cli.db)?;
    let deadline = crate::deadline::Deadline::new(total, args.timeout.is_some());
    let client = upstream::Client::with_deadline(args.record.clone(), deadline)?;
    let mut shown = report::progress::RefreshProgress::new(report::progress::Mode::of_stderr(args.json));
    let summary = upstream::refresh_told(&client, &db, &opts, Some(&args.out), &mut |step| {
        shown.step(&step)
    });
    shown.finish();
    let summary = summary?;
    report::refresh(out, &summary, args.json)?;
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// `--color` is found before the parse, for clap's own help and errors; a value that is
    /// not a choice, or one after `--`, is left to the parse.
    #[test]
    fn the_color_asked_is_found_before_the_parse() {
        use clap::ColorChoice;
        let asked = |args: &[&str]| {
            let args: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
            super::color_asked(&args)
        };
        assert_eq!(
            asked(&["gpuenv", "--color", "never", "query"]),
            Some(ColorChoice::Never)
        );
        assert_eq!(
            asked(&["gpuenv", "query", "--color=always"]),
            Some(ColorChoice::Always)
        );
        assert_eq!(
            asked(&["gpuenv", "--color=always", "--color", "never"]),
            Some(ColorChoice::Never)
        );
        assert_eq!(asked(&["gpuenv", "--color", "sometimes"]), None);
        assert_eq!(asked(&["gpuenv", "--", "--color", "never"]), None);
        assert_eq!(asked(&["gpuenv", "query"]), None);
    }

    /// The manual has a page per command, each titled with the command's full name.
    #[test]
    fn a_man_page_per_command() {
        let pages = super::man_pages().unwrap();
        let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names[0], "gpuenv.1");
        for page in [
            "gpuenv-query.1",
            "gpuenv-db.1",
            "gpuenv-db-refresh.1",
            "gpuenv-man.1",
        ] {
            assert!(names.contains(&page), "{names:?}");
        }
        assert!(!names.iter().any(|n| n.contains("help")), "{names:?}");
        let (_, refresh) = pages.iter().find(|(n, _)| n == "gpuenv-db-refresh.1").unwrap();
        let refresh = String::from_utf8_lossy(refresh);
        let title = format!(
            "\n.TH gpuenv-db-refresh 1  \"gpuenv {}\"",
            env!("CARGO_PKG_VERSION")
        );
        assert!(refresh.contains(&title), "{refresh}");
    }

    /// clap checks its definitions (unique names, valid defaults) only when a command is
    /// built: build them all here rather than at a user's first run of a subcommand.
    #[test]
    fn clap_definitions_are_consistent() {
        super::Cli::command().debug_assert();
    }

    /// An image that makes the daemon fail is bad input; a signal exits as a shell reports
    /// it; the daemon failing on its own is the environment.
    #[test]
    fn daemon_answers_map_to_the_exit_codes_of_the_contract() {
        use super::{CliError, DockerError, Exit, Signal};
        let code = |e: DockerError| CliError::Docker(e).exit().code();
        assert_eq!(
            code(DockerError::ImageContent {
                image: "x".into(),
                path: "/usr/local/cuda".into(),
                reason: "its symbolic links there lead back to themselves".into(),
            }),
            2
        );
        assert_eq!(code(DockerError::Interrupted(Signal::Interrupt)), 130);
        assert_eq!(code(DockerError::Interrupted(Signal::Terminate)), 143);
        assert_eq!(
            code(DockerError::InterruptedLeaving {
                signal: Signal::Terminate,
                left: vec!["image abc (busy)".into()],
            }),
            143
        );
        assert_eq!(
            code(DockerError::Api("the daemon gave no reason (HTTP 500)".into())),
            3
        );
        assert_eq!(Exit::Interrupted.code(), 130);
        assert_eq!(Exit::Terminated.code(), 143);
    }

    /// Messages that are several lines by design come as lines, for the printer to make
    /// each safe; the rest are one line.
    #[test]
    fn multi_line_messages_come_as_lines() {
        use super::{CliError, DockerError};
        let e = CliError::Docker(DockerError::BuildFailed {
            step: Some("step 2/3 `RUN x`".into()),
            message: "failed".into(),
            output: vec!["one\nFAKE".into(), "two".into()],
        });
        assert_eq!(
            e.lines().unwrap(),
            [
                "the build failed at step 2/3 `RUN x`: failed",
                "output of the failed step:",
                "  | one\nFAKE",
                "  | two"
            ]
        );
        let order = crate::judge::parse_order("o.toml", "gpus = 0\ncpus = -1\n").unwrap_err();
        assert_eq!(CliError::from(order).lines().unwrap().len(), 2);
        assert!(CliError::Usage("a\nb".into()).lines().is_none());
    }
}
