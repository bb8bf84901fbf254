//! `gpuenv fleet collect`: one `gpuenv doctor --json` report (or, with `--bench`, one
//! `gpuenv bench --json` document) from every node, through the engine the cluster already
//! runs (Slurm's `srun`, `ssh`, `kubectl`), into one new folder.
//!
//! Owns: the command lines given to those engines, reading their answers back into one
//! document or one failure per node ([`Gathered`], read as [`Reads`] says), telling a
//! node's document from its engine's noise (srun's task labels and its `srun: error:`
//! lines), the failure document a node that gave none leaves in the folder
//! ([`FailureDoc`]), and the names of the files written. Must not: run anything on a node
//! but `gpuenv doctor` or `gpuenv bench` (whose flags `cli` checks against its allow-list),
//! keep an agent or a daemon of its own, judge the documents (that is `fleet::merge`; a
//! bench's worst verdict is read from the judgement the node printed), or print.
//!
//! A node that fails, or does not answer in time, is never dropped: it gets a file of its
//! own that says why, so `fleet report` lists it as a node without a report.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::judge::Verdict;
use crate::report::SCHEMA_VERSION;
use crate::report::doc::DoctorDoc;

/// The key that marks a failure document.
pub const FAILURE_KEY: &str = "collect_failure";

/// The most lines of a node's own error output kept in its failure document.
const STDERR_LINES: usize = 8;

/// Why a node gave no report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// The node as its engine names it (Slurm node, ssh host, Kubernetes node or pod).
    pub node: String,
    /// `slurm`, `ssh` or `kubectl`.
    pub engine: String,
    /// Why, in a line: the engine's own words where it gave some.
    pub reason: String,
    /// The exit status of gpuenv (or of the engine's command) on that node, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The last lines the node printed on its error output.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stderr: Vec<String>,
}

/// The file a node that gave no report leaves in the folder (`{"schema_version": 1,
/// "collect_failure": {...}}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureDoc {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The failure.
    pub collect_failure: Failure,
}

/// What one node gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gathered {
    /// A report: the text as the node printed it, and what was read of it.
    Report {
        /// The node as its engine names it.
        node: String,
        /// The report's `host.hostname`, when it has one.
        hostname: Option<String>,
        /// Its worst check.
        worst: Option<Verdict>,
        /// The text, kept byte for byte.
        text: Vec<u8>,
    },
    /// No report.
    Failed(Failure),
}

impl Gathered {
    /// The node as its engine names it.
    pub fn node(&self) -> &str {
        match self {
            Gathered::Report { node, .. } => node,
            Gathered::Failed(f) => &f.node,
        }
    }
}

/// One node's line in what `collect` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectedNode {
    /// The node as its engine names it.
    pub node: String,
    /// The file written, relative to the folder.
    pub file: String,
    /// Whether it gave a report.
    pub collected: bool,
    /// The report's host name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// The report's worst check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worst: Option<Verdict>,
    /// Why there is no report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What each node runs, and so what its output is read as.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Reads {
    /// `gpuenv doctor --json`: a [`DoctorDoc`].
    #[default]
    DoctorReport,
    /// `gpuenv bench --json`: a [`BenchDoc`](crate::bench::BenchDoc) and the node's judgement of it.
    BenchResults,
}

impl Reads {
    /// The gpuenv command each node runs (`doctor`, `bench`), as `collect --json` names it.
    pub fn command(self) -> &'static str {
        match self {
            Reads::DoctorReport => "doctor",
            Reads::BenchResults => "bench",
        }
    }

    /// What one node's document is called, in a sentence.
    pub fn noun(self) -> &'static str {
        match self {
            Reads::DoctorReport => "report",
            Reads::BenchResults => "bench results",
        }
    }
}

/// `node`'s output read as `reads` says, or the failure it is. `status` is how gpuenv (or
/// the engine's command for it) exited: doctor and bench exit 1 when they find something
/// wrong, and that is still a document.
pub fn gathered(
    reads: Reads,
    engine: &str,
    node: &str,
    stdout: &[u8],
    stderr: &str,
    status: Option<i32>,
    no_status: &str,
) -> Gathered {
    match reads {
        Reads::DoctorReport => doctor_report(engine, node, stdout, stderr, status, no_status),
        Reads::BenchResults => bench_results(engine, node, stdout, stderr, status, no_status),
    }
}

fn failed(engine: &str, node: &str, stderr: &str, status: Option<i32>, reason: String) -> Gathered {
    Gathered::Failed(Failure {
        node: node.to_string(),
        engine: engine.to_string(),
        reason,
        exit_code: status,
        stderr: tail(stderr),
    })
}

/// Why a node's output is no document of the kind wanted: `parse_error` is what reading it
/// said. The node's last error line follows, where it printed one.
fn unreadable(
    reads: Reads,
    stdout: &[u8],
    stderr: &str,
    status: Option<i32>,
    no_status: &str,
    parse_error: &str,
) -> String {
    let why = match status {
        Some(0 | 1) if stdout.trim_ascii().is_empty() => format!("printed no {}", reads.noun()),
        Some(0 | 1) => format!(
            "printed something that is not {} ({parse_error})",
            match reads {
                Reads::DoctorReport => "a doctor report",
                Reads::BenchResults => "bench results",
            }
        ),
        Some(code) => format!("exited with status {code}"),
        None => no_status.to_string(),
    };
    match tail(stderr).pop() {
        Some(line) => format!("{why}: {line}"),
        None => why,
    }
}

fn other_version(v: u64) -> String {
    format!(
        "its gpuenv writes schema_version {v} (this one reads {SCHEMA_VERSION}): install the same gpuenv on every node"
    )
}

/// A `bench --json` document: read as `check --bench-results` and `fleet report` read it
/// (`judge::bench::parse_results`), kept byte for byte. Bench exits 1 when it found
/// something wrong, and those are results; a node that exited otherwise gave results only
/// where it printed figures (exit 3 with none is a failure: nothing was measured).
fn bench_results(
    engine: &str,
    node: &str,
    stdout: &[u8],
    stderr: &str,
    status: Option<i32>,
    no_status: &str,
) -> Gathered {
    let fail = |reason: String| failed(engine, node, stderr, status, reason);
    let trimmed = stdout.trim_ascii();
    let Ok(text) = std::str::from_utf8(trimmed) else {
        return fail(unreadable(
            Reads::BenchResults,
            stdout,
            stderr,
            status,
            no_status,
            "not UTF-8",
        ));
    };
    #[derive(Deserialize)]
    struct Version {
        schema_version: Option<u64>,
    }
    let doc = match crate::judge::bench::parse_results(text, SCHEMA_VERSION) {
        Ok(doc) => doc,
        Err(why) => {
            return fail(match serde_json::from_str::<Version>(text) {
                Ok(Version {
                    schema_version: Some(v),
                }) if v != u64::from(SCHEMA_VERSION) => other_version(v),
                _ => unreadable(Reads::BenchResults, stdout, stderr, status, no_status, &why),
            });
        }
    };
    if !matches!(status, Some(0 | 1)) && doc.figures.is_empty() {
        let how = match status {
            Some(code) => format!("exited with status {code}"),
            None => no_status.to_string(),
        };
        let said = tail(stderr).pop().or_else(|| doc.skipped.last().cloned());
        return fail(match said {
            Some(line) => format!("{how} and measured nothing: {}", crate::text::excerpt(&line)),
            None => format!("{how} and measured nothing"),
        });
    }
    Gathered::Report {
        node: node.to_string(),
        hostname: Some(doc.hostname.clone()).filter(|h| !h.trim().is_empty()),
        worst: Some(bench_worst(&doc, text, status)),
        text: stdout.to_vec(),
    }
}

/// A bench's worst, from the judgement the node printed beside its figures: `fail` where
/// it found something wrong (as its exit status 1 says too), `warn` where a figure or the
/// burn-in was only a warning, else `pass`. A figure no datasheet judges is neither.
fn bench_worst(doc: &crate::bench::BenchDoc, text: &str, status: Option<i32>) -> Verdict {
    #[derive(Deserialize)]
    struct Printed {
        #[serde(default)]
        judgement: Option<crate::bench::Judgement>,
    }
    let judgement = serde_json::from_str::<Printed>(text)
        .ok()
        .and_then(|p| p.judgement)
        .unwrap_or_default();
    let warned = judgement
        .figures
        .iter()
        .any(|j| j.verdict == crate::bench::Verdict::Warn)
        || doc
            .burn
            .as_ref()
            .is_some_and(|b| b.verdict == crate::bench::burn::Verdict::Warn);
    let failed = crate::bench::findings_in(
        &judgement.figures,
        &judgement.outliers,
        &doc.failures,
        doc.burn.as_ref(),
    );
    if status == Some(1) || failed {
        Verdict::Fail
    } else if warned {
        Verdict::Warn
    } else {
        Verdict::Pass
    }
}

fn doctor_report(
    engine: &str,
    node: &str,
    stdout: &[u8],
    stderr: &str,
    status: Option<i32>,
    no_status: &str,
) -> Gathered {
    let fail = |reason: String| failed(engine, node, stderr, status, reason);
    let trimmed = stdout.trim_ascii();
    match serde_json::from_slice::<DoctorDoc>(trimmed) {
        Ok(doc) if doc.schema_version == SCHEMA_VERSION => Gathered::Report {
            node: node.to_string(),
            hostname: doc.host.hostname.clone().filter(|h| !h.is_empty()),
            worst: doc.checks.iter().map(|c| c.verdict).max(),
            text: stdout.to_vec(),
        },
        Ok(doc) => fail(other_version(u64::from(doc.schema_version))),
        Err(e) => fail(unreadable(
            Reads::DoctorReport,
            stdout,
            stderr,
            status,
            no_status,
            &e.to_string(),
        )),
    }
}

/// The last [`STDERR_LINES`] non-blank lines of `text`, each cut to a readable length.
fn tail(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(STDERR_LINES)..]
        .iter()
        .map(|l| l.chars().take(crate::text::EXCERPT_CHARS).collect())
        .collect()
}

/// A name that is safe as a file name: the characters of a host name, nothing that climbs
/// out of the folder or hides the file.
pub fn file_stem(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~') {
                c
            } else {
                '_'
            }
        })
        .take(128)
        .collect();
    while s.starts_with('.') {
        s.replace_range(..1, "_");
    }
    if s.is_empty() { "_".into() } else { s }
}

/// The files for the folder (name, bytes) and a line per node: a report is named by its
/// host name (the engine's name for the node when it has none), a failure by the engine's
/// name; a second node with a name already taken gets `NAME~NODE`, so both are kept and
/// `fleet report` names the clash.
pub fn files(all: &[Gathered]) -> (Vec<(String, Vec<u8>)>, Vec<CollectedNode>) {
    let mut used = BTreeSet::new();
    let mut out = Vec::new();
    let mut lines = Vec::new();
    for g in all {
        let name = match g {
            Gathered::Report { hostname, node, .. } => hostname.as_deref().unwrap_or(node),
            Gathered::Failed(f) => &f.node,
        };
        let mut stem = file_stem(name);
        if !used.insert(stem.clone()) {
            stem = file_stem(&format!("{name}~{}", g.node()));
            let mut n = 2;
            while !used.insert(stem.clone()) {
                stem = file_stem(&format!("{name}~{}~{n}", g.node()));
                n += 1;
            }
        }
        let file = format!("{stem}.json");
        match g {
            Gathered::Report {
                node,
                hostname,
                worst,
                text,
            } => {
                out.push((file.clone(), text.clone()));
                lines.push(CollectedNode {
                    node: node.clone(),
                    file,
                    collected: true,
                    hostname: hostname.clone(),
                    worst: *worst,
                    reason: None,
                });
            }
            Gathered::Failed(f) => {
                let doc = FailureDoc {
                    schema_version: SCHEMA_VERSION,
                    collect_failure: f.clone(),
                };
                let mut text = serde_json::to_vec_pretty(&doc).unwrap_or_default();
                text.push(b'\n');
                out.push((file.clone(), text));
                lines.push(CollectedNode {
                    node: f.node.clone(),
                    file,
                    collected: false,
                    hostname: None,
                    worst: None,
                    reason: Some(f.reason.clone()),
                });
            }
        }
    }
    (out, lines)
}

// ---------------------------------------------------------------------------------------
// Slurm
// ---------------------------------------------------------------------------------------

/// Which nodes `srun` runs on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlurmTarget {
    /// `--partition`.
    pub partition: Option<String>,
    /// `--nodes`.
    pub nodes: Option<u32>,
    /// `--nodelist`.
    pub nodelist: Option<String>,
    /// Inside an allocation (`SLURM_JOB_ID`): its node count, from `SLURM_JOB_NUM_NODES`.
    pub allocation_nodes: Option<u32>,
}

/// The arguments of `srun` (after the program name) that run `command` once on every
/// node of `target`, each line of its output labelled with its task.
pub fn srun_args(target: &SlurmTarget, timeout: Duration, command: &[String]) -> Vec<String> {
    let mut a: Vec<String> = [
        format!("--job-name={}", job_name()).as_str(),
        "--ntasks-per-node=1",
        "--distribution=block",
        "--label",
        "--kill-on-bad-exit=0",
        "--cpus-per-task=1",
    ]
    .map(String::from)
    .to_vec();
    // Slurm's own limit as well (it counts whole minutes): a step that outlives gpuenv's
    // deadline is ended by Slurm even where gpuenv cannot cancel it (in an allocation).
    a.push(format!("--time={}", timeout.as_secs().div_ceil(60).max(1)));
    let inside = target.allocation_nodes.is_some();
    if inside {
        // The allocation's other steps may hold every CPU: doctor only reads.
        a.push("--overlap".into());
    } else if let Some(p) = &target.partition {
        a.push(format!("--partition={p}"));
    }
    if let Some(list) = &target.nodelist {
        a.push(format!("--nodelist={list}"));
    }
    let count = target.nodes.or(if target.nodelist.is_none() {
        target.allocation_nodes
    } else {
        None
    });
    if let Some(n) = count {
        a.push(format!("--nodes={n}"));
    } else if let Some(list) = &target.nodelist {
        a.push(format!("--nodes={}", expand_hostlist(list).len().max(1)));
    }
    a.extend(command.iter().cloned());
    a
}

/// A Slurm host list (`node[1-3,5],gpu7`) expanded (`node1 node2 node3 node5 gpu7`), in
/// its order. Brackets that do not read as ranges are kept as written.
pub fn expand_hostlist(list: &str) -> Vec<String> {
    let mut out = Vec::new();
    for item in split_top(list) {
        out.extend(expand_one(&item));
    }
    out
}

/// `list` split at the commas outside brackets.
fn split_top(list: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in list.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                if !cur.trim().is_empty() {
                    items.push(cur.trim().to_string());
                }
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        items.push(cur.trim().to_string());
    }
    items
}

fn expand_one(item: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (item.find('['), item.find(']')) else {
        return vec![item.to_string()];
    };
    if close < open {
        return vec![item.to_string()];
    }
    let (prefix, inner, rest) = (&item[..open], &item[open + 1..close], &item[close + 1..]);
    let mut heads = Vec::new();
    for range in inner.split(',') {
        let (lo, hi) = range.split_once('-').unwrap_or((range, range));
        let (Ok(a), Ok(b)) = (lo.parse::<u64>(), hi.parse::<u64>()) else {
            return vec![item.to_string()];
        };
        // A range of more than a cluster's worth is a typo, not a list to expand.
        if b < a || b - a > 100_000 {
            return vec![item.to_string()];
        }
        for n in a..=b {
            // Zero padding as written: `gpu[01-03]`.
            heads.push(format!("{prefix}{n:0width$}", width = lo.len()));
        }
    }
    let tails = expand_one(rest);
    heads
        .iter()
        .flat_map(|h| tails.iter().map(move |t| format!("{h}{t}")))
        .collect()
}

/// A task range list (`0-2,5`) expanded.
fn expand_tasks(list: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for r in list.split(',') {
        let (lo, hi) = r.trim().split_once('-').unwrap_or((r.trim(), r.trim()));
        let (a, b) = (lo.parse::<usize>().ok()?, hi.parse::<usize>().ok()?);
        if b < a || b - a > 100_000 {
            return None;
        }
        out.extend(a..=b);
    }
    Some(out)
}

/// What `srun --label` printed, split by task.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SrunOutput {
    /// Each task's standard output, the labels taken off.
    pub stdout: BTreeMap<usize, Vec<u8>>,
    /// Each task's standard error.
    pub stderr: BTreeMap<usize, String>,
    /// The node of each task, where srun named it.
    pub node_of: BTreeMap<usize, String>,
    /// srun's words on each task that ended badly (`Exited with exit code 2`).
    pub reason_of: BTreeMap<usize, String>,
    /// srun's lines about no task in particular.
    pub general: Vec<String>,
}

/// `0: text` as `(0, "text")` (srun pads labels with spaces when there are ten tasks or
/// more).
fn label(line: &[u8]) -> Option<(usize, &[u8])> {
    let s = line.trim_ascii_start();
    let colon = s.iter().position(|&b| b == b':')?;
    let task = std::str::from_utf8(&s[..colon]).ok()?.parse().ok()?;
    let rest = &s[colon + 1..];
    Some((task, rest.strip_prefix(b" ").unwrap_or(rest)))
}

/// Splits what `srun --label` printed by task. A task's output lines are joined with no
/// separator: srun cuts lines longer than its buffer into several labelled lines, and a
/// JSON document reads the same without the line breaks between its tokens (inside a
/// string there are none), so the joined text is the document, cut or not.
pub fn split_srun(stdout: &[u8], stderr: &str) -> SrunOutput {
    let mut o = SrunOutput::default();
    for line in stdout.split(|&b| b == b'\n') {
        if let Some((task, rest)) = label(line) {
            o.stdout.entry(task).or_default().extend_from_slice(rest);
        }
    }
    for line in stderr.lines() {
        if let Some(rest) = line.strip_prefix("srun: ") {
            let rest = rest.strip_prefix("error: ").unwrap_or(rest);
            // `node2: task 1: Exited with exit code 2`, `node[1-2]: tasks 0-1: Killed`.
            let parts: Vec<&str> = rest.splitn(3, ": ").collect();
            if let [hosts, tasks, reason] = parts[..] {
                let tasks = tasks
                    .strip_prefix("tasks ")
                    .or_else(|| tasks.strip_prefix("task "))
                    .and_then(expand_tasks);
                if let Some(tasks) = tasks {
                    let hosts = expand_hostlist(hosts);
                    for (i, t) in tasks.iter().enumerate() {
                        if hosts.len() == tasks.len() {
                            o.node_of.insert(*t, hosts[i].clone());
                        } else if hosts.len() == 1 {
                            o.node_of.insert(*t, hosts[0].clone());
                        }
                        o.reason_of.insert(*t, format!("srun: {reason}"));
                    }
                    continue;
                }
            }
            o.general.push(line.to_string());
        } else if let Some((task, rest)) = label(line.as_bytes()) {
            let e = o.stderr.entry(task).or_default();
            e.push_str(&String::from_utf8_lossy(rest));
            e.push('\n');
        } else if !line.trim().is_empty() {
            o.general.push(line.to_string());
        }
    }
    o
}

/// Every node's report or failure from one `srun`: `expected` is the step's node list where
/// it is known (task `i` runs on its `i`-th node: one task per node, block distribution),
/// `tasks` how many tasks there were, `timed_out` whether srun was cut off.
pub fn from_srun(
    reads: Reads,
    out: &SrunOutput,
    expected: &[String],
    tasks: usize,
    timed_out: bool,
    timeout: Duration,
) -> Vec<Gathered> {
    let all: BTreeSet<usize> = (0..tasks)
        .chain(out.stdout.keys().copied())
        .chain(out.reason_of.keys().copied())
        .collect();
    all.into_iter()
        .map(|t| {
            let node = out
                .node_of
                .get(&t)
                .cloned()
                .or_else(|| expected.get(t).cloned())
                .unwrap_or_else(|| format!("task-{t}"));
            let reason = out.reason_of.get(&t);
            // srun names a task's exit code in its reason; a task it says nothing of ended 0.
            let status = match reason {
                None if !timed_out => Some(0),
                None => None,
                Some(r) => r
                    .rsplit_once("exit code ")
                    .and_then(|(_, c)| c.trim().parse().ok()),
            };
            let stdout = out.stdout.get(&t).map(Vec::as_slice).unwrap_or_default();
            let stderr = out.stderr.get(&t).map(String::as_str).unwrap_or_default();
            let no_status = match reason {
                Some(r) => r.clone(),
                None => format!(
                    "no complete {} within {}s (srun was stopped)",
                    reads.noun(),
                    timeout.as_secs()
                ),
            };
            let g = gathered(reads, "slurm", &node, stdout, stderr, status, &no_status);
            match (g, reason) {
                // srun's own words say more than "exited with status N".
                (Gathered::Failed(mut f), Some(r)) if status.is_some_and(|s| s > 1) => {
                    f.reason = match tail(stderr).pop() {
                        Some(line) => format!("{r}: {line}"),
                        None => r.clone(),
                    };
                    Gathered::Failed(f)
                }
                (g, _) => g,
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Running the engines
// ---------------------------------------------------------------------------------------

/// How gpuenv is run on each node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remote {
    /// gpuenv on the nodes: a path, or a name their `PATH` finds.
    pub gpuenv: String,
    /// What follows it (`doctor --json`, and `--record DIR` when asked).
    pub args: Vec<String>,
    /// How long the whole collection may take (each ssh host gets this much too).
    pub timeout: Duration,
    /// What `args` runs, and so what each node's output is read as.
    pub reads: Reads,
}

impl Remote {
    fn command(&self) -> Vec<String> {
        std::iter::once(self.gpuenv.clone())
            .chain(self.args.iter().cloned())
            .collect()
    }
}

/// The most bytes kept of what one engine command prints (every node's report together,
/// for srun): far above a thousand reports of a few tens of KiB, and still a bound.
const ENGINE_OUTPUT_CAP: u64 = 512 << 20;

/// The Slurm job name of this collection: its own, so that a run cut off at the deadline
/// cancels its own job and no other.
fn job_name() -> String {
    format!("gpuenv-fleet-{}", std::process::id())
}

/// Why nothing could be collected at all: the engine is missing or refused the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineError(pub String);

fn run_engine(
    program: &str,
    args: &[String],
    timeout: Duration,
    cap: u64,
) -> Result<crate::process::Ran, EngineError> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    crate::process::run_capped(program, &args, None, timeout, cap).map_err(|e| {
        EngineError(if e.kind() == std::io::ErrorKind::NotFound {
            format!("`{program}` is not installed here, or not on PATH")
        } else {
            format!("cannot run `{program}`: {e}")
        })
    })
}

/// The last line of an engine's error output, or what it exited with.
fn engine_said(ran: &crate::process::Ran) -> String {
    let err = String::from_utf8_lossy(&ran.stderr);
    match tail(&err).pop() {
        Some(l) => l,
        None if ran.timed_out => "it did not finish in time".into(),
        None => format!("it exited with status {:?} and said nothing", ran.status),
    }
}

/// The nodes a run outside an allocation, with no `--nodes` or `--nodelist`, goes to: the
/// partition's nodes that answer and can take a job (a drained or down node would hold
/// srun until the deadline).
fn sinfo_nodes(partition: Option<&str>) -> Result<Vec<String>, EngineError> {
    let mut args: Vec<String> = ["-h", "-N", "-r", "-t", "idle,mix,alloc,completing", "-o", "%N"]
        .map(String::from)
        .to_vec();
    if let Some(p) = partition {
        args.push(format!("--partition={p}"));
    }
    let ran = run_engine("sinfo", &args, Duration::from_secs(30), 16 << 20)?;
    if ran.status != Some(0) {
        return Err(EngineError(format!("sinfo failed: {}", engine_said(&ran))));
    }
    let mut seen = BTreeSet::new();
    let nodes: Vec<String> = String::from_utf8_lossy(&ran.stdout)
        .split_whitespace()
        .filter(|n| seen.insert(n.to_string()))
        .map(String::from)
        .collect();
    if nodes.is_empty() {
        return Err(EngineError(format!(
            "sinfo lists no node that answers and can take a job{}: name them with --nodelist, or check `sinfo -R`",
            partition
                .map(|p| format!(" in partition `{p}`"))
                .unwrap_or_default()
        )));
    }
    Ok(nodes)
}

/// Every node of `target` through one `srun`.
pub fn slurm(target: &SlurmTarget, remote: &Remote) -> Result<Vec<Gathered>, EngineError> {
    let mut target = target.clone();
    let expected: Vec<String> = match (&target.nodelist, target.allocation_nodes) {
        (Some(list), _) => expand_hostlist(list),
        (None, Some(_)) if target.nodes.is_none() => std::env::var("SLURM_JOB_NODELIST")
            .map(|l| expand_hostlist(&l))
            .unwrap_or_default(),
        (None, None) if target.nodes.is_none() => {
            let nodes = sinfo_nodes(target.partition.as_deref())?;
            target.nodelist = Some(nodes.join(","));
            nodes
        }
        _ => Vec::new(),
    };
    let args = srun_args(&target, remote.timeout, &remote.command());
    let ran = run_engine("srun", &args, remote.timeout, ENGINE_OUTPUT_CAP)?;
    let mut expected = expected;
    if ran.timed_out && target.allocation_nodes.is_none() {
        // Which nodes the job got, so that a node that did not answer is named.
        if expected.is_empty() {
            if let Ok(q) = run_engine(
                "squeue",
                &[
                    "-h".into(),
                    format!("--name={}", job_name()),
                    "-o".into(),
                    "%N".into(),
                ],
                Duration::from_secs(15),
                1 << 20,
            ) {
                expected = expand_hostlist(String::from_utf8_lossy(&q.stdout).trim());
            }
        }
        // srun was killed, and a killed srun leaves its job holding the nodes until
        // Slurm's time limit: end it now. In an allocation that limit ends the step.
        let _ = run_engine(
            "scancel",
            &[format!("--name={}", job_name())],
            Duration::from_secs(15),
            1 << 20,
        );
    }
    let stderr = String::from_utf8_lossy(&ran.stderr);
    let out = split_srun(&ran.stdout, &stderr);
    if out.stdout.is_empty() && out.reason_of.is_empty() && !ran.timed_out {
        let said = out.general.last().cloned().unwrap_or_else(|| engine_said(&ran));
        return Err(EngineError(format!("srun ran no task: {said}")));
    }
    let tasks = target.nodes.map(|n| n as usize).unwrap_or(expected.len());
    Ok(from_srun(
        remote.reads,
        &out,
        &expected,
        tasks,
        ran.timed_out,
        remote.timeout,
    ))
}

/// The hosts of a `--hosts` file: one a line, as ssh takes it (`name`, `user@name`,
/// `ssh://user@name:port`), `#` starts a comment. A word that ssh would read as an option,
/// or that holds a space or a quote, is refused with its line.
pub fn read_hosts(file: &str, text: &str) -> Result<Vec<String>, String> {
    let mut hosts: Vec<String> = Vec::new();
    let mut problems = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let ok = !line.starts_with('-')
            && line
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-@:/[]%".contains(c));
        if !ok {
            problems.push(format!(
                "{file}:{}: `{}` is not a host as ssh takes it (a name, user@name or ssh://user@name:port; one a line)",
                i + 1,
                crate::text::excerpt(line)
            ));
        } else if hosts.iter().any(|h| h == line) {
            problems.push(format!("{file}:{}: `{line}` is listed twice", i + 1));
        } else {
            hosts.push(line.to_string());
        }
    }
    if !problems.is_empty() {
        return Err(problems.join("\n"));
    }
    if hosts.is_empty() {
        return Err(format!("{file} lists no host (one a line, `#` for comments)"));
    }
    Ok(hosts)
}

/// `word` quoted for the remote shell ssh hands its command to.
fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The arguments of `ssh` that run `remote` on `host`: never a password prompt
/// (`BatchMode`), a bounded connect, and the user's own ssh configuration otherwise
/// (`config` replaces it when given).
pub fn ssh_args(host: &str, remote: &Remote, config: Option<&Path>) -> Vec<String> {
    let mut a: Vec<String> = Vec::new();
    if let Some(c) = config {
        a.push("-F".into());
        a.push(c.display().to_string());
    }
    for o in ["BatchMode=yes", "ConnectTimeout=15", "ServerAliveInterval=15"] {
        a.push("-o".into());
        a.push(o.into());
    }
    a.push("-T".into());
    a.push("--".into());
    a.push(host.into());
    a.push(
        remote
            .command()
            .iter()
            .map(|w| shell_quote(w))
            .collect::<Vec<_>>()
            .join(" "),
    );
    a
}

/// Every host over ssh, at most `parallel` at once, each within the deadline; in the
/// hosts' order.
pub fn ssh(hosts: &[String], remote: &Remote, parallel: usize, config: Option<&Path>) -> Vec<Gathered> {
    let next = std::sync::Mutex::new(0usize);
    let results: std::sync::Mutex<Vec<Option<Gathered>>> = std::sync::Mutex::new(vec![None; hosts.len()]);
    std::thread::scope(|s| {
        for _ in 0..parallel.clamp(1, hosts.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = {
                        let mut n = next.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                        let i = *n;
                        *n += 1;
                        i
                    };
                    let Some(host) = hosts.get(i) else { break };
                    let g = ssh_one(host, remote, config);
                    results.lock().unwrap_or_else(std::sync::PoisonError::into_inner)[i] = Some(g);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .into_iter()
        .flatten()
        .collect()
}

fn ssh_one(host: &str, remote: &Remote, config: Option<&Path>) -> Gathered {
    let args = ssh_args(host, remote, config);
    let fail = |reason: String, exit_code| {
        Gathered::Failed(Failure {
            node: host.to_string(),
            engine: "ssh".into(),
            reason,
            exit_code,
            stderr: Vec::new(),
        })
    };
    let ran = match run_engine("ssh", &args, remote.timeout, crate::fleet::REPORT_CAP) {
        Ok(r) => r,
        Err(EngineError(m)) => return fail(m, None),
    };
    let stderr = String::from_utf8_lossy(&ran.stderr);
    let no_status = if ran.overflowed {
        format!(
            "printed more than {} (no {} is that big)",
            crate::files::bytes(crate::fleet::REPORT_CAP),
            remote.reads.noun()
        )
    } else {
        format!("no {} within {}s", remote.reads.noun(), remote.timeout.as_secs())
    };
    match gathered(
        remote.reads,
        "ssh",
        host,
        &ran.stdout,
        &stderr,
        ran.status,
        &no_status,
    ) {
        // 255 is ssh's own failure (it never reached gpuenv): its words are the reason.
        Gathered::Failed(mut f) if ran.status == Some(255) => {
            f.reason = format!("ssh failed: {}", engine_said(&ran));
            Gathered::Failed(f)
        }
        g => g,
    }
}

/// A pod of the manifest, as `kubectl get pods -o json` lists it.
#[derive(Debug, Deserialize)]
struct PodList {
    #[serde(default)]
    items: Vec<Pod>,
}

#[derive(Debug, Deserialize)]
struct Pod {
    metadata: PodMeta,
    #[serde(default)]
    spec: PodSpec,
    #[serde(default)]
    status: PodStatus,
}

#[derive(Debug, Deserialize)]
struct PodMeta {
    name: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodSpec {
    node_name: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodStatus {
    phase: Option<String>,
    #[serde(default)]
    conditions: Vec<PodCondition>,
    #[serde(default)]
    container_statuses: Vec<ContainerStatus>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodCondition {
    #[serde(rename = "type")]
    kind: String,
    status: String,
    message: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ContainerStatus {
    name: String,
    #[serde(default)]
    state: serde_json::Value,
}

/// The report in a pod's log. A log holds the container's error output too (a warning,
/// pip's words): the report is the part from the first line that opens a document at the
/// line's start to the last line that closes one, as `doctor --json` prints it.
fn log_document(log: &[u8]) -> &[u8] {
    let start = if log.starts_with(b"{") {
        Some(0)
    } else {
        log.windows(2).position(|w| w == b"\n{").map(|i| i + 1)
    };
    let end = log.windows(2).rposition(|w| w == b"\n}").map(|i| i + 2);
    match (start, end) {
        (Some(s), Some(e)) if s < e => &log[s..e],
        _ => log,
    }
}

use super::k8s::{CONTAINER as K8S_CONTAINER, INSTANCE_LABEL as K8S_INSTANCE_LABEL};

/// Every pod of the manifest's instance `name`: its log read as the report of its node.
pub fn kubectl(name: &str, namespace: Option<&str>, timeout: Duration) -> Result<Vec<Gathered>, EngineError> {
    let ns: Vec<String> = namespace
        .map(|n| vec!["--namespace".to_string(), n.to_string()])
        .unwrap_or_default();
    let mut args: Vec<String> = vec![
        "get".into(),
        "pods".into(),
        "--selector".into(),
        format!("{K8S_INSTANCE_LABEL}={name}"),
        "--output".into(),
        "json".into(),
    ];
    args.extend(ns.iter().cloned());
    let ran = run_engine("kubectl", &args, timeout, ENGINE_OUTPUT_CAP)?;
    if ran.status != Some(0) {
        return Err(EngineError(format!(
            "kubectl get pods failed: {}",
            engine_said(&ran)
        )));
    }
    let list: PodList = serde_json::from_slice(&ran.stdout)
        .map_err(|e| EngineError(format!("kubectl get pods printed no pod list: {e}")))?;
    if list.items.is_empty() {
        return Err(EngineError(format!(
            "no pod carries {K8S_INSTANCE_LABEL}={name}{}: apply `gpuenv fleet k8s-manifest --name {name}` first",
            namespace
                .map(|n| format!(" in namespace `{n}`"))
                .unwrap_or_default()
        )));
    }
    let mut out = Vec::new();
    for pod in list.items {
        let node = pod
            .spec
            .node_name
            .clone()
            .unwrap_or_else(|| format!("pod/{}", pod.metadata.name));
        let phase = pod.status.phase.clone().unwrap_or_else(|| "Unknown".into());
        let state = pod
            .status
            .container_statuses
            .iter()
            .find(|c| c.name == K8S_CONTAINER)
            .map(|c| c.state.clone())
            .unwrap_or_default();
        let exit_code = state["terminated"]["exitCode"].as_i64().map(|c| c as i32);
        let fail = |reason: String| {
            Gathered::Failed(Failure {
                node: node.clone(),
                engine: "kubectl".into(),
                reason,
                exit_code,
                stderr: Vec::new(),
            })
        };
        if pod.spec.node_name.is_none() || phase == "Pending" {
            let why = pod
                .status
                .conditions
                .iter()
                .find(|c| c.kind == "PodScheduled" && c.status != "True")
                .and_then(|c| c.message.clone())
                .or_else(|| state["waiting"]["reason"].as_str().map(String::from))
                .unwrap_or_else(|| "not started".into());
            out.push(fail(format!("pod {} is {phase}: {why}", pod.metadata.name)));
            continue;
        }
        let mut largs: Vec<String> = vec![
            "logs".into(),
            pod.metadata.name.clone(),
            "--container".into(),
            K8S_CONTAINER.into(),
        ];
        largs.extend(ns.iter().cloned());
        let logs = match run_engine("kubectl", &largs, timeout, crate::fleet::REPORT_CAP) {
            Ok(l) => l,
            Err(EngineError(m)) => {
                out.push(fail(m));
                continue;
            }
        };
        if logs.status != Some(0) {
            out.push(fail(format!(
                "kubectl logs {}: {}",
                pod.metadata.name,
                engine_said(&logs)
            )));
            continue;
        }
        let no_status = format!("pod {} is {phase}", pod.metadata.name);
        let text = log_document(&logs.stdout);
        // A finished container's exit code; a running one (a DaemonSet's, asleep after its
        // report) has none, and its log alone tells.
        let status = exit_code.or(Some(0));
        out.push(gathered(
            Reads::DoctorReport,
            "kubectl",
            &node,
            text,
            "",
            status,
            &no_status,
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_log_with_warnings_around_the_report_gives_the_report() {
        let log = b"warning: something\n{\n  \"a\": {\n    \"b\": 1\n  }\n}\nbye\n";
        assert_eq!(log_document(log), b"{\n  \"a\": {\n    \"b\": 1\n  }\n}");
        assert_eq!(log_document(b"{}"), b"{}");
        assert_eq!(log_document(b"nothing"), b"nothing");
    }

    /// Bench results as `bench --json` prints them: the document and, beside it, the
    /// node's judgement.
    fn bench_text(figures: &str, verdict: &str, hostname: &str) -> Vec<u8> {
        format!(
            r#"{{"schema_version": {SCHEMA_VERSION}, "hostname": "{hostname}", "gpus": [], "figures": [{figures}], "skipped": ["network (RDMA): not here"],
              "judgement": {{"figures": [{{"figure": {figures}, "verdict": "{verdict}", "rule": "r", "unverified": false}}], "outliers": []}}}}"#
        )
        .into_bytes()
    }

    const DISK: &str =
        r#"{"metric": "disk-seq-read", "value": 1.5, "unit": "GB/s", "engine": "gpuenv", "detail": "d"}"#;

    #[test]
    fn bench_results_are_read_with_the_worst_the_node_judged() {
        let read = |text: &[u8], status| gathered(Reads::BenchResults, "ssh", "n1", text, "", status, "none");
        let Gathered::Report {
            hostname,
            worst,
            text,
            ..
        } = read(&bench_text(DISK, "warn", "gpu-1"), Some(0))
        else {
            panic!()
        };
        assert_eq!(hostname.as_deref(), Some("gpu-1"));
        assert_eq!(worst, Some(Verdict::Warn));
        assert_eq!(text, bench_text(DISK, "warn", "gpu-1"), "kept byte for byte");
        // Exit 1: the bench found something, and those are still results.
        let g = read(&bench_text(DISK, "fail", "gpu-1"), Some(1));
        assert!(
            matches!(
                g,
                Gathered::Report {
                    worst: Some(Verdict::Fail),
                    ..
                }
            ),
            "{g:?}"
        );
        let g = read(&bench_text(DISK, "unknown", ""), Some(0));
        assert!(
            matches!(
                g,
                Gathered::Report {
                    worst: Some(Verdict::Pass),
                    hostname: None,
                    ..
                }
            ),
            "{g:?}"
        );
    }

    #[test]
    fn bench_output_that_is_no_results_is_a_failure_that_says_why() {
        let read = |text: &[u8], stderr: &str, status| match gathered(
            Reads::BenchResults,
            "slurm",
            "n1",
            text,
            stderr,
            status,
            "no results within 9s",
        ) {
            Gathered::Failed(f) => f.reason,
            g => panic!("{g:?}"),
        };
        // Exit 3 with no figure: nothing was measured.
        let none = format!(
            r#"{{"schema_version": {SCHEMA_VERSION}, "hostname": "h", "figures": [], "judgement": {{"figures": [], "outliers": []}}}}"#
        );
        let why = read(
            none.as_bytes(),
            "error: --gpu-only: no GPU figure could be measured\n",
            Some(3),
        );
        assert!(
            why.contains("status 3 and measured nothing") && why.contains("--gpu-only"),
            "{why}"
        );
        // A doctor report where bench results were asked for.
        let why = read(br#"{"schema_version": 1, "host": {}, "checks": []}"#, "", Some(0));
        assert!(
            why.contains("not bench results") && why.contains("doctor"),
            "{why}"
        );
        let why = read(b"", "", Some(0));
        assert_eq!(why, "printed no bench results");
        let why = read(br#"{"schema_version": 99, "figures": []}"#, "", Some(0));
        assert!(
            why.contains("schema_version 99") && why.contains("same gpuenv"),
            "{why}"
        );
        let why = read(b"\xff\xfe", "", Some(0));
        assert!(why.contains("not UTF-8"), "{why}");
        let why = read(b"", "", None);
        assert_eq!(why, "no results within 9s");
    }

    #[test]
    fn hostlists_expand_as_slurm_writes_them() {
        assert_eq!(
            expand_hostlist("node[1-3,5],gpu07"),
            ["node1", "node2", "node3", "node5", "gpu07"]
        );
        assert_eq!(expand_hostlist("gpu[08-10]"), ["gpu08", "gpu09", "gpu10"]);
        assert_eq!(expand_hostlist("r[1-2]n[1-2]"), ["r1n1", "r1n2", "r2n1", "r2n2"]);
        assert_eq!(expand_hostlist("odd[x]"), ["odd[x]"]);
        assert_eq!(expand_hostlist(""), Vec::<String>::new());
    }

    #[test]
    fn srun_output_splits_by_task_and_rejoins_cut_lines() {
        let stdout = b"0: {\"a\":\n1: {\"b\": 2}\n0: \"xx\n0: yy\"}\n";
        let stderr = "1: slurmstepd: error: oops\nsrun: error: node2: task 1: Exited with exit code 2\nsrun: error: node[3-4]: tasks 2-3: Killed\nsrun: Job step aborted\n";
        let o = split_srun(stdout, stderr);
        assert_eq!(o.stdout[&0], b"{\"a\":\"xxyy\"}");
        assert_eq!(o.stdout[&1], b"{\"b\": 2}");
        assert_eq!(o.stderr[&1], "slurmstepd: error: oops\n");
        assert_eq!(o.node_of[&1], "node2");
        assert_eq!(o.node_of[&2], "node3");
        assert_eq!(o.node_of[&3], "node4");
        assert_eq!(o.reason_of[&1], "srun: Exited with exit code 2");
        assert_eq!(o.general, ["srun: Job step aborted"]);
    }

    #[test]
    fn a_task_without_a_report_is_a_failure_with_srun_reason() {
        let o = split_srun(
            b"",
            "1: slurmstepd: error: execve(): gpuenv: No such file or directory\nsrun: error: node2: task 1: Exited with exit code 2\n",
        );
        let g = from_srun(
            Reads::DoctorReport,
            &o,
            &["node1".into(), "node2".into()],
            2,
            false,
            Duration::from_secs(60),
        );
        let Gathered::Failed(f) = &g[1] else {
            panic!("{g:?}")
        };
        assert_eq!(f.node, "node2");
        assert_eq!(f.exit_code, Some(2));
        assert!(f.reason.contains("Exited with exit code 2"), "{}", f.reason);
        assert!(f.reason.contains("No such file"), "{}", f.reason);
        // Task 0 printed nothing and srun said nothing: it ended 0 with no report.
        let Gathered::Failed(f) = &g[0] else {
            panic!("{g:?}")
        };
        assert_eq!(f.node, "node1");
        assert_eq!(f.reason, "printed no report");
    }

    #[test]
    fn a_timed_out_task_says_so() {
        let g = from_srun(
            Reads::DoctorReport,
            &SrunOutput::default(),
            &["n1".into()],
            1,
            true,
            Duration::from_secs(90),
        );
        let Gathered::Failed(f) = &g[0] else {
            panic!("{g:?}")
        };
        assert!(f.reason.contains("within 90s"), "{}", f.reason);
    }

    #[test]
    fn srun_args_inside_and_outside_an_allocation() {
        let cmd = ["gpuenv".to_string(), "doctor".into(), "--json".into()];
        let out = srun_args(
            &SlurmTarget {
                partition: Some("gpu".into()),
                nodelist: Some("node[1-2]".into()),
                ..Default::default()
            },
            Duration::from_secs(90),
            &cmd,
        );
        assert!(out.contains(&"--partition=gpu".to_string()), "{out:?}");
        assert!(out.contains(&"--nodes=2".to_string()), "{out:?}");
        assert!(out.contains(&"--time=2".to_string()), "{out:?}");
        assert_eq!(out[out.len() - 3..], cmd);
        let inside = srun_args(
            &SlurmTarget {
                partition: Some("gpu".into()),
                allocation_nodes: Some(4),
                ..Default::default()
            },
            Duration::from_secs(60),
            &cmd,
        );
        assert!(inside.contains(&"--overlap".to_string()), "{inside:?}");
        assert!(inside.contains(&"--nodes=4".to_string()), "{inside:?}");
        assert!(!inside.iter().any(|a| a.starts_with("--partition")));
    }

    #[test]
    fn file_names_stay_in_the_folder_and_clashes_keep_both() {
        assert_eq!(file_stem("../../etc/passwd"), "_._.._etc_passwd");
        assert_eq!(file_stem(".hidden"), "_hidden");
        let f = |node: &str| {
            Gathered::Failed(Failure {
                node: node.into(),
                engine: "ssh".into(),
                reason: "r".into(),
                exit_code: None,
                stderr: vec![],
            })
        };
        let (files, lines) = files(&[f("a"), f("a")]);
        assert_eq!(files[0].0, "a.json");
        assert_eq!(files[1].0, "a~a.json");
        assert!(!lines[1].collected);
    }
}
