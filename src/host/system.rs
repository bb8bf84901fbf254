//! The seam between the probes and the machine: commands, files, directories, environment
//! variables, NVML and the Docker Engine. [`RealSystem`] touches the machine;
//! [`Recording`] replays (and, wrapped around a real one, captures) a host, so tests and
//! `--host-facts` see exactly what a real host answered.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::types::GpuInfo;
use crate::model::EngineInfo;

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// It ran and exited (see `status`).
    Exited,
    /// No such program.
    NotFound,
    /// Killed after the timeout.
    TimedOut,
    /// It could not be started for another reason.
    Failed(String),
}

/// What a command printed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CmdOutput {
    /// How it ended.
    pub outcome: Outcome,
    /// Exit status, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<i32>,
    /// Standard output (lossy UTF-8).
    #[serde(default)]
    pub stdout: String,
    /// Standard error (lossy UTF-8).
    #[serde(default)]
    pub stderr: String,
}

impl CmdOutput {
    /// Exited with status 0.
    pub fn ok(&self) -> bool {
        self.outcome == Outcome::Exited && self.status == Some(0)
    }

    fn not_found() -> CmdOutput {
        CmdOutput {
            outcome: Outcome::NotFound,
            status: None,
            stdout: String::new(),
            stderr: String::new(),
        }
    }
}

/// What NVML said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum NvmlProbe {
    /// The library is not installed: not an error, the next source answers.
    Unavailable {
        /// Why it could not be loaded.
        reason: String,
    },
    /// The library loaded but failed (e.g. "Driver/library version mismatch").
    Failed {
        /// NVML's error.
        error: String,
    },
    /// Its readings.
    Read {
        /// `535.104.05`.
        driver: String,
        /// `cuDriverGetVersion` as NVML reports it (12020 for 12.2).
        cuda_driver: Option<i32>,
        /// Every GPU.
        gpus: Vec<GpuInfo>,
    },
}

/// The machine as the probes see it.
pub trait System: Send + Sync {
    /// Runs a program (looked up on PATH) with arguments, cut off after the system's timeout.
    fn run(&self, program: &str, args: &[&str]) -> CmdOutput;
    /// [`System::run`], cut off after `timeout` where that comes before the system's own
    /// timeout: for a program whose run has a known length (a timed network test), so
    /// that a hung one is not waited for as long as the slowest probe may take. A system
    /// that replays answers gives them as [`System::run`] does.
    fn run_for(&self, program: &str, args: &[&str], timeout: Duration) -> CmdOutput {
        let _ = timeout;
        self.run(program, args)
    }
    /// A file's text; `None` when it does not exist or cannot be read.
    fn read(&self, path: &str) -> Option<String>;
    /// A directory's entry names; `None` when it does not exist.
    fn list(&self, dir: &str) -> Option<Vec<String>>;
    /// An environment variable.
    fn env(&self, key: &str) -> Option<String>;
    /// NVML's readings.
    fn nvml(&self) -> NvmlProbe;
    /// The Docker Engine's answer.
    fn docker(&self) -> Result<EngineInfo, String>;
}

/// The real machine.
pub struct RealSystem {
    /// Cut-off for each command.
    pub timeout: Duration,
    /// How to ask the Docker Engine (injected by the caller: `host` never talks to Docker).
    pub docker: Box<dyn Fn() -> Result<EngineInfo, String> + Send + Sync>,
}

impl System for RealSystem {
    fn run(&self, program: &str, args: &[&str]) -> CmdOutput {
        run_with_timeout(program, args, self.timeout)
    }

    fn run_for(&self, program: &str, args: &[&str], timeout: Duration) -> CmdOutput {
        run_with_timeout(program, args, timeout.min(self.timeout))
    }

    fn read(&self, path: &str) -> Option<String> {
        // Bounded: a probe never needs more than a few MiB of any file.
        let mut f = std::fs::File::open(path).ok()?;
        let mut buf = Vec::new();
        f.by_ref().take(8 << 20).read_to_end(&mut buf).ok()?;
        Some(String::from_utf8_lossy(&buf).into_owned())
    }

    fn list(&self, dir: &str) -> Option<Vec<String>> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect();
        names.sort();
        Some(names)
    }

    fn env(&self, key: &str) -> Option<String> {
        std::env::var(key).ok()
    }

    fn nvml(&self) -> NvmlProbe {
        super::nvml::read()
    }

    fn docker(&self) -> Result<EngineInfo, String> {
        (self.docker)()
    }
}

/// Runs a command, killing it after `timeout` (see [`crate::process`]).
pub fn run_with_timeout(program: &str, args: &[&str], timeout: Duration) -> CmdOutput {
    match crate::process::run(program, args, None, timeout) {
        Ok(ran) => CmdOutput {
            outcome: if ran.timed_out {
                Outcome::TimedOut
            } else {
                Outcome::Exited
            },
            status: ran.status,
            stdout: String::from_utf8_lossy(&ran.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&ran.stderr).into_owned(),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => CmdOutput::not_found(),
        Err(e) => CmdOutput {
            outcome: Outcome::Failed(e.to_string()),
            status: None,
            stdout: String::new(),
            stderr: String::new(),
        },
    }
}

/// Everything a host answered: the `--record` fixture format and `--host-facts` input.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HostRecord {
    /// Format version of this file.
    pub gpuenv_host_record: u32,
    /// Free text: where and when it was recorded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Commands, keyed by the command line (`nvidia-smi -q -x`).
    #[serde(default)]
    pub commands: BTreeMap<String, CmdOutput>,
    /// Files read (`null`: absent).
    #[serde(default)]
    pub files: BTreeMap<String, Option<String>>,
    /// Directories listed (`null`: absent).
    #[serde(default)]
    pub dirs: BTreeMap<String, Option<Vec<String>>>,
    /// Environment variables asked for (`null`: unset).
    #[serde(default)]
    pub env: BTreeMap<String, Option<String>>,
    /// NVML's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvml: Option<NvmlProbe>,
    /// The Docker Engine's answer (`Err` text when unreachable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker: Option<Result<EngineInfo, String>>,
}

/// The key a command is recorded under. The Python probe's script and the GPU bench
/// script are keyed by name, not text, so a recorded host stays replayable when the
/// script improves.
pub fn command_key(program: &str, args: &[&str]) -> String {
    std::iter::once(program)
        .chain(args.iter().map(|a| {
            if a.starts_with(PROBE_MARK) {
                "<python-probe>"
            } else if a.starts_with(BENCH_MARK) {
                "<gpu-bench>"
            } else {
                a
            }
        }))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The first line of the Python probe script.
const PROBE_MARK: &str = "# gpuenv's Python probe";

/// The first line of the GPU bench script (`bench::gpu::SCRIPT_MARK`; `host` does not
/// import `bench`), keyed by name for the same reason.
const BENCH_MARK: &str = "# gpuenv's GPU bench script";

/// Why a recorded host could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The file itself: missing, not a regular file, too large, not text.
    #[error(transparent)]
    File(crate::files::ReadError),
    /// Its contents are not a host record.
    #[error("{0}")]
    Invalid(String),
}

/// A recorded host: replays its answers, and when built around a real system, records
/// every answer it passes on.
pub struct Recording {
    inner: Option<Box<dyn System>>,
    record: Mutex<HostRecord>,
}

impl Recording {
    /// Replays a record; anything it lacks reads as absent.
    pub fn replay(record: HostRecord) -> Recording {
        Recording {
            inner: None,
            record: Mutex::new(record),
        }
    }

    /// Records everything `inner` answers.
    pub fn capture(inner: Box<dyn System>, description: String) -> Recording {
        Recording {
            inner: Some(inner),
            record: Mutex::new(HostRecord {
                gpuenv_host_record: 1,
                description,
                ..HostRecord::default()
            }),
        }
    }

    /// The record so far.
    pub fn record(&self) -> HostRecord {
        self.record.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Reads a record from a file, or from `host.json` in a directory: a regular file of
    /// at most [`crate::files::limits::HOST_RECORD`] bytes.
    pub fn load(path: &Path) -> Result<HostRecord, RecordError> {
        let file = if path.is_dir() {
            path.join("host.json")
        } else {
            path.to_path_buf()
        };
        let text = crate::files::read_text(&file, crate::files::limits::HOST_RECORD, "host record")
            .map_err(RecordError::File)?;
        // serde's message may quote a value of the file: only an excerpt of it.
        let record: HostRecord = serde_json::from_str(&text).map_err(|e| {
            RecordError::Invalid(format!(
                "`{}` is not a gpuenv host record: {}",
                crate::files::shown(&file),
                crate::text::excerpt(&e.to_string())
            ))
        })?;
        if record.gpuenv_host_record != 1 {
            return Err(RecordError::Invalid(format!(
                "`{}`: unsupported host record version {}",
                crate::files::shown(&file),
                record.gpuenv_host_record
            )));
        }
        Ok(record)
    }

    /// A command's answer: replayed under its key, or asked of the live system by `live`
    /// and recorded.
    fn command(
        &self,
        program: &str,
        args: &[&str],
        live: impl FnOnce(&dyn System) -> CmdOutput,
    ) -> CmdOutput {
        let key = command_key(program, args);
        self.with(
            |r| r.commands.get(&key).cloned(),
            live,
            |r, v| {
                r.commands.insert(key.clone(), kept(program, v));
            },
        )
        .unwrap_or_else(CmdOutput::not_found)
    }

    fn with<T: Clone>(
        &self,
        get: impl Fn(&HostRecord) -> Option<T>,
        live: impl FnOnce(&dyn System) -> T,
        put: impl FnOnce(&mut HostRecord, T),
    ) -> Option<T> {
        match &self.inner {
            None => self.record.lock().ok().and_then(|r| get(&r)),
            Some(sys) => {
                let v = live(sys.as_ref());
                if let Ok(mut r) = self.record.lock() {
                    put(&mut r, v.clone());
                }
                Some(v)
            }
        }
    }
}

/// What a record keeps of a command's answer: all of it, except of the kernel log
/// (`journalctl -k`, `dmesg`), where only its first line and the NVIDIA driver's lines
/// (`NVRM:`) are kept. The rest of a kernel log (device serials, addresses, other
/// software's messages) is not gpuenv's to copy into a file people share, and the probe
/// reads nothing else of it; the first line keeps a log that was readable non-empty, so
/// that replay does not take it for one that could not be read.
fn kept(program: &str, mut out: CmdOutput) -> CmdOutput {
    if program == "journalctl" || program == "dmesg" {
        let mut lines = out.stdout.lines();
        let first = lines.next().map(str::to_string);
        let nvrm = lines.filter(|l| l.contains("NVRM:"));
        let mut text = String::new();
        for line in first.iter().map(String::as_str).chain(nvrm) {
            text.push_str(line);
            text.push('\n');
        }
        out.stdout = text;
    }
    out
}

impl System for Recording {
    fn run(&self, program: &str, args: &[&str]) -> CmdOutput {
        self.command(program, args, |s| s.run(program, args))
    }

    fn run_for(&self, program: &str, args: &[&str], timeout: Duration) -> CmdOutput {
        self.command(program, args, |s| s.run_for(program, args, timeout))
    }

    fn read(&self, path: &str) -> Option<String> {
        self.with(
            |r| r.files.get(path).cloned(),
            |s| s.read(path),
            |r, v| {
                // The raw machine ID is confidential: the record keeps what gpuenv derives.
                let v = if path == super::machine::MACHINE_ID_FILE {
                    super::machine::recorded(v)
                } else {
                    v
                };
                r.files.insert(path.to_string(), v);
            },
        )
        .flatten()
    }

    fn list(&self, dir: &str) -> Option<Vec<String>> {
        self.with(
            |r| r.dirs.get(dir).cloned(),
            |s| s.list(dir),
            |r, v| {
                r.dirs.insert(dir.to_string(), v);
            },
        )
        .flatten()
    }

    fn env(&self, key: &str) -> Option<String> {
        self.with(
            |r| r.env.get(key).cloned(),
            |s| s.env(key),
            |r, v| {
                r.env.insert(key.to_string(), v);
            },
        )
        .flatten()
    }

    fn nvml(&self) -> NvmlProbe {
        self.with(|r| r.nvml.clone(), |s| s.nvml(), |r, v| r.nvml = Some(v))
            .unwrap_or(NvmlProbe::Unavailable {
                reason: "not in the host record".into(),
            })
    }

    fn docker(&self) -> Result<EngineInfo, String> {
        self.with(|r| r.docker.clone(), |s| s.docker(), |r, v| r.docker = Some(v))
            .unwrap_or_else(|| Err("not in the host record".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A machine whose every command prints `stdout`.
    struct Prints(&'static str);

    impl System for Prints {
        fn run(&self, _: &str, _: &[&str]) -> CmdOutput {
            CmdOutput {
                outcome: Outcome::Exited,
                status: Some(0),
                stdout: self.0.to_string(),
                stderr: String::new(),
            }
        }
        fn read(&self, _: &str) -> Option<String> {
            None
        }
        fn list(&self, _: &str) -> Option<Vec<String>> {
            None
        }
        fn env(&self, _: &str) -> Option<String> {
            None
        }
        fn nvml(&self) -> NvmlProbe {
            NvmlProbe::Unavailable {
                reason: "test".into(),
            }
        }
        fn docker(&self) -> Result<EngineInfo, String> {
            Err("test".into())
        }
    }

    const LOG: &str = "[    0.000000] Linux version 6.8.0-49-generic\n\
        [    3.100000] usb 1-1: SerialNumber: 4C530001230517115433\n\
        [    5.402113] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  590.44.01\n\
        [ 8812.004211] NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n";

    #[test]
    fn a_run_with_its_own_timeout_is_cut_off_and_recorded() {
        let real = RealSystem {
            timeout: Duration::from_secs(60),
            docker: Box::new(|| Err("test".into())),
        };
        let t = std::time::Instant::now();
        assert_eq!(
            real.run_for("sleep", &["30"], Duration::from_millis(200)).outcome,
            Outcome::TimedOut
        );
        assert!(t.elapsed() < Duration::from_secs(10));
        // The system's own timeout still bounds a longer one.
        let short = RealSystem {
            timeout: Duration::from_millis(200),
            docker: Box::new(|| Err("test".into())),
        };
        assert_eq!(
            short.run_for("sleep", &["30"], Duration::from_secs(60)).outcome,
            Outcome::TimedOut
        );
        let rec = Recording::capture(Box::new(Prints("report\n")), "test".into());
        assert_eq!(
            rec.run_for("ib_write_bw", &["-d", "mlx5_0"], Duration::from_secs(5))
                .stdout,
            "report\n"
        );
        let replay = Recording::replay(rec.record());
        assert_eq!(
            replay
                .run_for("ib_write_bw", &["-d", "mlx5_0"], Duration::from_secs(5))
                .stdout,
            "report\n"
        );
        assert_eq!(replay.run("ib_write_bw", &["-d", "mlx5_0"]).stdout, "report\n");
    }

    #[test]
    fn a_record_keeps_only_the_drivers_lines_of_the_kernel_log() {
        let rec = Recording::capture(Box::new(Prints(LOG)), "test".into());
        let live = rec.run("journalctl", &["-k", "-b"]);
        assert_eq!(live.stdout, LOG, "the probe sees the whole log");
        rec.run("uname", &["-r"]);
        let record = rec.record();
        let kept = &record.commands[&command_key("journalctl", &["-k", "-b"])].stdout;
        assert_eq!(
            kept,
            "[    0.000000] Linux version 6.8.0-49-generic\n\
             [    5.402113] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  590.44.01\n\
             [ 8812.004211] NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
        );
        assert!(!kept.contains("SerialNumber"));
        // Other commands are kept whole.
        assert_eq!(record.commands[&command_key("uname", &["-r"])].stdout, LOG);
        // Replayed, the kept log gives the same XIDs.
        let replay = Recording::replay(record);
        let xids: Vec<_> = replay
            .run("journalctl", &["-k", "-b"])
            .stdout
            .lines()
            .filter_map(crate::host::parse::xid_line)
            .collect();
        assert_eq!(xids.len(), 1);
        assert_eq!(xids[0].xid, 79);
    }
}
