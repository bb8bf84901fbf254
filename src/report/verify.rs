//! `gpuenv verify`: what the image holds, its claims, and the target.

use std::io::{self, Write};

use super::doc::{CatalogVerdict, ShowJudgedDoc, VerifyDoc};
use super::query::mark;
use super::{SCHEMA_VERSION, Styles, write_json};
use crate::image::detect::ImageFacts;
use crate::model::PartialDate;
use crate::resolve::Severity;
use crate::verify::Verification;
use crate::verify::propose::{Outcome, Proposal};

/// Prints a verification; `db_date` is the date of the database it was judged with.
pub fn verify(
    out: &mut dyn Write,
    v: &Verification,
    db_date: Option<PartialDate>,
    json_out: bool,
    styles: Styles,
) -> io::Result<()> {
    verify_proposing(out, v, None, db_date, json_out, styles)
}

/// [`verify`], with the record proposed from the same read (`verify --propose`): after the
/// verdict, each fact as confirmed, corrected, added, partial or unread, and where the
/// proposal was written.
pub fn verify_proposing(
    out: &mut dyn Write,
    v: &Verification,
    proposal: Option<&Proposal>,
    db_date: Option<PartialDate>,
    json_out: bool,
    styles: Styles,
) -> io::Result<()> {
    if json_out {
        return write_json(
            out,
            &VerifyDoc {
                verification: v.clone(),
                schema_version: SCHEMA_VERSION,
                db_date,
                proposal: proposal.cloned(),
            },
        );
    }
    origin_lines(out, v)?;
    software_lines(out, &v.facts)?;
    library_lines(out, &v.facts)?;
    verdict(out, v, styles)?;
    match proposal {
        Some(p) => proposal_lines(out, p),
        None => Ok(()),
    }
}

/// The proposal: a line per fact, then what was written.
fn proposal_lines(out: &mut dyn Write, p: &Proposal) -> io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "proposal for compat-db/{}{}:",
        p.file,
        if p.new { " (a new record)" } else { "" }
    )?;
    for c in &p.facts {
        let values = match c.outcome {
            Outcome::Corrected => format!(
                "compat-db {}, image {}",
                c.record.as_deref().unwrap_or("-"),
                c.read.as_deref().unwrap_or("-")
            ),
            Outcome::Unread => c.record.clone().unwrap_or_default(),
            _ => c.read.clone().unwrap_or_default(),
        };
        let from = if c.read_from.is_empty() {
            String::new()
        } else {
            format!("  [{}]", c.read_from.join(", "))
        };
        let held = if !c.applied && matches!(c.outcome, Outcome::Corrected | Outcome::Added) {
            " (not applied)"
        } else {
            ""
        };
        let left = if c.unverified { ", stays unverified" } else { "" };
        writeln!(
            out,
            "  {:<9}  {}: {values}{held}{left}{from}",
            c.outcome.word(),
            c.key
        )?;
        if let Some(why) = &c.why {
            writeln!(out, "             {why}")?;
        }
    }
    writeln!(out, "  source:    {}", p.source.url)?;
    match &p.written {
        Some(path) => writeln!(
            out,
            "written:    {path} (review it, then copy it to compat-db/{})",
            p.file
        ),
        None => writeln!(
            out,
            "written:    nothing: compat-db already says what the image shows"
        ),
    }
}

/// The image read, and how it was read.
fn origin_lines(out: &mut dyn Write, v: &Verification) -> io::Result<()> {
    writeln!(
        out,
        "image:      {} ({}{})",
        v.origin.reference,
        v.origin.transport,
        v.origin
            .digest
            .as_deref()
            .map(|d| format!(", {d}"))
            .unwrap_or_default()
    )?;
    match (&v.origin.paths_asked, &v.origin.layers_because) {
        (Some(n), _) => writeln!(
            out,
            "read:       {n} paths through a container never started (--full reads every layer)"
        )?,
        (None, Some(why)) => writeln!(out, "read:       every layer, because {why}")?,
        (None, None) => {}
    }
    Ok(())
}

/// The OS, Pythons, torch and CUDA toolkits found.
fn software_lines(out: &mut dyn Write, f: &ImageFacts) -> io::Result<()> {
    if let Some(os) = &f.os {
        writeln!(
            out,
            "OS:         {}  [{}]",
            if os.pretty_name.is_empty() {
                &os.id
            } else {
                &os.pretty_name
            },
            os.source
        )?;
    }
    for p in &f.pythons {
        writeln!(
            out,
            "Python:     {} at {}  [{}]",
            p.exact.as_ref().map_or(p.version.as_str(), |e| e.value.as_str()),
            p.prefix,
            p.source
        )?;
    }
    if f.torch.is_empty() {
        writeln!(out, "torch:      none")?;
    }
    for t in &f.torch {
        writeln!(
            out,
            "torch:      {} (CUDA {}) in {}{}{}",
            t.version_str().unwrap_or("?"),
            t.cuda
                .as_ref()
                .map_or(if t.cpu_only { "none: CPU build" } else { "?" }, |c| c
                    .value
                    .as_str()),
            t.site_packages,
            t.torchvision
                .as_ref()
                .map(|x| format!(", torchvision {}", x.value))
                .unwrap_or_default(),
            t.torchaudio
                .as_ref()
                .map(|x| format!(", torchaudio {}", x.value))
                .unwrap_or_default()
        )?;
    }
    for c in &f.cuda_toolkits {
        writeln!(
            out,
            "CUDA:       {} at {}{}",
            c.version
                .as_ref()
                .map_or("?".to_string(), |v| v.value.to_string()),
            c.root,
            if c.nvcc.is_some() { " (with nvcc)" } else { "" }
        )?;
    }
    Ok(())
}

/// cuDNN, NCCL, cuda-compat, NVIDIA_REQUIRE_* and the user the image runs as.
fn library_lines(out: &mut dyn Write, f: &ImageFacts) -> io::Result<()> {
    let versions = |xs: Vec<String>| {
        if xs.is_empty() {
            "none".to_string()
        } else {
            xs.join(", ")
        }
    };
    writeln!(
        out,
        "cuDNN:      {}",
        versions(
            f.cudnn
                .headers
                .iter()
                .map(|h| format!("{} ({})", h.value, h.source))
                .chain(f.cudnn.libraries.iter().map(|l| format!(
                    "{} ({})",
                    l.version.as_deref().unwrap_or("?"),
                    l.path
                )))
                .chain(f.cudnn.pip.iter().map(|p| format!("{} ({})", p.value, p.source)))
                .collect()
        )
    )?;
    writeln!(
        out,
        "NCCL:       {}",
        versions(
            f.nccl
                .libraries
                .iter()
                .map(|l| format!("{} ({})", l.version.as_deref().unwrap_or("?"), l.path))
                .chain(f.nccl.pip.iter().map(|p| format!("{} ({})", p.value, p.source)))
                .collect()
        )
    )?;
    for c in &f.cuda_compat {
        writeln!(
            out,
            "compat:     {} (driver {})",
            c.path,
            c.driver.as_ref().map_or("?".to_string(), |d| d.to_string())
        )?;
    }
    for r in &f.env.require {
        writeln!(
            out,
            "require:    {}={}",
            r.source.trim_start_matches("env "),
            r.value
        )?;
    }
    if let Some(u) = &f.user {
        writeln!(out, "user:       {}", if u.is_empty() { "root" } else { u })?;
    }
    Ok(())
}

/// The target, the claims, the findings and the verdict: what `verify` and an image judged
/// from the catalog share.
pub(super) fn verdict(out: &mut dyn Write, v: &Verification, styles: Styles) -> io::Result<()> {
    if let Some(t) = &v.target {
        let mut have: Vec<String> = Vec::new();
        if let Some(d) = &t.driver {
            have.push(match &t.driver_cuda {
                Some(c) => format!("driver {d} (CUDA {c})"),
                None => format!("driver {d}"),
            });
        }
        have.extend(t.gpus().iter().cloned());
        have.extend(t.unknown_gpus.iter().map(|g| format!("{g} (not in compat-db)")));
        have.extend(t.no_driver.iter().cloned());
        have.extend(t.no_gpu.iter().cloned());
        writeln!(out, "target:     {}: {}", t.source, have.join(", "))?;
        if !t.overrides.is_empty() {
            writeln!(out, "overrides:  {}", t.overrides.join(", "))?;
        }
        for r in &t.readings {
            writeln!(out, "read:       {} {}: {}", r.input, r.given, r.note)?;
        }
    }
    // Each claim set under its source.
    for source in &v.claims_source {
        let rows: Vec<_> = v.claims.iter().filter(|c| &c.source == source).collect();
        if rows.is_empty() {
            continue;
        }
        writeln!(out)?;
        writeln!(out, "claims from {source}:")?;
        for c in rows {
            let found: Vec<String> = c.found.iter().map(|x| x.value.clone()).collect();
            let m = match c.matches {
                Some(true) => "pass",
                Some(false) | None => "FAIL",
            };
            write!(out, "  ")?;
            styles.paint(out, m)?;
            writeln!(
                out,
                "  {}: claimed {}, found {}",
                c.component,
                c.claimed,
                if found.is_empty() {
                    "no trace".into()
                } else {
                    found.join(", ")
                }
            )?;
        }
    }
    if !v.findings.is_empty() {
        writeln!(out)?;
        writeln!(out, "findings:")?;
        for x in &v.findings {
            write!(out, "  ")?;
            styles.paint(out, mark(x.severity))?;
            let unverified = if x.unverified { " [unverified data]" } else { "" };
            writeln!(out, " {}: {}{unverified}", x.code, x.message)?;
        }
    }
    for s in &v.torch_on_target {
        writeln!(
            out,
            "  torch {}+{} on the target: {}",
            s.torch, s.variant, s.status
        )?;
        for x in s.findings.iter().filter(|x| x.severity >= Severity::Conditional) {
            write!(out, "    ")?;
            styles.paint(out, mark(x.severity))?;
            writeln!(out, " {}: {}", x.code, x.message)?;
        }
    }
    if v.failed {
        write!(out, "verdict: ")?;
        styles.paint(out, "FAIL")?;
        return writeln!(out);
    }
    let covered = match v.covers.as_slice() {
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
        [] => String::new(),
    };
    write!(out, "verdict: ")?;
    styles.paint(out, "pass")?;
    if v.covers.contains(&"catalog") {
        writeln!(
            out,
            " on the target, from the catalog's facts: `gpuenv verify` reads what the image really holds"
        )
    } else if v.covers.contains(&"claims") {
        writeln!(out, " ({covered})")
    } else {
        writeln!(out, " of {covered} only: no claim was checked")
    }
}

/// An image record judged on a target from the catalog: the record, then the verdict.
pub fn show_judged(
    out: &mut dyn Write,
    found: crate::db::Found<'_>,
    v: &Verification,
    db_date: Option<PartialDate>,
    json_out: bool,
    styles: Styles,
) -> io::Result<()> {
    if json_out {
        // The facts are the record's, already above: the verdict leaves them out.
        return write_json(
            out,
            &ShowJudgedDoc {
                show: super::show_json(found, crate::db::today()),
                db_date,
                verdict: CatalogVerdict::from(v.clone()),
            },
        );
    }
    super::show(out, found, None, crate::db::today(), false)?;
    writeln!(out)?;
    verdict(out, v, styles)
}
