//! `gpuenv fleet report --report FILE`: the fleet page, one self-contained HTML or
//! Markdown file.
//!
//! Owns: the page's layout (`templates/fleet.*.j2`) and the view the templates read: a row
//! per node (with its bench results when given), the nodes slower than the others, the
//! drift grouped by what it breaks, the files left out. Must not: read
//! reports, judge a node, or read the clock: the caller hands it the merged [`Fleet`] (each
//! node already judged) and the time; this module only shapes them into strings and rows.
//!
//! It is written exactly as the acceptance page is ([`super::acceptance`]): the same
//! template environment (escaping on in both formats, HTML autoescaping and the Markdown
//! escaper), inline CSS only, no script, and a Content-Security-Policy that forbids every
//! load.

use std::io;

use minijinja::Value;
use serde::Serialize;

use super::acceptance::PageFormat;
use crate::db::Db;
use crate::fleet::{Drift, Fleet, NodeSummary};
use crate::judge::{AcceptVerdict, Verdict};
use crate::resolve::Status;

/// The fleet page's templates, by name: added to the acceptance page's environment, whose
/// escaping is chosen by these names.
pub(super) const TEMPLATES: [(&str, &str); 2] = [
    ("fleet.html.j2", include_str!("templates/fleet.html.j2")),
    ("fleet.md.j2", include_str!("templates/fleet.md.j2")),
];

/// Everything the page shows, as the caller computed it.
pub struct FleetPageInput<'a> {
    /// The compat-db the nodes were judged with (its date).
    pub db: &'a Db,
    /// The merged reports, each node judged.
    pub fleet: &'a Fleet,
    /// When the page is written.
    pub written_at: jiff::Timestamp,
}

/// Renders the page.
pub fn page(format: PageFormat, input: &FleetPageInput<'_>) -> io::Result<String> {
    let view = FleetView::new(input);
    let name = match format {
        PageFormat::Html => "fleet.html.j2",
        PageFormat::Markdown => "fleet.md.j2",
    };
    super::acceptance::environment()
        .get_template(name)
        .and_then(|t| t.render(Value::from(minijinja::value::Serde(&view))))
        .map_err(|e| io::Error::other(format!("the fleet page did not render: {e:#}")))
}

#[derive(Serialize)]
struct FleetView {
    written: String,
    version: &'static str,
    db_date: String,
    count: usize,
    overall: String,
    overall_class: &'static str,
    order: Option<String>,
    stack_asked: Option<String>,
    nodes: Vec<NodeRow>,
    /// Whether any node has bench results: the nodes table then has their column.
    measured: bool,
    /// The nodes slower than the others, each with its rule.
    slow: Vec<String>,
    groups: Vec<DriftGroup>,
    problems: Vec<ProblemRow>,
}

#[derive(Serialize)]
struct NodeRow {
    node: String,
    file: String,
    verdict: &'static str,
    class: &'static str,
    gpus: String,
    driver: String,
    torch: Vec<String>,
    rdma: &'static str,
    failing: String,
    warns: usize,
    acceptance: Judged,
    stack: Judged,
    bench: Judged,
}

/// A judgment in a cell: its word, its colour, and the lines under it.
#[derive(Serialize)]
struct Judged {
    word: String,
    class: &'static str,
    lines: Vec<String>,
}

#[derive(Serialize)]
struct DriftGroup {
    breaks: String,
    kinds: Vec<DriftKind>,
}

#[derive(Serialize)]
struct DriftKind {
    kind: String,
    detail: String,
    values: Vec<DriftRow>,
}

#[derive(Serialize)]
struct DriftRow {
    value: String,
    nodes: String,
}

#[derive(Serialize)]
struct ProblemRow {
    file: String,
    message: String,
}

fn mark(v: Option<Verdict>) -> (&'static str, &'static str) {
    match v {
        Some(Verdict::Pass) => ("pass", "pass"),
        Some(Verdict::Skip) | None => ("skip", "skip"),
        Some(Verdict::Warn) => ("warn", "warn"),
        Some(Verdict::Fail) => ("FAIL", "fail"),
    }
}

impl FleetView {
    fn new(input: &FleetPageInput<'_>) -> FleetView {
        let f = input.fleet;
        let (overall, overall_class) = overall(f);
        FleetView {
            written: input.written_at.strftime("%Y-%m-%d %H:%M:%S UTC").to_string(),
            version: env!("CARGO_PKG_VERSION"),
            db_date: input
                .db
                .date()
                .map_or_else(|| "unknown".to_string(), |d| d.to_string()),
            count: f.nodes.len(),
            overall,
            overall_class,
            order: f.order.as_ref().map(|items| {
                items
                    .iter()
                    .map(|i| format!("{} {}", i.item, i.expected))
                    .collect::<Vec<_>>()
                    .join(", ")
            }),
            stack_asked: f.stack_asked.clone(),
            nodes: f.nodes.iter().map(|n| node_row(n, f)).collect(),
            measured: f.nodes.iter().any(|n| n.bench.is_some()),
            slow: f
                .bench_outliers
                .iter()
                .map(|o| {
                    format!(
                        "{} {}: {}",
                        o.who,
                        crate::bench::judge::metric_name(o.metric),
                        o.rule
                    )
                })
                .collect(),
            groups: drift_groups(&f.drift),
            problems: f
                .problems
                .iter()
                .map(|p| ProblemRow {
                    file: p.file.clone(),
                    message: p.message.clone(),
                })
                .collect(),
        }
    }
}

/// The line at the top: how many nodes, and how many of each verdict.
fn overall(f: &Fleet) -> (String, &'static str) {
    if f.nodes.is_empty() {
        return ("No report could be read.".into(), "fail");
    }
    let count = |v: Verdict| f.nodes.iter().filter(|n| n.worst == Some(v)).count();
    let parts: Vec<String> = [
        (Verdict::Fail, "FAIL"),
        (Verdict::Warn, "warn"),
        (Verdict::Pass, "pass"),
    ]
    .iter()
    .map(|&(v, word)| (count(v), word))
    .filter(|&(n, _)| n > 0)
    .map(|(n, word)| format!("{n} {word}"))
    .collect();
    let (_, class) = mark(f.worst);
    let nodes = if f.nodes.len() == 1 { "node" } else { "nodes" };
    (format!("{} {nodes}: {}", f.nodes.len(), parts.join(", ")), class)
}

fn node_row(n: &NodeSummary, f: &Fleet) -> NodeRow {
    let (verdict, class) = mark(n.worst);
    if let Some(why) = &n.no_report {
        // Collected without a report: every fact is unknown, none is "none".
        let unknown = || "unknown (no report)".to_string();
        return NodeRow {
            node: n.node.clone(),
            file: n.file.clone(),
            verdict,
            class,
            gpus: format!("no report: {why}"),
            driver: unknown(),
            torch: vec![unknown()],
            rdma: "unknown",
            failing: unknown(),
            warns: 0,
            acceptance: Judged {
                word: "no report".into(),
                class: "fail",
                lines: Vec::new(),
            },
            stack: Judged {
                word: "no report".into(),
                class: "fail",
                lines: Vec::new(),
            },
            bench: Judged {
                word: "no report".into(),
                class: "fail",
                lines: Vec::new(),
            },
        };
    }
    let mut torch: Vec<String> = n
        .torch
        .iter()
        .map(|t| {
            format!(
                "torch {} (CUDA {}, NCCL {}) in {}",
                t.torch,
                t.cuda.as_deref().unwrap_or("none"),
                t.nccl.as_deref().unwrap_or("unknown"),
                t.python
            )
        })
        .collect();
    if torch.is_empty() {
        torch.push("no torch".into());
    }
    if !n.system_nccl.is_empty() {
        torch.push(format!("system NCCL {}", n.system_nccl.join(", ")));
    }
    NodeRow {
        node: n.node.clone(),
        file: n.file.clone(),
        verdict,
        class,
        gpus: if n.gpu_count == 0 {
            "no GPU".into()
        } else {
            format!("{}x {}", n.gpu_count, n.gpu_models.join(" + "))
        },
        driver: n.driver.clone().unwrap_or_else(|| "none found".into()),
        torch,
        rdma: match n.rdma {
            Some(true) => "active",
            Some(false) => "none",
            None => "unknown",
        },
        failing: if n.failing_checks.is_empty() {
            "none".into()
        } else {
            n.failing_checks.join(", ")
        },
        warns: n.warns,
        acceptance: acceptance_cell(n),
        stack: stack_cell(n),
        bench: bench_cell(n, f),
    }
}

/// A node's bench results in a cell: slower than the other nodes, a GPU below its peers,
/// or the tally of its figures.
fn bench_cell(n: &NodeSummary, f: &Fleet) -> Judged {
    let Some(b) = &n.bench else {
        return Judged {
            word: "no results".into(),
            class: "none",
            lines: Vec::new(),
        };
    };
    let slow: Vec<String> = f
        .bench_outliers
        .iter()
        .filter(|o| o.who == crate::text::terminal_safe(&n.node))
        .map(|o| format!("{}: {}", crate::bench::judge::metric_name(o.metric), o.rule))
        .collect();
    let mut lines = slow.clone();
    lines.extend(b.outliers.iter().map(|o| {
        format!(
            "{} {}: {}",
            o.who,
            crate::bench::judge::metric_name(o.metric),
            o.rule
        )
    }));
    lines.push(format!(
        "{} figures against their datasheets: {} pass, {} warn, {} fail, {} unknown",
        b.figures, b.pass, b.warn, b.fail, b.unknown
    ));
    let (word, class) = if !slow.is_empty() {
        ("SLOWER THAN THE OTHERS", "fail")
    } else if !b.outliers.is_empty() {
        ("a GPU below its peers", "warn")
    } else {
        ("measured", "pass")
    };
    Judged {
        word: word.into(),
        class,
        lines,
    }
}

fn acceptance_cell(n: &NodeSummary) -> Judged {
    match &n.acceptance {
        Some(a) if a.failed.is_empty() => Judged {
            word: "ACCEPTED".into(),
            class: "pass",
            lines: Vec::new(),
        },
        Some(a) => Judged {
            word: "NOT ACCEPTED".into(),
            class: "fail",
            lines: a
                .failed
                .iter()
                .map(|x| {
                    let how = match x.verdict {
                        AcceptVerdict::Overridden => " (decided by an override: not evidence)",
                        AcceptVerdict::Pass | AcceptVerdict::Fail => "",
                    };
                    format!("{}: expected {}, found {}{how}", x.item, x.expected, x.found)
                })
                .collect(),
        },
        None => Judged {
            word: "no order given".into(),
            class: "none",
            lines: Vec::new(),
        },
    }
}

fn stack_cell(n: &NodeSummary) -> Judged {
    let Some(s) = &n.stack else {
        return Judged {
            word: "not asked".into(),
            class: "none",
            lines: Vec::new(),
        };
    };
    let class = match s.verdict {
        Status::Compatible => "pass",
        Status::Conditional => "cond",
        Status::Incompatible => "fail",
    };
    Judged {
        word: s.verdict.to_string(),
        class,
        lines: s
            .best
            .iter()
            .map(|b| format!("best: {b}"))
            .chain(s.why_not.iter().cloned())
            .collect(),
    }
}

/// The drift, grouped by what it breaks: the consequence a kind's sentence opens with
/// (before its first `: `), in the order the kinds are listed; the rest of the sentence
/// says which fact differs.
fn drift_groups(drift: &[Drift]) -> Vec<DriftGroup> {
    let mut groups: Vec<DriftGroup> = Vec::new();
    for d in drift {
        let (breaks, detail) = d
            .what_it_breaks
            .split_once(": ")
            .unwrap_or((d.what_it_breaks.as_str(), ""));
        let detail = if d.allowed {
            format!(
                "{detail} (allowed by --allow-drift {}: it does not fail the report)",
                d.kind
            )
        } else {
            detail.to_string()
        };
        let kind = DriftKind {
            kind: d.kind.clone(),
            detail,
            values: d
                .values
                .iter()
                .map(|v| DriftRow {
                    value: v.value.clone(),
                    nodes: v.nodes.join(", "),
                })
                .collect(),
        };
        match groups.iter_mut().find(|g| g.breaks == breaks) {
            Some(g) => g.kinds.push(kind),
            None => groups.push(DriftGroup {
                breaks: breaks.to_string(),
                kinds: vec![kind],
            }),
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::{DRIFT_KINDS, DriftValue};

    #[test]
    fn drift_is_grouped_by_what_it_breaks() {
        let drift: Vec<Drift> = DRIFT_KINDS
            .iter()
            .map(|(kind, breaks)| Drift {
                kind: kind.to_string(),
                what_it_breaks: breaks.to_string(),
                values: vec![DriftValue {
                    value: "x".into(),
                    nodes: vec!["a".into()],
                }],
                breaks_jobs: crate::fleet::breaks_jobs(kind),
                allowed: false,
            })
            .collect();
        let groups = drift_groups(&drift);
        let shape: Vec<(&str, Vec<&str>)> = groups
            .iter()
            .map(|g| {
                (
                    g.breaks.as_str(),
                    g.kinds.iter().map(|k| k.kind.as_str()).collect(),
                )
            })
            .collect();
        assert_eq!(
            shape,
            [
                (
                    "a multi-node job will fail or hang",
                    vec!["nccl", "system-nccl", "torch", "torch-cuda"]
                ),
                (
                    "usually fine, but named",
                    vec!["driver-branch", "driver", "cuda-toolkit", "cudnn", "os", "kernel"]
                ),
                ("a heterogeneous job", vec!["gpu-model", "gpu-count"]),
                ("RDMA on some nodes only", vec!["rdma"]),
                ("these nodes fail doctor's own checks", vec!["failing-checks"]),
                ("these nodes gave no report when collected", vec!["no-report"]),
            ]
        );
        assert_eq!(groups[0].kinds[0].detail, "torch's NCCL differs between nodes");
        let mut allowed = drift[0].clone();
        allowed.allowed = true;
        assert_eq!(
            drift_groups(&[allowed])[0].kinds[0].detail,
            "torch's NCCL differs between nodes (allowed by --allow-drift nccl: it does not fail the report)"
        );
    }

    #[test]
    fn both_templates_render_an_empty_fleet() {
        let db = crate::db::Db::embedded().unwrap();
        let fleet = Fleet::default();
        let input = FleetPageInput {
            db,
            fleet: &fleet,
            written_at: jiff::Timestamp::UNIX_EPOCH,
        };
        let html = page(PageFormat::Html, &input).unwrap();
        assert!(html.contains("No report could be read."), "{html}");
        assert!(html.contains("1970-01-01 00:00:00 UTC"));
        let md = page(PageFormat::Markdown, &input).unwrap();
        assert!(md.starts_with("# Fleet report: 0 nodes\n"), "{md}");
    }
}
