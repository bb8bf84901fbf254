//! What a Python project's own files say about its PyTorch stack: the pins on torch,
//! torchvision and torchaudio, `requires-python`, the CUDA variants named by PyTorch
//! index URLs, and every requirement by its normalized name with how it installs (index,
//! wheel file or source) and the build options on its line, read from a pip requirements
//! file or a `pyproject.toml`.
//!
//! Owns: the two file grammars as pip and the packaging PEPs define them (pip's
//! requirements-file format; PEP 508 requirements, PEP 621 `[project]`, PEP 735
//! `[dependency-groups]`, uv's `[[tool.uv.index]]`), and errors that name the file, the
//! line and what was expected there, quoting at most an excerpt of what the file says
//! ([`crate::text::excerpt`]: a line can be a whole file, and a file named by mistake can
//! hold secrets). Also owns evaluating a pin's environment marker for
//! the one platform gpuenv answers for (Linux x86_64 CPython).
//!
//! Must not: read files or the environment (the caller reads each file, including the
//! ones a requirements file includes, and merges the results), consult the database, or
//! decide anything about compatibility; that is the resolver's. Requirements on other
//! projects are recorded by name ([`Requirement`]) for the resolver to match against the
//! database's package records, and syntax-checked, since pip would refuse the whole file
//! over one bad line.
//!
//! Traps this module exists for:
//! - `torch==2.4.1+cu121` names its CUDA build in the local segment, while plain
//!   `torch==2.4.1` takes whatever the index serves: the variant often comes from an
//!   `--index-url https://download.pytorch.org/whl/cu121` line instead.
//! - `#` starts a comment only at the start of a line or after whitespace, so
//!   `...#egg=torch` and `#sha256=` fragments survive.
//! - pip joins a line ending in `\` with the next, so an error must be reported at the
//!   first physical line of the joined one.
//! - `torch-vision` and `torch_vision` are the same project (PEP 503), and it is not
//!   `torchvision`.

use std::str::FromStr;

use pep508_rs::{MarkerEnvironment, MarkerTree, VersionOrUrl};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::model::pep508;
use crate::model::{Operator, Variant, Version, VersionSpecifier, VersionSpecifiers, local_variant};
use crate::text::excerpt;

/// Where a constraint came from, for messages: "requirements.txt:3",
/// `pyproject.toml: project.dependencies[2]`, `--torch`.
pub type Origin = String;

/// One requirement on torch, torchvision or torchaudio.
#[derive(Debug, Clone)]
pub struct Pin {
    /// Empty means any version (`torch` with no specifier, or a source checkout).
    pub specifiers: VersionSpecifiers,
    /// The CUDA variant named by a local version in an `==` pin (`torch==2.4.1+cu121` ->
    /// cu121) or in the file name of a wheel URL.
    pub variant: Option<Variant>,
    /// The environment marker, if any (`; python_version < "3.12"`).
    pub marker: Option<MarkerTree>,
    /// Where the pin was written.
    pub origin: Origin,
}

impl Pin {
    /// Whether the pin came from a command-line flag (`--torch`) rather than a project
    /// file: a suggestion may change a flag, never the project's own files.
    pub fn is_flag(&self) -> bool {
        self.origin.starts_with("--")
    }
}

/// How a requirement installs, as far as its line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Install {
    /// By name from an index: a wheel when one matches, else the source distribution.
    Index,
    /// A wheel file named by URL or path (`.../flash_attn-2.6.3+cu123...whl`): nothing is
    /// built.
    Wheel(String),
    /// From source: a VCS URL, a source archive, or an editable checkout, as written.
    Source(String),
}

/// A requirement on any project, by its normalized name: what compat-db's package
/// records are matched against.
#[derive(Debug, Clone)]
pub struct Requirement {
    /// The PEP 503 normalized project name (`flash_attn` is `flash-attn`).
    pub name: String,
    /// Its version specifiers; empty for any version.
    pub specifiers: VersionSpecifiers,
    /// The environment marker, if any.
    pub marker: Option<MarkerTree>,
    /// Index, wheel file or source.
    pub install: Install,
    /// Build options written on its line (`--config-settings`, `--global-option` values,
    /// as written: `--build-option=--cuda_ext`).
    pub build_options: Vec<String>,
    /// Where it was written.
    pub origin: Origin,
    /// Written in pyproject.toml (which a Dockerfile installs with uv) rather than a
    /// requirements file (installed with pip).
    pub pyproject: bool,
    /// The extras asked for (`sglang[srt]`), PEP 685 normalized: some packages pin torch
    /// only through one.
    pub extras: Vec<String>,
}

/// Everything a project's files say that constrains its PyTorch stack.
#[derive(Debug, Clone, Default)]
pub struct ProjectNeeds {
    /// Pins on `torch`.
    pub torch: Vec<Pin>,
    /// Pins on `torchvision`.
    pub torchvision: Vec<Pin>,
    /// Pins on `torchaudio`.
    pub torchaudio: Vec<Pin>,
    /// `requires-python` of pyproject.toml.
    pub requires_python: Option<(VersionSpecifiers, Origin)>,
    /// CUDA variants named by PyTorch index URLs (`--index-url`, `--extra-index-url`,
    /// `-i`, `[[tool.uv.index]]`), in the order written. Both the primary and the extra
    /// indexes are recorded: which one pip ends up using is the resolver's question.
    pub index_variants: Vec<(Variant, Origin)>,
    /// Files pulled in by `-r`/`--requirement`/`-c`/`--constraint`, as written (relative
    /// to the including file), with the line that names them.
    pub includes: Vec<(String, Origin)>,
    /// Requirements installed from a relative path of the project tree (`-e .`,
    /// `./libs/pkg`, `-e ./tools[dev]`), as written: pip needs those files in place, so a
    /// Dockerfile installs such requirements after copying the project.
    pub local_paths: Vec<(String, Origin)>,
    /// Every requirement on a named project (torch's too), in the order written.
    pub requirements: Vec<Requirement>,
    /// pyproject.toml's optional dependency groups (`project.optional-dependencies`), by
    /// their PEP 685 normalized names, each kept apart until [`ProjectNeeds::choose_extras`]
    /// says which are installed.
    pub extras: Vec<(String, ProjectNeeds)>,
}

/// Which optional dependency groups of a pyproject.toml are installed: those named
/// (`--extra`), every one (`--all-extras`), or, when neither is said, the caller's default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtrasChoice {
    /// The groups named, as written.
    pub names: Vec<String>,
    /// Every group.
    pub all: bool,
}

impl ProjectNeeds {
    /// Appends everything of `other` (for includes and for combining `--requirements`
    /// with `--pyproject`). Only one `requires-python` is kept: the one already here, if
    /// any, since it is the file the user named first.
    pub fn merge(&mut self, other: ProjectNeeds) {
        let ProjectNeeds {
            torch,
            torchvision,
            torchaudio,
            requires_python,
            index_variants,
            includes,
            local_paths,
            requirements,
            extras,
        } = other;
        self.torch.extend(torch);
        self.torchvision.extend(torchvision);
        self.torchaudio.extend(torchaudio);
        if self.requires_python.is_none() {
            self.requires_python = requires_python;
        }
        self.index_variants.extend(index_variants);
        self.includes.extend(includes);
        self.local_paths.extend(local_paths);
        self.requirements.extend(requirements);
        self.extras.extend(extras);
    }

    /// Merges the optional dependency groups `choice` names (every one when `choice.all`,
    /// or when nothing is named and `default_all`) into the rest, and drops the others;
    /// returns the groups installed, normalized. A name no group has is an error that
    /// lists those there are.
    pub fn choose_extras(&mut self, choice: &ExtrasChoice, default_all: bool) -> Result<Vec<String>, String> {
        let groups = std::mem::take(&mut self.extras);
        let all = choice.all || (choice.names.is_empty() && default_all);
        let mut wanted = Vec::new();
        for name in &choice.names {
            let n = pep508::normalize_name(name.trim());
            if !groups.iter().any(|(g, _)| *g == n) {
                let known: Vec<&str> = groups.iter().map(|(g, _)| g.as_str()).collect();
                return Err(format!(
                    "`{}` is no optional dependency group of the pyproject.toml; it has {}",
                    excerpt(name),
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ));
            }
            if !wanted.contains(&n) {
                wanted.push(n);
            }
        }
        let mut chosen = Vec::new();
        for (name, needs) in groups {
            if all || wanted.contains(&name) {
                // The name goes into an install line (`--extra NAME`): only what PEP 685
                // makes of a valid one.
                let valid = !name.is_empty()
                    && name
                        .split('-')
                        .all(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric()));
                if !valid {
                    return Err(format!(
                        "the optional dependency group `{}` has no valid name (PEP 685: letters, digits and -, _ or . between them)",
                        excerpt(&name)
                    ));
                }
                chosen.push(name);
                self.merge(needs);
            }
        }
        Ok(chosen)
    }

    fn pins_of(&mut self, normalized_name: &str) -> Option<&mut Vec<Pin>> {
        match normalized_name {
            "torch" => Some(&mut self.torch),
            "torchvision" => Some(&mut self.torchvision),
            "torchaudio" => Some(&mut self.torchaudio),
            _ => None,
        }
    }
}

/// A project file that cannot be read: names the file, the line (1-based) where there is
/// one, and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}{}: {message}", .line.map(|n| format!(":{n}")).unwrap_or_default())]
pub struct InputError {
    /// The file as the caller named it.
    pub file: String,
    /// 1-based line, where the problem has one.
    pub line: Option<usize>,
    /// What is wrong and what was expected.
    pub message: String,
}

impl InputError {
    fn new(file: &str, line: Option<usize>, message: impl Into<String>) -> Self {
        InputError {
            file: file.to_string(),
            line,
            message: message.into(),
        }
    }
}

// ---------------------------------------------------------------------------------------
// requirements.txt
// ---------------------------------------------------------------------------------------

/// What gpuenv does with an option pip accepts in a requirements file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// `-i`, `--index-url`, `--extra-index-url`: may name a CUDA variant.
    Index,
    /// `-r`, `-c`: another file the caller must read.
    Include,
    /// `-e`: a source checkout, which pins nothing but may name torch.
    Editable,
    /// Accepted by pip, irrelevant here (`--pre`, `--hash`, `-f`, ...).
    Ignore,
}

struct OptionSpec {
    long: &'static str,
    short: Option<char>,
    takes_value: bool,
    action: Action,
}

const fn opt(long: &'static str, short: Option<char>, takes_value: bool, action: Action) -> OptionSpec {
    OptionSpec {
        long,
        short,
        takes_value,
        action,
    }
}

/// Every option pip (24.x) accepts in a requirements file, global and per-requirement.
/// Anything else makes pip reject the file, so it is an error here too.
const OPTIONS: &[OptionSpec] = &[
    opt("--index-url", Some('i'), true, Action::Index),
    opt("--extra-index-url", None, true, Action::Index),
    opt("--no-index", None, false, Action::Ignore),
    opt("--constraint", Some('c'), true, Action::Include),
    opt("--requirement", Some('r'), true, Action::Include),
    opt("--editable", Some('e'), true, Action::Editable),
    // A find-links page (`.../whl/torch_stable.html`) lists every variant, so it names none.
    opt("--find-links", Some('f'), true, Action::Ignore),
    opt("--no-binary", None, true, Action::Ignore),
    opt("--only-binary", None, true, Action::Ignore),
    opt("--prefer-binary", None, false, Action::Ignore),
    opt("--require-hashes", None, false, Action::Ignore),
    opt("--pre", None, false, Action::Ignore),
    opt("--trusted-host", None, true, Action::Ignore),
    opt("--use-feature", None, true, Action::Ignore),
    opt("--global-option", None, true, Action::Ignore),
    opt("--config-settings", Some('C'), true, Action::Ignore),
    opt("--hash", None, true, Action::Ignore),
];

/// One option as written on a line, with its value.
struct LineOption {
    spec: &'static OptionSpec,
    value: Option<String>,
}

/// Parses a pip requirements file. `file` is the name to put in messages and origins.
///
/// Pins come from torch, torchvision and torchaudio requirements (PEP 508, a wheel URL or
/// path, or an `#egg=` name); every other requirement is only syntax-checked.
pub fn parse_requirements(file: &str, text: &str) -> Result<ProjectNeeds, InputError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut needs = ProjectNeeds::default();
    for (line_no, logical) in logical_lines(text) {
        let content = strip_comment(&logical).trim();
        if content.is_empty() {
            continue;
        }
        let origin = format!("{file}:{line_no}");
        let fail = |message: String| InputError::new(file, Some(line_no), message);
        // As pip does: the requirement runs up to the first word that starts with `-`;
        // the rest are options.
        let split = option_start(content);
        let (requirement, options) = (content[..split].trim(), &content[split..]);
        let options = parse_options(options).map_err(fail)?;
        let build_options: Vec<String> = options
            .iter()
            .filter(|o| matches!(o.spec.long, "--config-settings" | "--global-option"))
            .filter_map(|o| o.value.clone())
            .collect();
        let before = needs.requirements.len();
        if requirement.is_empty() {
            for option in options {
                apply_option(option, &origin, &mut needs);
            }
        } else {
            // pip parses global options written after a requirement but acts on none of
            // them (only `--hash` and the build options apply), so neither does gpuenv.
            read_requirement_line(requirement, &origin, &mut needs).map_err(fail)?;
        }
        for r in &mut needs.requirements[before..] {
            r.build_options.clone_from(&build_options);
        }
    }
    Ok(needs)
}

/// Joins continued lines as pip does: a line ending in `\` (that is not a comment) is
/// glued to the next without a space, and the result is reported at its first line.
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (index, raw) in text.lines().enumerate() {
        let line_no = index + 1;
        let is_comment = raw.trim_start().starts_with('#');
        if raw.ends_with('\\') && !is_comment {
            let part = raw.trim_end_matches('\\');
            match &mut pending {
                Some((_, joined)) => joined.push_str(part),
                None => pending = Some((line_no, part.to_string())),
            }
            continue;
        }
        match pending.take() {
            Some((start, mut joined)) => {
                // A comment line ends a continuation; the space keeps it a comment once
                // glued on, as in pip.
                if is_comment {
                    joined.push(' ');
                }
                joined.push_str(raw);
                out.push((start, joined));
            }
            None => out.push((line_no, raw.to_string())),
        }
    }
    if let Some(last) = pending {
        out.push(last);
    }
    out
}

/// Cuts a comment: a `#` at the start or after whitespace (pip's `(^|\s+)#.*$`).
fn strip_comment(line: &str) -> &str {
    let mut previous_is_space = true;
    for (at, c) in line.char_indices() {
        if c == '#' && previous_is_space {
            return &line[..at];
        }
        previous_is_space = c.is_whitespace();
    }
    line
}

/// Byte offset of the first word starting with `-`, or the end.
fn option_start(content: &str) -> usize {
    let mut previous_is_space = true;
    for (at, c) in content.char_indices() {
        if c == '-' && previous_is_space {
            return at;
        }
        previous_is_space = c.is_whitespace();
    }
    content.len()
}

fn find_option(word: &str) -> Result<&'static OptionSpec, String> {
    if let Some(spec) = OPTIONS.iter().find(|o| o.long == word) {
        return Ok(spec);
    }
    // pip's option parser (optparse) accepts any unambiguous prefix of a long option.
    if word.len() > 2 {
        let matches: Vec<&OptionSpec> = OPTIONS.iter().filter(|o| o.long.starts_with(word)).collect();
        match matches.as_slice() {
            [one] => return Ok(one),
            [] => {}
            several => {
                let names: Vec<&str> = several.iter().map(|o| o.long).collect();
                return Err(format!(
                    "ambiguous option `{}` (could be {})",
                    excerpt(word),
                    names.join(", ")
                ));
            }
        }
    }
    Err(unknown_option(word))
}

fn unknown_option(word: &str) -> String {
    let closest = OPTIONS
        .iter()
        .map(|o| (strsim::levenshtein(word, o.long), o.long))
        .min_by_key(|(distance, _)| *distance);
    if let Some((distance, long)) = closest
        && distance <= 2
    {
        return format!("unknown option `{}` (did you mean `{long}`?)", excerpt(word));
    }
    format!(
        "unknown option `{}`: pip accepts only -i/--index-url, --extra-index-url, \
         -f/--find-links, -r/--requirement, -c/--constraint, -e/--editable, --no-index, \
         --pre, --trusted-host, --no-binary, --only-binary, --prefer-binary, \
         --require-hashes, --use-feature, --hash, --global-option and \
         -C/--config-settings in a requirements file",
        excerpt(word)
    )
}

fn parse_options(text: &str) -> Result<Vec<LineOption>, String> {
    let mut out = Vec::new();
    let mut words = text.split_whitespace();
    while let Some(word) = words.next() {
        if !word.starts_with('-') {
            // optparse keeps stray words as arguments, and pip drops them; so does gpuenv.
            continue;
        }
        let (spec, attached) = if let Some(long) = word.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (long, None),
            };
            let spec = find_option(&format!("--{name}"))?;
            if value.is_some() && !spec.takes_value {
                return Err(format!("option `{}` takes no value", spec.long));
            }
            (spec, value.map(str::to_string))
        } else {
            let mut chars = word.chars().skip(1);
            let Some(letter) = chars.next() else {
                return Err("unknown option `-`: expected an option name after `-`".to_string());
            };
            let Some(spec) = OPTIONS.iter().find(|o| o.short == Some(letter)) else {
                return Err(unknown_option(word));
            };
            // optparse reads `-rfile.txt` as `-r file.txt`.
            let rest: String = chars.collect();
            (spec, (!rest.is_empty()).then_some(rest))
        };
        let value = match (spec.takes_value, attached) {
            (false, _) => None,
            (true, Some(value)) => Some(unquote(&value).to_string()),
            (true, None) => match words.next() {
                Some(value) => Some(unquote(value).to_string()),
                None => return Err(format!("option `{}` needs a value", display_name(spec))),
            },
        };
        out.push(LineOption { spec, value });
    }
    Ok(out)
}

/// pip splits option words like a shell, so `-r "my reqs.txt"` loses its quotes; a
/// quoted value with a space in it is beyond this word splitter and stays cut.
fn unquote(value: &str) -> &str {
    for quote in ['"', '\''] {
        if let Some(inner) = value.strip_prefix(quote).and_then(|v| v.strip_suffix(quote)) {
            return inner;
        }
    }
    value
}

fn display_name(spec: &OptionSpec) -> String {
    match spec.short {
        Some(short) => format!("-{short}/{}", spec.long),
        None => spec.long.to_string(),
    }
}

fn apply_option(option: LineOption, origin: &str, needs: &mut ProjectNeeds) {
    let Some(value) = option.value else {
        return;
    };
    match option.spec.action {
        Action::Index => {
            if let Some(variant) = pytorch_index_variant(&value) {
                needs.index_variants.push((variant, origin.to_string()));
            }
        }
        Action::Include => needs.includes.push((value, origin.to_string())),
        Action::Editable => {
            if is_relative_path(&value) {
                needs.local_paths.push((value.clone(), origin.to_string()));
            }
            if let Some(name) = egg_name(&value) {
                needs.requirements.push(Requirement {
                    name: name.clone(),
                    specifiers: VersionSpecifiers::empty(),
                    marker: None,
                    install: Install::Source(value.clone()),
                    build_options: Vec::new(),
                    origin: origin.to_string(),
                    pyproject: false,
                    extras: Vec::new(),
                });
                if let Some(pins) = needs.pins_of(&name) {
                    pins.push(Pin {
                        specifiers: VersionSpecifiers::empty(),
                        variant: None,
                        marker: None,
                        origin: origin.to_string(),
                    });
                }
            }
        }
        Action::Ignore => {}
    }
}

/// The variant of a PyTorch wheel index: `https://download.pytorch.org/whl/cu121`, with
/// or without a trailing slash, and the `nightly` and `test` channels
/// (`.../whl/nightly/cu124`). ROCm, XPU and anything else name no CUDA variant.
pub(crate) fn pytorch_index_variant(url: &str) -> Option<Variant> {
    let rest = strip_prefix_ignore_case(url.trim(), "https://")
        .or_else(|| strip_prefix_ignore_case(url.trim(), "http://"))?;
    let rest = rest.split(['?', '#']).next().unwrap_or(rest);
    let (host, path) = rest.split_once('/')?;
    if !host.eq_ignore_ascii_case("download.pytorch.org") {
        return None;
    }
    let path = path.strip_suffix('/').unwrap_or(path);
    let segments: Vec<&str> = path.split('/').collect();
    let variant = match segments.as_slice() {
        ["whl", variant] => variant,
        ["whl", "nightly" | "test", variant] => variant,
        _ => return None,
    };
    variant.parse().ok()
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &text[prefix.len()..])
}

/// Reads one requirement of a requirements file: PEP 508, or a URL or path as pip allows.
fn read_requirement_line(requirement: &str, origin: &str, needs: &mut ProjectNeeds) -> Result<(), String> {
    if is_direct_reference(requirement) {
        let location = requirement.split(';').next().unwrap_or(requirement).trim();
        if is_relative_path(location) {
            needs.local_paths.push((location.to_string(), origin.to_string()));
        }
        return read_direct_reference(requirement, origin, needs);
    }
    read_pep508(requirement, origin, needs).map_err(|reason| {
        format!(
            "invalid requirement `{}`: {}",
            excerpt(requirement),
            excerpt(&reason)
        )
    })
}

/// Whether pip reads the line as a URL or a path rather than a PEP 508 requirement:
/// `./pkg`, `/abs/torch.whl`, `https://...`, `git+https://...`, `torch-2.4.1+cu121-...whl`.
fn is_direct_reference(requirement: &str) -> bool {
    let name_end = requirement
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')))
        .unwrap_or(requirement.len());
    let name = &requirement[..name_end];
    let rest = &requirement[name_end..];
    if name.starts_with('.') {
        return true;
    }
    if name.is_empty() {
        return rest.starts_with(['/', '\\', '~']);
    }
    if rest.starts_with(['/', '\\', ':']) {
        return true;
    }
    // `git+https://...`, and a wheel file name whose version has a local segment.
    if rest.starts_with('+') {
        return true;
    }
    // pip treats an archive file name as a path even when no such file exists.
    let location = requirement.split(';').next().unwrap_or(requirement).trim();
    !location.contains('@') && is_archive(location)
}

/// Whether pip reads `location` as a path relative to where it runs (`.`, `./pkg`,
/// `libs/pkg[extra]`, `dist/x.whl`): no URL scheme, not absolute, not from a home folder.
fn is_relative_path(location: &str) -> bool {
    let location = location.trim();
    !location.is_empty()
        && !location.contains("://")
        && !location.starts_with(['/', '\\', '~'])
        && !location.to_ascii_lowercase().starts_with("file:")
        // A Windows drive (`C:\wheels`).
        && location.as_bytes().get(1).is_none_or(|&b| b != b':')
}

fn is_archive(location: &str) -> bool {
    let lower = location.to_ascii_lowercase();
    [
        ".whl", ".zip", ".tar.gz", ".tgz", ".tar.bz2", ".tbz", ".tar.xz", ".txz", ".tar",
    ]
    .iter()
    .any(|ext| lower.ends_with(ext))
}

fn read_direct_reference(requirement: &str, origin: &str, needs: &mut ProjectNeeds) -> Result<(), String> {
    // pip splits a marker off a URL at `; ` (a `;` may be part of a URL), off a path at `;`.
    let (location, marker) = match requirement.split_once("; ") {
        Some((location, marker)) => (location, Some(marker)),
        None if !requirement.contains("://") => match requirement.split_once(';') {
            Some((location, marker)) => (location, Some(marker)),
            None => (requirement, None),
        },
        None => (requirement, None),
    };
    let marker = match marker.map(str::trim).filter(|m| !m.is_empty()) {
        Some(text) => {
            pep508::check_marker(text)
                .map_err(|reason| format!("invalid marker `{}`: {}", excerpt(text), excerpt(&reason)))?;
            let tree = MarkerTree::from_str(text).map_err(|e| {
                format!(
                    "invalid marker `{}` after `{}`: {}",
                    excerpt(text),
                    excerpt(location.trim()),
                    excerpt(&pep508::reason(&e))
                )
            })?;
            (!tree.is_true()).then_some(tree)
        }
        None => None,
    };
    let location = location.trim();
    if let Some((name, specifiers, variant)) = pin_from_location(location) {
        needs.requirements.push(Requirement {
            name: name.clone(),
            specifiers: specifiers.clone(),
            marker: marker.clone(),
            install: install_of(location),
            build_options: Vec::new(),
            origin: origin.to_string(),
            pyproject: false,
            extras: Vec::new(),
        });
        if let Some(pins) = needs.pins_of(&name) {
            pins.push(Pin {
                specifiers,
                variant,
                marker,
                origin: origin.to_string(),
            });
        }
    }
    Ok(())
}

/// How pip installs from a URL or path: a wheel file as it is, anything else built.
fn install_of(location: &str) -> Install {
    let path = location.split(['#', '?']).next().unwrap_or(location);
    if path.to_ascii_lowercase().ends_with(".whl") {
        Install::Wheel(percent_decode(path.rsplit(['/', '\\']).next().unwrap_or(path)))
    } else {
        Install::Source(location.to_string())
    }
}

/// The project a URL or path installs, where it says: a wheel file name
/// (`torch-2.4.1%2Bcu121-cp311-cp311-linux_x86_64.whl` pins `==2.4.1+cu121`) or an
/// `#egg=torch` fragment (any version).
fn pin_from_location(location: &str) -> Option<(String, VersionSpecifiers, Option<Variant>)> {
    let (before_fragment, fragment) = match location.split_once('#') {
        Some((before, fragment)) => (before, Some(fragment)),
        None => (location, None),
    };
    let path = before_fragment.split('?').next().unwrap_or(before_fragment);
    let file_name = percent_decode(path.rsplit(['/', '\\']).next().unwrap_or(path));
    if let Some(stem) = file_name.strip_suffix(".whl") {
        let mut parts = stem.split('-');
        if let (Some(name), Some(version)) = (parts.next(), parts.next())
            && let Ok(version) = version.parse::<Version>()
        {
            let variant = local_variant(&version);
            let specifiers = VersionSpecifiers::from(VersionSpecifier::equals_version(version));
            return Some((pep508::normalize_name(name), specifiers, variant));
        }
    }
    let name = egg_in_fragment(fragment?)?;
    Some((name, VersionSpecifiers::empty(), None))
}

/// The project an editable or VCS URL names by its `#egg=` fragment.
fn egg_name(value: &str) -> Option<String> {
    let (_, fragment) = value.split_once('#')?;
    egg_in_fragment(fragment)
}

fn egg_in_fragment(fragment: &str) -> Option<String> {
    fragment
        .split('&')
        .find_map(|pair| pair.strip_prefix("egg="))
        .map(egg_project)
}

/// The normalized project name of an `#egg=` value (`torch`, `torch[extra]`).
fn egg_project(egg: &str) -> String {
    let end = egg
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')))
        .unwrap_or(egg.len());
    pep508::normalize_name(&egg[..end])
}

/// Decodes `%2B` and friends; a malformed escape is kept as written.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = text.get(i + 1..i + 3)
            && hex.bytes().all(|b| b.is_ascii_hexdigit())
            && let Ok(byte) = u8::from_str_radix(hex, 16)
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses a PEP 508 requirement and records it if it is on a tracked project; the error
/// is pep508's reason, on one line.
fn read_pep508(requirement: &str, origin: &str, needs: &mut ProjectNeeds) -> Result<(), String> {
    let parsed = pep508::parse_requirement(requirement)?;
    let marker = (!parsed.marker.is_true()).then(|| parsed.marker.clone());
    let (specifiers, install) = match &parsed.version_or_url {
        None => (VersionSpecifiers::empty(), Install::Index),
        Some(VersionOrUrl::VersionSpecifier(specifiers)) => (specifiers.clone(), Install::Index),
        Some(VersionOrUrl::Url(url)) => (VersionSpecifiers::empty(), install_of(url.as_str())),
    };
    needs.requirements.push(Requirement {
        name: parsed.name.to_string(),
        specifiers,
        marker: marker.clone(),
        install,
        build_options: Vec::new(),
        origin: origin.to_string(),
        pyproject: false,
        extras: parsed
            .extras
            .iter()
            .map(|e| pep508::normalize_name(e.as_ref()))
            .collect(),
    });
    let Some(pins) = needs.pins_of(parsed.name.as_ref()) else {
        return Ok(());
    };
    let (specifiers, variant) = match &parsed.version_or_url {
        None => (VersionSpecifiers::empty(), None),
        Some(VersionOrUrl::VersionSpecifier(specifiers)) => {
            let variant = specifiers
                .iter()
                .filter(|s| matches!(s.operator(), Operator::Equal | Operator::ExactEqual))
                .find_map(|s| local_variant(s.version()));
            (specifiers.clone(), variant)
        }
        Some(VersionOrUrl::Url(url)) => match pin_from_location(url.as_str()) {
            // The URL's file name may spell another project; the requirement's name wins.
            Some((_, specifiers, variant)) => (specifiers, variant),
            None => (VersionSpecifiers::empty(), None),
        },
    };
    pins.push(Pin {
        specifiers,
        variant,
        marker,
        origin: origin.to_string(),
    });
    Ok(())
}

// ---------------------------------------------------------------------------------------
// pyproject.toml
// ---------------------------------------------------------------------------------------

/// A parsed pyproject.toml with what is needed to point at a line.
struct Pyproject<'a> {
    file: &'a str,
    text: &'a str,
}

type Value<'i> = Spanned<DeValue<'i>>;

impl Pyproject<'_> {
    fn line_at(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1
    }

    fn error(&self, value: &Value<'_>, message: String) -> InputError {
        InputError::new(self.file, Some(self.line_at(value.span().start)), message)
    }

    fn wrong_type(&self, key: &str, expected: &str, value: &Value<'_>) -> InputError {
        let found = value.get_ref().type_str();
        self.error(
            value,
            format!("`{key}` must be {expected}, found {}", a_or_an(found)),
        )
    }

    fn origin(&self, key: &str) -> Origin {
        format!("{}: {key}", self.file)
    }

    /// The table at `key` of `table`; `None` when absent.
    fn table<'t, 'i>(
        &self,
        table: &'t DeTable<'i>,
        name: &str,
        key: &str,
    ) -> Result<Option<&'t DeTable<'i>>, InputError> {
        match table.get(name) {
            None => Ok(None),
            Some(value) => match value.get_ref().as_table() {
                Some(inner) => Ok(Some(inner)),
                None => Err(self.wrong_type(key, "a table", value)),
            },
        }
    }

    /// Reads an array of PEP 508 strings at `key`, recording pins. PEP 735's
    /// `{include-group = "..."}` entries are skipped where `groups` allows them: the
    /// group they name is read on its own anyway.
    fn requirements(
        &self,
        key: &str,
        value: &Value<'_>,
        groups: bool,
        needs: &mut ProjectNeeds,
    ) -> Result<(), InputError> {
        let expected = "an array of PEP 508 requirement strings";
        let Some(items) = value.get_ref().as_array() else {
            return Err(self.wrong_type(key, expected, value));
        };
        for (index, item) in items.iter().enumerate() {
            let item_key = format!("{key}[{index}]");
            match item.get_ref() {
                DeValue::String(text) => {
                    read_pep508(text, &self.origin(&item_key), needs).map_err(|reason| {
                        self.error(
                            item,
                            format!(
                                "`{item_key}` is not a valid requirement `{}`: {}",
                                excerpt(text),
                                excerpt(&reason)
                            ),
                        )
                    })?;
                }
                DeValue::Table(table) if groups && table.get("include-group").is_some() => {}
                _ => {
                    let expected = if groups {
                        "a PEP 508 requirement string or an `{include-group = \"...\"}` table"
                    } else {
                        "a PEP 508 requirement string"
                    };
                    return Err(self.wrong_type(&item_key, expected, item));
                }
            }
        }
        Ok(())
    }
}

fn a_or_an(type_name: &str) -> String {
    if type_name.starts_with(['a', 'e', 'i', 'o', 'u']) {
        format!("an {type_name}")
    } else {
        format!("a {type_name}")
    }
}

/// Parses a `pyproject.toml`. `file` is the name to put in messages and origins.
///
/// Reads `project.requires-python`, `project.dependencies`,
/// `project.optional-dependencies.*` (kept apart in [`ProjectNeeds::extras`]: an extra
/// constrains whoever installs it, see [`ProjectNeeds::choose_extras`]),
/// `dependency-groups.*` and the URLs of `[[tool.uv.index]]`. A file without `[project]`
/// gives empty needs.
pub fn parse_pyproject(file: &str, text: &str) -> Result<ProjectNeeds, InputError> {
    let toml_error = |e: toml::de::Error| {
        let line = e.span().map(|span| Pyproject { file, text }.line_at(span.start));
        InputError::new(
            file,
            line,
            format!("not valid TOML: {}", excerpt(&pep508::first_line(e.message()))),
        )
    };
    // `from_str` is the full TOML check (duplicate keys, redefined tables); the span-keeping
    // parse below is what lets later errors name their line.
    toml::from_str::<toml::Table>(text).map_err(toml_error)?;
    let document = DeTable::parse(text).map_err(toml_error)?;
    let doc = Pyproject { file, text };
    let root = document.get_ref();
    let mut needs = ProjectNeeds::default();

    if let Some(project) = doc.table(root, "project", "project")? {
        if let Some(value) = project.get("requires-python") {
            let key = "project.requires-python";
            let Some(text) = value.get_ref().as_str() else {
                return Err(doc.wrong_type(key, "a string of PEP 440 version specifiers", value));
            };
            let specifiers = text.parse::<VersionSpecifiers>().map_err(|e| {
                let reason = pep508::first_line(&e.to_string()).replace("Failed to parse version: ", "");
                doc.error(
                    value,
                    format!(
                        "`{key}` is not a version specifier: `{}`: {}",
                        excerpt(text),
                        excerpt(&reason)
                    ),
                )
            })?;
            needs.requires_python = Some((specifiers, doc.origin(key)));
        }
        if let Some(value) = project.get("dependencies") {
            doc.requirements("project.dependencies", value, false, &mut needs)?;
        }
        if let Some(extras) = doc.table(project, "optional-dependencies", "project.optional-dependencies")? {
            for (name, value) in extras {
                let key = format!("project.optional-dependencies.{}", excerpt(name.get_ref()));
                // Kept apart: installed only when chosen (`--extra`, `--all-extras`).
                let mut group = ProjectNeeds::default();
                doc.requirements(&key, value, false, &mut group)?;
                for r in &mut group.requirements {
                    r.pyproject = true;
                }
                needs.extras.push((pep508::normalize_name(name.get_ref()), group));
            }
        }
    }

    if let Some(groups) = doc.table(root, "dependency-groups", "dependency-groups")? {
        for (name, value) in groups {
            let key = format!("dependency-groups.{}", excerpt(name.get_ref()));
            doc.requirements(&key, value, true, &mut needs)?;
        }
    }

    if let Some(tool) = doc.table(root, "tool", "tool")?
        && let Some(uv) = doc.table(tool, "uv", "tool.uv")?
        && let Some(indexes) = uv.get("index")
    {
        let Some(items) = indexes.get_ref().as_array() else {
            return Err(doc.wrong_type("tool.uv.index", "an array of tables", indexes));
        };
        for (index, item) in items.iter().enumerate() {
            let key = format!("tool.uv.index[{index}]");
            let Some(entry) = item.get_ref().as_table() else {
                return Err(doc.wrong_type(&key, "a table", item));
            };
            let Some(url) = entry.get("url") else {
                continue;
            };
            let Some(text) = url.get_ref().as_str() else {
                return Err(doc.wrong_type(&format!("{key}.url"), "a string", url));
            };
            if let Some(variant) = pytorch_index_variant(text) {
                needs.index_variants.push((variant, doc.origin(&key)));
            }
        }
    }
    for r in &mut needs.requirements {
        r.pyproject = true;
    }
    Ok(needs)
}

// ---------------------------------------------------------------------------------------
// Markers
// ---------------------------------------------------------------------------------------

/// Whether a pin's marker holds on Linux x86_64 CPython `python` (`"3.11"`); true
/// without a marker, and true when `python` is not a version (a pin is then not dropped
/// on a guess).
pub fn marker_applies(marker: Option<&MarkerTree>, python: &str) -> bool {
    let Some(marker) = marker else {
        return true;
    };
    let Some(environment) = linux_cpython(python) else {
        return true;
    };
    // No extras: an extra's requirements are listed under it, not behind `extra ==`.
    marker.evaluate(&environment, &[])
}

/// The environment of CPython `python` on Linux x86_64, the platform gpuenv answers for.
fn linux_cpython(python: &str) -> Option<MarkerEnvironment> {
    pep508::linux_cpython(python, "x86_64")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reqs(text: &str) -> ProjectNeeds {
        match parse_requirements("requirements.txt", text) {
            Ok(needs) => needs,
            Err(e) => panic!("{e}"),
        }
    }

    fn req_err(text: &str) -> InputError {
        match parse_requirements("requirements.txt", text) {
            Ok(needs) => panic!("expected an error, got {needs:?}"),
            Err(e) => e,
        }
    }

    /// The file's needs with every optional dependency group, as a query reads them.
    fn pyproject(text: &str) -> ProjectNeeds {
        match parse_pyproject("pyproject.toml", text) {
            Ok(mut needs) => {
                needs.choose_extras(&ExtrasChoice::default(), true).unwrap();
                needs
            }
            Err(e) => panic!("{e}"),
        }
    }

    fn pyproject_err(text: &str) -> InputError {
        match parse_pyproject("pyproject.toml", text) {
            Ok(needs) => panic!("expected an error, got {needs:?}"),
            Err(e) => e,
        }
    }

    fn variant(s: &str) -> Variant {
        s.parse().unwrap()
    }

    fn version(s: &str) -> Version {
        s.parse().unwrap()
    }

    fn variants(needs: &ProjectNeeds) -> Vec<(String, String)> {
        needs
            .index_variants
            .iter()
            .map(|(v, o)| (v.to_string(), o.clone()))
            .collect()
    }

    #[test]
    fn plain_pins() {
        let needs = reqs("torch==2.4.1\ntorchvision>=0.19,<0.20\ntorchaudio\nnumpy<2\n");
        assert_eq!(needs.torch.len(), 1);
        let torch = &needs.torch[0];
        assert_eq!(torch.specifiers.to_string(), "==2.4.1");
        assert_eq!(torch.variant, None);
        assert!(torch.marker.is_none());
        assert_eq!(torch.origin, "requirements.txt:1");
        assert!(torch.specifiers.contains(&version("2.4.1+cu121")));
        assert_eq!(needs.torchvision[0].specifiers.to_string(), ">=0.19, <0.20");
        assert_eq!(needs.torchvision[0].origin, "requirements.txt:2");
        assert!(needs.torchaudio[0].specifiers.is_empty());
        assert!(needs.index_variants.is_empty() && needs.includes.is_empty());
    }

    #[test]
    fn local_version_names_the_variant() {
        let needs = reqs("torch==2.4.1+cu121\ntorchvision==0.19.1+cpu\ntorchaudio>=2.4\n");
        let torch = &needs.torch[0];
        assert_eq!(torch.variant, Some(variant("cu121")));
        assert_eq!(torch.specifiers.to_string(), "==2.4.1+cu121");
        assert_eq!(needs.torchvision[0].variant, Some(Variant::Cpu));
        assert_eq!(needs.torchaudio[0].variant, None);
        // `===` is an `==` too for this purpose.
        let needs = reqs("torch===2.4.1+cu118\n");
        assert_eq!(needs.torch[0].variant, Some(variant("cu118")));
    }

    #[test]
    fn index_url_forms() {
        let text = "\
-i https://download.pytorch.org/whl/cu118
--index-url https://download.pytorch.org/whl/cu121
--index-url=https://download.pytorch.org/whl/cu124/
--extra-index-url https://download.pytorch.org/whl/cpu
--extra-index-url=https://download.pytorch.org/whl/nightly/cu126
-ihttps://download.pytorch.org/whl/cu117
--extra-index https://download.pytorch.org/whl/cu102
torch
";
        let needs = reqs(text);
        assert_eq!(
            variants(&needs),
            [
                ("cu118", 1),
                ("cu121", 2),
                ("cu124", 3),
                ("cpu", 4),
                ("cu126", 5),
                ("cu117", 6),
                ("cu102", 7)
            ]
            .map(|(v, l)| (v.to_string(), format!("requirements.txt:{l}")))
        );
    }

    #[test]
    fn other_indexes_name_no_variant() {
        let text = "\
--index-url https://pypi.org/simple
--extra-index-url https://download.pytorch.org/whl/rocm6.2
--extra-index-url https://download.pytorch.org/whl/xpu
--extra-index-url https://example.com/whl/cu121
--extra-index-url https://download.pytorch.org/whl/cu121/torch/
-f https://download.pytorch.org/whl/torch_stable.html
--find-links https://download.pytorch.org/whl/cu113/torch_stable.html
";
        assert!(reqs(text).index_variants.is_empty());
    }

    #[test]
    fn comments_and_continuations() {
        let text = "\
# the stack
torch==2.4.1  # pinned for the cluster
torchvision \\
    ==0.19.1 \\
    ; python_version >= \"3.9\"
   # indented comment

pkg @ https://example.com/pkg-1.0.tar.gz#egg=pkg
torchaudio==2.4.1#not-a-comment-but-a-syntax-error
";
        let e = req_err(text);
        assert_eq!(e.line, Some(9), "{e}");
        let text = text.replace(
            "torchaudio==2.4.1#not-a-comment-but-a-syntax-error",
            "torchaudio==2.4.1 #ok",
        );
        let needs = reqs(&text);
        assert_eq!(needs.torch[0].specifiers.to_string(), "==2.4.1");
        let vision = &needs.torchvision[0];
        assert_eq!(vision.specifiers.to_string(), "==0.19.1");
        assert_eq!(vision.origin, "requirements.txt:3");
        assert!(vision.marker.is_some());
        assert_eq!(needs.torchaudio[0].origin, "requirements.txt:9");
    }

    #[test]
    fn comment_line_ends_a_continuation() {
        let needs = reqs("torch==2.4.1 \\\n# comment\ntorchvision\n");
        assert_eq!(needs.torch[0].origin, "requirements.txt:1");
        assert_eq!(needs.torchvision[0].origin, "requirements.txt:3");
        // A file that ends in the middle of a continuation still counts its last line.
        let needs = reqs("numpy\ntorch==2.4.1 \\");
        assert_eq!(needs.torch[0].origin, "requirements.txt:2");
    }

    #[test]
    fn hashes_are_stripped() {
        let text = "\
--require-hashes
torch==2.4.1+cu121 \\
    --hash=sha256:aaaa \\
    --hash sha256:bbbb
numpy==1.26.4 --hash=sha256:cccc
";
        let needs = reqs(text);
        assert_eq!(needs.torch[0].specifiers.to_string(), "==2.4.1+cu121");
        assert_eq!(needs.torch[0].variant, Some(variant("cu121")));
        assert_eq!(needs.torch[0].origin, "requirements.txt:2");
    }

    #[test]
    fn includes() {
        let text = "\
-r base.txt
--requirement=gpu/requirements.txt
-c constraints.txt
--constraint ../pins.txt
-rdev.txt
-r 'quoted.txt'
";
        let needs = reqs(text);
        let got: Vec<(&str, &str)> = needs
            .includes
            .iter()
            .map(|(p, o)| (p.as_str(), o.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("base.txt", "requirements.txt:1"),
                ("gpu/requirements.txt", "requirements.txt:2"),
                ("constraints.txt", "requirements.txt:3"),
                ("../pins.txt", "requirements.txt:4"),
                ("dev.txt", "requirements.txt:5"),
                ("quoted.txt", "requirements.txt:6"),
            ]
        );
    }

    #[test]
    fn requirements_installed_from_the_project_tree_are_noted() {
        let text = "\
-e .
-e git+https://github.com/pytorch/vision.git@v0.19.1#egg=torchvision
--editable ./local[dev]
./libs/tokenizer
dist/mylib-0.1-py3-none-any.whl ; python_version >= \"3.9\"
/opt/wheels/other-1.0-py3-none-any.whl
file:///srv/pkg
https://example.com/x-1.0.tar.gz
numpy==1.26.4
";
        let needs = reqs(text);
        let got: Vec<(&str, &str)> = needs
            .local_paths
            .iter()
            .map(|(p, o)| (p.as_str(), o.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (".", "requirements.txt:1"),
                ("./local[dev]", "requirements.txt:3"),
                ("./libs/tokenizer", "requirements.txt:4"),
                ("dist/mylib-0.1-py3-none-any.whl", "requirements.txt:5"),
            ]
        );
    }

    #[test]
    fn every_named_requirement_is_recorded_with_how_it_installs() {
        let text = "\
flash-attn==2.6.3
flash_attn ; python_version >= \"3.10\"
Flash.Attn>=2
apex @ git+https://github.com/NVIDIA/apex --config-settings \"--build-option=--cuda_ext\"
-e git+https://github.com/facebookresearch/xformers.git#egg=xformers --global-option=--verbose
https://github.com/Dao-AILab/flash-attention/releases/download/v2.6.3/flash_attn-2.6.3%2Bcu123torch2.4cxx11abiFALSE-cp311-cp311-linux_x86_64.whl
deepspeed @ https://files.example.org/deepspeed-0.16.5.tar.gz
./vendored/pkg
torch==2.4.1
";
        let needs = reqs(text);
        let got: Vec<(&str, &str, &Install)> = needs
            .requirements
            .iter()
            .map(|r| (r.name.as_str(), r.origin.as_str(), &r.install))
            .collect();
        assert_eq!(
            got,
            [
                ("flash-attn", "requirements.txt:1", &Install::Index),
                ("flash-attn", "requirements.txt:2", &Install::Index),
                ("flash-attn", "requirements.txt:3", &Install::Index),
                (
                    "apex",
                    "requirements.txt:4",
                    &Install::Source("git+https://github.com/NVIDIA/apex".into())
                ),
                (
                    "xformers",
                    "requirements.txt:5",
                    &Install::Source(
                        "git+https://github.com/facebookresearch/xformers.git#egg=xformers".into()
                    )
                ),
                (
                    "flash-attn",
                    "requirements.txt:6",
                    &Install::Wheel(
                        "flash_attn-2.6.3+cu123torch2.4cxx11abiFALSE-cp311-cp311-linux_x86_64.whl".into()
                    )
                ),
                (
                    "deepspeed",
                    "requirements.txt:7",
                    &Install::Source("https://files.example.org/deepspeed-0.16.5.tar.gz".into())
                ),
                ("torch", "requirements.txt:9", &Install::Index),
            ]
        );
        assert_eq!(needs.requirements[0].specifiers.to_string(), "==2.6.3");
        assert!(needs.requirements[1].marker.is_some());
        assert_eq!(needs.requirements[3].build_options, ["--build-option=--cuda_ext"]);
        assert_eq!(needs.requirements[4].build_options, ["--verbose"]);
        assert!(needs.requirements.iter().all(|r| !r.pyproject));
        // Only the tracked projects become pins.
        assert_eq!(needs.torch.len(), 1);
    }

    #[test]
    fn pyproject_requirements_are_recorded_from_every_table() {
        let needs = pyproject(PYPROJECT);
        let got: Vec<(&str, &str)> = needs
            .requirements
            .iter()
            .map(|r| (r.name.as_str(), r.origin.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("numpy", "pyproject.toml: project.dependencies[0]"),
                ("torch", "pyproject.toml: project.dependencies[1]"),
                ("torchvision", "pyproject.toml: project.dependencies[2]"),
                ("pytest", "pyproject.toml: dependency-groups.dev[0]"),
                ("torch", "pyproject.toml: dependency-groups.dev[2]"),
                ("ruff", "pyproject.toml: dependency-groups.lint[0]"),
                // The optional groups last: kept apart until chosen, then merged.
                (
                    "torchaudio",
                    "pyproject.toml: project.optional-dependencies.audio[0]"
                ),
                ("torch", "pyproject.toml: project.optional-dependencies.cpu[0]"),
            ]
        );
        assert!(needs.requirements.iter().all(|r| r.pyproject));
        // Merged with a requirements file, each keeps where it came from.
        let mut both = reqs("flash-attn\n");
        both.merge(needs);
        assert!(!both.requirements[0].pyproject && both.requirements[1].pyproject);
    }

    #[test]
    fn known_options_are_accepted() {
        let text = "\
--pre
--trusted-host download.pytorch.org
--no-binary :all:
--only-binary=:all:
--prefer-binary
--no-index
--use-feature=fast-deps
-e .
-e git+https://github.com/pytorch/vision.git@v0.19.1#egg=torchvision
--editable ./local[dev]
torch==2.4.1 --config-settings=foo=bar
";
        let needs = reqs(text);
        assert_eq!(needs.torch.len(), 1);
        assert_eq!(needs.torchvision.len(), 1);
        assert!(needs.torchvision[0].specifiers.is_empty());
        assert_eq!(needs.torchvision[0].origin, "requirements.txt:9");
    }

    #[test]
    fn unknown_option_is_an_error() {
        let e = req_err("torch\n--frobnicate\n");
        assert_eq!(e.line, Some(2));
        assert!(e.message.starts_with("unknown option `--frobnicate`"), "{e}");
        assert!(
            e.to_string().starts_with("requirements.txt:2: unknown option"),
            "{e}"
        );
        let e = req_err("-x foo\n");
        assert!(e.message.contains("`-x`"), "{e}");
        let e = req_err("torch==2.4.1 --hashes=sha256:aa\n");
        assert_eq!(e.message, "unknown option `--hashes` (did you mean `--hash`?)");
        let e = req_err("-r\n");
        assert!(e.message.contains("needs a value"), "{e}");
        let e = req_err("--pre=yes\n");
        assert!(e.message.contains("takes no value"), "{e}");
        let e = req_err("--no something\n");
        assert!(e.message.contains("ambiguous"), "{e}");
    }

    #[test]
    fn names_pep508_would_panic_on_are_errors() {
        for (text, name) in [
            ("a-%", "a-"),
            ("torch_ ==2.4.1", "torch_"),
            ("torch[cuda-]", "cuda-"),
            ("x[a, b.]>=1", "b."),
        ] {
            let e = req_err(text);
            assert!(
                e.message
                    .contains(&format!("`{name}` must end with a letter or a digit")),
                "{e}"
            );
        }
        // At the very end, pep508 reports it itself.
        assert!(
            req_err("torch-")
                .message
                .starts_with("invalid requirement `torch-`")
        );
    }

    #[test]
    fn string_markers_compared_with_tilde_equal_are_errors() {
        for text in [
            "torch ; 'linux' ~= sys_platform",
            "torch ; python_version < '3.12' and (\"x\"~=platform_machine)",
            "https://download.pytorch.org/whl/cu121/torch-2.4.1%2Bcu121-cp311-cp311-linux_x86_64.whl ; '1' ~= os.name",
        ] {
            let e = req_err(text);
            assert!(e.message.contains("compares versions"), "{e}");
        }
        // Markers still work afterwards: pep508 never got to panic and poison its interner.
        let needs = reqs("torch ; python_version ~= '3.11' and sys_platform == 'linux'\n");
        assert!(marker_applies(needs.torch[0].marker.as_ref(), "3.11"));
        assert!(!marker_applies(needs.torch[0].marker.as_ref(), "3.10"));
        // `~=` against a string key on the left is pep508's to report (or ignore), not a panic.
        let _ = parse_requirements("r.txt", "torch ; sys_platform ~= 'linux'\n");
    }

    #[test]
    fn syntax_error_names_the_line() {
        let e = req_err("numpy\n\ntorch==2.4.x\n");
        assert_eq!(e.file, "requirements.txt");
        assert_eq!(e.line, Some(3));
        assert!(
            e.message.starts_with("invalid requirement `torch==2.4.x`: "),
            "{e}"
        );
        assert!(!e.message.contains('\n'), "{e}");
        assert!(
            e.to_string()
                .starts_with("requirements.txt:3: invalid requirement"),
            "{e}"
        );
        // Reported at the first line of a continued line.
        let e = req_err("numpy\ntorchvision \\\n  >= 0.19 \\\n  ;;\n");
        assert_eq!(e.line, Some(2), "{e}");
        // And lines after a continuation keep their own numbers.
        let e = req_err("torch \\\n  ==2.4.1\nnot valid!\n");
        assert_eq!(e.line, Some(3), "{e}");
    }

    #[test]
    fn markers() {
        let needs =
            reqs("torch==2.4.1; python_version < \"3.12\"\ntorch==2.5.1; python_version >= \"3.12\"\n");
        let old = needs.torch[0].marker.as_ref();
        let new = needs.torch[1].marker.as_ref();
        assert!(marker_applies(old, "3.11"));
        assert!(!marker_applies(old, "3.12"));
        assert!(!marker_applies(new, "3.11"));
        assert!(marker_applies(new, "3.12"));
        assert!(marker_applies(None, "3.12"));
        // A python that is not a version keeps the pin rather than guessing.
        assert!(marker_applies(old, "three"));
        assert!(marker_applies(old, ""));
    }

    #[test]
    fn markers_for_the_linux_x86_64_host() {
        let m = |text: &str| MarkerTree::from_str(text).unwrap();
        assert!(marker_applies(Some(&m("sys_platform == 'linux'")), "3.11"));
        assert!(!marker_applies(Some(&m("sys_platform == 'darwin'")), "3.11"));
        assert!(marker_applies(Some(&m("platform_machine == 'x86_64'")), "3.11"));
        assert!(!marker_applies(Some(&m("platform_machine == 'aarch64'")), "3.11"));
        assert!(marker_applies(
            Some(&m("platform_python_implementation == 'CPython'")),
            "3.11"
        ));
        assert!(marker_applies(
            Some(&m("python_full_version >= '3.11.0'")),
            "3.11"
        ));
        assert!(marker_applies(
            Some(&m("python_full_version >= '3.11.3'")),
            "3.11.4"
        ));
        assert!(!marker_applies(Some(&m("python_version < '3.11'")), "3.11.4"));
        assert!(!marker_applies(Some(&m("extra == 'cuda'")), "3.11"));
    }

    #[test]
    fn names_are_normalized() {
        let needs = reqs("Torch==2.4.1\nTORCH>=2\nTorchVision\ntorch.audio\ntorch_vision\ntorch-vision\n");
        assert_eq!(needs.torch.len(), 2);
        assert_eq!(
            needs.torchvision.len(),
            1,
            "torch_vision and torch-vision are another project"
        );
        assert!(
            needs.torchaudio.is_empty(),
            "torch.audio is `torch-audio`, not torchaudio"
        );
        assert_eq!(pep508::normalize_name("Torch__Vision..x"), "torch-vision-x");
    }

    #[test]
    fn direct_references() {
        let text = "\
https://download.pytorch.org/whl/cu121/torch-2.4.1%2Bcu121-cp311-cp311-linux_x86_64.whl
./wheels/torchvision-0.19.1+cu121-cp311-cp311-linux_x86_64.whl ; python_version == \"3.11\"
torchaudio @ https://download.pytorch.org/whl/cu121/torchaudio-2.4.1%2Bcu121-cp311-cp311-linux_x86_64.whl
git+https://github.com/pytorch/pytorch@v2.4.1#egg=torch
./vendored/numpy
/abs/path/pkg.tar.gz
other-1.0-py3-none-any.whl
";
        let needs = reqs(text);
        assert_eq!(needs.torch.len(), 2);
        assert_eq!(needs.torch[0].specifiers.to_string(), "==2.4.1+cu121");
        assert_eq!(needs.torch[0].variant, Some(variant("cu121")));
        assert!(needs.torch[1].specifiers.is_empty());
        assert_eq!(needs.torch[1].origin, "requirements.txt:4");
        let vision = &needs.torchvision[0];
        assert_eq!(vision.variant, Some(variant("cu121")));
        assert!(marker_applies(vision.marker.as_ref(), "3.11"));
        assert!(!marker_applies(vision.marker.as_ref(), "3.12"));
        assert_eq!(needs.torchaudio[0].specifiers.to_string(), "==2.4.1+cu121");
        assert_eq!(needs.torchaudio[0].variant, Some(variant("cu121")));
        let e = req_err("./torch-2.4.1-cp311-cp311-linux_x86_64.whl ; python_version ==\n");
        assert!(e.message.starts_with("invalid marker"), "{e}");
    }

    #[test]
    fn index_variant_urls() {
        let v = |url: &str| pytorch_index_variant(url).map(|v| v.to_string());
        assert_eq!(v("https://download.pytorch.org/whl/cu121"), Some("cu121".into()));
        assert_eq!(v("https://download.pytorch.org/whl/cu121/"), Some("cu121".into()));
        assert_eq!(v("HTTPS://Download.PyTorch.org/whl/cpu"), Some("cpu".into()));
        assert_eq!(
            v("https://download.pytorch.org/whl/nightly/cu128"),
            Some("cu128".into())
        );
        assert_eq!(
            v("https://download.pytorch.org/whl/test/cu126/"),
            Some("cu126".into())
        );
        assert_eq!(v("https://download.pytorch.org/whl/rocm6.2"), None);
        assert_eq!(v("https://download.pytorch.org/whl/"), None);
        assert_eq!(v("https://download.pytorch.org/whl/torch_stable.html"), None);
        assert_eq!(v("https://download.pytorch.org/"), None);
        assert_eq!(v("download.pytorch.org/whl/cu121"), None);
        assert_eq!(v("https://é"), None);
    }

    #[test]
    fn merge_appends() {
        let mut needs = reqs("torch==2.4.1\n-i https://download.pytorch.org/whl/cu121\n-r more.txt\n");
        let more = parse_requirements("more.txt", "torch<2.5\ntorchaudio\n").unwrap();
        needs.merge(more);
        let project =
            pyproject("[project]\nrequires-python = \">=3.10\"\ndependencies = [\"torchvision\"]\n");
        needs.merge(project);
        let other = pyproject("[project]\nrequires-python = \">=3.12\"\n");
        needs.merge(other);
        assert_eq!(needs.torch.len(), 2);
        assert_eq!(needs.torch[1].origin, "more.txt:1");
        assert_eq!(needs.torchaudio.len(), 1);
        assert_eq!(needs.torchvision.len(), 1);
        assert_eq!(needs.index_variants.len(), 1);
        assert_eq!(needs.includes.len(), 1);
        let (specs, origin) = needs.requires_python.unwrap();
        assert_eq!(specs.to_string(), ">=3.10");
        assert_eq!(origin, "pyproject.toml: project.requires-python");
    }

    #[test]
    fn crlf_and_bom() {
        let needs = reqs("\u{feff}torch==2.4.1\r\ntorchvision \\\r\n==0.19.1\r\n");
        assert_eq!(needs.torch[0].specifiers.to_string(), "==2.4.1");
        assert_eq!(needs.torchvision[0].specifiers.to_string(), "==0.19.1");
    }

    const PYPROJECT: &str = r#"
[project]
name = "demo"
requires-python = ">=3.10,<3.13"
dependencies = [
    "numpy<2",
    "torch==2.4.1+cu121; python_version < '3.13'",
    "torchvision>=0.19",
]

[project.optional-dependencies]
audio = ["torchaudio==2.4.1"]
cpu = ["torch==2.4.1+cpu"]

[dependency-groups]
dev = ["pytest", {include-group = "lint"}, "torch>=2.4"]
lint = ["ruff"]

[[tool.uv.index]]
name = "pytorch-cu124"
url = "https://download.pytorch.org/whl/cu124"
explicit = true

[[tool.uv.index]]
name = "pypi"
url = "https://pypi.org/simple"

[[tool.uv.index]]
name = "rocm"
url = "https://download.pytorch.org/whl/rocm6.2"
"#;

    #[test]
    fn pyproject_fields() {
        let needs = pyproject(PYPROJECT);
        let (specs, origin) = needs.requires_python.as_ref().unwrap();
        assert!(specs.contains(&version("3.12")) && !specs.contains(&version("3.13")));
        assert_eq!(origin, "pyproject.toml: project.requires-python");

        let origins: Vec<&str> = needs.torch.iter().map(|p| p.origin.as_str()).collect();
        assert_eq!(
            origins,
            [
                "pyproject.toml: project.dependencies[1]",
                "pyproject.toml: dependency-groups.dev[2]",
                "pyproject.toml: project.optional-dependencies.cpu[0]",
            ]
        );
        assert_eq!(needs.torch[0].variant, Some(variant("cu121")));
        assert!(marker_applies(needs.torch[0].marker.as_ref(), "3.12"));
        assert!(!marker_applies(needs.torch[0].marker.as_ref(), "3.13"));
        assert_eq!(needs.torch[2].variant, Some(Variant::Cpu));
        assert_eq!(
            needs.torchvision[0].origin,
            "pyproject.toml: project.dependencies[2]"
        );
        assert_eq!(
            needs.torchaudio[0].origin,
            "pyproject.toml: project.optional-dependencies.audio[0]"
        );
        assert_eq!(
            variants(&needs),
            [(
                "cu124".to_string(),
                "pyproject.toml: tool.uv.index[0]".to_string()
            )]
        );
        assert!(needs.includes.is_empty());
    }

    #[test]
    fn pyproject_without_project() {
        let needs = pyproject("[tool.black]\nline-length = 100\n");
        assert!(needs.torch.is_empty() && needs.requires_python.is_none());
        let needs = pyproject("");
        assert!(needs.index_variants.is_empty());
    }

    #[test]
    fn pyproject_syntax_error_line() {
        let e = pyproject_err("[project]\nname = \"x\"\ndependencies = [\"torch\",\n\n]\nbroken = = 1\n");
        assert_eq!(e.line, Some(6), "{e}");
        assert!(e.message.starts_with("not valid TOML: "), "{e}");
        assert!(!e.message.contains('\n'), "{e}");
        assert!(
            e.to_string().starts_with("pyproject.toml:6: not valid TOML"),
            "{e}"
        );
        let e = pyproject_err("[project]\nname = \"a\"\nname = \"b\"\n");
        assert_eq!(e.line, Some(3), "duplicate key: {e}");
    }

    #[test]
    fn pyproject_wrong_types() {
        let e = pyproject_err("[project]\nname = \"x\"\ndependencies = \"torch\"\n");
        assert_eq!(e.line, Some(3));
        assert_eq!(
            e.message,
            "`project.dependencies` must be an array of PEP 508 requirement strings, found a string"
        );
        let e = pyproject_err("[project]\ndependencies = [\"numpy\", 3]\n");
        assert!(
            e.message
                .starts_with("`project.dependencies[1]` must be a PEP 508"),
            "{e}"
        );
        let e = pyproject_err("project = 1\n");
        assert_eq!(e.message, "`project` must be a table, found an integer");
        let e = pyproject_err("[project]\nrequires-python = 3.11\n");
        assert!(
            e.message
                .starts_with("`project.requires-python` must be a string"),
            "{e}"
        );
        let e = pyproject_err("[project.optional-dependencies]\ngpu = \"torch\"\n");
        assert!(
            e.message
                .starts_with("`project.optional-dependencies.gpu` must be an array"),
            "{e}"
        );
        // `include-group` tables belong to dependency groups only.
        let e = pyproject_err("[project]\ndependencies = [{include-group = \"x\"}]\n");
        assert!(e.message.starts_with("`project.dependencies[0]`"), "{e}");
        let e = pyproject_err("[dependency-groups]\ndev = [\"torch\", {other = 1}]\n");
        assert!(
            e.message.starts_with(
                "`dependency-groups.dev[1]` must be a PEP 508 requirement string or an `{include-group"
            ),
            "{e}"
        );
        let e = pyproject_err("[[tool.uv.index]]\nurl = 5\n");
        assert_eq!(
            e.message,
            "`tool.uv.index[0].url` must be a string, found an integer"
        );
        let e = pyproject_err("[tool.uv]\nindex = \"x\"\n");
        assert!(e.message.starts_with("`tool.uv.index` must be an array"), "{e}");
    }

    #[test]
    fn pyproject_bad_values() {
        let e = pyproject_err("[project]\nname = \"x\"\nrequires-python = \">=3.x\"\n");
        assert_eq!(e.line, Some(3));
        assert!(
            e.message
                .starts_with("`project.requires-python` is not a version specifier: `>=3.x`"),
            "{e}"
        );
        assert!(!e.message.contains('\n'), "{e}");
        let e = pyproject_err("[project]\ndependencies = [\n  \"numpy\",\n  \"torch==2.4.x\",\n]\n");
        assert_eq!(e.line, Some(4));
        assert!(
            e.message
                .starts_with("`project.dependencies[1]` is not a valid requirement `torch==2.4.x`: "),
            "{e}"
        );
        assert!(!e.message.contains('\n'), "{e}");
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::*;

        proptest! {
            #[test]
            fn requirements_never_panic(text in any::<String>()) {
                let _ = parse_requirements("requirements.txt", &text);
            }

            #[test]
            fn requirement_like_lines_never_panic(
                lines in proptest::collection::vec(
                    "[-a-zA-Z0-9_.@:/#%+ =<>!~;,*\"'()\\[\\]\\\\]{0,40}", 0..6)
            ) {
                let _ = parse_requirements("requirements.txt", &lines.join("\n"));
            }

            #[test]
            fn pyproject_never_panics(text in any::<String>()) {
                let _ = parse_pyproject("pyproject.toml", &text);
            }

            #[test]
            fn pyproject_values_never_panic(value in "[-a-zA-Z0-9_.@:/#%+ =<>!~;,*'()\\[\\]]{0,30}") {
                let escaped = value.replace('\\', "\\\\");
                let text = format!(
                    "[project]\nrequires-python = \"{escaped}\"\ndependencies = [\"{escaped}\"]\n"
                );
                let _ = parse_pyproject("pyproject.toml", &text);
            }

            #[test]
            fn markers_never_panic(
                words in proptest::collection::vec(prop_oneof![
                    Just("python_version"), Just("python_full_version"), Just("sys_platform"),
                    Just("platform_release"), Just("implementation_version"), Just("extra"),
                    Just("os_name"), Just("platform_machine"), Just("=="), Just("!="), Just("<"),
                    Just("<="), Just(">"), Just(">="), Just("~="), Just("==="), Just("in"),
                    Just("not in"), Just("and"), Just("or"), Just("("), Just(")"), Just("'3.11'"),
                    Just("'3.*'"), Just("'linux'"), Just("''"), Just("'1.0'"), Just("'x86_64'"),
                    Just("'cuda'"), Just("'3.12.1'"),
                ], 0..12),
                python in "[0-9.a-z]{0,8}",
            ) {
                let text = format!("torch==2.4.1 ; {}", words.join(" "));
                if let Ok(needs) = parse_requirements("requirements.txt", &text) {
                    for pin in &needs.torch {
                        let _ = marker_applies(pin.marker.as_ref(), &python);
                        let _ = marker_applies(pin.marker.as_ref(), "3.11");
                    }
                }
            }

            /// Whatever a line holds, an error quotes an excerpt of it, never the whole:
            /// what lies past the excerpt (a secret further along a line of a file named
            /// by mistake) never reaches the message.
            #[test]
            fn errors_quote_only_an_excerpt(
                head in "\\PC{0,60}",
                filler in "[a-zA-Z0-9]{300,600}",
                shape in 0usize..4,
            ) {
                let secret = "S3CRET-PAST-THE-EXCERPT";
                let line = match shape {
                    0 => format!("--{head}{filler}{secret}"),
                    1 => format!("{head}{filler}{secret}"),
                    2 => format!("torch==2.4.1 ; {head}{filler}{secret}"),
                    _ => format!("./pkg ; {head}{filler}{secret}"),
                };
                if let Err(e) = parse_requirements("requirements.txt", &line) {
                    let message = e.to_string();
                    prop_assert!(!message.contains(secret), "{}", message);
                    prop_assert!(message.chars().count() < 2000, "{}", message);
                    prop_assert!(!message.chars().any(|c| c.is_control() && c != '\t'), "{}", message);
                }
                let toml = format!("[project]\ndependencies = [\"{}\"]\n", line.replace(['\\', '"'], ""));
                if let Err(e) = parse_pyproject("pyproject.toml", &toml) {
                    let message = e.to_string();
                    prop_assert!(!message.contains(secret), "{}", message);
                    prop_assert!(message.chars().count() < 2000, "{}", message);
                }
            }

            #[test]
            fn marker_applies_never_panics(python in any::<String>()) {
                let marker = MarkerTree::from_str("python_version < '3.12'").ok();
                let _ = marker_applies(marker.as_ref(), &python);
            }
        }
    }
}
