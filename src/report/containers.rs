//! `gpuenv dockerfile`, `build` and `pull`: summaries (text or JSON) and the progress
//! lines written while the Engine works.

use std::collections::HashMap;
use std::io::{self, Write};

use super::doc::{BuiltDoc, CatalogPick, PullChoiceDoc, PullDoc, PullResult, PullSource};
use super::{SCHEMA_VERSION, write_json};
use crate::docker::{Built, Progress, Pulled};
use crate::dockerfile::{Dockerfile, Prebuilt};
use crate::resolve::Stack;
use crate::text::terminal_safe;

/// `1.2 GB`, `340.5 MB`, `12 kB` (decimal units, as `docker images` prints them).
pub fn human_size(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.0} kB", b / 1e3)
    } else {
        format!("{bytes} B")
    }
}

fn stack_line(s: &Stack) -> String {
    let mut line = format!("torch {}+{} on Python {}", s.torch, s.variant, s.python);
    if let Some(c) = &s.cuda {
        line.push_str(&format!(", CUDA {c}"));
    }
    if let Some(c) = &s.cudnn {
        line.push_str(&format!(", cuDNN {c}"));
    }
    line.push_str(&format!(" ({})", s.status));
    line
}

/// `gpuenv dockerfile` without `--out`: the text itself.
pub fn dockerfile_text(out: &mut dyn Write, d: &Dockerfile) -> io::Result<()> {
    out.write_all(d.text.as_bytes())
}

/// `gpuenv dockerfile --out FILE`: what was written.
pub fn dockerfile_written(out: &mut dyn Write, path: &str, d: &Dockerfile, stack: &Stack) -> io::Result<()> {
    writeln!(out, "wrote {path}")?;
    stack_and_base(out, d, stack)
}

/// The stack a Dockerfile holds, its base and what it requires of the host.
fn stack_and_base(out: &mut dyn Write, d: &Dockerfile, stack: &Stack) -> io::Result<()> {
    writeln!(out, "  stack    {}", stack_line(stack))?;
    writeln!(out, "  base     {}", d.base.image)?;
    for e in &d.extensions_from {
        writeln!(out, "  extensions {}", e.why)?;
    }
    if let Some(r) = &d.require_cuda {
        writeln!(out, "  requires NVIDIA_REQUIRE_CUDA={r}")?;
    }
    Ok(())
}

/// `gpuenv build`: the image made.
pub fn built(
    out: &mut dyn Write,
    b: &Built,
    d: &Dockerfile,
    stack: &Stack,
    json_out: bool,
) -> io::Result<()> {
    if json_out {
        return write_json(
            out,
            &BuiltDoc {
                schema_version: SCHEMA_VERSION,
                tag: b.tag.clone(),
                image_id: b.image_id.clone(),
                size: b.size,
                steps: b.steps,
                base: d.base.image.clone(),
                require_cuda: d.require_cuda.clone(),
                extensions_from: d.extensions_from.clone(),
                stack: stack.into(),
                labels: d.labels.clone(),
            },
        );
    }
    writeln!(out, "built {}", b.tag)?;
    writeln!(out, "  image    {}", b.image_id)?;
    if let Some(s) = b.size {
        writeln!(out, "  size     {}", human_size(s))?;
    }
    stack_and_base(out, d, stack)
}

/// The image chosen from the catalog, the stack it serves, and `query`'s best stack for
/// the same flags (which the image may not hold).
#[derive(Debug, Clone, Copy)]
pub struct PullChoice<'a> {
    /// The catalog's image.
    pub chosen: &'a Prebuilt,
    /// The stack it serves.
    pub stack: &'a Stack,
    /// `query`'s best stack.
    pub query_best: &'a Stack,
}

/// The fields a catalog pick adds to `pull`'s JSON.
fn choice_doc(c: PullChoice<'_>) -> PullChoiceDoc {
    PullChoiceDoc {
        catalog: CatalogPick {
            image: c.chosen.image.clone(),
            family: c.chosen.family,
            has_torch: c.chosen.has_torch,
            why: c.chosen.why.clone(),
        },
        stack: c.stack.into(),
        query_best: c.query_best.into(),
        query_best_differs: c.chosen.differs.is_some(),
        query_best_why: c.chosen.differs.clone(),
    }
}

/// The lines a catalog pick adds to `pull`'s text.
fn choice_lines(out: &mut dyn Write, c: PullChoice<'_>) -> io::Result<()> {
    writeln!(out, "  why      {}", c.chosen.why)?;
    writeln!(out, "  stack    {}", stack_line(c.stack))?;
    if let Some(d) = &c.chosen.differs {
        writeln!(out, "  differs  {d}")?;
    }
    Ok(())
}

/// `gpuenv pull --dry-run`: the image that would be pulled.
pub fn pull_plan(out: &mut dyn Write, image: &str, choice: PullChoice<'_>, json_out: bool) -> io::Result<()> {
    if json_out {
        return write_json(
            out,
            &PullDoc {
                schema_version: SCHEMA_VERSION,
                image: image.to_string(),
                pulled: false,
                result: None,
                choice: Some(choice_doc(choice)),
            },
        );
    }
    writeln!(out, "would pull {image}")?;
    choice_lines(out, choice)
}

/// `gpuenv pull`: what was pulled, and that its digest is the one announced.
pub fn pulled(
    out: &mut dyn Write,
    p: &Pulled,
    chosen: Option<PullChoice<'_>>,
    json_out: bool,
) -> io::Result<()> {
    if json_out {
        return write_json(
            out,
            &PullDoc {
                schema_version: SCHEMA_VERSION,
                image: p.image.clone(),
                pulled: true,
                result: Some(PullResult {
                    digest: p.digest.clone(),
                    digest_verified: true,
                    image_id: p.image_id.clone(),
                    size: p.size,
                    layers: p.layers,
                    downloaded_layers: p.downloaded_layers,
                    source: if chosen.is_some() {
                        PullSource::Catalog
                    } else {
                        PullSource::Name
                    },
                }),
                choice: chosen.map(choice_doc),
            },
        );
    }
    writeln!(out, "pulled {}", p.image)?;
    writeln!(
        out,
        "  digest   {} (verified: the one the registry announced)",
        p.digest
    )?;
    writeln!(out, "  image    {}", p.image_id)?;
    if let Some(s) = p.size {
        writeln!(out, "  size     {}", human_size(s))?;
    }
    writeln!(
        out,
        "  layers   {} ({} downloaded)",
        p.layers, p.downloaded_layers
    )?;
    if let Some(c) = chosen {
        choice_lines(out, c)?;
    }
    Ok(())
}

/// What each line of a build's output (the daemon's and its steps') starts with on stderr.
pub const BUILD_LINE: &str = "  | ";

/// Turns [`Progress`] events into lines: build output as it comes, each line after
/// [`BUILD_LINE`]; a line per layer and state, and for downloads and extraction at most one
/// per quarter, so that a log stays readable without a terminal to redraw. Everything the
/// daemon sent is made terminal-safe ([`terminal_safe`]).
#[derive(Debug, Default)]
pub struct ProgressLines {
    layers: HashMap<String, (String, u8)>,
    partial: bool,
}

impl ProgressLines {
    /// A printer with no layer seen yet.
    pub fn new() -> ProgressLines {
        ProgressLines::default()
    }

    /// Writes what an event is worth showing.
    pub fn event(&mut self, w: &mut dyn Write, p: &Progress) -> io::Result<()> {
        match p {
            Progress::Build(chunk) => {
                // Line by line, each line made safe and set off by `BUILD_LINE`: what a
                // step prints can neither drive the terminal nor pass for gpuenv's lines.
                let chunk = chunk.replace("\r\n", "\n");
                let mut rest = chunk.as_str();
                while !rest.is_empty() {
                    if !self.partial {
                        w.write_all(BUILD_LINE.as_bytes())?;
                    }
                    let (piece, ended) = match rest.split_once('\n') {
                        Some((line, after)) => {
                            rest = after;
                            (line, true)
                        }
                        None => (std::mem::take(&mut rest), false),
                    };
                    w.write_all(terminal_safe(piece).as_bytes())?;
                    if ended {
                        w.write_all(b"\n")?;
                    }
                    self.partial = !ended;
                }
            }
            Progress::Status(s) if !s.trim().is_empty() => {
                self.end_partial(w)?;
                writeln!(w, "{}", terminal_safe(s.trim()))?;
            }
            Progress::Status(_) => {}
            Progress::Layer {
                id,
                status,
                current,
                total,
            } => {
                let quarter = match (current, total) {
                    (Some(c), Some(t)) if *t > 0 => ((c.saturating_mul(4)) / t).min(4) as u8,
                    _ => 0,
                };
                let prev = self.layers.get(id);
                let changed = prev.is_none_or(|(s, q)| s != status || *q < quarter);
                if !changed {
                    return Ok(());
                }
                self.layers.insert(id.clone(), (status.clone(), quarter));
                self.end_partial(w)?;
                let (id, status) = (terminal_safe(id), terminal_safe(status));
                match (current, total) {
                    (Some(c), Some(t)) if *t > 0 && status.as_str() != "Pull complete" => writeln!(
                        w,
                        "{id}: {status} {}% ({} / {})",
                        c.saturating_mul(100) / t,
                        human_size(*c),
                        human_size(*t)
                    )?,
                    _ => writeln!(w, "{id}: {status}")?,
                }
            }
        }
        w.flush()
    }

    fn end_partial(&mut self, w: &mut dyn Write) -> io::Result<()> {
        if self.partial {
            writeln!(w)?;
            self.partial = false;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_print_on_state_changes_and_quarters_only() {
        let mut p = ProgressLines::new();
        let mut out = Vec::new();
        let layer = |status: &str, c: Option<u64>, t: Option<u64>| Progress::Layer {
            id: "d9a015881b5e".into(),
            status: status.into(),
            current: c,
            total: t,
        };
        for e in [
            layer("Pulling fs layer", None, None),
            layer("Downloading", Some(1), Some(1000)),
            layer("Downloading", Some(100), Some(1000)),
            layer("Downloading", Some(600), Some(1000)),
            layer("Downloading", Some(610), Some(1000)),
            layer("Download complete", None, None),
            layer("Pull complete", None, None),
            Progress::Status("Digest: sha256:abc".into()),
        ] {
            p.event(&mut out, &e).unwrap();
        }
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "d9a015881b5e: Pulling fs layer\n\
             d9a015881b5e: Downloading 0% (1 B / 1 kB)\n\
             d9a015881b5e: Downloading 60% (600 B / 1 kB)\n\
             d9a015881b5e: Download complete\n\
             d9a015881b5e: Pull complete\n\
             Digest: sha256:abc\n"
        );
    }

    #[test]
    fn build_output_is_shown_line_by_line_made_safe_and_set_off() {
        let mut p = ProgressLines::new();
        let mut out = Vec::new();
        for chunk in [
            "Step 1/2 : FROM base\n ---> abc\n",
            "Step 2/2 : RUN x\npart",
            "ial\r\n\u{1b}[2J\u{1b}]8;;http://evil\u{7}link\u{1b}]8;;\u{7}\rerror: FAKE\n",
        ] {
            p.event(&mut out, &Progress::Build(chunk.into())).unwrap();
        }
        p.event(&mut out, &Progress::Status("Digest:\u{1b}[31m x\nFAKE".into()))
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "  | Step 1/2 : FROM base\n  |  ---> abc\n  | Step 2/2 : RUN x\n  | partial\n  | link\\rerror: FAKE\nDigest: x\\nFAKE\n"
        );
        // A line cut off by another event is ended first.
        let mut out = Vec::new();
        p.event(&mut out, &Progress::Build("no end".into())).unwrap();
        p.event(&mut out, &Progress::Status("Done".into())).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "  | no end\nDone\n");
    }

    #[test]
    fn sizes_read_like_dockers() {
        assert_eq!(human_size(999), "999 B");
        assert_eq!(human_size(1_064_562), "1.1 MB");
        assert_eq!(human_size(2_500_000_000), "2.50 GB");
    }
}
