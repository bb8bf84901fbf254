//! Where host facts come from for `doctor` and `check`: the live machine (optionally
//! recorded), or a recorded host replayed; then the `GPUENV_*` overrides.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::CliError;
use crate::host::system::{RealSystem, Recording, System};
use crate::host::{HostReport, ProbeOptions, overrides, probe};

/// How to probe the host.
#[derive(Debug, Args, Clone, Default)]
pub struct HostArgs {
    /// Save every raw answer of this host to DIR/host.json (a fixture for --host-facts).
    #[arg(long, value_name = "DIR", conflicts_with = "host_facts")]
    pub record: Option<PathBuf>,
    /// Replay a recorded host (DIR/host.json or the file) instead of probing this one.
    #[arg(long, value_name = "FILE")]
    pub host_facts: Option<PathBuf>,
    /// Seconds before one command is cut off.
    #[arg(long, value_name = "SECONDS", default_value_t = 15)]
    pub probe_timeout: u64,
}

impl HostArgs {
    /// Probes (or replays) the host, with these interpreters besides the ones found, and
    /// applies the overrides.
    pub fn report(&self, pythons: &[String], db: &crate::db::Db) -> Result<HostReport, CliError> {
        let opts = ProbeOptions {
            pythons: pythons.to_vec(),
            deadline: Duration::from_secs(self.probe_timeout.max(1) + 5),
        };
        let mut report = match &self.host_facts {
            Some(path) => {
                let record = Recording::load(path).map_err(CliError::Usage)?;
                probe(Arc::new(Recording::replay(record)), &opts)
            }
            None => {
                let real: Box<dyn System> = Box::new(RealSystem {
                    timeout: Duration::from_secs(self.probe_timeout.max(1)),
                    docker: Box::new(|| {
                        crate::docker::info(Duration::from_secs(5)).map_err(|e| e.to_string())
                    }),
                });
                match &self.record {
                    None => probe(Arc::from(real), &opts),
                    Some(dir) => {
                        let rec = Arc::new(Recording::capture(
                            real,
                            format!("recorded by gpuenv {}", env!("CARGO_PKG_VERSION")),
                        ));
                        let report = probe(rec.clone(), &opts);
                        save(dir, &rec)?;
                        report
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
        Ok(report)
    }
}

fn save(dir: &std::path::Path, rec: &Recording) -> Result<(), CliError> {
    let werr = |e: std::io::Error| {
        CliError::Usage(format!(
            "cannot write the host record to `{}`: {e}",
            dir.display()
        ))
    };
    fs_err::create_dir_all(dir).map_err(werr)?;
    let json = serde_json::to_string_pretty(&rec.record())
        .map_err(std::io::Error::other)
        .map_err(werr)?;
    // Write then rename, so an interrupted record never looks complete.
    let tmp = dir.join(".host.json.partial");
    fs_err::write(&tmp, json).map_err(werr)?;
    fs_err::rename(&tmp, dir.join("host.json")).map_err(werr)
}
