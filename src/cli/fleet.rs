//! `gpuenv fleet collect`: its flags, which engine they pick, the bench flags it passes on
//! (`--bench-arg`, checked against [`BENCH_FLAGS`] and parsed as the nodes will parse
//! them), and the folder it writes. What runs on the nodes and how answers are read is
//! `fleet::collect`'s.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgGroup, Args};

use super::{CliError, Exit, write_error};
use crate::fleet::collect::{self, EngineError, Reads, Remote, SlurmTarget};
use crate::report;

/// `gpuenv fleet collect`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("engine").required(true).args(["slurm", "hosts", "kubectl"])))]
pub struct CollectArgs {
    /// Through Slurm: `srun --ntasks-per-node=1` runs gpuenv on every node of the current
    /// allocation (`SLURM_JOB_ID` set), or of a new one (`--nodes`, `--nodelist`, or else
    /// every node of the partition that can take a job).
    #[arg(long)]
    slurm: bool,
    /// Over ssh to each host of FILE (one a line: `name`, `user@name`,
    /// `ssh://user@name:port`; `#` comments), without a password prompt (`BatchMode`).
    #[arg(long, value_name = "FILE")]
    hosts: Option<PathBuf>,
    /// From the pods of `gpuenv fleet k8s-manifest --name NAME`: each pod's log is its
    /// node's report (`kubectl get pods`, `kubectl logs`).
    #[arg(long, value_name = "NAME")]
    kubectl: Option<String>,
    /// Slurm partition (a new allocation only).
    #[arg(long, value_name = "P", requires = "slurm")]
    partition: Option<String>,
    /// How many Slurm nodes.
    #[arg(long, value_name = "N", requires = "slurm")]
    nodes: Option<u32>,
    /// Which Slurm nodes (`node[1-4],gpu7`).
    #[arg(long, value_name = "LIST", requires = "slurm")]
    nodelist: Option<String>,
    /// Kubernetes namespace of the pods (kubectl's current one otherwise).
    #[arg(long, value_name = "NS", requires = "kubectl")]
    namespace: Option<String>,
    /// Hosts reached at once over ssh.
    #[arg(long, value_name = "N", default_value_t = 16, requires = "hosts")]
    parallel: usize,
    /// An ssh configuration file used instead of the user's own (`ssh -F`).
    #[arg(long, value_name = "FILE", requires = "hosts")]
    ssh_config: Option<PathBuf>,
    /// gpuenv on the nodes: a path, or a name found on their PATH. Default: this gpuenv's
    /// own path for Slurm (a shared file system), `gpuenv` for ssh.
    #[arg(long, value_name = "PATH", conflicts_with = "kubectl")]
    gpuenv: Option<String>,
    /// Each node also records every raw answer to DIR/<its hostname>/host.json on its own
    /// file system (`doctor --record`), to replay with `--host-facts`.
    #[arg(long, value_name = "DIR", conflicts_with = "kubectl")]
    record: Option<String>,
    /// Run `gpuenv bench --json` on every node instead of `doctor --json` (Slurm and ssh),
    /// one results file per node (named by its hostname), for `fleet report` beside the
    /// nodes' doctor reports.
    #[arg(long)]
    bench: bool,
    /// A word passed on to each node's `gpuenv bench` (repeatable): one of its flags
    /// --quick, --full, --gpu-only, --host-only, --burn D, --dcgm-level N, --python PATH,
    /// --path DIR, --allow-system-disk, --disk-size S, --memory-size S, --seconds N,
    /// --no-download; a value as the next --bench-arg or after `=`
    /// (`--bench-arg=--burn=10m`). Checked here before any node runs.
    #[arg(
        long = "bench-arg",
        value_name = "ARG",
        requires = "bench",
        allow_hyphen_values = true
    )]
    bench_arg: Vec<String>,
    /// Seconds the collection may take: srun as a whole (and Slurm's own limit for the
    /// step, in whole minutes), each ssh host, each kubectl call. Default: 300; with
    /// --bench, the bench's own limits for the flags given added up (its GPU side's
    /// engines, the burn-in, its host side's engines and downloads: about 35 minutes for
    /// the quick run of GPUs and host).
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<u64>,
    /// The new folder the reports go to (it must not exist, or be empty). Default:
    /// `gpuenv-fleet-<UTC time>`.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print a JSON document.
    #[arg(long)]
    json: bool,
}

/// Collects, writes the folder, prints a line per node. Exit 0 when every node gave a
/// report with no failing check, 1 when one did not or has one, 2 for bad input, 3 when the
/// engine could not run at all.
pub fn collect(args: &CollectArgs, out: &mut dyn Write, styles: report::Styles) -> Result<Exit, CliError> {
    if args.timeout == Some(0) {
        return Err(CliError::Usage("--timeout must be at least 1 second".into()));
    }
    let bench = if args.bench { Some(bench_plan(args)?) } else { None };
    if args.parallel == 0 {
        return Err(CliError::Usage("--parallel must be at least 1".into()));
    }
    if args.nodes == Some(0) {
        return Err(CliError::Usage("--nodes must be at least 1".into()));
    }
    if let Some(r) = &args.record {
        if r.is_empty() || r.contains(['\n', '\0']) {
            return Err(CliError::Usage(
                "--record needs a folder path on the nodes".into(),
            ));
        }
    }
    let dir = args.out.clone().unwrap_or_else(|| {
        let now = jiff::Timestamp::now().strftime("%Y%m%dT%H%M%SZ");
        PathBuf::from(format!("gpuenv-fleet-{now}"))
    });
    // Refused before any node is asked, so nothing runs for a folder that cannot be written.
    crate::files::check_new_dir(&dir).map_err(write_error)?;
    let (reads, node_args, timeout) = match bench {
        Some((words, limit)) => {
            let mut a: Vec<String> = vec!["bench".into(), "--json".into()];
            a.extend(words);
            let timeout = args.timeout.map(Duration::from_secs).unwrap_or(limit);
            (Reads::BenchResults, a, timeout)
        }
        None => {
            let mut a: Vec<String> = vec!["doctor".into(), "--json".into()];
            if let Some(r) = &args.record {
                a.push("--record".into());
                a.push(format!("{}/{}", r.trim_end_matches('/'), HOSTNAME_MARK));
            }
            let timeout = Duration::from_secs(args.timeout.unwrap_or(DOCTOR_TIMEOUT));
            (Reads::DoctorReport, a, timeout)
        }
    };
    let (engine, gathered) = if args.slurm {
        let gpuenv = match &args.gpuenv {
            Some(g) => g.clone(),
            None => std::env::current_exe()
                .map(|p| p.display().to_string())
                .map_err(|e| CliError::Environment(format!("cannot tell this gpuenv's path: {e}")))?,
        };
        let inside = std::env::var_os("SLURM_JOB_ID").is_some_and(|v| !v.is_empty());
        let target = SlurmTarget {
            partition: args.partition.clone(),
            nodes: args.nodes,
            nodelist: args.nodelist.clone(),
            allocation_nodes: inside.then(|| {
                std::env::var("SLURM_JOB_NUM_NODES")
                    .ok()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(1)
            }),
        };
        let remote = Remote {
            gpuenv,
            args: node_args,
            timeout,
            reads,
        };
        ("slurm", collect::slurm(&target, &remote).map_err(engine_error)?)
    } else if let Some(file) = &args.hosts {
        let text = crate::files::read_text(file, crate::files::limits::ORDER, "hosts file")
            .map_err(super::stack::read_error)?;
        let hosts = collect::read_hosts(&crate::files::shown(file), &text).map_err(CliError::Usage)?;
        if let Some(c) = &args.ssh_config {
            crate::files::open_regular(c, "ssh configuration").map_err(super::stack::read_error)?;
        }
        let remote = Remote {
            gpuenv: args.gpuenv.clone().unwrap_or_else(|| "gpuenv".into()),
            args: node_args,
            timeout,
            reads,
        };
        (
            "ssh",
            collect::ssh(&hosts, &remote, args.parallel, args.ssh_config.as_deref()),
        )
    } else {
        let name = args.kubectl.as_deref().unwrap_or_default();
        if !crate::fleet::k8s::dns_label(name) {
            return Err(CliError::Usage(format!(
                "--kubectl `{}` is not a Kubernetes name (lowercase letters, digits and `-`, at most 63)",
                name
            )));
        }
        (
            "kubectl",
            collect::kubectl(name, args.namespace.as_deref(), timeout).map_err(engine_error)?,
        )
    };
    let (files, lines) = collect::files(&gathered);
    crate::files::write_new_dir(
        &dir,
        files
            .iter()
            .map(|(name, bytes)| (name.as_str(), bytes.as_slice())),
    )
    .map_err(write_error)?;
    report::fleet::collected(out, engine, reads, &dir, &lines, args.json, styles)?;
    let bad = lines
        .iter()
        .any(|l| !l.collected || l.worst == Some(crate::judge::Verdict::Fail));
    Ok(if bad { Exit::Findings } else { Exit::Ok })
}

/// Seconds a doctor collection may take when `--timeout` is not given.
const DOCTOR_TIMEOUT: u64 = 300;

/// The bench flags `--bench-arg` may pass on: each with whether a value follows. None of
/// them writes outside the disk test's directory, names a file here, or reaches another
/// host (`--record`, `--report`, `--host-facts`, `--peer`, `--download-*`, `--image` are
/// not among them), and `--json` is fleet collect's own.
pub const BENCH_FLAGS: &[(&str, bool)] = &[
    ("--quick", false),
    ("--full", false),
    ("--gpu-only", false),
    ("--host-only", false),
    ("--burn", true),
    ("--dcgm-level", true),
    ("--python", true),
    ("--path", true),
    ("--allow-system-disk", false),
    ("--disk-size", true),
    ("--memory-size", true),
    ("--seconds", true),
    ("--no-download", false),
];

/// `--bench` with its `--bench-arg`s: the words each node's `gpuenv bench --json` gets
/// (each flag and its value as two words), and how long a node's bench may take. Refused
/// with the reason: `--kubectl` (its pods run doctor), `--record` (doctor's), a word not
/// among [`BENCH_FLAGS`], a value that is missing or reads as a flag, and whatever the
/// node's gpuenv would refuse of the flags together.
fn bench_plan(args: &CollectArgs) -> Result<(Vec<String>, Duration), CliError> {
    if args.kubectl.is_some() {
        return Err(CliError::Usage(
            "--bench with --kubectl: the pods of `fleet k8s-manifest` run `gpuenv doctor --json`, and their logs are \
             what --kubectl reads; collect bench results through --slurm or --hosts"
                .into(),
        ));
    }
    if args.record.is_some() {
        return Err(CliError::Usage(
            "--record with --bench: --record keeps `doctor --record`'s answers; a bench's raw outputs are kept by \
             `gpuenv bench --record DIR` run on the node itself"
                .into(),
        ));
    }
    let words = bench_words(&args.bench_arg)?;
    let mut argv: Vec<String> = vec!["gpuenv".into(), "bench".into()];
    argv.extend(words.iter().cloned());
    let cli = <super::Cli as clap::Parser>::try_parse_from(&argv).map_err(|e| {
        let said = e.to_string();
        let first = said
            .lines()
            .next()
            .unwrap_or_default()
            .trim_start_matches("error: ");
        CliError::Usage(format!(
            "--bench-arg: `gpuenv bench {}` would be refused on the nodes: {}",
            crate::text::excerpt(&words.join(" ")),
            crate::text::excerpt(first)
        ))
    })?;
    let super::Command::Bench(bench) = &cli.command else {
        return Err(CliError::Usage(
            "--bench-arg: the words do not read as `gpuenv bench` flags".into(),
        ));
    };
    let limit = super::bench::fleet_time_limit(bench)?;
    Ok((words, limit))
}

/// The `--bench-arg` words checked against [`BENCH_FLAGS`], each flag followed by its
/// value where it takes one (`--burn=10m` and `--burn`, `10m` give the same two words).
fn bench_words(given: &[String]) -> Result<Vec<String>, CliError> {
    let allowed = || {
        BENCH_FLAGS
            .iter()
            .map(|(f, v)| if *v { format!("{f} VALUE") } else { f.to_string() })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut words = Vec::new();
    let mut it = given.iter();
    while let Some(word) = it.next() {
        let (flag, inline) = match word.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v)),
            _ => (word.as_str(), None),
        };
        let Some(&(name, takes)) = BENCH_FLAGS.iter().find(|(f, _)| *f == flag) else {
            return Err(CliError::Usage(format!(
                "--bench-arg `{}`: not a bench flag fleet collect passes on; expected one of {}",
                crate::text::excerpt(word),
                allowed()
            )));
        };
        words.push(name.to_string());
        match (takes, inline) {
            (false, None) => {}
            (false, Some(_)) => {
                return Err(CliError::Usage(format!(
                    "--bench-arg `{}`: {name} takes no value",
                    crate::text::excerpt(word)
                )));
            }
            (true, _) => {
                let value = inline.map(str::to_string).or_else(|| it.next().cloned());
                match value {
                    Some(v) if !v.is_empty() && !v.starts_with('-') && !v.chars().any(char::is_control) => {
                        words.push(v);
                    }
                    Some(v) => {
                        return Err(CliError::Usage(format!(
                            "--bench-arg {name} `{}`: expected its value (not empty, not starting with `-`)",
                            crate::text::excerpt(&v)
                        )));
                    }
                    None => {
                        return Err(CliError::Usage(format!(
                            "--bench-arg {name}: its value is missing; give it as the next --bench-arg or as `{name}=VALUE`"
                        )));
                    }
                }
            }
        }
    }
    Ok(words)
}

/// What `doctor --record` replaces with the host's name, so that one path given to every
/// node keeps each node's record apart.
pub const HOSTNAME_MARK: &str = "{hostname}";

fn engine_error(EngineError(m): EngineError) -> CliError {
    CliError::Environment(m)
}
