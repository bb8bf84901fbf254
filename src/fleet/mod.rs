//! Many nodes: `doctor --json` reports merged into one view of a fleet.
//!
//! Owns: which files are read (each file named, every `*.json` of a directory named, in
//! name order), reading them one at a time within a cap, the small summary kept of each
//! node ([`NodeSummary`]), the drift between nodes and what each kind of drift breaks
//! ([`Drift`], [`DRIFT_KINDS`]), and the line said about each file that could not be merged
//! ([`FileProblem`]), and what is kept of judging each node against the order and the
//! project's stack ([`Judge`], [`NodeAcceptance`], [`NodeStack`]). Must not: print (that is
//! `report::fleet`), judge by rules of its own (acceptance is `judge::accept_with_health`,
//! health items included, the stack `judge::check_query` and the resolver, as `check`
//! uses them), or reach the nodes (that is [`collect`]).
//!
//! [`k8s`] owns the Kubernetes manifest that runs `doctor --json` on a cluster's nodes.
//!
//! `gpuenv bench --json` results travel with the reports: told apart by their fields
//! (`figures`, no `host` and `checks`), each is matched to its node by the rule `check
//! --bench-results` holds one machine to (`judge::bench::identity`: the machine ID, else
//! the host name), judged on it as `check` judges it, and the nodes are compared with each
//! other by the peer rule GPUs of one machine are held to (`bench::outliers_across`). A
//! slow node fails; results of no node read are a problem, never dropped unsaid.
//!
//! Memory: a report is read, summarized, judged and dropped before the next is read, so
//! what is held grows with the summaries (a few hundred bytes a node, more only for the
//! order items a node fails), not with the reports. Bench results are kept whole until
//! every file is read (a node's report may come after its results, and the nodes are
//! compared with each other): they are small (figures, tens of KiB a node).

pub mod collect;
pub mod k8s;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::bench::{BenchDoc, Outlier, PcieLink};
use crate::db::Db;
use crate::judge::{AcceptVerdict, Expect, Item, Measured, Verdict};
use crate::report::SCHEMA_VERSION;
use crate::report::doc::DoctorDoc;
use crate::resolve::{Answer, Query, Severity, Status};

/// The most bytes read of one report.
pub const REPORT_CAP: u64 = 32 << 20;

/// How a drift's sentence opens when it breaks multi-node jobs: such drift fails the
/// report (exit 1) unless `--allow-drift` relaxes its kind.
pub const FAILS_JOBS: &str = "a multi-node job will fail or hang";

/// Whether drift of `kind` breaks multi-node jobs: its sentence says so, so what the
/// report prints and what fails it cannot disagree.
pub fn breaks_jobs(kind: &str) -> bool {
    DRIFT_KINDS
        .iter()
        .any(|(k, breaks)| *k == kind && breaks.starts_with(FAILS_JOBS))
}

/// Each kind of drift, its stable code and what it breaks, in the order they are listed.
pub const DRIFT_KINDS: [(&str, &str); 15] = [
    (
        "nccl",
        "a multi-node job will fail or hang: torch's NCCL differs between nodes",
    ),
    (
        "system-nccl",
        "a multi-node job will fail or hang: the system NCCL differs between nodes",
    ),
    (
        "torch",
        "a multi-node job will fail or hang: torch differs between nodes",
    ),
    (
        "torch-cuda",
        "a multi-node job will fail or hang: torch's CUDA differs between nodes",
    ),
    (
        "driver-branch",
        "usually fine, but named: the driver branch differs between nodes",
    ),
    (
        "driver",
        "usually fine, but named: the full driver version differs between nodes; NCCL and CUDA run over each node's own driver, so a hang, an error or a speed seen on one node may not reproduce on another",
    ),
    (
        "cuda-toolkit",
        "usually fine, but named: the system CUDA toolkit differs between nodes; an extension compiled on one node (nvcc, torch's JIT builds) may not load on another",
    ),
    (
        "cudnn",
        "usually fine, but named: the system cuDNN differs between nodes; a program linked to it may not load, or may choose other algorithms, on another node",
    ),
    (
        "os",
        "usually fine, but named: the OS release differs between nodes; its libraries (glibc among them) differ, so a binary or an environment built on one node may not run on another",
    ),
    (
        "kernel",
        "usually fine, but named: the kernel differs between nodes; the modules built for it (the RDMA stack, nvidia-peermem) differ too, so GPUDirect RDMA may work on some nodes only",
    ),
    ("gpu-model", "a heterogeneous job: the slowest GPU sets the pace"),
    (
        "gpu-count",
        "a heterogeneous job: nodes hold different numbers of GPUs",
    ),
    (
        "rdma",
        "RDMA on some nodes only: traffic to the others falls back to TCP",
    ),
    ("failing-checks", "these nodes fail doctor's own checks"),
    (
        "no-report",
        "these nodes gave no report when collected: nothing is known of them",
    ),
];

/// The torch of one Python of a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TorchSummary {
    /// The interpreter.
    pub python: String,
    /// `torch.__version__`.
    pub torch: String,
    /// torch's CUDA (`None` for a CPU build).
    pub cuda: Option<String>,
    /// torch's NCCL.
    pub nccl: Option<String>,
}

/// What is kept of one node's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeSummary {
    /// The node's name: its host name, or the file's name without `.json` when the report
    /// has none; `hostname (first 8 of machine_id)` when other machines share the host
    /// name. Nodes are told apart by `machine_id` where reports have one.
    pub node: String,
    /// The file read.
    pub file: String,
    /// `host.hostname`.
    pub hostname: Option<String>,
    /// `host.machine_id` (derived, never the raw ID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_id: Option<String>,
    /// The driver version.
    pub driver: Option<String>,
    /// Its branch (the major version).
    pub driver_branch: Option<u32>,
    /// The system CUDA toolkits (under `/usr/local`), sorted, each once.
    #[serde(default)]
    pub cuda_toolkits: Vec<String>,
    /// The system cuDNN versions (not pip's), sorted, each once.
    #[serde(default)]
    pub cudnn: Vec<String>,
    /// The OS release (`/etc/os-release`'s `PRETTY_NAME`, else `ID VERSION_ID`).
    #[serde(default)]
    pub os: Option<String>,
    /// The kernel release.
    #[serde(default)]
    pub kernel: Option<String>,
    /// The GPU models, sorted, each once.
    pub gpu_models: Vec<String>,
    /// How many GPUs.
    pub gpu_count: usize,
    /// Each Python with torch.
    pub torch: Vec<TorchSummary>,
    /// The system NCCL versions, sorted, each once.
    pub system_nccl: Vec<String>,
    /// Whether an RDMA port is ACTIVE; `None` when the report holds no network facts.
    pub rdma: Option<bool>,
    /// The ids of the checks that failed.
    pub failing_checks: Vec<String>,
    /// How many checks warned.
    pub warns: usize,
    /// The node against the order, when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acceptance: Option<NodeAcceptance>,
    /// The project's stack on the node, when query's flags or files were given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<NodeStack>,
    /// The node's `gpuenv bench --json` results, when they were among the inputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bench: Option<NodeBench>,
    /// The worst verdict of its checks, its acceptance (`fail` when an item fails or was
    /// decided by an override), its stack (`warn` when conditional, `fail` when none
    /// runs) and its bench results (`fail` when the node is slower than the others, `warn`
    /// when one of its GPUs is slower than its peers); `None` when it has none of them; a
    /// fail when it gave no report.
    pub worst: Option<Verdict>,
    /// Why the node gave no report when collected (`fleet collect` left a failure in its
    /// place); every fact above is then unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_report: Option<String>,
}

/// A node's bench results: the file, the tally of its figures against their datasheets,
/// the GPUs below their peers on the node, the burn-in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeBench {
    /// The `gpuenv bench --json` file read.
    pub file: String,
    /// How many figures.
    pub figures: usize,
    /// Of them, how many pass, warn, fail and are unknown against their datasheets.
    pub pass: usize,
    /// Warn.
    pub warn: usize,
    /// Fail.
    pub fail: usize,
    /// Unknown (no datasheet to judge by: host figures, or a fact compat-db lacks).
    pub unknown: usize,
    /// The node's GPUs (or GPU pairs) more than `bench::judge::PEER_FRACTION` below the
    /// median of their peers on the node.
    pub outliers: Vec<Outlier>,
    /// The burn-in's verdict, when one ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burn: Option<crate::bench::burn::Verdict>,
}

impl NodeBench {
    fn of(m: &Measured, file: &Path) -> NodeBench {
        let [pass, warn, fail, unknown] = m.tally();
        NodeBench {
            file: file.display().to_string(),
            figures: m.figures.len(),
            pass,
            warn,
            fail,
            unknown,
            outliers: m.outliers.clone(),
            burn: m.burn.as_ref().map(|b| b.verdict),
        }
    }
}

/// A node against the order: kept small, only the items that did not pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAcceptance {
    /// `pass` when every item passed on evidence, else `fail`.
    pub verdict: Verdict,
    /// Each item that failed or was decided by an override, in the order's item order.
    pub failed: Vec<FailedItem>,
}

/// One order item a node did not pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedItem {
    /// The order's key (`gpus`, `driver`, ...).
    pub item: String,
    /// What was ordered.
    pub expected: String,
    /// What the node has.
    pub found: String,
    /// `fail`, or `overridden` when a `GPUENV_*` override decided it (not evidence).
    pub verdict: AcceptVerdict,
}

/// One item of the order, as asked (the same on every node).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderItem {
    /// The order's key.
    pub item: String,
    /// What was ordered, in words.
    pub expected: String,
}

/// The project's stack on a node: the resolver's verdict and, in words, the best stack
/// or why none runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStack {
    /// The best stack's verdict: `compatible`, `conditional` or `incompatible`.
    pub verdict: Status,
    /// The best stack that runs, as `check` words it (`torch 2.4.1+cu124 on Python 3.10
    /// (compatible, native; wheels for Python 3.8-3.12)`); `None` when none runs.
    pub best: Option<String>,
    /// Why none runs: the closest build's blocking findings, or why no build matches
    /// what was asked; `None` when one runs.
    pub why_not: Option<String>,
}

/// What each node is judged against beyond doctor's checks, read once before any report.
pub struct Judge<'a> {
    db: &'a Db,
    order: Option<(Expect, Vec<OrderItem>)>,
    stack: Option<Query>,
}

impl<'a> Judge<'a> {
    /// Judges each node against `order` and runs the project's `stack` query (query's
    /// flags and files, not yet fitted to a host) on it. The order is tried first on an
    /// empty host: what `judge::accept` cannot read (a GPU name compat-db does not know, a
    /// driver requirement that does not parse) depends on the order alone, so it is the
    /// error here, naming the flag or the file's line, before any report is read.
    pub fn new(db: &'a Db, order: Option<Expect>, stack: Option<Query>) -> Result<Judge<'a>, String> {
        let order = match order {
            Some(expect) => {
                // The measured items are listed one per key asked, not as the one item a
                // node without bench results gets.
                let measured: Vec<(Item, String)> = crate::judge::bench::asked(&expect);
                let mut asked: Vec<OrderItem> =
                    crate::judge::accept(db, &crate::host::HostReport::default(), &expect)?
                        .into_iter()
                        .filter(|a| !is_measured(a.item))
                        .map(|a| OrderItem {
                            item: a.item.to_string(),
                            expected: a.expected,
                        })
                        .collect();
                asked.extend(measured.into_iter().map(|(i, expected)| OrderItem {
                    item: i.key().to_string(),
                    expected,
                }));
                Some((expect, asked))
            }
            None => None,
        };
        Ok(Judge { db, order, stack })
    }

    /// The compat-db the nodes are judged with.
    pub fn db(&self) -> &'a Db {
        self.db
    }

    /// Whether the order asks for measured figures.
    fn wants_bench(&self) -> bool {
        self.order.as_ref().is_some_and(|(e, _)| e.wants_bench())
    }

    /// Judges a node's measured items on its bench results (`None`: none were among the
    /// inputs), replacing those it was judged with while its report was read (without
    /// results, as every node is then); `machine_gpus` is how many GPUs its report lists,
    /// `checks_worst` its checks' worst verdict, from which `worst` is folded again.
    fn judge_bench(
        &self,
        n: &mut NodeSummary,
        m: Option<&Measured>,
        machine_gpus: usize,
        checks_worst: Option<Verdict>,
    ) {
        let (Some((expect, _)), Some(acceptance)) = (&self.order, n.acceptance.as_mut()) else {
            return;
        };
        if !expect.wants_bench() {
            return;
        }
        // Items that could not be read at all (`order`) stay as they are.
        if acceptance.failed.iter().any(|x| x.item == "order") {
            return;
        }
        acceptance
            .failed
            .retain(|x| !Item::BENCH.iter().any(|i| i.key() == x.item));
        acceptance.failed.extend(
            crate::judge::bench::items(expect, m, machine_gpus)
                .into_iter()
                .filter(|a| !a.pass)
                .map(|a| FailedItem {
                    item: a.item.to_string(),
                    expected: a.expected,
                    found: a.found,
                    verdict: a.verdict,
                }),
        );
        let order: Vec<&str> = self
            .order
            .as_ref()
            .map(|(_, asked)| asked.iter().map(|o| o.item.as_str()).collect())
            .unwrap_or_default();
        // The order's items first, in the order asked, then health items as read.
        acceptance
            .failed
            .sort_by_key(|x| order.iter().position(|k| *k == x.item).unwrap_or(order.len()));
        acceptance.verdict = if acceptance.failed.is_empty() {
            Verdict::Pass
        } else {
            Verdict::Fail
        };
        let stack = n.stack.as_ref().map(|s| stack_verdict(s.verdict));
        n.worst = checks_worst.max(Some(acceptance.verdict)).max(stack);
    }

    /// The order's items as asked, when an order is judged.
    pub fn order_items(&self) -> Option<Vec<OrderItem>> {
        self.order.as_ref().map(|(_, items)| items.clone())
    }

    /// The stack asked, in a line, when the stack is judged.
    pub fn stack_asked(&self) -> Option<String> {
        self.stack.as_ref().map(crate::report::describe_query)
    }

    /// Judges one node's report, while it is in memory, into its summary; the node's
    /// `worst` takes in both verdicts.
    pub fn judge(&self, doc: &DoctorDoc, n: &mut NodeSummary) {
        if let Some((expect, _)) = &self.order {
            n.acceptance = Some(
                match crate::judge::accept_with_health(self.db, &doc.host, expect) {
                    Ok(items) => NodeAcceptance {
                        verdict: if items.iter().all(|a| a.pass) {
                            Verdict::Pass
                        } else {
                            Verdict::Fail
                        },
                        failed: items
                            .into_iter()
                            .filter(|a| !a.pass)
                            .map(|a| FailedItem {
                                item: a.item.to_string(),
                                expected: a.expected,
                                found: a.found,
                                verdict: a.verdict,
                            })
                            .collect(),
                    },
                    // `new` read the order on an empty host, and what fails to read depends
                    // on the order alone; should a host still make it fail, the node is not
                    // accepted on an order nobody could judge.
                    Err(why) => NodeAcceptance {
                        verdict: Verdict::Fail,
                        failed: vec![FailedItem {
                            item: "order".into(),
                            expected: "an order that can be judged".into(),
                            found: why,
                            verdict: AcceptVerdict::Fail,
                        }],
                    },
                },
            );
        }
        if let Some(q) = &self.stack {
            n.stack = Some(match crate::judge::check_query(self.db, &doc.host, q.clone()) {
                Ok(q) => node_stack(&crate::resolve::resolve(self.db, &q)),
                // The host's own facts did not read as a question (a Python version that
                // is not one): the report is at fault, and the node runs nothing known.
                Err(why) => NodeStack {
                    verdict: Status::Incompatible,
                    best: None,
                    why_not: Some(format!("this node's report cannot be judged: {why}")),
                },
            });
        }
        let acceptance = n.acceptance.as_ref().map(|a| a.verdict);
        let stack = n.stack.as_ref().map(|s| stack_verdict(s.verdict));
        n.worst = n.worst.max(acceptance).max(stack);
    }
}

/// A stack's verdict as a node's.
fn stack_verdict(s: Status) -> Verdict {
    match s {
        Status::Compatible => Verdict::Pass,
        // As `check` without `--strict`: it runs, under a rule worth knowing.
        Status::Conditional => Verdict::Warn,
        Status::Incompatible => Verdict::Fail,
    }
}

/// Whether an acceptance item is one of the order's measured items.
fn is_measured(key: &str) -> bool {
    Item::BENCH.iter().any(|i| i.key() == key)
}

/// What is kept of an answer: its verdict, the best stack in words, or why none runs.
fn node_stack(a: &Answer) -> NodeStack {
    let best = crate::report::best_summary(a).map(|(line, _)| line);
    let why_not = match (best.is_some(), a.stacks.first()) {
        (true, _) => None,
        (false, Some(closest)) => {
            let blocking: Vec<String> = closest
                .findings
                .iter()
                .filter(|f| f.severity == Severity::Incompatible)
                .map(|f| format!("{}: {}", f.code, f.message))
                .collect();
            Some(format!(
                "the closest build, torch {}+{} on Python {}: {}",
                closest.torch,
                closest.variant,
                closest.python,
                blocking.join("; ")
            ))
        }
        (false, None) => {
            let said: Vec<String> = a
                .findings
                .iter()
                .filter(|f| f.severity >= Severity::Conditional)
                .map(|f| format!("{}: {}", f.code, f.message))
                .collect();
            Some(if said.is_empty() {
                "no torch build matches what was asked".to_string()
            } else {
                format!("no torch build matches what was asked: {}", said.join("; "))
            })
        }
    };
    NodeStack {
        verdict: a.verdict,
        best,
        why_not,
    }
}

impl NodeSummary {
    /// The summary of one report, read from `file`.
    pub fn of(doc: &DoctorDoc, file: &Path) -> NodeSummary {
        let h = &doc.host;
        let hostname = h.hostname.clone().filter(|n| !n.is_empty());
        let node = hostname.clone().unwrap_or_else(|| stem(file));
        let driver = h.driver.as_ref().map(|d| &d.value);
        let set = |it: &mut dyn Iterator<Item = String>| -> Vec<String> {
            it.collect::<BTreeSet<_>>().into_iter().collect()
        };
        NodeSummary {
            node,
            file: file.display().to_string(),
            hostname,
            machine_id: h.machine_id.clone(),
            driver: driver.map(|d| d.to_string()),
            driver_branch: driver.map(|d| d.branch()),
            cuda_toolkits: set(&mut h.toolkits.iter().map(|t| t.version.to_string())),
            cudnn: set(&mut h
                .cudnn
                .iter()
                .map(|l| l.version.clone().unwrap_or_else(|| "unknown".into()))),
            os: h.os.as_ref().map(|o| {
                if o.pretty_name.is_empty() {
                    format!("{} {}", o.id, o.version_id)
                } else {
                    o.pretty_name.clone()
                }
            }),
            kernel: h.kernel.clone(),
            gpu_models: set(&mut h.gpus.iter().map(|g| g.name.clone())),
            gpu_count: h.gpus.len(),
            torch: h
                .pythons
                .iter()
                .filter_map(|p| {
                    p.torch.as_ref().map(|t| TorchSummary {
                        python: p.path.clone(),
                        torch: t.version.clone(),
                        cuda: t.cuda.clone(),
                        nccl: t.nccl.clone(),
                    })
                })
                .collect(),
            system_nccl: set(&mut h.nccl.iter().filter_map(|l| l.version.clone())),
            rdma: h.network.as_ref().map(|n| {
                n.rdma.iter().any(|p| {
                    p.state
                        .as_deref()
                        .is_some_and(|s| s.eq_ignore_ascii_case("ACTIVE"))
                })
            }),
            failing_checks: doc
                .checks
                .iter()
                .filter(|c| c.verdict == Verdict::Fail)
                .map(|c| c.id.to_string())
                .collect(),
            warns: doc.checks.iter().filter(|c| c.verdict == Verdict::Warn).count(),
            acceptance: None,
            stack: None,
            bench: None,
            worst: doc.checks.iter().map(|c| c.verdict).max(),
            no_report: None,
        }
    }

    /// A node that gave no report, from the failure `fleet collect` wrote in its place.
    pub fn of_failure(f: &collect::Failure, file: &Path) -> NodeSummary {
        NodeSummary {
            node: f.node.clone(),
            file: file.display().to_string(),
            hostname: None,
            machine_id: None,
            driver: None,
            driver_branch: None,
            cuda_toolkits: Vec::new(),
            cudnn: Vec::new(),
            os: None,
            kernel: None,
            gpu_models: Vec::new(),
            gpu_count: 0,
            torch: Vec::new(),
            system_nccl: Vec::new(),
            rdma: None,
            failing_checks: Vec::new(),
            warns: 0,
            acceptance: None,
            stack: None,
            bench: None,
            worst: Some(Verdict::Fail),
            no_report: Some(format!("{}: {}", f.engine, f.reason)),
        }
    }

    /// This node's value for a kind of drift, in words (`none`, `unknown` where it has
    /// nothing to compare).
    fn value(&self, kind: &str) -> String {
        fn words(v: Vec<String>) -> String {
            let v: Vec<String> = v.into_iter().collect::<BTreeSet<_>>().into_iter().collect();
            if v.is_empty() { "none".into() } else { v.join(", ") }
        }
        let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
        match kind {
            "nccl" => words(self.torch.iter().map(|t| opt(&t.nccl)).collect()),
            "system-nccl" => words(self.system_nccl.clone()),
            "torch" => words(self.torch.iter().map(|t| t.torch.clone()).collect()),
            "torch-cuda" => words(
                self.torch
                    .iter()
                    .map(|t| t.cuda.clone().unwrap_or_else(|| "cpu".into()))
                    .collect(),
            ),
            "driver-branch" => self
                .driver_branch
                .map_or_else(|| "unknown".into(), |b| b.to_string()),
            "driver" => opt(&self.driver),
            "cuda-toolkit" => words(self.cuda_toolkits.clone()),
            "cudnn" => words(self.cudnn.clone()),
            "os" => opt(&self.os),
            "kernel" => opt(&self.kernel),
            "gpu-model" => words(self.gpu_models.clone()),
            "gpu-count" => self.gpu_count.to_string(),
            "rdma" => match self.rdma {
                Some(true) => "active".into(),
                Some(false) => "none".into(),
                None => "unknown".into(),
            },
            "failing-checks" => words(self.failing_checks.clone()),
            "no-report" => self.no_report.clone().unwrap_or_else(|| "none".into()),
            _ => String::new(),
        }
    }
}

/// One value of a drift, and the nodes holding it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriftValue {
    /// The value, in words.
    pub value: String,
    /// The nodes holding it, in the order they were read.
    pub nodes: Vec<String>,
}

/// A fact that differs between nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drift {
    /// Its stable code (one of [`DRIFT_KINDS`]).
    pub kind: String,
    /// What it breaks, in a sentence.
    pub what_it_breaks: String,
    /// Each value, with its nodes, the most common first.
    pub values: Vec<DriftValue>,
    /// Whether it breaks multi-node jobs ([`breaks_jobs`]), and so fails the report
    /// unless allowed.
    #[serde(default)]
    pub breaks_jobs: bool,
    /// Whether `--allow-drift` relaxed it: still listed, no longer failing the report.
    #[serde(default)]
    pub allowed: bool,
}

/// A file that could not be merged, and why, in a line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileProblem {
    /// The file.
    pub file: String,
    /// Why.
    pub message: String,
}

/// The merged view.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Fleet {
    /// Each node, in the order its report was read.
    pub nodes: Vec<NodeSummary>,
    /// The facts that differ between nodes, in the order of [`DRIFT_KINDS`].
    pub drift: Vec<Drift>,
    /// Each file that could not be merged.
    pub problems: Vec<FileProblem>,
    /// The worst verdict of any node.
    pub worst: Option<Verdict>,
    /// The order's items, when the nodes were judged against one.
    pub order: Option<Vec<OrderItem>>,
    /// The stack asked, in a line, when it was judged on the nodes.
    pub stack_asked: Option<String>,
    /// The nodes slower than the others: each figure more than
    /// `bench::judge::PEER_FRACTION` worse than the median of the nodes that measured it.
    #[serde(default)]
    pub bench_outliers: Vec<Outlier>,
}

impl Fleet {
    /// Marks drift of each of `kinds` allowed (`--allow-drift`): it no longer fails the
    /// report.
    pub fn allow_drift(&mut self, kinds: &[String]) {
        for d in &mut self.drift {
            if kinds.contains(&d.kind) {
                d.allowed = true;
            }
        }
    }

    /// The kinds of drift found that break multi-node jobs and were not allowed: any of
    /// them fails the report.
    pub fn failing_drift(&self) -> Vec<String> {
        self.drift
            .iter()
            .filter(|d| d.breaks_jobs && !d.allowed)
            .map(|d| d.kind.clone())
            .collect()
    }
}

/// Reads `--allow-drift KIND`: only a kind that would fail the report can be relaxed.
pub fn allowable(kind: &str) -> Result<String, String> {
    if breaks_jobs(kind) {
        return Ok(kind.to_string());
    }
    let can: Vec<&str> = DRIFT_KINDS
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| breaks_jobs(k))
        .collect();
    Err(format!(
        "invalid --allow-drift `{kind}`: expected a kind of drift that fails the report, one of {}",
        can.join(", ")
    ))
}

fn stem(file: &Path) -> String {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.strip_suffix(".json").map(str::to_string).unwrap_or(name)
}

/// The files `paths` name: a file as it is, a directory as its `*.json` files in name
/// order. A directory that cannot be listed is a problem.
pub fn inputs(paths: &[PathBuf]) -> (Vec<PathBuf>, Vec<FileProblem>) {
    let mut files = Vec::new();
    let mut problems = Vec::new();
    for p in paths {
        if !p.is_dir() {
            files.push(p.clone());
            continue;
        }
        match std::fs::read_dir(p) {
            Ok(entries) => {
                let mut found: Vec<PathBuf> = entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|f| f.extension().is_some_and(|x| x == "json"))
                    .collect();
                found.sort();
                files.extend(found);
            }
            Err(e) => problems.push(FileProblem {
                file: p.display().to_string(),
                message: format!("cannot list the directory: {e}"),
            }),
        }
    }
    (files, problems)
}

/// What a document is, when it does not read as a doctor report.
#[derive(Deserialize)]
struct Shape {
    schema_version: Option<u32>,
    host: Option<serde::de::IgnoredAny>,
    checks: Option<serde::de::IgnoredAny>,
    figures: Option<serde::de::IgnoredAny>,
    collect_failure: Option<collect::Failure>,
}

/// What one file holds: a node's report, the failure `fleet collect` left for a node that
/// gave none, or a node's bench results.
pub enum NodeFile {
    /// A report.
    Report(Box<DoctorDoc>),
    /// No report, and why.
    Failure(collect::Failure),
    /// `gpuenv bench --json` results.
    Bench(Box<BenchDoc>),
}

/// One file read: a report, a collection failure or bench results, or why none (a line,
/// without the file's name). The text is read once; its shape is looked at only when it
/// is not a report.
pub fn read_node(file: &Path) -> Result<NodeFile, String> {
    let text = crate::files::read_text(file, REPORT_CAP, "report").map_err(|e| e.to_string())?;
    let wrong_version = |v: u32| {
        let age = if v < SCHEMA_VERSION { "an older" } else { "a newer" };
        format!(
            "written by {age} gpuenv (schema_version {v}; this one reads {SCHEMA_VERSION}): run this gpuenv's `doctor --json` on the node again"
        )
    };
    match serde_json::from_str::<DoctorDoc>(&text) {
        Ok(doc) if doc.schema_version != SCHEMA_VERSION => Err(wrong_version(doc.schema_version)),
        Ok(doc) => Ok(NodeFile::Report(Box::new(doc))),
        Err(e) => match serde_json::from_str::<Shape>(&text) {
            Ok(Shape {
                schema_version: Some(v),
                ..
            }) if v != SCHEMA_VERSION => Err(wrong_version(v)),
            Ok(Shape {
                collect_failure: Some(f),
                schema_version: Some(_),
                ..
            }) => Ok(NodeFile::Failure(f)),
            Ok(Shape {
                figures: Some(_),
                host: None,
                ..
            }) => crate::judge::bench::parse_results(&text, SCHEMA_VERSION)
                .map(|d| NodeFile::Bench(Box::new(d)))
                .map_err(|why| format!("bench results that do not read: {why}")),
            Ok(Shape {
                host: Some(_),
                checks: Some(_),
                ..
            }) => Err(format!("not a readable `gpuenv doctor --json` report: {e}")),
            Ok(Shape {
                collect_failure: Some(_),
                ..
            }) => Err("a collection failure (fleet collect) that does not read".to_string()),
            Ok(_) => Err(
                "not a `gpuenv doctor --json` report (it has no `host` and `checks`), nor `gpuenv bench --json` results (no `figures`)"
                    .to_string(),
            ),
            Err(_) => Err(format!("not JSON: {e}")),
        },
    }
}

/// Reads each file in turn, keeping only its summary, and merges them: the nodes, the
/// drift between them, the bench results of each node and the nodes slower than the
/// others, and a problem for each file that could not be merged (unreadable, not a doctor
/// report nor bench results, another schema, a node already read, results of no node).
pub fn merge(db: &Db, files: &[PathBuf], problems: Vec<FileProblem>) -> Fleet {
    merge_each(
        files,
        problems,
        &Judge {
            db,
            order: None,
            stack: None,
        },
    )
}

/// [`merge`], each node also judged by `judge` while its report is in memory (and on its
/// bench results once every file is read).
pub fn merge_judged(files: &[PathBuf], problems: Vec<FileProblem>, judge: &Judge<'_>) -> Fleet {
    let mut fleet = merge_each(files, problems, judge);
    fleet.order = judge.order_items();
    fleet.stack_asked = judge.stack_asked();
    fleet
}

/// What is kept of a node's report for its bench results, which may be read after it.
#[derive(Default)]
struct Kept {
    /// The GPUs' names, to refuse results of other GPUs.
    gpus: Vec<String>,
    /// Each GPU's PCIe link, to judge host copies by.
    links: BTreeMap<u32, PcieLink>,
    /// The worst verdict of its checks alone.
    checks_worst: Option<Verdict>,
}

fn merge_each(files: &[PathBuf], mut problems: Vec<FileProblem>, judge: &Judge<'_>) -> Fleet {
    let mut nodes: Vec<NodeSummary> = Vec::new();
    let mut kept: Vec<Kept> = Vec::new();
    let mut benches: Vec<(PathBuf, BenchDoc)> = Vec::new();
    // A node is its machine ID where the report has one: host names repeat (`localhost`
    // on every fresh image). Machine IDs repeat too, on machines cloned from one image
    // whose /etc/machine-id was not cleared, so one ID under two host names is two
    // machines, not one reported twice. Without an ID on either side, the name is all
    // there is to tell two reports apart.
    let mut by_id: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut by_name: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for file in files {
        let problem = |message: String| FileProblem {
            file: file.display().to_string(),
            message,
        };
        let (mut summary, doc) = match read_node(file) {
            Ok(NodeFile::Report(doc)) => (NodeSummary::of(&doc, file), Some(doc)),
            // Nothing to judge: no acceptance and no stack for a node without a report.
            Ok(NodeFile::Failure(f)) => (NodeSummary::of_failure(&f, file), None),
            Ok(NodeFile::Bench(doc)) => {
                benches.push((file.clone(), *doc));
                continue;
            }
            Err(m) => {
                problems.push(problem(m));
                continue;
            }
        };
        let same_name = by_name.get(&summary.node).map_or(&[][..], Vec::as_slice);
        let first = match &summary.machine_id {
            Some(id) => by_id
                .get(&(id.clone(), summary.node.clone()))
                .copied()
                .or_else(|| same_name.iter().copied().find(|&i| nodes[i].machine_id.is_none())),
            None => same_name.first().copied(),
        };
        if let Some(i) = first {
            let why = if summary.machine_id.is_some() && summary.machine_id == nodes[i].machine_id {
                "the same machine ID and host name"
            } else {
                "the same host name, and no machine ID to tell them apart"
            };
            problems.push(problem(format!(
                "a second report of node `{}` (the first is `{}`, {why}): left out",
                summary.node, nodes[i].file
            )));
            continue;
        }
        let mut keep = Kept {
            checks_worst: summary.worst,
            ..Kept::default()
        };
        // Judged while the report is still in memory: the summary keeps only the verdicts.
        if let Some(doc) = &doc {
            judge.judge(doc, &mut summary);
            keep.gpus = doc.host.gpus.iter().map(|g| g.name.clone()).collect();
            keep.links = crate::bench::links_from_host(&doc.host.gpus);
        }
        drop(doc);
        kept.push(keep);
        if let Some(id) = &summary.machine_id {
            by_id.insert((id.clone(), summary.node.clone()), nodes.len());
        }
        by_name.entry(summary.node.clone()).or_default().push(nodes.len());
        nodes.push(summary);
    }
    // Machines that share a host name are named apart by their IDs, so that each is a row
    // of its own and the drift between them says which is which.
    for same in by_name.values().filter(|v| v.len() > 1) {
        for &i in same {
            if let Some(id) = &nodes[i].machine_id {
                let prefix: String = id.chars().take(8).collect();
                nodes[i].node = format!("{} ({prefix})", nodes[i].node);
            }
        }
    }
    let bench_outliers = bench_each(&mut nodes, &kept, benches, &mut problems, judge);
    let drift = drift(&nodes);
    let worst = nodes.iter().filter_map(|n| n.worst).max();
    Fleet {
        nodes,
        drift,
        problems,
        worst,
        order: None,
        stack_asked: None,
        bench_outliers,
    }
}

/// `bench results of `node-a` (machine ID 3f2a...)`, as a problem names them.
fn results_named(doc: &BenchDoc) -> String {
    let name = if doc.hostname.trim().is_empty() {
        "a host without a name".to_string()
    } else {
        format!("`{}`", crate::text::excerpt(&doc.hostname))
    };
    match &doc.machine_id {
        Some(id) => format!(
            "bench results of {name} (machine ID {})",
            id.chars().take(8).collect::<String>()
        ),
        None => format!("bench results of {name}"),
    }
}

/// Matches each bench document to its node, judges it there, and names the nodes slower
/// than the others. Results that match no node, several nodes, a node already given
/// results, or other GPUs than the node's are problems, left out of the judging and the
/// comparison.
fn bench_each(
    nodes: &mut [NodeSummary],
    kept: &[Kept],
    benches: Vec<(PathBuf, BenchDoc)>,
    problems: &mut Vec<FileProblem>,
    judge: &Judge<'_>,
) -> Vec<Outlier> {
    let mut matched: Vec<(usize, PathBuf, BenchDoc)> = Vec::new();
    for (file, doc) in benches {
        let problem = |message: String| FileProblem {
            file: file.display().to_string(),
            message,
        };
        let named = results_named(&doc);
        let candidates: Vec<usize> = nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| {
                n.no_report.is_none()
                    && crate::judge::bench::identity(&doc, n.hostname.as_deref(), n.machine_id.as_deref())
                        .is_ok()
            })
            .map(|(i, _)| i)
            .collect();
        let i = match candidates.as_slice() {
            [i] => *i,
            [] => {
                problems.push(problem(format!(
                    "{named}: no `doctor --json` report among the inputs is of that machine (by machine ID, else host name), so they are neither judged nor compared with the other nodes: add that node's report"
                )));
                continue;
            }
            several => {
                let names: Vec<&str> = several.iter().map(|&i| nodes[i].node.as_str()).collect();
                problems.push(problem(format!(
                    "{named} match several nodes ({}) and name no machine ID that tells them apart: left out",
                    names.join(", ")
                )));
                continue;
            }
        };
        if let Some((_, first, _)) = matched.iter().find(|(j, _, _)| *j == i) {
            problems.push(problem(format!(
                "second bench results of node `{}` (the first are `{}`): left out",
                nodes[i].node,
                first.display()
            )));
            continue;
        }
        let gpus: Vec<&str> = kept[i].gpus.iter().map(String::as_str).collect();
        if let Err(why) = crate::judge::bench::gpus_fit(judge.db, &doc, &gpus) {
            problems.push(problem(format!(
                "{named} are not node `{}`'s: {why}; left out",
                nodes[i].node
            )));
            continue;
        }
        matched.push((i, file, doc));
    }
    for (i, file, doc) in &matched {
        let m = Measured::judge(judge.db, doc, &kept[*i].links, judge.wants_bench());
        let n = &mut nodes[*i];
        n.bench = Some(NodeBench::of(&m, file));
        judge.judge_bench(n, Some(&m), kept[*i].gpus.len(), kept[*i].checks_worst);
        // A GPU below its peers on its node is worth a look whatever the order says; the
        // order's `bench` item fails it where one asks.
        if !m.outliers.is_empty() {
            n.worst = n.worst.max(Some(Verdict::Warn));
        }
    }
    let compared: Vec<(String, &BenchDoc)> = matched
        .iter()
        .map(|(i, _, d)| (nodes[*i].node.clone(), d))
        .collect();
    let slow = crate::bench::outliers_across(&compared);
    // A node slower than the others fails: the rule names it against the nodes' median.
    for o in &slow {
        if let Some(n) = nodes
            .iter_mut()
            .find(|n| crate::text::terminal_safe(&n.node) == o.who)
        {
            n.worst = n.worst.max(Some(Verdict::Fail));
        }
    }
    slow
}

/// The facts that differ between `nodes`, in the order of [`DRIFT_KINDS`]; failing checks
/// and nodes without a report are listed whenever there is one. A node without a report
/// counts only there: its facts are unknown, not different.
pub fn drift(nodes: &[NodeSummary]) -> Vec<Drift> {
    let mut out = Vec::new();
    for (kind, breaks) in DRIFT_KINDS {
        let mut values: Vec<DriftValue> = Vec::new();
        let listed: Box<dyn Fn(&&NodeSummary) -> bool> = if kind == "no-report" {
            Box::new(|n: &&NodeSummary| n.no_report.is_some())
        } else {
            Box::new(|n: &&NodeSummary| n.no_report.is_none())
        };
        for n in nodes.iter().filter(listed) {
            let v = n.value(kind);
            match values.iter_mut().find(|d| d.value == v) {
                Some(d) => d.nodes.push(n.node.clone()),
                None => values.push(DriftValue {
                    value: v,
                    nodes: vec![n.node.clone()],
                }),
            }
        }
        let differs = values.len() > 1;
        let fails = (kind == "failing-checks" && nodes.iter().any(|n| !n.failing_checks.is_empty()))
            || (kind == "no-report" && !values.is_empty());
        if differs || fails {
            // Stable: the most common value first, then the order read.
            values.sort_by_key(|d| std::cmp::Reverse(d.nodes.len()));
            out.push(Drift {
                kind: kind.to_string(),
                what_it_breaks: breaks.to_string(),
                values,
                breaks_jobs: breaks_jobs(kind),
                allowed: false,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, branch: u32, gpus: usize) -> NodeSummary {
        NodeSummary {
            node: name.into(),
            file: format!("{name}.json"),
            hostname: Some(name.into()),
            machine_id: None,
            driver: Some(format!("{branch}.1.2")),
            driver_branch: Some(branch),
            cuda_toolkits: vec!["12.4.1".into()],
            cudnn: vec!["9".into()],
            os: Some("Ubuntu 22.04.4 LTS".into()),
            kernel: Some("5.15.0-105-generic".into()),
            gpu_models: vec!["NVIDIA H100 80GB HBM3".into()],
            gpu_count: gpus,
            torch: Vec::new(),
            system_nccl: Vec::new(),
            rdma: Some(true),
            failing_checks: Vec::new(),
            warns: 0,
            acceptance: None,
            stack: None,
            bench: None,
            worst: Some(Verdict::Pass),
            no_report: None,
        }
    }

    #[test]
    fn a_node_without_a_report_is_listed_and_is_no_drift_of_its_own() {
        let f = collect::Failure {
            node: "c".into(),
            engine: "slurm".into(),
            reason: "srun: Exited with exit code 2".into(),
            exit_code: Some(2),
            stderr: vec![],
        };
        let nodes = [
            node("a", 535, 8),
            node("b", 535, 8),
            NodeSummary::of_failure(&f, Path::new("c.json")),
        ];
        let d = drift(&nodes);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].kind, "no-report");
        assert_eq!(d[0].values[0].nodes, ["c"]);
        assert!(d[0].values[0].value.contains("exit code 2"));
    }

    #[test]
    fn only_what_differs_is_drift() {
        let nodes = [node("a", 535, 8), node("b", 535, 8), node("c", 550, 8)];
        let d = drift(&nodes);
        let kinds: Vec<&str> = d.iter().map(|d| d.kind.as_str()).collect();
        assert_eq!(kinds, ["driver-branch", "driver"], "{d:?}");
        let d = &d[..1];
        assert_eq!(d[0].values[0].value, "535");
        assert_eq!(d[0].values[0].nodes, ["a", "b"]);
        assert_eq!(d[0].values[1].nodes, ["c"]);
        assert!(drift(&nodes[..2]).is_empty());
    }

    #[test]
    fn drift_that_says_jobs_fail_fails_the_report_unless_allowed() {
        let breaking: Vec<&str> = DRIFT_KINDS
            .iter()
            .map(|(k, _)| *k)
            .filter(|k| breaks_jobs(k))
            .collect();
        assert_eq!(breaking, ["nccl", "system-nccl", "torch", "torch-cuda"]);
        let mut a = node("a", 535, 8);
        a.torch = vec![TorchSummary {
            python: "/usr/bin/python3".into(),
            torch: "2.4.1".into(),
            cuda: Some("12.4".into()),
            nccl: Some("2.20.5".into()),
        }];
        let mut b = a.clone();
        b.node = "b".into();
        b.torch[0].nccl = Some("2.21.5".into());
        let mut fleet = Fleet {
            drift: drift(&[a, b]),
            ..Fleet::default()
        };
        assert_eq!(fleet.failing_drift(), ["nccl"]);
        fleet.allow_drift(&["torch".into()]);
        assert_eq!(fleet.failing_drift(), ["nccl"], "another kind allowed");
        fleet.allow_drift(&["nccl".into()]);
        assert!(fleet.failing_drift().is_empty());
        assert!(fleet.drift[0].allowed);
        assert_eq!(allowable("nccl").unwrap(), "nccl");
        let why = allowable("gpu-count").unwrap_err();
        assert!(why.contains("nccl, system-nccl, torch, torch-cuda"), "{why}");
    }

    #[test]
    fn each_finer_fact_is_a_drift_of_its_own_saying_what_it_breaks() {
        type Edit = fn(&mut NodeSummary);
        let cases: [(&str, Edit, &str, &str); 5] = [
            ("driver", |n| n.driver = Some("535.1.3".into()), "535.1.3", "NCCL"),
            (
                "cuda-toolkit",
                |n| n.cuda_toolkits = vec!["12.1.1".into()],
                "12.1.1",
                "extension",
            ),
            ("cudnn", |n| n.cudnn = vec!["8".into()], "8", "may not load"),
            (
                "os",
                |n| n.os = Some("Ubuntu 24.04.1 LTS".into()),
                "Ubuntu 24.04.1 LTS",
                "glibc",
            ),
            (
                "kernel",
                |n| n.kernel = Some("6.8.0-45-generic".into()),
                "6.8.0-45-generic",
                "RDMA",
            ),
        ];
        for (kind, edit, value, says) in cases {
            let a = node("a", 535, 8);
            let mut b = node("b", 535, 8);
            edit(&mut b);
            let d = drift(&[a, b]);
            assert_eq!(d.len(), 1, "{kind}: {d:?}");
            assert_eq!(d[0].kind, kind);
            assert_eq!(d[0].values[1].value, value, "{kind}");
            assert_eq!(d[0].values[1].nodes, ["b"], "{kind}");
            assert!(
                d[0].what_it_breaks.contains(says),
                "{kind}: {}",
                d[0].what_it_breaks
            );
            assert!(!d[0].breaks_jobs, "{kind} is named, not failed");
        }
    }

    #[test]
    fn a_failing_check_is_listed_even_when_every_node_fails_it() {
        let mut a = node("a", 535, 8);
        a.failing_checks = vec!["gpus-visible".into()];
        let d = drift(&[a]);
        assert_eq!(d[0].kind, "failing-checks");
        assert_eq!(d[0].values[0].value, "gpus-visible");
    }

    #[test]
    fn every_drift_code_is_kebab_case_and_has_a_value() {
        let n = node("a", 535, 8);
        for (kind, _) in DRIFT_KINDS {
            assert!(
                kind.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'),
                "{kind}"
            );
            assert!(!n.value(kind).is_empty(), "{kind}");
        }
    }

    fn empty_report() -> DoctorDoc {
        DoctorDoc {
            schema_version: SCHEMA_VERSION,
            db_date: None,
            host: crate::host::HostReport::default(),
            checks: Vec::new(),
            overrides: Vec::new(),
        }
    }

    #[test]
    fn a_judged_node_is_as_bad_as_its_order_and_its_stack() {
        let db = Db::embedded().unwrap();
        let mut expect = Expect::default();
        expect.set_flag(crate::judge::Item::Gpus, "8").unwrap();
        // The empty report knows no health fact: unknowns allowed, so only the count fails.
        expect.allow_health("unknown").unwrap();
        let judge = Judge::new(db, Some(expect), Some(Query::default())).unwrap();
        assert_eq!(
            judge.order_items().unwrap(),
            [OrderItem {
                item: "gpus".into(),
                expected: "8".into()
            }]
        );
        let doc = empty_report();
        let mut n = NodeSummary::of(&doc, Path::new("a.json"));
        assert_eq!(n.worst, None, "no check, no verdict");
        judge.judge(&doc, &mut n);
        let a = n.acceptance.clone().unwrap();
        assert_eq!(a.verdict, Verdict::Fail);
        assert_eq!(
            a.failed,
            [FailedItem {
                item: "gpus".into(),
                expected: "8".into(),
                found: "0".into(),
                verdict: AcceptVerdict::Fail
            }]
        );
        assert!(n.stack.is_some(), "a stack asked is judged on every node");
        assert_eq!(n.worst, Some(Verdict::Fail), "the order counts in worst");
    }

    #[test]
    fn an_order_that_cannot_be_judged_is_refused_before_any_node() {
        let db = Db::embedded().unwrap();
        let mut expect = Expect::default();
        expect.set_flag(crate::judge::Item::Gpu, "Z9000").unwrap();
        let why = Judge::new(db, Some(expect), None).err().unwrap();
        assert!(why.contains("--expect-gpu"), "{why}");
    }

    #[test]
    fn a_node_without_hostname_is_its_file() {
        assert_eq!(stem(Path::new("/x/node-3.json")), "node-3");
    }
}
