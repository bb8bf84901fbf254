//! `gpuenv fleet collect`: its flags, which engine they pick, and the folder it writes.
//! What runs on the nodes and how answers are read is `fleet::collect`'s.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgGroup, Args};

use super::{CliError, Exit, write_error};
use crate::fleet::collect::{self, EngineError, Remote, SlurmTarget};
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
    /// Seconds the collection may take: srun as a whole (and Slurm's own limit for the
    /// step, in whole minutes), each ssh host, each kubectl call.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    timeout: u64,
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
    if args.timeout == 0 {
        return Err(CliError::Usage("--timeout must be at least 1 second".into()));
    }
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
    let timeout = Duration::from_secs(args.timeout);
    let mut doctor: Vec<String> = vec!["doctor".into(), "--json".into()];
    if let Some(r) = &args.record {
        doctor.push("--record".into());
        doctor.push(format!("{}/{}", r.trim_end_matches('/'), HOSTNAME_MARK));
    }
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
            args: doctor,
            timeout,
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
            args: doctor,
            timeout,
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
    report::fleet::collected(out, engine, &dir, &lines, args.json, styles)?;
    let bad = lines
        .iter()
        .any(|l| !l.collected || l.worst == Some(crate::judge::Verdict::Fail));
    Ok(if bad { Exit::Findings } else { Exit::Ok })
}

/// What `doctor --record` replaces with the host's name, so that one path given to every
/// node keeps each node's record apart.
pub const HOSTNAME_MARK: &str = "{hostname}";

fn engine_error(EngineError(m): EngineError) -> CliError {
    CliError::Environment(m)
}
