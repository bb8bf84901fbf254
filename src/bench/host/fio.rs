//! `fio`, where installed: the same three disk jobs gpuenv times itself ([`super::disk`]),
//! run through the host seam ([`System`]) with `--output-format=json`, so that a
//! recorded host replays them; and the parser of that JSON.
//!
//! Owns: the jobs' arguments ([`args`]), the parser ([`parse`]) and turning a job's
//! result into a [`Figure`] with [`Engine::Fio`]. Must not: write anything but fio's one
//! test file under the directory it was given (removed afterwards), or print.
//!
//! fio's JSON (`fio --output-format=json`, <https://fio.readthedocs.io/en/latest/fio_doc.html#json-output>):
//! `jobs[]`, each with `jobname`, `error` and a `read` and a `write` section holding
//! `bw_bytes` (bytes a second) and `iops`. fio may print warnings before the document,
//! so the parser starts at its first `{`.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::bench::{Engine, Figure, Metric};
use crate::host::system::{Outcome, System};

/// The most bytes of fio output read as a document.
pub const MAX_OUTPUT: usize = 4 << 20;

/// The name of fio's test file under the directory: fixed, so that the command lines, and
/// so a recorded host's keys, are the same on every run.
pub const TEST_FILE: &str = ".gpuenv-bench-fio.tmp";

/// One of the three jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FioJob {
    /// Sequential write, [`SEQ_BLOCK`](super::disk::SEQ_BLOCK) blocks, fsync at the end.
    SeqWrite,
    /// Sequential read, [`SEQ_BLOCK`](super::disk::SEQ_BLOCK) blocks.
    SeqRead,
    /// 4 KiB random reads, for a fixed time.
    RandRead,
}

impl FioJob {
    /// In the order they run: the write lays the file out for the reads.
    pub const ALL: [FioJob; 3] = [FioJob::SeqWrite, FioJob::SeqRead, FioJob::RandRead];

    /// fio's `--name`.
    pub fn name(self) -> &'static str {
        match self {
            FioJob::SeqWrite => "seqwrite",
            FioJob::SeqRead => "seqread",
            FioJob::RandRead => "randread",
        }
    }

    /// The figure it gives.
    pub fn metric(self) -> Metric {
        match self {
            FioJob::SeqWrite => Metric::DiskSeqWrite,
            FioJob::SeqRead => Metric::DiskSeqRead,
            FioJob::RandRead => Metric::DiskRandRead,
        }
    }
}

/// Where fio's I/O buffer lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buffer {
    /// Where fio's own allocation puts it: ordinary pages, placed by luck (on a virtual
    /// disk the sequential figures move with their placement: [`super::disk`]'s doc).
    Own,
    /// In a huge page of the machine's hugetlb pool (`--mem=mmaphuge`), for the sequential
    /// jobs: one segment a request, as gpuenv's own passes with their transparent huge
    /// page. Needs a free page in the pool (`HugePages_Free` in `/proc/meminfo`): without
    /// one, fio 3.33 fails the job (error 12, and a crash).
    HugeTlb,
}

/// fio's arguments for `job` on `file`: one thread, one request in flight (`psync`),
/// O_DIRECT, the same blocks, as gpuenv's own passes run.
pub fn args(job: FioJob, file: &Path, file_bytes: u64, rand_seconds: u64, buffer: Buffer) -> Vec<String> {
    let seq_block = format!("--bs={}", super::disk::SEQ_BLOCK);
    let mut a = vec![
        format!("--name={}", job.name()),
        format!("--filename={}", file.display()),
        format!("--size={file_bytes}"),
        "--direct=1".into(),
        "--ioengine=psync".into(),
        "--iodepth=1".into(),
        "--numjobs=1".into(),
        "--output-format=json".into(),
    ];
    match job {
        FioJob::SeqWrite => a.extend(["--rw=write".into(), seq_block, "--end_fsync=1".into()]),
        FioJob::SeqRead => a.extend(["--rw=read".into(), seq_block]),
        FioJob::RandRead => a.extend([
            "--rw=randread".into(),
            "--bs=4k".into(),
            "--norandommap".into(),
            "--randrepeat=0".into(),
            "--time_based".into(),
            format!("--runtime={}", rand_seconds.max(1)),
        ]),
    }
    // A 4 KiB random read is one page, one segment, wherever its buffer lies.
    if buffer == Buffer::HugeTlb && job != FioJob::RandRead {
        a.push("--mem=mmaphuge".into());
    }
    a
}

/// One job's result.
#[derive(Debug, Clone, PartialEq)]
pub struct FioResult {
    /// `fio-3.33`.
    pub version: String,
    /// The job's name.
    pub job: String,
    /// Read bytes a second.
    pub read_bw_bytes: f64,
    /// Read operations a second.
    pub read_iops: f64,
    /// Written bytes a second.
    pub write_bw_bytes: f64,
}

/// Why fio's output could not be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FioError {
    /// Not fio's JSON document.
    #[error("fio's output is not its JSON document: {0}")]
    NotJson(String),
    /// A job reported an error.
    #[error("fio's job `{job}` failed with error {code}")]
    JobFailed {
        /// The job.
        job: String,
        /// fio's error number.
        code: i64,
    },
    /// The document holds no job of that name.
    #[error("fio's output holds no job `{0}`")]
    NoJob(String),
}

#[derive(Deserialize)]
struct RawDoc {
    #[serde(rename = "fio version", default)]
    version: String,
    #[serde(default)]
    jobs: Vec<RawJob>,
}

#[derive(Deserialize)]
struct RawJob {
    jobname: String,
    #[serde(default)]
    error: i64,
    #[serde(default)]
    read: RawDir,
    #[serde(default)]
    write: RawDir,
}

#[derive(Deserialize, Default)]
struct RawDir {
    #[serde(default)]
    bw_bytes: f64,
    #[serde(default)]
    iops: f64,
}

/// Every job of fio's JSON output (what precedes the document, fio's warnings, skipped).
pub fn parse(text: &str) -> Result<Vec<FioResult>, FioError> {
    let text = &text[..text.len().min(MAX_OUTPUT)];
    let start = text
        .find('{')
        .ok_or_else(|| FioError::NotJson(format!("no document in `{}`", crate::text::excerpt(text))))?;
    let doc: RawDoc = serde_json::from_str(&text[start..])
        .map_err(|e| FioError::NotJson(crate::text::excerpt(&e.to_string())))?;
    let mut out = Vec::with_capacity(doc.jobs.len());
    for j in doc.jobs {
        if j.error != 0 {
            return Err(FioError::JobFailed {
                job: crate::text::excerpt(&j.jobname),
                code: j.error,
            });
        }
        let finite = |v: f64| if v.is_finite() && v >= 0.0 { v } else { 0.0 };
        out.push(FioResult {
            version: crate::text::excerpt(&doc.version),
            job: j.jobname,
            read_bw_bytes: finite(j.read.bw_bytes),
            read_iops: finite(j.read.iops),
            write_bw_bytes: finite(j.write.bw_bytes),
        });
    }
    Ok(out)
}

/// The figure of `job` in a parsed output.
pub fn figure(job: FioJob, results: &[FioResult], detail: &str) -> Result<Figure, FioError> {
    let r = results
        .iter()
        .find(|r| r.job == job.name())
        .ok_or_else(|| FioError::NoJob(job.name().into()))?;
    let value = match job {
        FioJob::SeqWrite => r.write_bw_bytes / 1e9,
        FioJob::SeqRead => r.read_bw_bytes / 1e9,
        FioJob::RandRead => r.read_iops,
    };
    Ok(Figure::new(
        job.metric(),
        value,
        Engine::Fio,
        format!("{} job `{}`: {detail}", r.version, job.name()),
    ))
}

/// Why fio gave no figures.
#[derive(Debug, Clone, PartialEq)]
pub enum FioSkip {
    /// Not on PATH.
    NotInstalled,
    /// It ran and failed, or its output is unusable: the reason.
    Failed(String),
}

/// Runs the three jobs in `dir` through `system` and reads their figures; fio's test file
/// is removed afterwards. `dir` was checked by [`super::disk::check`]. fio's buffer is its
/// own ([`Buffer::Own`]): a machine's hugetlb pool is not gpuenv's to draw on unasked.
pub fn measure(
    system: &dyn System,
    dir: &Path,
    file_bytes: u64,
    rand_seconds: u64,
) -> Result<Vec<Figure>, FioSkip> {
    measure_with(system, dir, file_bytes, rand_seconds, Buffer::Own)
}

/// [`measure`] with fio's buffer where `buffer` says.
pub fn measure_with(
    system: &dyn System,
    dir: &Path,
    file_bytes: u64,
    rand_seconds: u64,
    buffer: Buffer,
) -> Result<Vec<Figure>, FioSkip> {
    let file = dir.join(TEST_FILE);
    // A link planted under the fixed name would send fio's writes elsewhere.
    if let Ok(m) = std::fs::symlink_metadata(&file) {
        if !m.file_type().is_file() {
            return Err(FioSkip::Failed(format!(
                "`{}` exists and is not a regular file; fio was not run",
                crate::files::shown(&file)
            )));
        }
    }
    struct Remove(PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let _remove = Remove(file.clone());
    let mut figures = Vec::new();
    for job in FioJob::ALL {
        if crate::interrupt::requested().is_some() {
            return Err(FioSkip::Failed("stopped by a signal".into()));
        }
        let a = args(job, &file, file_bytes, rand_seconds, buffer);
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        let ran = system.run("fio", &refs);
        match ran.outcome {
            Outcome::NotFound => return Err(FioSkip::NotInstalled),
            Outcome::TimedOut => {
                return Err(FioSkip::Failed(format!("fio's job `{}` timed out", job.name())));
            }
            Outcome::Failed(why) => return Err(FioSkip::Failed(crate::text::excerpt(&why))),
            Outcome::Exited => {}
        }
        if !ran.ok() {
            return Err(FioSkip::Failed(format!(
                "fio's job `{}` exited with {:?}: {}",
                job.name(),
                ran.status,
                crate::text::excerpt(ran.stderr.trim())
            )));
        }
        let results = parse(&ran.stdout).map_err(|e| FioSkip::Failed(e.to_string()))?;
        let detail = format!(
            "{} on `{}`",
            a.iter()
                .filter(|s| !s.starts_with("--filename") && !s.starts_with("--output-format"))
                .cloned()
                .collect::<Vec<_>>()
                .join(" "),
            crate::files::shown(dir)
        );
        figures.push(figure(job, &results, &detail).map_err(|e| FioSkip::Failed(e.to_string()))?);
    }
    Ok(figures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_not_a_document() {
        assert!(matches!(
            parse("fio: command not found"),
            Err(FioError::NotJson(_))
        ));
        assert!(matches!(parse("{\"jobs\": 3}"), Err(FioError::NotJson(_))));
        assert!(matches!(
            parse("{\"jobs\": [{\"jobname\": \"x\", \"error\": 5}]}"),
            Err(FioError::JobFailed { code: 5, .. })
        ));
        let r = parse("warning\n{\"jobs\": [{\"jobname\": \"seqread\", \"read\": {\"bw_bytes\": 2e9}}]}")
            .unwrap();
        assert_eq!(figure(FioJob::SeqRead, &r, "").unwrap().value, 2.0);
        assert!(matches!(
            figure(FioJob::RandRead, &r, ""),
            Err(FioError::NoJob(_))
        ));
    }

    #[test]
    fn jobs_ask_for_json_and_o_direct() {
        for job in FioJob::ALL {
            let a = args(job, Path::new("/d/f"), 1 << 30, 5, Buffer::Own);
            assert!(a.contains(&"--output-format=json".to_string()));
            assert!(a.contains(&"--direct=1".to_string()));
            assert!(a.contains(&format!("--name={}", job.name())));
        }
        // The sequential jobs read and write in gpuenv's own block, or the two would not
        // compare.
        for job in [FioJob::SeqWrite, FioJob::SeqRead] {
            let a = args(job, Path::new("/d/f"), 1 << 30, 5, Buffer::Own);
            assert!(
                a.contains(&format!("--bs={}", super::super::disk::SEQ_BLOCK)),
                "{a:?}"
            );
            assert!(!a.iter().any(|x| x.starts_with("--mem")), "{a:?}");
            let huge = args(job, Path::new("/d/f"), 1 << 30, 5, Buffer::HugeTlb);
            assert!(huge.contains(&"--mem=mmaphuge".to_string()), "{huge:?}");
        }
    }
}
