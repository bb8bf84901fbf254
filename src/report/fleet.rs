//! `gpuenv fleet report`: a row per node, each node against the order and its stack (when
//! judged), its bench results and the nodes slower than the others, the drift between
//! them, the files left out.

use std::io::{self, Write};

use super::doc::FleetDoc;
use super::{SCHEMA_VERSION, Styles, write_json};
use crate::fleet::collect::{CollectedNode, Reads};
use crate::fleet::{Fleet, NodeSummary};
use crate::judge::{AcceptVerdict, Verdict};

fn mark(v: Option<Verdict>) -> &'static str {
    match v {
        Some(Verdict::Pass) => "pass",
        Some(Verdict::Skip) | None => "skip",
        Some(Verdict::Warn) => "warn",
        Some(Verdict::Fail) => "FAIL",
    }
}

/// The merged reports: JSON ([`FleetDoc`]) or text.
pub fn fleet(out: &mut dyn Write, f: &Fleet, json_out: bool, styles: Styles) -> io::Result<()> {
    if json_out {
        return write_json(
            out,
            &FleetDoc {
                schema_version: SCHEMA_VERSION,
                nodes: f.nodes.clone(),
                drift: f.drift.clone(),
                failing_drift: f.failing_drift(),
                problems: f.problems.clone(),
                worst: f.worst,
                order: f.order.clone(),
                stack_asked: f.stack_asked.clone(),
                bench_outliers: f.bench_outliers.clone(),
            },
        );
    }
    if f.nodes.is_empty() {
        writeln!(out, "no report could be read")?;
    } else {
        writeln!(out, "{} nodes", f.nodes.len())?;
    }
    for n in &f.nodes {
        styles.paint(out, mark(n.worst))?;
        writeln!(out, "  {}", row(n))?;
    }
    judged(out, f)?;
    measured(out, f, styles)?;
    if f.drift.is_empty() && !f.nodes.is_empty() {
        writeln!(out)?;
        writeln!(out, "no drift: the nodes agree")?;
    }
    for d in &f.drift {
        writeln!(out)?;
        writeln!(out, "{}: {}", d.kind, d.what_it_breaks)?;
        for v in &d.values {
            writeln!(out, "  {}: {}", v.value, v.nodes.join(", "))?;
        }
        if d.allowed {
            writeln!(
                out,
                "  allowed by --allow-drift {}: it does not fail the report",
                d.kind
            )?;
        }
    }
    let failing = f.failing_drift();
    if !failing.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "drift that breaks multi-node jobs: {} (exit 1; `--allow-drift KIND` relaxes one)",
            failing.join(", ")
        )?;
    }
    if !f.problems.is_empty() {
        writeln!(out)?;
        writeln!(out, "left out:")?;
        for p in &f.problems {
            writeln!(out, "  {}: {}", p.file, p.message)?;
        }
    }
    Ok(())
}

/// Each node against the order, then each node's stack, a line each: what every node is
/// on its own, beside the drift (which only compares them).
fn judged(out: &mut dyn Write, f: &Fleet) -> io::Result<()> {
    if let Some(order) = &f.order {
        writeln!(out)?;
        let items: Vec<String> = order
            .iter()
            .map(|i| format!("{} {}", i.item, i.expected))
            .collect();
        writeln!(out, "order: {}", items.join(", "))?;
        for n in &f.nodes {
            if n.no_report.is_some() {
                writeln!(out, "  {}: order: not judged, no report", n.node)?;
            }
            let Some(a) = &n.acceptance else { continue };
            if a.failed.is_empty() {
                writeln!(out, "  {}: order: accepted", n.node)?;
            }
            for x in &a.failed {
                let how = match x.verdict {
                    AcceptVerdict::Overridden => " (decided by an override: not evidence)",
                    AcceptVerdict::Pass | AcceptVerdict::Fail => "",
                };
                writeln!(
                    out,
                    "  {}: order: {} expected {}, found {}{how}",
                    n.node, x.item, x.expected, x.found
                )?;
            }
        }
    }
    if let Some(asked) = &f.stack_asked {
        writeln!(out)?;
        writeln!(out, "stack: {asked}")?;
        for n in &f.nodes {
            if n.no_report.is_some() {
                writeln!(out, "  {}: stack: not judged, no report", n.node)?;
            }
            let Some(s) = &n.stack else { continue };
            match (&s.best, &s.why_not) {
                (Some(best), _) => writeln!(out, "  {}: stack: {}, best {best}", n.node, s.verdict)?,
                (None, Some(why)) => writeln!(out, "  {}: stack: {}: {why}", n.node, s.verdict)?,
                (None, None) => writeln!(out, "  {}: stack: {}", n.node, s.verdict)?,
            }
        }
    }
    Ok(())
}

/// Each node's bench results in a line, its GPUs below their peers, and the nodes slower
/// than the others with the rule that names them.
fn measured(out: &mut dyn Write, f: &Fleet, styles: Styles) -> io::Result<()> {
    let with: Vec<&NodeSummary> = f.nodes.iter().filter(|n| n.bench.is_some()).collect();
    if with.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(out, "bench: results of {} of {} nodes", with.len(), f.nodes.len())?;
    for n in &with {
        let Some(b) = &n.bench else { continue };
        let burn = match b.burn {
            Some(v) => format!(
                ", burn-in {}",
                serde_json::to_value(v)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            ),
            None => String::new(),
        };
        writeln!(
            out,
            "  {}: {} figures against their datasheets: {} pass, {} warn, {} fail, {} unknown{burn} ({})",
            n.node, b.figures, b.pass, b.warn, b.fail, b.unknown, b.file
        )?;
        for o in &b.outliers {
            writeln!(
                out,
                "  {}: {} {} below its peers: {}",
                n.node,
                o.who,
                crate::bench::judge::metric_name(o.metric),
                o.rule
            )?;
        }
    }
    if !f.bench_outliers.is_empty() {
        writeln!(out, "slower than the other nodes:")?;
        for o in &f.bench_outliers {
            write!(out, "  ")?;
            styles.paint(out, "FAIL")?;
            writeln!(
                out,
                "  {} {}: {}",
                o.who,
                crate::bench::judge::metric_name(o.metric),
                o.rule
            )?;
        }
    }
    Ok(())
}

/// One node in a line.
fn row(n: &NodeSummary) -> String {
    if let Some(why) = &n.no_report {
        return format!("{}  no report: {}", n.node, why);
    }
    let gpus = if n.gpu_count == 0 {
        "no GPU".to_string()
    } else {
        format!("{}x {}", n.gpu_count, n.gpu_models.join(" + "))
    };
    let driver = n.driver.as_deref().unwrap_or("?");
    let torch: Vec<String> = n
        .torch
        .iter()
        .map(|t| {
            format!(
                "torch {} (CUDA {}, NCCL {})",
                t.torch,
                t.cuda.as_deref().unwrap_or("none"),
                t.nccl.as_deref().unwrap_or("?")
            )
        })
        .collect();
    let torch = if torch.is_empty() {
        "no torch".to_string()
    } else {
        torch.join("; ")
    };
    let nccl = if n.system_nccl.is_empty() {
        String::new()
    } else {
        format!(", system NCCL {}", n.system_nccl.join(", "))
    };
    let rdma = match n.rdma {
        Some(true) => "RDMA",
        Some(false) => "no RDMA",
        None => "RDMA unknown",
    };
    let fails = if n.failing_checks.is_empty() {
        String::new()
    } else {
        format!(", failing: {}", n.failing_checks.join(", "))
    };
    format!(
        "{}  {gpus}, driver {driver}, {torch}{nccl}, {rdma}, {} warn{fails}",
        n.node, n.warns
    )
}

/// `fleet collect --json`: where the reports went and a line per node.
#[derive(serde::Serialize)]
struct CollectDoc<'a> {
    schema_version: u32,
    engine: &'a str,
    /// The gpuenv command run on each node: `doctor`, or `bench` (`--bench`).
    command: &'a str,
    dir: String,
    nodes: &'a [CollectedNode],
}

/// What `fleet collect` wrote: a line per node (its file, or why it gave no report), and
/// what to run next.
pub fn collected(
    out: &mut dyn Write,
    engine: &str,
    reads: Reads,
    dir: &std::path::Path,
    nodes: &[CollectedNode],
    json_out: bool,
    styles: Styles,
) -> io::Result<()> {
    if json_out {
        return write_json(
            out,
            &CollectDoc {
                schema_version: SCHEMA_VERSION,
                engine,
                command: reads.command(),
                dir: dir.display().to_string(),
                nodes,
            },
        );
    }
    let got = nodes.iter().filter(|n| n.collected).count();
    writeln!(
        out,
        "{got} of {} nodes gave {} through {engine}, written to {}",
        nodes.len(),
        match reads {
            Reads::DoctorReport => "a report",
            Reads::BenchResults => "bench results",
        },
        crate::files::shown(dir)
    )?;
    for n in nodes {
        if n.collected {
            styles.paint(out, mark(n.worst))?;
            let host = match &n.hostname {
                Some(h) if *h != n.node => format!(" (hostname {h})"),
                _ => String::new(),
            };
            writeln!(out, "  {}{host}  {}", n.node, n.file)?;
        } else {
            styles.paint(out, "FAIL")?;
            writeln!(
                out,
                "  {}  no {}: {}  ({})",
                n.node,
                reads.noun(),
                n.reason.as_deref().unwrap_or(""),
                n.file
            )?;
        }
    }
    writeln!(out)?;
    match reads {
        Reads::DoctorReport => writeln!(out, "next: gpuenv fleet report {}", crate::files::shown(dir))?,
        // Results are judged on the node's report (its GPUs, their links) and matched to it.
        Reads::BenchResults => writeln!(
            out,
            "next: gpuenv fleet report DOCTOR-REPORTS-DIR {}",
            crate::files::shown(dir)
        )?,
    }
    Ok(())
}

/// `gpuenv fleet k8s-manifest`: the manifest as one YAML document, after a comment naming
/// what made it. Every string in it was checked against Kubernetes' grammars first, so none
/// holds a control character.
pub fn k8s_manifest(out: &mut dyn Write, manifest: &serde_json::Value) -> io::Result<()> {
    let yaml = serde_norway::to_string(manifest).map_err(io::Error::other)?;
    writeln!(
        out,
        "# gpuenv {} (`gpuenv fleet k8s-manifest`): each pod's log is one `gpuenv doctor --json` report.",
        env!("CARGO_PKG_VERSION")
    )?;
    out.write_all(yaml.as_bytes())
}
