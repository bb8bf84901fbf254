//! `gpuenv bench`: the figures measured and what was skipped, as text or JSON; the lines
//! `bench net --listen` says on stderr.
//!
//! Owns: the layout of a [`BenchDoc`] in text. Must not: compute or judge a figure.

use std::io::{self, Write};

use minijinja::Value;
use serde::Serialize;

use super::Styles;
use super::acceptance::PageFormat;
use super::measured::{self, Shown};
use crate::bench::{BenchDoc, Judged, Outlier};
use crate::judge::Measured;

/// `bench --json`: the document (what `check --bench-results` and `fleet report` read
/// back), and beside it the judgement of each figure.
#[derive(Serialize)]
struct Output<'a> {
    #[serde(flatten)]
    doc: &'a BenchDoc,
    judgement: Judgement<'a>,
}

#[derive(Serialize)]
struct Judgement<'a> {
    figures: &'a [Judged],
    outliers: &'a [Outlier],
}

/// A bench's results: the document and its judgement as JSON, or, as `check` shows
/// them, each figure beside its datasheet figure, the GPUs below their peers, the
/// burn-in, the engines' failures and the parts not measured.
pub fn bench(
    out: &mut dyn Write,
    doc: &BenchDoc,
    m: &Measured,
    json: bool,
    styles: Styles,
) -> io::Result<()> {
    if json {
        let judgement = Judgement {
            figures: &m.figures,
            outliers: &m.outliers,
        };
        return super::write_json(out, &Output { doc, judgement });
    }
    if doc.figures.is_empty() {
        writeln!(out, "no figures")?;
    }
    measured::text(out, m, Shown::Bench, styles)
}

/// Everything a bench page shows.
pub struct PageInput<'a> {
    /// The results.
    pub doc: &'a BenchDoc,
    /// Their judgement.
    pub measured: &'a Measured,
    /// When the page is written.
    pub written_at: jiff::Timestamp,
}

#[derive(Serialize)]
struct PageView {
    written: String,
    version: &'static str,
    host: String,
    overall: &'static str,
    overall_class: &'static str,
    gpus: Vec<String>,
    bench: measured::BenchView,
}

/// The results as a page to keep or send: every figure beside its datasheet figure.
pub fn page(format: PageFormat, input: &PageInput<'_>) -> io::Result<String> {
    let doc = input.doc;
    let bad = crate::bench::has_findings(input.measured);
    let view = PageView {
        written: input.written_at.strftime("%Y-%m-%d %H:%M:%S UTC").to_string(),
        version: env!("CARGO_PKG_VERSION"),
        host: if doc.hostname.is_empty() {
            "this host".into()
        } else {
            doc.hostname.clone()
        },
        overall: if bad {
            "FINDINGS: a figure, a GPU, an engine or the burn-in failed"
        } else {
            "no figure failed"
        },
        overall_class: if bad { "fail" } else { "pass" },
        gpus: doc
            .gpus
            .iter()
            .map(|g| format!("{}: {}", g.index, g.name))
            .collect(),
        bench: measured::view(input.measured, Shown::Bench),
    };
    let name = match format {
        PageFormat::Html => "bench.html.j2",
        PageFormat::Markdown => "bench.md.j2",
    };
    super::acceptance::environment()
        .get_template(name)
        .and_then(|t| t.render(Value::from(minijinja::value::Serde(&view))))
        .map_err(|e| io::Error::other(format!("the bench page did not render: {e:#}")))
}

/// The page's templates, added to the report environment, and the figures' part they
/// share with the acceptance page.
pub(super) const TEMPLATES: [(&str, &str); 4] = [
    ("bench.html.j2", include_str!("templates/bench.html.j2")),
    ("bench.md.j2", include_str!("templates/bench.md.j2")),
    ("measured.html.j2", include_str!("templates/measured.html.j2")),
    ("measured.md.j2", include_str!("templates/measured.md.j2")),
];

/// `listening on ADDR (protocol 1) for N s` and each refused client, on the writer given
/// (stderr).
pub fn bench_listening(err: &mut dyn Write, addr: &str, seconds: u64) -> io::Result<()> {
    writeln!(
        err,
        "listening on {addr} (gpuenv bench net, protocol {}) for {seconds} s; run `gpuenv bench net --peer THIS_HOST:PORT` on the other node",
        crate::bench::host::net::VERSION
    )?;
    err.flush()
}

/// One client the listener turned away, and why.
pub fn bench_refused(err: &mut dyn Write, why: &str) -> io::Result<()> {
    writeln!(err, "refused {}", crate::text::terminal_safe(why))?;
    err.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::{Engine, Figure, Metric};

    #[test]
    fn text_lists_figures_failures_and_skipped() {
        let db = crate::db::Db::embedded().unwrap();
        let doc = BenchDoc {
            schema_version: 1,
            hostname: "node1".into(),
            figures: vec![Figure::new(Metric::DiskRandRead, 12345.6, Engine::Fio, "4k")],
            skipped: vec!["network (RDMA): not installed".into()],
            failures: vec![crate::bench::EngineFailure {
                engine: Engine::Dcgm,
                gpu: Some(3),
                test: "Memory".into(),
                reason: "errors".into(),
            }],
            ..BenchDoc::default()
        };
        let m = Measured::judge(db, &doc, &Default::default(), false);
        let mut out = Vec::new();
        bench(&mut out, &doc, &m, false, Styles::PLAIN).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("bench results of node1 (each against its datasheet and its peers)"),
            "{text}"
        );
        assert!(text.contains("disk-rand-read"), "{text}");
        assert!(text.contains("12345.6"), "{text}");
        assert!(text.contains("fio"), "{text}");
        assert!(
            text.contains("engine failures:\n  FAIL  dcgmi diag GPU 3 Memory: errors"),
            "{text}"
        );
        assert!(text.contains("skipped: network (RDMA)"), "{text}");
    }
}
