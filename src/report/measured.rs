//! Bench results as `check` shows them: every figure beside its datasheet (measured, the
//! datasheet figure, the share, the verdict, the rule, the engine), the GPUs below their
//! peers, the burn-in and what was skipped; in text, and as the rows of the acceptance
//! page.
//!
//! Owns: the layout of a judged bench ([`Measured`]). Must not: judge a figure, or decide
//! what counts for acceptance (both are done before it is handed here).

use std::io::{self, Write};

use serde::Serialize;

use super::Styles;
use crate::bench::burn::Verdict as BurnVerdict;
use crate::bench::judge::metric_name;
use crate::bench::{Figure, Judged, Verdict};
use crate::judge::Measured;
use crate::judge::bench::has_datasheet;

/// `GPU 5 matmul-bf16`, `GPU 0 -> GPU 3 peer-to-peer`, `nccl-busbw`.
pub(super) fn label(f: &Figure) -> String {
    let name = metric_name(f.metric);
    match (f.gpu, f.peer) {
        (Some(g), Some(p)) => format!("GPU {g} -> GPU {p} {name}"),
        (Some(g), None) => format!("GPU {g} {name}"),
        _ => name,
    }
}

/// Three significant digits at least, no exponent: `794.5`, `52.77`, `0.0123`.
pub(super) fn value(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.1}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

fn engine(f: &Figure) -> String {
    f.engine.name().to_string()
}

/// The mark of a verdict, as the text and the page write it.
fn mark(v: Verdict) -> (&'static str, &'static str) {
    match v {
        Verdict::Pass => ("pass", "pass"),
        Verdict::Warn => ("warn", "warn"),
        Verdict::Fail => ("FAIL", "fail"),
        Verdict::Unknown => ("unkn", "skip"),
    }
}

/// `80% of 989.5 TFLOPS (H100 SXM bf16_tflops)`, or why there is no datasheet figure.
fn against(j: &Judged) -> String {
    match (j.share, j.datasheet) {
        (Some(share), Some(sheet)) => format!(
            "{:.0}% of {} {}{}",
            share * 100.0,
            value(sheet),
            j.figure.unit,
            match (&j.gpu_record, &j.datasheet_fact) {
                (Some(g), Some(f)) => format!(" ({g} {f})"),
                (None, Some(f)) => format!(" ({f})"),
                _ => String::new(),
            }
        ),
        _ if has_datasheet(j.figure.metric) => "no datasheet figure".into(),
        _ => "no datasheet (peers and floors only)".into(),
    }
}

/// Whether a figure's rule is worth a line of its own: a verdict that is not a pass on a
/// figure a datasheet could judge. Host figures are `unknown` by nature, which a line each
/// would only repeat.
fn rule_shown(j: &Judged) -> bool {
    j.verdict != Verdict::Pass && has_datasheet(j.figure.metric)
}

/// Where the figures are shown: with `check`'s acceptance, or as `gpuenv bench`'s own
/// results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shown {
    /// After the acceptance lines of `check`.
    Check,
    /// As `gpuenv bench` prints them.
    Bench,
}

/// The line above the figures: where they are from, whether they count, the tally.
fn headline(m: &Measured, shown: Shown) -> String {
    let [pass, warn, fail, unknown] = m.tally();
    let host = if m.hostname.trim().is_empty() {
        "a host that did not give its name".to_string()
    } else {
        m.hostname.clone()
    };
    format!(
        "bench results of {host} ({}): {} figure{}, {pass} pass, {warn} warn, {fail} fail, {unknown} unknown",
        match (shown, m.counts_for_acceptance) {
            (Shown::Bench, _) => "each against its datasheet and its peers",
            (Shown::Check, true) => "the order's measured items are judged on them",
            (Shown::Check, false) => "shown only: the order asks for no measured figure",
        },
        m.figures.len(),
        if m.figures.len() == 1 { "" } else { "s" }
    )
}

fn burn_line(m: &Measured) -> Option<(String, &'static str, Vec<String>)> {
    let b = m.burn.as_ref()?;
    let (word, class) = match b.verdict {
        BurnVerdict::Pass => ("pass", "pass"),
        BurnVerdict::Warn => ("warn", "warn"),
        BurnVerdict::Fail => ("FAIL", "fail"),
    };
    let findings = b
        .findings
        .iter()
        .map(|f| {
            let who = f.gpu.map(|g| format!("GPU {g} ")).unwrap_or_default();
            format!("{who}{}: {} (rule: {})", f.code, f.found, f.rule)
        })
        .collect();
    Some((
        format!("{word}: {} s on {} GPU(s)", b.seconds, b.gpus.len()),
        class,
        findings,
    ))
}

/// What an engine reported as failed: `dcgmi diag GPU 3 Memory: ...`.
fn failure_lines(m: &Measured) -> Vec<String> {
    m.failures
        .iter()
        .map(|f| {
            let gpu = f.gpu.map(|g| format!(" GPU {g}")).unwrap_or_default();
            format!("{}{gpu} {}: {}", f.engine.name(), f.test, f.reason)
        })
        .collect()
}

/// The bench results in text: after the acceptance lines of `check`, or as `bench`'s.
pub(super) fn text(out: &mut dyn Write, m: &Measured, shown: Shown, styles: Styles) -> io::Result<()> {
    writeln!(out, "{}", headline(m, shown))?;
    for j in &m.figures {
        let (word, _) = mark(j.verdict);
        let f = &j.figure;
        write!(out, "  ")?;
        styles.paint(out, word)?;
        writeln!(
            out,
            "  {:<30} {:>10} {:<8} {:<44} {}",
            label(f),
            value(f.value),
            f.unit,
            against(j),
            engine(f)
        )?;
        if rule_shown(j) {
            writeln!(out, "          rule: {}", j.rule)?;
        }
    }
    if !m.outliers.is_empty() {
        writeln!(out, "below their peers:")?;
        for o in &m.outliers {
            write!(out, "  ")?;
            styles.paint(out, "FAIL")?;
            writeln!(out, "  {} {}: {}", o.who, metric_name(o.metric), o.rule)?;
        }
    }
    if let Some((line, _, findings)) = burn_line(m) {
        writeln!(out, "burn-in: {line}")?;
        for f in findings {
            writeln!(out, "  {f}")?;
        }
    }
    let failures = failure_lines(m);
    if !failures.is_empty() {
        writeln!(out, "engine failures:")?;
        for f in failures {
            write!(out, "  ")?;
            styles.paint(out, "FAIL")?;
            writeln!(out, "  {f}")?;
        }
    }
    for s in &m.skipped {
        writeln!(out, "skipped: {s}")?;
    }
    Ok(())
}

/// One figure on the acceptance page.
#[derive(Serialize)]
pub(super) struct FigureRow {
    what: String,
    measured: String,
    datasheet: String,
    share: String,
    verdict: &'static str,
    class: &'static str,
    engine: String,
    detail: String,
    rule: String,
}

/// The burn-in on the page.
#[derive(Serialize)]
pub(super) struct BurnView {
    line: String,
    class: &'static str,
    findings: Vec<String>,
}

/// The bench results on the acceptance page.
#[derive(Serialize)]
pub(super) struct BenchView {
    headline: String,
    figures: Vec<FigureRow>,
    outliers: Vec<String>,
    burn: Option<BurnView>,
    failures: Vec<String>,
    skipped: Vec<String>,
}

/// The page's view of `m`.
pub(super) fn view(m: &Measured, shown: Shown) -> BenchView {
    BenchView {
        headline: headline(m, shown),
        figures: m
            .figures
            .iter()
            .map(|j| {
                let f = &j.figure;
                let (verdict, class) = mark(j.verdict);
                FigureRow {
                    what: label(f),
                    measured: format!("{} {}", value(f.value), f.unit),
                    datasheet: match (j.datasheet, &j.datasheet_fact) {
                        (Some(v), Some(fact)) => format!(
                            "{} {} ({}{fact})",
                            value(v),
                            f.unit,
                            j.gpu_record
                                .as_deref()
                                .map(|g| format!("{g} "))
                                .unwrap_or_default()
                        ),
                        _ => "none".into(),
                    },
                    share: j
                        .share
                        .map_or_else(|| "-".to_string(), |s| format!("{:.0}%", s * 100.0)),
                    verdict: if verdict == "unkn" { "unknown" } else { verdict },
                    class,
                    engine: engine(f),
                    detail: f.detail.clone(),
                    rule: j.rule.clone(),
                }
            })
            .collect(),
        outliers: m
            .outliers
            .iter()
            .map(|o| format!("{} {}: {}", o.who, metric_name(o.metric), o.rule))
            .collect(),
        burn: burn_line(m).map(|(line, class, findings)| BurnView {
            line,
            class,
            findings,
        }),
        failures: failure_lines(m),
        skipped: m.skipped.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::{BenchDoc, Engine, Metric};

    #[test]
    fn text_shows_each_figure_beside_its_datasheet_and_the_rule_of_what_did_not_pass() {
        let db = crate::db::Db::embedded().unwrap();
        let mut doc = BenchDoc {
            schema_version: 1,
            hostname: "node-a".into(),
            gpus: (0..3)
                .map(|index| crate::bench::figure::BenchGpu {
                    index,
                    name: "NVIDIA H100 80GB HBM3".into(),
                    memory_mib: None,
                })
                .collect(),
            ..BenchDoc::default()
        };
        for (g, v) in [794.5, 790.0, 400.0].into_iter().enumerate() {
            doc.figures
                .push(Figure::new(Metric::MatmulBf16, v, Engine::Gpuenv, "8192^3").on_gpu(g as u32));
        }
        doc.figures
            .push(Figure::new(Metric::DiskSeqRead, 2.5, Engine::Fio, "/data"));
        let m = Measured::judge(db, &doc, &Default::default(), true);
        let mut out = Vec::new();
        text(&mut out, &m, Shown::Check, Styles::PLAIN).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("bench results of node-a (the order's measured items are judged on them): 4 figures, 2 pass, 0 warn, 1 fail, 1 unknown\n"), "{text}");
        assert!(text.contains("  pass  GPU 0 matmul-bf16"), "{text}");
        assert!(
            text.contains("80% of 989.5 TFLOPS (H100 SXM bf16_tflops)"),
            "{text}"
        );
        assert!(text.contains("  FAIL  GPU 2 matmul-bf16"), "{text}");
        assert_eq!(text.matches("          rule: ").count(), 1, "{text}");
        assert!(text.contains("no datasheet (peers and floors only)"), "{text}");
        assert!(text.contains("below their peers:\n  FAIL  GPU 2 matmul-bf16: 400.0 TFLOPS is 49% below the median 790.0 TFLOPS"), "{text}");
    }
}
