//! Progress on stderr while long work runs: `db refresh` (a line per stage, the metadata
//! files N of M), `pull` (a bar per layer), `build` (a spinner on the current step, the
//! step's output above it) and `verify` from a registry, an archive or an OCI directory
//! (layers N of M, and bytes).
//!
//! Owns: how progress looks, and whether it is shown ([`Mode`]). The work itself never
//! touches the terminal: it reports events through a callback ([`Progress`] from the
//! engine, [`RefreshStep`] from upstream) or a [`ReadProgress`] it is handed, and the types
//! here turn them into indicatif's bars and spinners, which redraw in place.
//!
//! Shown as bars only where a person watches: stderr a terminal (not `TERM=dumb`) and no
//! `--json`. Where stderr is not a terminal, `pull` and `build` keep the plain lines of
//! [`ProgressLines`] (what logs and scripts read, unchanged), and `refresh` and `verify`
//! print nothing, as before; under `--json` on a terminal, nothing is shown. Every piece of
//! outside text a bar shows (a layer's id and state, a build's output, an image's name) is
//! made [`terminal_safe`] first: indicatif prints messages as they are.

use std::io::{self, IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::containers::{BUILD_LINE, ProgressLines};
use crate::docker::Progress;
use crate::image::{ReadProgress, Watch};
use crate::text::terminal_safe;
use crate::upstream::RefreshStep;

/// How a command shows its progress on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Bars and spinners that redraw in place: stderr is a terminal and there is no
    /// `--json`.
    Bars,
    /// Plain lines, one per event worth one ([`ProgressLines`]: `pull` and `build` only;
    /// `refresh` and `verify` print none): stderr is not a terminal, whatever the flags.
    Lines,
    /// Nothing: `--json` on a terminal.
    Quiet,
}

impl Mode {
    /// The mode for this process's stderr, for a command run with or without `--json`.
    pub fn of_stderr(json: bool) -> Mode {
        let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
        Mode::decide(io::stderr().is_terminal() && !dumb, json)
    }

    /// The mode for a stderr that is (or is not) a terminal able to redraw.
    pub fn decide(terminal: bool, json: bool) -> Mode {
        match (terminal, json) {
            (false, _) => Mode::Lines,
            (true, false) => Mode::Bars,
            (true, true) => Mode::Quiet,
        }
    }
}

/// How often bars redraw at most: often enough to look alive, rarely enough to cost
/// nothing beside the work.
const REDRAWS_PER_SECOND: u8 = 10;
/// How often a spinner turns while nothing else happens.
const TICK: Duration = Duration::from_millis(120);

const SPINNER: &str = "{spinner} {msg}";
const LAYER_WAITING: &str = "{prefix} {msg}";
const LAYER_BYTES: &str = "{prefix} {msg:<18} [{bar:30}] {decimal_bytes}/{decimal_total_bytes}";
const STAGE_FILES: &str = "{spinner} {msg} [{bar:30}] {pos}/{len}";
const STAGE_DONE: &str = "  {msg}: {pos}/{len} read";
const IMAGE_LAYERS: &str = "{spinner} {prefix} {msg} [{bar:30}] {decimal_bytes}/{decimal_total_bytes}";

/// A style from one of the templates above; they are constants, checked by a test, so the
/// fallback is never taken.
fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
        .tick_chars("|/-\\ ")
}

fn stderr_target() -> ProgressDrawTarget {
    ProgressDrawTarget::stderr_with_hz(REDRAWS_PER_SECOND)
}

/// A layer's id as shown: made safe and cut to Docker's 12 characters, so that a column
/// of bars lines up and no id can push the bar off the screen.
fn layer_label(id: &str) -> String {
    let safe = terminal_safe(id);
    match safe.char_indices().nth(12) {
        Some((at, _)) => safe[..at].to_string(),
        None => safe,
    }
}

/// The engine's progress (`pull`, `build`) on stderr, in the [`Mode`] chosen.
pub struct EngineProgress {
    inner: EngineInner,
}

enum EngineInner {
    Bars(EngineBars),
    Lines(ProgressLines, Box<dyn Write + Send>),
    Quiet,
}

impl std::fmt::Debug for EngineProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.inner {
            EngineInner::Bars(_) => "EngineProgress(bars)",
            EngineInner::Lines(..) => "EngineProgress(lines)",
            EngineInner::Quiet => "EngineProgress(quiet)",
        })
    }
}

impl EngineProgress {
    /// Progress in `mode`: bars drawn on stderr, or lines written to `lines` (the caller
    /// passes stderr), or nothing.
    pub fn new(mode: Mode, lines: Box<dyn Write + Send>) -> EngineProgress {
        let inner = match mode {
            Mode::Bars => EngineInner::Bars(EngineBars::new(stderr_target())),
            Mode::Lines => EngineInner::Lines(ProgressLines::new(), lines),
            Mode::Quiet => EngineInner::Quiet,
        };
        EngineProgress { inner }
    }

    /// Shows one event. A stderr that fails must not fail the work: errors are dropped.
    pub fn event(&mut self, p: &Progress) {
        match &mut self.inner {
            EngineInner::Bars(bars) => bars.event(p),
            EngineInner::Lines(lines, w) => {
                let _ = lines.event(w, p);
            }
            EngineInner::Quiet => {}
        }
    }

    /// The work is over (done or failed): the build's spinner goes, the last line of its
    /// output is shown, and each layer's bar stays at its last state.
    pub fn finish(&mut self) {
        if let EngineInner::Bars(bars) = &mut self.inner {
            bars.finish();
        }
    }
}

/// Bars for the engine's events: one per layer of a pull, a spinner for a build's step.
struct EngineBars {
    multi: MultiProgress,
    layers: Vec<(String, ProgressBar, bool)>,
    step: Option<ProgressBar>,
    partial: String,
}

impl EngineBars {
    fn new(target: ProgressDrawTarget) -> EngineBars {
        EngineBars {
            multi: MultiProgress::with_draw_target(target),
            layers: Vec::new(),
            step: None,
            partial: String::new(),
        }
    }

    fn event(&mut self, p: &Progress) {
        match p {
            Progress::Build(chunk) => {
                self.partial.push_str(&chunk.replace("\r\n", "\n"));
                while let Some(end) = self.partial.find('\n') {
                    let line: String = self.partial.drain(..=end).collect();
                    self.build_line(line.trim_end_matches('\n'));
                }
            }
            Progress::Status(s) if !s.trim().is_empty() => {
                let _ = self.multi.println(terminal_safe(s.trim()));
            }
            Progress::Status(_) => {}
            Progress::Layer {
                id,
                status,
                current,
                total,
            } => self.layer(id, status, *current, *total),
        }
    }

    /// A line of the build's output: shown above the spinner as [`ProgressLines`] shows
    /// it, and a step's header also names the step on the spinner.
    fn build_line(&mut self, line: &str) {
        let multi = &self.multi;
        let spinner = self.step.get_or_insert_with(|| {
            let s = multi.add(ProgressBar::new_spinner().with_style(style(SPINNER)));
            s.set_message("building");
            s.enable_steady_tick(TICK);
            s
        });
        if let Some((frac, _, instruction)) = crate::docker::step_header(line) {
            spinner.set_message(format!("step {frac}: {}", terminal_safe(instruction)));
        }
        let _ = self.multi.println(format!("{BUILD_LINE}{}", terminal_safe(line)));
    }

    fn layer(&mut self, id: &str, status: &str, current: Option<u64>, total: Option<u64>) {
        let at = match self.layers.iter().position(|(known, _, _)| known == id) {
            Some(at) => at,
            None => {
                let bar = self.multi.add(
                    ProgressBar::new(0)
                        .with_style(style(LAYER_WAITING))
                        .with_prefix(layer_label(id)),
                );
                self.layers.push((id.to_string(), bar, false));
                self.layers.len() - 1
            }
        };
        let (_, bar, bytes_shown) = &mut self.layers[at];
        let status = terminal_safe(status);
        if matches!(status.as_str(), "Pull complete" | "Already exists") {
            bar.set_style(style(LAYER_WAITING));
            bar.finish_with_message(status);
            return;
        }
        match (current, total) {
            (Some(c), Some(t)) if t > 0 => {
                if !*bytes_shown {
                    bar.set_style(style(LAYER_BYTES));
                    *bytes_shown = true;
                }
                bar.set_length(t);
                bar.set_position(c.min(t));
            }
            _ if *bytes_shown => {
                bar.set_style(style(LAYER_WAITING));
                *bytes_shown = false;
            }
            _ => {}
        }
        bar.set_message(status);
    }

    fn finish(&mut self) {
        if !self.partial.is_empty() {
            let rest = std::mem::take(&mut self.partial);
            self.build_line(&rest);
        }
        if let Some(s) = self.step.take() {
            s.finish_and_clear();
        }
        for (_, bar, _) in &self.layers {
            if !bar.is_finished() {
                bar.abandon();
            }
        }
    }
}

/// `db refresh`'s progress: a line per stage (the PyPI pages, each project's wheel
/// metadata N of M, the PyTorch index), the current one a bar. Shown in [`Mode::Bars`]
/// only: elsewhere the refresh prints nothing until its summary, as before.
pub struct RefreshProgress {
    multi: Option<MultiProgress>,
    current: Option<ProgressBar>,
}

impl std::fmt::Debug for RefreshProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RefreshProgress(shown: {})", self.multi.is_some())
    }
}

impl RefreshProgress {
    /// Progress in `mode`, drawn on stderr.
    pub fn new(mode: Mode) -> RefreshProgress {
        RefreshProgress::drawn_on(mode, stderr_target)
    }

    fn drawn_on(mode: Mode, target: impl FnOnce() -> ProgressDrawTarget) -> RefreshProgress {
        RefreshProgress {
            multi: (mode == Mode::Bars).then(|| MultiProgress::with_draw_target(target())),
            current: None,
        }
    }

    /// Shows one step of the refresh.
    pub fn step(&mut self, step: &RefreshStep) {
        let Some(multi) = &self.multi else { return };
        match step {
            RefreshStep::Stage { what, files } => {
                if let Some(done) = self.current.take() {
                    done.set_style(style(STAGE_DONE));
                    done.abandon();
                }
                let bar = match files {
                    Some(n) => ProgressBar::new(*n).with_style(style(STAGE_FILES)),
                    None => ProgressBar::new_spinner().with_style(style(SPINNER)),
                };
                let bar = multi.add(bar);
                bar.set_message(terminal_safe(what));
                bar.enable_steady_tick(TICK);
                self.current = Some(bar);
            }
            RefreshStep::Read => {
                if let Some(bar) = &self.current {
                    bar.inc(1);
                }
            }
        }
    }

    /// The refresh is over (done or failed): the last stage stays as a line, with how far
    /// it got.
    pub fn finish(&mut self) {
        if let Some(done) = self.current.take() {
            done.set_style(style(STAGE_DONE));
            done.abandon();
        }
    }
}

/// `verify`'s progress while it reads an image from a registry, an archive or an OCI
/// directory: a spinner until the layers are known, then layers N of M and bytes. Shown in
/// [`Mode::Bars`] only.
#[derive(Debug)]
pub struct VerifyProgress {
    shown: Option<Arc<LayerBar>>,
}

/// The bar the readers report to, from any of their threads.
#[derive(Debug)]
struct LayerBar {
    bar: ProgressBar,
    count: AtomicUsize,
    done: AtomicUsize,
}

impl LayerBar {
    fn message(&self) -> String {
        format!(
            "layers {} of {}",
            self.done.load(Ordering::Relaxed),
            self.count.load(Ordering::Relaxed)
        )
    }
}

impl ReadProgress for LayerBar {
    fn layers(&self, count: usize, bytes: u64) {
        self.count.store(count, Ordering::Relaxed);
        self.done.store(0, Ordering::Relaxed);
        self.bar.set_style(style(IMAGE_LAYERS));
        self.bar.set_length(bytes);
        self.bar.set_position(0);
        self.bar.set_message(self.message());
    }

    fn read(&self, n: u64) {
        self.bar.inc(n);
    }

    fn layer_done(&self) {
        self.done.fetch_add(1, Ordering::Relaxed);
        self.bar.set_message(self.message());
    }
}

impl VerifyProgress {
    /// Progress of reading `image` (the reference as given) in `mode`, drawn on stderr.
    pub fn new(mode: Mode, image: &str) -> VerifyProgress {
        VerifyProgress::drawn_on(mode, image, stderr_target)
    }

    fn drawn_on(mode: Mode, image: &str, target: impl FnOnce() -> ProgressDrawTarget) -> VerifyProgress {
        let shown = (mode == Mode::Bars).then(|| {
            let bar = ProgressBar::with_draw_target(None, target()).with_style(style(SPINNER));
            bar.set_prefix(format!("reading {}", terminal_safe(image)));
            bar.set_message(format!("reading {}", terminal_safe(image)));
            bar.enable_steady_tick(TICK);
            Arc::new(LayerBar {
                bar,
                count: AtomicUsize::new(0),
                done: AtomicUsize::new(0),
            })
        });
        VerifyProgress { shown }
    }

    /// What the image readers report to: the bar, or no one.
    pub fn watch(&self) -> Watch {
        match &self.shown {
            Some(bar) => Watch::new(Arc::clone(bar) as Arc<dyn ReadProgress>),
            None => Watch::default(),
        }
    }

    /// The read is over: the bar goes, before the report is printed.
    pub fn finish(&self) {
        if let Some(b) = &self.shown {
            b.bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A terminal that records what is written to it, as indicatif writes it.
    #[derive(Debug, Clone, Default)]
    struct Screen {
        written: Arc<Mutex<String>>,
    }

    impl Screen {
        fn text(&self) -> String {
            self.written.lock().map(|w| w.clone()).unwrap_or_default()
        }
        fn target(&self) -> ProgressDrawTarget {
            ProgressDrawTarget::term_like_with_hz(Box::new(self.clone()), 100)
        }
    }

    impl indicatif::TermLike for Screen {
        fn width(&self) -> u16 {
            120
        }
        fn move_cursor_up(&self, _: usize) -> io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> io::Result<()> {
            self.write_str(&format!("{s}\n"))
        }
        fn write_str(&self, s: &str) -> io::Result<()> {
            if let Ok(mut w) = self.written.lock() {
                w.push_str(s);
            }
            Ok(())
        }
        fn clear_line(&self) -> io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> io::Result<()> {
            Ok(())
        }
    }

    fn bars_on(screen: &Screen) -> EngineProgress {
        EngineProgress {
            inner: EngineInner::Bars(EngineBars::new(screen.target())),
        }
    }

    const HOSTILE: &str = "x\u{1b}[2J\u{1b}]0;title\u{7}\rFAKE\nline";

    #[test]
    fn every_template_parses() {
        for t in [
            SPINNER,
            LAYER_WAITING,
            LAYER_BYTES,
            STAGE_FILES,
            STAGE_DONE,
            IMAGE_LAYERS,
        ] {
            assert!(ProgressStyle::with_template(t).is_ok(), "{t}");
        }
    }

    #[test]
    fn bars_only_on_a_terminal_without_json() {
        assert_eq!(Mode::decide(true, false), Mode::Bars);
        assert_eq!(Mode::decide(true, true), Mode::Quiet);
        assert_eq!(Mode::decide(false, false), Mode::Lines);
        assert_eq!(Mode::decide(false, true), Mode::Lines);
    }

    #[test]
    fn a_pull_shows_a_bar_per_layer_and_each_layers_last_state() {
        let screen = Screen::default();
        let mut p = bars_on(&screen);
        let layer = |id: &str, status: &str, c: Option<u64>, t: Option<u64>| Progress::Layer {
            id: id.into(),
            status: status.into(),
            current: c,
            total: t,
        };
        for e in [
            layer("d9a015881b5e", "Pulling fs layer", None, None),
            layer("0c7e6b4c2d11", "Already exists", None, None),
            layer("d9a015881b5e", "Downloading", Some(600_000), Some(1_000_000)),
            layer("d9a015881b5e", "Pull complete", None, None),
            Progress::Status("Digest: sha256:abc".into()),
        ] {
            p.event(&e);
        }
        p.finish();
        let text = screen.text();
        assert!(text.contains("d9a015881b5e Downloading"), "{text}");
        assert!(text.contains("600.00 kB/1.00 MB"), "{text}");
        assert!(text.contains("d9a015881b5e Pull complete"), "{text}");
        assert!(text.contains("0c7e6b4c2d11 Already exists"), "{text}");
        assert!(text.contains("Digest: sha256:abc"), "{text}");
    }

    #[test]
    fn a_build_names_its_step_and_shows_its_output_set_off() {
        let screen = Screen::default();
        let mut p = bars_on(&screen);
        for chunk in [
            "Step 1/2 : FROM base\n ---> abc\nStep 2/2 : RUN x\npart",
            "ial\n",
            "no end",
        ] {
            p.event(&Progress::Build(chunk.into()));
        }
        p.finish();
        // indicatif pads each line it prints to the terminal's width.
        let text = screen.text();
        assert!(text.contains("  | Step 1/2 : FROM base "), "{text}");
        assert!(text.contains("  | partial "), "{text}");
        // The line cut off when the build ended is shown too.
        assert!(text.contains("  | no end "), "{text}");
        assert!(text.contains("step 2/2: RUN x"), "{text}");
    }

    /// What the daemon sends (layer ids, states, build output) reaches the terminal with
    /// no escape and no control character: none can clear the screen, retitle the window or
    /// forge a line.
    #[test]
    fn outside_text_in_bars_cannot_drive_the_terminal() {
        let screen = Screen::default();
        let mut p = bars_on(&screen);
        p.event(&Progress::Layer {
            id: HOSTILE.into(),
            status: HOSTILE.into(),
            current: Some(1),
            total: Some(2),
        });
        p.event(&Progress::Build(format!("Step 1/1 : RUN {HOSTILE}\n{HOSTILE}\n")));
        p.event(&Progress::Status(HOSTILE.into()));
        p.finish();
        let text = screen.text();
        assert!(text.contains("x\\rFAKE\\nline"), "{text}");
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{text:?}");
    }

    #[test]
    fn a_refresh_shows_each_stage_and_how_far_it_got() {
        let screen = Screen::default();
        let mut p = RefreshProgress::drawn_on(Mode::Bars, || screen.target());
        p.step(&RefreshStep::Stage {
            what: "the PyPI page of torch".into(),
            files: Some(1),
        });
        p.step(&RefreshStep::Read);
        p.step(&RefreshStep::Stage {
            what: "torch's wheel metadata".into(),
            files: Some(3),
        });
        p.step(&RefreshStep::Read);
        p.step(&RefreshStep::Read);
        p.finish();
        let text = screen.text();
        assert!(text.contains("the PyPI page of torch: 1/1 read"), "{text}");
        assert!(text.contains("torch's wheel metadata: 2/3 read"), "{text}");
        // Not on a terminal: nothing, as before.
        let screen = Screen::default();
        let mut p = RefreshProgress::drawn_on(Mode::Lines, || screen.target());
        p.step(&RefreshStep::Stage {
            what: "x".into(),
            files: None,
        });
        p.finish();
        assert_eq!(screen.text(), "");
    }

    #[test]
    fn verify_counts_layers_and_bytes_from_any_thread() {
        let screen = Screen::default();
        let p = VerifyProgress::drawn_on(Mode::Bars, &format!("docker-archive:{HOSTILE}"), || {
            screen.target()
        });
        let watch = p.watch();
        let bar = p.shown.as_ref().map(Arc::clone).expect("shown on a terminal");
        bar.layers(3, 3_000_000);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    bar.read(1_000_000);
                    bar.layer_done();
                });
            }
        });
        assert_eq!(bar.bar.position(), 3_000_000);
        assert_eq!(bar.message(), "layers 3 of 3");
        bar.bar.tick();
        let text = screen.text();
        assert!(text.contains("layers 3 of 3"), "{text}");
        assert!(text.contains("3.00 MB/3.00 MB"), "{text}");
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{text:?}");
        p.finish();
        assert!(format!("{watch:?}").contains("on"));
        // Elsewhere the readers report to no one.
        let quiet = VerifyProgress::drawn_on(Mode::Quiet, "x", || screen.target());
        assert_eq!(format!("{:?}", quiet.watch()), "Watch(none)");
    }
}
