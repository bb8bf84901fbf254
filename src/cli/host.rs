//! Where host facts come from for `doctor` and `check`: the live machine (optionally
//! recorded), or a recorded host replayed; then the `GPUENV_*` overrides.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::CliError;
use crate::files::{self, Replace};
use crate::host::system::{HostRecord, RealSystem, RecordError, Recording, System};
use crate::host::{HostReport, ProbeOptions, overrides, probe};

/// How to probe the host.
#[derive(Debug, Args, Clone, Default)]
pub struct HostArgs {
    /// Save every raw answer of this host to DIR/host.json (a fixture for --host-facts);
    /// `{hostname}` in DIR is this host's name (one path for every node of a fleet).
    #[arg(long, value_name = "DIR", conflicts_with = "host_facts")]
    pub record: Option<PathBuf>,
    /// Replay a recorded host (DIR/host.json or the file) instead of probing this one.
    /// `GPUENV_HOST_FACTS` does the same when the flag is not given (a scheduler's task
    /// prolog can hand each node its own).
    #[arg(long, value_name = "FILE")]
    pub host_facts: Option<PathBuf>,
    /// Seconds before one command is cut off.
    #[arg(long, value_name = "SECONDS", default_value_t = 15)]
    pub probe_timeout: u64,
}

impl HostArgs {
    /// Whether the host is a recorded one replayed (`--host-facts`, or
    /// `GPUENV_HOST_FACTS` without `--record`), not this machine.
    pub fn replays(&self) -> bool {
        self.host_facts.is_some()
            || (self.record.is_none() && std::env::var_os("GPUENV_HOST_FACTS").is_some_and(|v| !v.is_empty()))
    }

    /// Probes (or replays) the host, with these interpreters besides the ones found, and
    /// applies the overrides.
    pub fn report(&self, pythons: &[String], db: &crate::db::Db) -> Result<HostReport, CliError> {
        self.report_with_record(pythons, db, false)
            .map(|(report, _)| report)
    }

    /// [`HostArgs::report`], and, when `want_record`, every raw answer the host gave: the
    /// record replayed (`--host-facts`), or the live machine's answers, captured as
    /// `--record` captures them (whether or not `--record` was given). `None` when not
    /// asked for.
    pub fn report_with_record(
        &self,
        pythons: &[String],
        db: &crate::db::Db,
        want_record: bool,
    ) -> Result<(HostReport, Option<HostRecord>), CliError> {
        let opts = ProbeOptions {
            pythons: pythons.to_vec(),
            deadline: Duration::from_secs(self.probe_timeout.max(1) + 5),
        };
        let from_env = || {
            std::env::var_os("GPUENV_HOST_FACTS")
                .filter(|v| !v.is_empty() && self.record.is_none())
                .map(PathBuf::from)
        };
        let (mut report, record) = match self.host_facts.clone().or_else(from_env) {
            Some(path) => {
                let record = Recording::load(&path).map_err(|e| match e {
                    RecordError::File(e) => super::stack::read_error(e),
                    RecordError::Invalid(m) => CliError::Usage(m),
                })?;
                let kept = want_record.then(|| record.clone());
                (probe(Arc::new(Recording::replay(record)), &opts), kept)
            }
            None => {
                let real: Box<dyn System> = Box::new(RealSystem {
                    timeout: Duration::from_secs(self.probe_timeout.max(1)),
                    docker: Box::new(|| {
                        crate::docker::info(Duration::from_secs(5)).map_err(|e| e.to_string())
                    }),
                });
                let record_dir = self.record.as_deref().map(with_hostname);
                match &record_dir {
                    None if !want_record => (probe(Arc::from(real), &opts), None),
                    dir => {
                        // Refused before a probe runs, not after.
                        if let Some(dir) = dir {
                            record_target(dir)?;
                        }
                        let rec = Arc::new(Recording::capture(
                            real,
                            format!("recorded by gpuenv {}", env!("CARGO_PKG_VERSION")),
                        ));
                        let report = probe(rec.clone(), &opts);
                        if let Some(dir) = dir {
                            save(dir, &rec)?;
                        }
                        (report, want_record.then(|| rec.record()))
                    }
                }
            }
        };
        // GPUENV_GPUS is read as `--gpu` is: a name no record answers to is an error.
        let gpus = |text: &str| -> Result<Vec<(String, u32)>, String> {
            db.gpus_written(text)
                .map(|found| {
                    found
                        .into_iter()
                        .map(|(m, n)| (m.chosen.name.clone(), n))
                        .collect()
                })
                .map_err(|e| e.to_string())
        };
        overrides::apply(&mut report, |k| std::env::var(k).ok(), &gpus)
            .map_err(|e| CliError::Usage(e.to_string()))?;
        Ok((report, record))
    }
}

/// The file `--record DIR` writes, checked before the host is probed: `DIR` is a directory
/// (or does not exist yet), and `DIR/host.json` is absent or a regular file, which it
/// replaces.
fn record_target(dir: &Path) -> Result<PathBuf, CliError> {
    if let Ok(m) = std::fs::metadata(dir) {
        if !m.is_dir() {
            return Err(CliError::Usage(format!(
                "refusing --record `{}`: it is not a directory",
                files::shown(dir)
            )));
        }
    }
    let file = dir.join("host.json");
    files::check_target(&file, Replace::RegularFile).map_err(super::write_error)?;
    Ok(file)
}

fn save(dir: &Path, rec: &Recording) -> Result<(), CliError> {
    let file = record_target(dir)?;
    let werr = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CliError::Write { path, source }
    };
    fs_err::create_dir_all(dir).map_err(werr(dir))?;
    let json = serde_json::to_string_pretty(&rec.record())
        .map_err(std::io::Error::other)
        .map_err(werr(&file))?;
    // Atomic: an interrupted record never looks complete.
    files::write_file(&file, json.as_bytes(), Replace::RegularFile).map_err(super::write_error)
}

/// `dir` with `{hostname}` replaced by this host's name (`_` where the name would climb
/// out of the folder).
fn with_hostname(dir: &Path) -> PathBuf {
    let text = dir.to_string_lossy();
    if !text.contains(super::fleet::HOSTNAME_MARK) {
        return dir.to_path_buf();
    }
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|n| n.trim().to_string())
        .unwrap_or_default();
    let name = crate::fleet::collect::file_stem(if name.is_empty() { "localhost" } else { &name });
    PathBuf::from(text.replace(super::fleet::HOSTNAME_MARK, &name))
}
