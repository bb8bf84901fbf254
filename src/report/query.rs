//! `gpuenv query`: the answer as a table with reasons, or as JSON.

use crate::resolve::Code;
use std::io::{self, Write};

use super::doc::QueryDoc;
use super::{SCHEMA_VERSION, Styles, write_json};
use crate::resolve::{Answer, Query, Severity, Stack, Status};

/// How to print an answer.
#[derive(Debug, Clone)]
pub struct QueryOpts {
    /// A JSON document instead of text.
    pub json: bool,
    /// Also incompatible stacks.
    pub all: bool,
    /// Builds in the table (0: all).
    pub limit: usize,
    /// Whether the marks and the verdict are coloured.
    pub styles: Styles,
}

/// One line describing what was asked.
pub(crate) fn describe(q: &Query) -> String {
    let mut parts = Vec::new();
    for p in &q.torch {
        parts.push(format!("torch {}", p.specifiers));
    }
    for (s, _) in &q.python {
        parts.push(format!("Python {s}"));
    }
    if let Some((ask, _)) = &q.cuda {
        parts.push(match ask {
            crate::resolve::CudaAsk::Cpu => "cpu build".to_string(),
            crate::resolve::CudaAsk::Spec(s) => format!("CUDA {s}"),
        });
    }
    for g in &q.gpus {
        parts.push(if g.count > 1 {
            format!("{}x {}", g.count, g.gpu.name)
        } else {
            g.gpu.name.clone()
        });
    }
    if let Some(d) = &q.driver {
        parts.push(format!("driver {d}"));
    }
    if let Some((g, origin)) = &q.glibc {
        parts.push(format!("glibc {g} ({origin})"));
    }
    if q.extensions {
        parts.push("CUDA extensions".into());
    }
    if parts.is_empty() {
        "no constraints".into()
    } else {
        parts.join(", ")
    }
}

/// How the inputs that were not taken literally were read, under the query line.
pub(super) fn write_readings(out: &mut dyn Write, q: &Query) -> io::Result<()> {
    for r in &q.readings {
        writeln!(out, "read:  {} {}: {}", r.input, r.given, r.note)?;
    }
    Ok(())
}

/// The host architecture the answer is for. Unknown, x86_64 wheels are assumed, and the
/// answer says so where a CUDA build is shown: on an Arm host they may not exist.
pub(super) fn write_arch(out: &mut dyn Write, q: &Query, a: &Answer) -> io::Result<()> {
    match q.host_arch() {
        Some((arch, from)) => writeln!(out, "arch:  {arch} ({from})"),
        None if a.stacks.iter().any(|s| s.cuda.is_some()) => writeln!(
            out,
            "arch:  not given: x86_64 wheels assumed (on an Arm host, GH200 or GB200, give --arch aarch64)"
        ),
        None => Ok(()),
    }
}

/// Builds (torch + variant) in rank order, each with its stacks.
fn by_build<'a>(stacks: impl Iterator<Item = &'a Stack>) -> Vec<Vec<&'a Stack>> {
    let mut out: Vec<Vec<&Stack>> = Vec::new();
    for s in stacks {
        match out
            .iter_mut()
            .find(|b| b[0].torch == s.torch && b[0].variant == s.variant && b[0].status == s.status)
        {
            Some(b) => b.push(s),
            None => out.push(vec![s]),
        }
    }
    out
}

fn pythons(b: &[&Stack]) -> String {
    let mut v: Vec<&str> = b.iter().map(|s| s.python.as_str()).collect();
    v.sort_by_key(|p| {
        p.split('.')
            .map(|x| x.parse::<u32>().unwrap_or(0))
            .collect::<Vec<_>>()
    });
    v.dedup();
    match v.as_slice() {
        [] => "-".into(),
        [one] => (*one).to_string(),
        [first, .., last] => format!("{first}-{last}"),
    }
}

/// The four-letter mark of a finding's severity, in the human reports of `query` and
/// `verify`.
pub(super) fn mark(s: Severity) -> &'static str {
    match s {
        Severity::Info => "ok  ",
        Severity::Warning => "warn",
        Severity::Conditional => "cond",
        Severity::Incompatible => "FAIL",
    }
}

/// The note of a build in the table: what decided it, briefly.
fn note(s: &Stack) -> String {
    let worst = s
        .findings
        .iter()
        .filter(|f| f.severity >= Severity::Conditional)
        .map(|f| f.code.as_str())
        .collect::<Vec<_>>();
    if !worst.is_empty() {
        let mut w = worst;
        w.dedup();
        return w.join(", ");
    }
    match &s.needs.driver_native {
        Some(d) if s.findings.iter().any(|f| f.code == Code::NeedsDriver) => format!("needs driver >= {d}"),
        _ => "native".into(),
    }
}

fn write_findings(out: &mut dyn Write, styles: Styles, s: &Stack, min: Severity) -> io::Result<()> {
    for f in s.findings.iter().filter(|f| f.severity >= min) {
        let unverified = if f.unverified { " [unverified data]" } else { "" };
        write!(out, "    ")?;
        styles.paint(out, mark(f.severity))?;
        writeln!(out, " {}: {}{unverified}", f.code, f.message)?;
    }
    Ok(())
}

/// A line per requirement on a package that compiles CUDA code: whether it made the
/// project one that builds extensions, and why.
fn write_extensions_from(out: &mut dyn Write, q: &Query) -> io::Result<()> {
    for e in &q.extensions_from {
        writeln!(out, "extensions: {}", e.why)?;
    }
    Ok(())
}

/// The JSON document of an answer.
pub(crate) fn answer_json(q: &Query, a: &Answer, opts: &QueryOpts) -> QueryDoc {
    QueryDoc {
        schema_version: SCHEMA_VERSION,
        query: describe(q),
        readings: q.readings.clone(),
        arch: q.host_arch().map(|(name, from)| super::doc::ArchDoc {
            name,
            from: from.into_owned(),
        }),
        verdict: a.verdict,
        db_date: a.db_date,
        findings: a.findings.clone(),
        newer_conditional: a.newer_conditional().cloned(),
        extensions_from: q.extensions_from.clone(),
        stacks: a
            .stacks
            .iter()
            .filter(|s| opts.all || s.status != Status::Incompatible)
            .cloned()
            .collect(),
        suggestions: a.suggestions.clone(),
    }
}

/// Prints an answer.
pub fn query(out: &mut dyn Write, q: &Query, a: &Answer, opts: &QueryOpts) -> io::Result<()> {
    if opts.json {
        return write_json(out, &answer_json(q, a, opts));
    }
    let shown: Vec<&Stack> = a
        .stacks
        .iter()
        .filter(|s| opts.all || s.status != Status::Incompatible)
        .collect();
    writeln!(out, "query: {}", describe(q))?;
    write_readings(out, q)?;
    write_extensions_from(out, q)?;
    write_arch(out, q, a)?;
    let builds = by_build(shown.iter().copied());
    write_verdict(out, a, opts)?;
    write_table(out, &builds, opts)?;
    write_best(out, a, opts)?;
    if !a.suggestions.is_empty() {
        writeln!(out)?;
        for s in &a.suggestions {
            writeln!(out, "hint: {} -> {}", s.change, s.gives)?;
        }
    }
    Ok(())
}

/// The verdict, with how many builds run, and what the database cannot know.
fn write_verdict(out: &mut dyn Write, a: &Answer, opts: &QueryOpts) -> io::Result<()> {
    let (word, detail) = verdict_summary(a);
    write!(out, "verdict: ")?;
    opts.styles.paint(out, word)?;
    writeln!(out, "{detail}")?;
    // What the database cannot know, when there are builds to show as well (with none,
    // these are listed with why nothing matches).
    if !a.stacks.is_empty() && !a.findings.is_empty() {
        writeln!(out)?;
        for f in &a.findings {
            write!(out, "  ")?;
            opts.styles.paint(out, mark(f.severity))?;
            writeln!(out, " {}: {}", f.code, f.message)?;
        }
    }
    Ok(())
}

/// The verdict's word and what follows it on the `verdict:` line (` (42 builds run)`).
pub(super) fn verdict_summary(a: &Answer) -> (&'static str, String) {
    let runnable = by_build(a.stacks.iter().filter(|s| s.status != Status::Incompatible)).len();
    let word = match a.verdict {
        Status::Compatible => "compatible",
        Status::Conditional => "conditional",
        Status::Incompatible => "incompatible",
    };
    let unknown = a.findings.iter().any(|f| f.code == Code::TorchReleaseUnknown);
    let detail = if runnable > 0 {
        format!(" ({runnable} build{} run)", if runnable == 1 { "" } else { "s" })
    } else if unknown && a.stacks.is_empty() {
        " (no release compat-db knows matches: the torch asked for is not judged)".to_string()
    } else {
        String::new()
    };
    (word, detail)
}

/// The `best:` line's text, when a stack runs.
pub(crate) fn best_summary(a: &Answer) -> Option<(String, String)> {
    let best = a.stacks.first().filter(|s| s.status != Status::Incompatible)?;
    Some((
        format!(
            "torch {}+{} on Python {} ({}{}; wheels for Python {})",
            best.torch,
            best.variant,
            best.python,
            best.status,
            if best.status == Status::Compatible {
                ", native"
            } else {
                ""
            },
            a.python_range(best)
        ),
        best.install.to_string(),
    ))
}

/// The builds shown, one a line, up to `--limit`.
fn write_table(out: &mut dyn Write, builds: &[Vec<&Stack>], opts: &QueryOpts) -> io::Result<()> {
    if !builds.is_empty() {
        writeln!(out)?;
        let limit = if opts.limit == 0 { builds.len() } else { opts.limit };
        writeln!(
            out,
            "  {:<12} {:<20} {:<10} {:<6} {:<10} note",
            "status", "torch", "python", "cuda", "cudnn"
        )?;
        for b in builds.iter().take(limit) {
            let s = b[0];
            write!(out, "  ")?;
            // The status padded to its column, the padding outside the colour.
            opts.styles.paint(
                out,
                match s.status {
                    Status::Compatible => "compatible  ",
                    Status::Conditional => "conditional ",
                    Status::Incompatible => "incompatible",
                },
            )?;
            writeln!(
                out,
                " {:<20} {:<10} {:<6} {:<10} {}",
                format!("{}+{}", s.torch, s.variant),
                pythons(b),
                s.cuda.as_ref().map_or("-", |c| c.as_str()),
                s.cudnn.as_ref().map_or("-", |c| c.as_str()),
                note(s)
            )?;
        }
        if builds.len() > limit {
            writeln!(
                out,
                "  ... {} more builds (--limit 0 shows all)",
                builds.len() - limit
            )?;
        }
    }
    Ok(())
}

/// The best stack (and a newer conditional one), or why nothing matches or runs.
fn write_best(out: &mut dyn Write, a: &Answer, opts: &QueryOpts) -> io::Result<()> {
    if let Some(best) = a.stacks.first().filter(|s| s.status != Status::Incompatible) {
        writeln!(out)?;
        let (line, _) = best_summary(a).unwrap_or_default();
        writeln!(out, "best: {line}")?;
        write_findings(out, opts.styles, best, Severity::Info)?;
        writeln!(out, "  install: {}", best.install)?;
        if let Some(n) = a.newer_conditional() {
            let rules: Vec<&str> = n
                .findings
                .iter()
                .filter(|f| f.severity == Severity::Conditional)
                .map(|f| f.code.as_str())
                .collect();
            writeln!(out)?;
            writeln!(
                out,
                "newer: torch {}+{} on Python {} (conditional: {}): a newer torch, which runs only under that rule; the best above runs natively on an older CUDA line",
                n.torch,
                n.variant,
                n.python,
                rules.join(", ")
            )?;
            write_findings(out, opts.styles, n, Severity::Conditional)?;
            writeln!(out, "  install: {}", n.install)?;
        }
    } else if a.stacks.is_empty() {
        writeln!(out)?;
        writeln!(out, "No torch build matches what was asked:")?;
        for f in &a.findings {
            write!(out, "    ")?;
            opts.styles.paint(out, mark(f.severity))?;
            writeln!(out, " {}: {}", f.code, f.message)?;
        }
    } else {
        writeln!(out)?;
        writeln!(out, "No stack runs. The closest builds, and why not:")?;
        for b in by_build(a.stacks.iter()).iter().take(3) {
            let s = b[0];
            writeln!(out, "  torch {}+{} (Python {})", s.torch, s.variant, pythons(b))?;
            write_findings(out, opts.styles, s, Severity::Conditional)?;
        }
    }
    Ok(())
}
