//! The only module that prints: human text and JSON documents for every command.
//!
//! Owns: layout of reports, the JSON `schema_version`, turning records into lines, the
//! colours of the marks ([`Styles`]) and the progress shown while long work runs
//! ([`progress`]). Must not: compute anything a test would want to check without reading
//! text (that belongs to the module that produced the result). Data goes to the writer it
//! is given (stdout); progress lines ([`ProgressLines`]) go to the writer given for them
//! (the caller passes stderr). The one thing here that reaches a stream by itself is the
//! progress display of [`progress`], which draws on stderr, and only when stderr is a
//! terminal.
//!
//! Colour: the marks (`pass`, `FAIL`, `warn`, `cond`, `ok`, `OVER`, `skip`) and verdicts are
//! styled when [`Styles`] says so, which the binary decides per stream from `--color`,
//! `NO_COLOR`, `CLICOLOR_FORCE` and whether the stream is a terminal (as `anstream` does).
//! Off, not one byte differs from an uncoloured report: no style is written at all, rather
//! than written and stripped. On, a style's escapes are gpuenv's own constants written as
//! bytes ([`Styles::paint`]), around gpuenv's own words: outside text still goes through the
//! formatted path and is made safe, so it can neither inject escapes nor borrow a colour.
//!
//! Text from outside (a daemon, a registry, upstream, an archive's names, a file's content,
//! a probe's output, a project file) reaches a terminal only made safe by
//! [`terminal_safe`]: escape sequences removed, line breaks and other control characters
//! shown as visible escapes (`\n`, `\r`, `\u{1b}`), so that none can move the cursor,
//! retitle the window, hide a link or forge a line. Text reports get this at the edge:
//! they are written through [`SafeText`], where each `writeln!` is one line; progress
//! ([`ProgressLines`]) and errors ([`error`]) make each line safe themselves. JSON needs no
//! more: serde escapes every control character.

pub mod acceptance;
pub mod bench;
mod containers;
pub mod doc;
pub mod fleet;
pub mod fleet_page;
mod graph;
mod host;
mod measured;
mod plan;
pub mod progress;
mod query;
mod verify;

use std::io::{self, Write};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::db::{Db, Found, Kind, Problem};
use crate::model::PartialDate;
use crate::text::terminal_safe;
use crate::upstream::Summary;

pub use bench::{bench, bench_listening, bench_refused};
pub use containers::{
    BUILD_LINE, ProgressLines, PullChoice, built, dockerfile_text, dockerfile_written, human_size, pull_plan,
    pulled,
};
pub use fleet::{fleet, k8s_manifest};
pub use graph::graph_dot;
pub use host::{CheckInput, check, doctor};
pub use plan::plan;
pub use query::{QueryOpts, query};
// For `fleet`, which keeps each node's stack in the words `check` prints.
pub(crate) use query::{best_summary, describe as describe_query};
pub use verify::{show_judged, verify, verify_proposing};

/// Version of every JSON document gpuenv prints. Bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// The writer every report goes through. Formatted text (`write!`, `writeln!`) is one line
/// per call: its content is made [`terminal_safe`], so a line break or an escape sequence
/// inside a value shows as a visible escape, and only the line end `writeln!` adds is kept.
/// Bytes written as they are (`write_all`) pass unchanged: documents in a format of their
/// own, whose writers escape what they hold (JSON), or text gpuenv generated whole (a
/// Dockerfile, DOT, a completion script, a man page, the escapes of its own styles:
/// [`Styles::paint`]).
#[derive(Debug)]
pub struct SafeText<W> {
    inner: W,
}

impl<W: Write> SafeText<W> {
    /// Wraps the writer reports go to.
    pub fn new(inner: W) -> SafeText<W> {
        SafeText { inner }
    }
}

impl<W: Write> Write for SafeText<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }

    fn write_fmt(&mut self, args: std::fmt::Arguments<'_>) -> io::Result<()> {
        let text = match args.as_str() {
            Some(s) => std::borrow::Cow::Borrowed(s),
            None => std::borrow::Cow::Owned(args.to_string()),
        };
        let (line, end) = match text.strip_suffix('\n') {
            Some(line) => (line, "\n"),
            None => (&*text, ""),
        };
        self.inner.write_all(terminal_safe(line).as_bytes())?;
        self.inner.write_all(end.as_bytes())
    }
}

/// Whether gpuenv colours what it writes to one stream. Decided once per stream by the
/// binary; reports only ask it to [`paint`](Styles::paint) their own words.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Styles {
    on: bool,
}

impl Styles {
    /// No colour: what every pipe, file and test gets unless asked otherwise.
    pub const PLAIN: Styles = Styles { on: false };

    /// Colour when `on`.
    pub fn new(on: bool) -> Styles {
        Styles { on }
    }

    /// Whether styles are written.
    pub fn on(self) -> bool {
        self.on
    }

    /// The style of one of gpuenv's marks or verdict words; `None` for any other word.
    pub fn style_of(word: &str) -> Option<anstyle::Style> {
        use anstyle::{AnsiColor, Style};
        let fg = |c: AnsiColor| Style::new().fg_color(Some(c.into()));
        Some(match word.trim_end() {
            "pass" | "ok" | "compatible" => fg(AnsiColor::Green),
            "FAIL" | "incompatible" => fg(AnsiColor::Red).bold(),
            "warn" => fg(AnsiColor::Yellow),
            "cond" | "conditional" => fg(AnsiColor::Cyan),
            "OVER" => fg(AnsiColor::Magenta).bold(),
            "skip" => Style::new().dimmed(),
            "error:" => fg(AnsiColor::Red).bold(),
            _ => return None,
        })
    }

    /// Writes `word`, one of gpuenv's own (hence `'static`: never text from outside), in
    /// its style when styles are on, else as it is. The escapes are written as bytes,
    /// which [`SafeText`] passes unchanged; the word goes through the formatted path like
    /// any other text. Padding (`ok  `) stays outside the style.
    pub fn paint(self, out: &mut dyn Write, word: &'static str) -> io::Result<()> {
        let bare = word.trim_end();
        match Styles::style_of(bare).filter(|_| self.on) {
            Some(style) => {
                out.write_all(style.render().to_string().as_bytes())?;
                write!(out, "{bare}")?;
                out.write_all(style.render_reset().to_string().as_bytes())?;
                write!(out, "{}", &word[bare.len()..])
            }
            None => write!(out, "{word}"),
        }
    }
}

/// An error that ends a command, on stderr: `error: ` and its first line, then the others
/// (a failed build's step output), each line made [`terminal_safe`] (a line break inside a
/// line shows as `\n`). `error:` is coloured when `styles` (stderr's) say so.
pub fn error(w: &mut dyn Write, styles: Styles, lines: &[String]) -> io::Result<()> {
    let mut lines = lines.iter();
    styles.paint(w, "error:")?;
    writeln!(w, " {}", terminal_safe(lines.next().map_or("", String::as_str)))?;
    for line in lines {
        writeln!(w, "{}", terminal_safe(line))?;
    }
    w.flush()
}

/// Text gpuenv generated whole from its own definitions (a completion script, a manual
/// page in roff), as it is.
pub fn generated(out: &mut dyn Write, text: &[u8]) -> io::Result<()> {
    out.write_all(text)
}

/// The files a command wrote, a line each (`wrote PATH`); the paths are shown made safe.
pub fn written(out: &mut dyn Write, paths: &[String]) -> io::Result<()> {
    for p in paths {
        writeln!(out, "wrote {p}")?;
    }
    Ok(())
}

/// Writes `value` as pretty JSON with a trailing newline.
pub fn write_json(out: &mut dyn Write, value: &impl Serialize) -> io::Result<()> {
    // `io::Error::from` keeps the kind of a write error (a closed pipe stays `BrokenPipe`).
    serde_json::to_writer_pretty(&mut *out, value).map_err(io::Error::from)?;
    writeln!(out)
}

/// `{"schema_version": 1, "kind": ..., "age_days": ..., "stale": ..., ...record}`, the
/// record's age counted to `today` (the clock's date, given so that tests can fix it).
pub fn show_json(found: Found<'_>, today: Option<PartialDate>) -> doc::ShowDoc<Found<'_>> {
    let age_days = crate::db::age_days(found.checked(), today);
    doc::ShowDoc {
        schema_version: SCHEMA_VERSION,
        kind: found.kind(),
        age_days,
        stale: age_days.is_some_and(|d| d > crate::db::STALE_AFTER_DAYS),
        record: found,
    }
}

/// The warning `show` prints above a record whose `checked` is more than 90 days before
/// `today`: its facts may have moved on since (a new driver release, a corrected table).
pub fn stale_record_warning(found: Found<'_>, today: Option<PartialDate>) -> Option<String> {
    let checked = found.checked()?;
    let days = crate::db::age_days(Some(checked), today)?;
    (days > crate::db::STALE_AFTER_DAYS).then(|| {
        format!(
            "warn: checked {checked}, {days} days ago (more than {}): its facts may have changed since; compare them with the sources below",
            crate::db::STALE_AFTER_DAYS
        )
    })
}

/// The title line of a record.
fn title(found: Found<'_>) -> String {
    match found {
        Found::Gpu(g) => g.name.clone(),
        Found::Cuda(c) => format!("{} ({})", c.label, c.version),
        Found::Cudnn(c) => format!("cuDNN {}", c.version),
        Found::Torch(t) => format!("torch {}", t.version),
        Found::Driver(d) => format!("Driver branch R{}", d.branch),
        Found::Python(p) => format!("Python {}", p.version),
        Found::Package(e) => format!("{} (compiles CUDA code: {})", e.name, e.compiles.as_str()),
        Found::Framework(f) => format!("{} (pins torch; {} releases read)", f.name, f.releases.len()),
        Found::Model(m) => m.name.clone(),
        Found::Xid(x) => format!("Xid {}: {}", x.code, x.description),
        Found::Efficiency(e) => format!("Expected efficiency of {} against {}", e.metric, e.basis.key()),
        Found::ForeignGpu(f) => f.refusal(),
        Found::Image(i) => match &i.tag {
            Some(tag) => format!("{}:{tag}", i.repository),
            None => format!(
                "{}:{}-* (tag family)",
                i.repository,
                i.cuda.as_ref().map_or("", |c| c.as_str())
            ),
        },
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        Value::Array(items) => items.iter().map(scalar).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

fn is_table_list(v: &Value) -> bool {
    matches!(v, Value::Array(items) if !items.is_empty() && items.iter().all(Value::is_object))
}

/// Writes the facts of one table as aligned `key  value` lines; facts named in its
/// `unverified` list are marked. Sources are gathered by the caller.
fn write_fields(out: &mut dyn Write, fields: &Map<String, Value>, indent: &str) -> io::Result<()> {
    let unverified: Vec<&str> = fields
        .get("unverified")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let shown: Vec<(&String, &Value)> = fields
        .iter()
        .filter(|(k, v)| !["id", "sources", "unverified", "notes"].contains(&k.as_str()) && !is_table_list(v))
        .collect();
    let width = shown.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in shown {
        let mark = if unverified.contains(&k.as_str()) {
            "  (unverified)"
        } else {
            ""
        };
        writeln!(out, "{indent}{k:<width$}  {}{mark}", scalar(v))?;
    }
    if let Some(notes) = fields.get("notes").and_then(Value::as_str) {
        writeln!(out, "{indent}{:<width$}  {notes}", "notes")?;
    }
    for (k, v) in fields
        .iter()
        .filter(|(k, v)| k.as_str() != "sources" && is_table_list(v))
    {
        for item in v.as_array().into_iter().flatten() {
            let Some(t) = item.as_object() else { continue };
            let label = t
                .get("tag")
                .or_else(|| t.get("name"))
                .map(scalar)
                .unwrap_or_default();
            writeln!(out, "{indent}{k} {label}:")?;
            write_fields(out, t, &format!("{indent}  "))?;
        }
    }
    Ok(())
}

fn collect_sources(v: &Value, acc: &mut Vec<(String, Option<String>)>) {
    match v {
        Value::Object(m) => {
            // The record's own sources first, then those of its nested tables.
            for s in m.get("sources").and_then(Value::as_array).into_iter().flatten() {
                let url = s.get("url").map(scalar).unwrap_or_default();
                let note = s.get("note").and_then(Value::as_str).map(str::to_string);
                if !acc.iter().any(|(u, n)| *u == url && *n == note) {
                    acc.push((url, note));
                }
            }
            for (k, val) in m {
                if k != "sources" {
                    collect_sources(val, acc);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| collect_sources(i, acc)),
        _ => {}
    }
}

/// `gpuenv show`: one record with its sources.
/// `note`: how the name was read when it names more than one record (a GPU name such as
/// `A100`), printed under the title.
pub fn show(
    out: &mut dyn Write,
    found: Found<'_>,
    note: Option<&str>,
    today: Option<PartialDate>,
    json_out: bool,
) -> io::Result<()> {
    if json_out {
        return write_json(out, &show_json(found, today));
    }
    let value = serde_json::to_value(found).map_err(io::Error::other)?;
    let Value::Object(fields) = &value else {
        return Err(io::Error::other("a record serializes to a table"));
    };
    writeln!(
        out,
        "{}  [{} {}]",
        title(found),
        found.kind(),
        fields.get("id").map(scalar).unwrap_or_default()
    )?;
    if let Some(n) = note {
        writeln!(out, "  read: {n}")?;
    }
    if let Some(w) = stale_record_warning(found, today) {
        writeln!(out, "  {w}")?;
    }
    write_fields(out, fields, "  ")?;
    let mut sources = Vec::new();
    collect_sources(&value, &mut sources);
    writeln!(out, "sources:")?;
    for (url, note) in sources {
        match note {
            Some(n) => writeln!(out, "  - {url} ({n})")?,
            None => writeln!(out, "  - {url}")?,
        }
    }
    Ok(())
}

/// `gpuenv db lint`: every problem, or a line saying the database is clean.
pub fn lint(out: &mut dyn Write, problems: &[Problem], files: usize, json_out: bool) -> io::Result<()> {
    if json_out {
        return write_json(
            out,
            &doc::LintDoc {
                schema_version: SCHEMA_VERSION,
                files,
                clean: problems.is_empty(),
                problems: problems.to_vec(),
            },
        );
    }
    for p in problems {
        writeln!(out, "{p}")?;
    }
    if problems.is_empty() {
        writeln!(out, "ok: {files} record files, no problems")
    } else {
        writeln!(
            out,
            "{} problem{} in {files} record files",
            problems.len(),
            if problems.len() == 1 { "" } else { "s" }
        )
    }
}

/// `gpuenv db list`: the records of a kind, a line each.
pub fn list(out: &mut dyn Write, kind: Kind, names: &[(String, String)], json_out: bool) -> io::Result<()> {
    if json_out {
        let records = names
            .iter()
            .map(|(id, name)| doc::Listed {
                id: id.clone(),
                name: name.clone(),
            })
            .collect();
        return write_json(
            out,
            &doc::ListDoc {
                schema_version: SCHEMA_VERSION,
                kind,
                records,
            },
        );
    }
    let width = names.iter().map(|(id, _)| id.len()).max().unwrap_or(0);
    for (id, name) in names {
        writeln!(out, "{id:<width$}  {name}")?;
    }
    Ok(())
}

fn unverified_count(v: &Value) -> usize {
    match v {
        Value::Object(m) => m
            .iter()
            .map(|(k, val)| {
                if k == "unverified" {
                    val.as_array().map_or(0, Vec::len)
                } else {
                    unverified_count(val)
                }
            })
            .sum(),
        Value::Array(items) => items.iter().map(unverified_count).sum(),
        _ => 0,
    }
}

fn kind_stats(db: &Db) -> Vec<doc::KindStats> {
    fn count<T: Serialize>(records: &[T]) -> usize {
        records
            .iter()
            .map(|r| serde_json::to_value(r).map_or(0, |v| unverified_count(&v)))
            .sum()
    }
    let newest_image = db
        .images
        .iter()
        .filter(|i| i.family == crate::db::ImageFamily::Ngc)
        .filter_map(|i| i.tag.clone())
        .max()
        .map(|t| format!("nvcr.io/nvidia/pytorch:{t}"));
    Kind::ALL
        .iter()
        .map(|&kind| {
            let (unverified_facts, newest) = match kind {
                Kind::Gpu => (count(&db.gpus), None),
                Kind::Driver => (
                    count(&db.drivers),
                    db.drivers.last().map(|d| format!("R{}", d.branch)),
                ),
                Kind::Cuda => (count(&db.cuda), db.cuda.last().map(|c| c.version.to_string())),
                Kind::Cudnn => (count(&db.cudnn), db.cudnn.last().map(|c| c.version.to_string())),
                Kind::Python => (count(&db.python), db.python.last().map(|p| p.version.to_string())),
                Kind::Torch => (count(&db.torch), db.torch.last().map(|t| t.version.to_string())),
                Kind::Image => (count(&db.images), newest_image.clone()),
                Kind::Package => (count(&db.packages), None),
                Kind::Framework => (count(&db.frameworks), None),
                Kind::Model => (count(&db.models), None),
                Kind::Xid => (count(&db.xids), None),
                Kind::Efficiency => (count(&db.efficiencies), None),
                Kind::ForeignGpu => (count(&db.foreign_gpus), None),
            };
            doc::KindStats {
                kind,
                records: db.count(kind),
                unverified_facts,
                newest,
            }
        })
        .collect()
}

/// `gpuenv db stats`: coverage of the database.
pub fn stats(out: &mut dyn Write, db: &Db, json_out: bool) -> io::Result<()> {
    let kinds = kind_stats(db);
    let date = db.date();
    if json_out {
        return write_json(
            out,
            &doc::StatsDoc {
                schema_version: SCHEMA_VERSION,
                db_date: date,
                oldest_checked: db.oldest_checked(),
                stale_records: db.stale_records(),
                stale_after_days: crate::db::STALE_AFTER_DAYS,
                kinds,
            },
        );
    }
    // As wide as the longest kind, `foreign-gpu`.
    writeln!(
        out,
        "{:<11} {:>7} {:>11}  newest",
        "kind", "records", "unverified"
    )?;
    for k in &kinds {
        writeln!(
            out,
            "{:<11} {:>7} {:>11}  {}",
            k.kind.dir(),
            k.records,
            k.unverified_facts,
            k.newest.as_deref().unwrap_or("-")
        )?;
    }
    let records: usize = kinds.iter().map(|k| k.records).sum();
    let unverified: usize = kinds.iter().map(|k| k.unverified_facts).sum();
    writeln!(out, "{:<11} {records:>7} {unverified:>11}", "total")?;
    writeln!(
        out,
        "date: {} (the newest `checked` of its records)",
        date.map_or_else(|| "unknown".to_string(), |d| d.to_string())
    )?;
    let stale = db.stale_records();
    writeln!(
        out,
        "oldest: {} ({stale} record{} checked more than {} days before the newest)",
        db.oldest_checked()
            .map_or_else(|| "unknown".to_string(), |d| d.to_string()),
        if stale == 1 { "" } else { "s" },
        crate::db::STALE_AFTER_DAYS
    )
}

/// `gpuenv db refresh`: what upstream proposes.
pub fn refresh(out: &mut dyn Write, s: &Summary, json_out: bool) -> io::Result<()> {
    if json_out {
        return write_json(
            out,
            &doc::RefreshDoc {
                summary: s.clone(),
                schema_version: SCHEMA_VERSION,
            },
        );
    }
    writeln!(out, "torch releases read from PyPI: {}", s.releases)?;
    writeln!(
        out,
        "CUDA toolkit releases read from PyPI: {} (cuda-toolkit); cuDNN releases: {}",
        s.cuda_releases, s.cudnn_releases
    )?;
    if s.cudnn_older_unrecorded > 0 {
        writeln!(
            out,
            "cuDNN releases older than compat-db's newest without a record: {} (not proposed: older cuDNN is recorded where a build or an image uses it)",
            s.cudnn_older_unrecorded
        )?;
    }
    writeln!(
        out,
        "releases of packages that pin torch read from PyPI: {} (their wheel metadata)",
        s.framework_releases
    )?;
    writeln!(out, "PyTorch wheel index: {}", s.pytorch_index)?;
    writeln!(out, "NGC registry: {}", s.ngc_registry)?;
    if s.ngc_registry == "read" {
        writeln!(
            out,
            "  NGC PyTorch releases listed: {} (YY.MM-py3 tags); other tags ignored: {} (-igpu and other variants)",
            s.ngc_releases, s.ngc_tags_ignored
        )?;
        if s.ngc_older_unrecorded > 0 {
            writeln!(
                out,
                "  NGC releases older than compat-db's oldest without a record: {} (not proposed)",
                s.ngc_older_unrecorded
            )?;
        }
    }
    writeln!(out, "NVIDIA driver index: {}", s.driver_index)?;
    if s.driver_index == "read" {
        writeln!(
            out,
            "  driver releases listed: {} in {} branches{}; other entries ignored: {}",
            s.driver_releases,
            s.driver_branches,
            s.driver_latest
                .as_deref()
                .map(|l| format!(" (latest.txt: {l})"))
                .unwrap_or_default(),
            s.driver_entries_ignored
        )?;
        if s.driver_older_unrecorded > 0 {
            writeln!(
                out,
                "  driver branches older than compat-db's oldest without a record: {} (not proposed)",
                s.driver_older_unrecorded
            )?;
        }
    }
    if !s.without_metadata.is_empty() {
        writeln!(
            out,
            "no wheel metadata served for: {} (compared on wheel tags only)",
            s.without_metadata.join(", ")
        )?;
    }
    let new: Vec<_> = s.proposals.iter().filter(|p| p.new).collect();
    let changed: Vec<_> = s.proposals.iter().filter(|p| !p.new).collect();
    let of_kind = |kind: &str| new.iter().filter(|p| p.kind == kind).count();
    writeln!(
        out,
        "new records proposed: {} (torch {}, CUDA {}, cuDNN {}{}{}{})",
        new.len(),
        of_kind("torch"),
        of_kind("cuda"),
        of_kind("cudnn"),
        match of_kind("framework") {
            0 => String::new(),
            n => format!(", packages that pin torch {n}"),
        },
        match of_kind("image") {
            0 => String::new(),
            n => format!(", NGC releases {n}"),
        },
        match of_kind("driver") {
            0 => String::new(),
            n => format!(", driver branches {n}"),
        }
    )?;
    for p in &new {
        if p.pending.is_empty() {
            writeln!(out, "  + {}", p.file)?;
        } else {
            // Pending facts are what a curator must add before `query` uses the record.
            writeln!(out, "  + {} (pending: {})", p.file, p.pending.join(", "))?;
        }
    }
    writeln!(out, "changed records proposed: {}", changed.len())?;
    for p in changed {
        writeln!(out, "  ~ {}", p.file)?;
        for c in &p.changes {
            writeln!(
                out,
                "      {}: curated {} / upstream {}",
                c.field, c.curated, c.upstream
            )?;
        }
    }
    match &s.out {
        Some(dir) => writeln!(
            out,
            "proposals written to {dir}; review them before moving any into compat-db/"
        ),
        None => writeln!(out, "nothing to propose: compat-db agrees with upstream"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `show`'s freshness against a fixed clock: 90 days is still fresh, 91 is not, and
    /// text and JSON say the same.
    #[test]
    fn a_record_checked_more_than_90_days_back_is_called_stale() {
        let db = crate::db::Db::embedded().unwrap();
        let mut branch = db.drivers.iter().find(|d| d.branch == 535).unwrap().clone();
        branch.checked = Some("2026-01-01".parse().unwrap());
        let found = Found::Driver(&branch);
        let day = |s: &str| Some(s.parse::<PartialDate>().unwrap());
        // 2026-04-01 is 90 days after 2026-01-01.
        assert_eq!(stale_record_warning(found, day("2026-04-01")), None);
        let doc = show_json(found, day("2026-04-01"));
        assert_eq!((doc.age_days, doc.stale), (Some(90), false));
        let w = stale_record_warning(found, day("2026-04-02")).unwrap();
        assert!(
            w.starts_with("warn: checked 2026-01-01, 91 days ago (more than 90)"),
            "{w}"
        );
        let doc = show_json(found, day("2026-04-02"));
        assert_eq!((doc.age_days, doc.stale), (Some(91), true));
        let mut text = Vec::new();
        show(&mut text, found, None, day("2026-04-02"), false).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert_eq!(text.lines().nth(1), Some(format!("  {w}").as_str()), "{text}");
        // No clock, or no `checked`: no age, nothing said.
        assert_eq!(stale_record_warning(found, None), None);
        assert_eq!(show_json(found, None).age_days, None);
        branch.checked = None;
        assert_eq!(
            stale_record_warning(Found::Driver(&branch), day("2030-01-01")),
            None
        );
    }

    #[test]
    fn each_formatted_line_is_made_safe_and_only_its_own_end_is_kept() {
        let mut out = SafeText::new(Vec::new());
        let hostile = "v1\r\nverdict: pass\u{1b}[2J\u{1b}]8;;http://evil\u{7}link\u{1b}]8;;\u{7}";
        writeln!(out, "OS:         {hostile}").unwrap();
        write!(out, "a\nb").unwrap();
        writeln!(out).unwrap();
        writeln!(out, "plain\ttab").unwrap();
        // Documents of their own pass unchanged.
        out.write_all(b"{\"x\": \"\\u001b\"}\n").unwrap();
        let text = String::from_utf8(out.inner).unwrap();
        assert_eq!(
            text,
            "OS:         v1\\r\\nverdict: passlink\na\\nb\nplain\ttab\n{\"x\": \"\\u001b\"}\n"
        );
        assert_eq!(text.lines().filter(|l| l.starts_with("verdict")).count(), 0);
    }

    #[test]
    fn styles_go_around_gpuenvs_own_words_only_when_on() {
        let hostile = "\u{1b}[32mpass\u{1b}[0m\r\nFAKE";
        let line = |styles: Styles| {
            let mut out = SafeText::new(Vec::new());
            write!(out, "  ").unwrap();
            styles.paint(&mut out, "ok  ").unwrap();
            writeln!(out, " code: {hostile}").unwrap();
            styles.paint(&mut out, "FAIL").unwrap();
            styles.paint(&mut out, "plain").unwrap();
            String::from_utf8(out.inner).unwrap()
        };
        assert_eq!(line(Styles::PLAIN), "  ok   code: pass\\r\\nFAKE\nFAILplain");
        assert_eq!(
            line(Styles::new(true)),
            "  \u{1b}[32mok\u{1b}[0m   code: pass\\r\\nFAKE\n\u{1b}[1m\u{1b}[31mFAIL\u{1b}[0mplain"
        );
    }

    #[test]
    fn errors_are_one_safe_line_each() {
        let mut out = Vec::new();
        error(
            &mut out,
            Styles::PLAIN,
            &[
                "the daemon says: no\nerror: FAKE\u{1b}[31m".into(),
                "  | step output\r".into(),
            ],
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "error: the daemon says: no\\nerror: FAKE\n  | step output\\r\n"
        );
    }
}
