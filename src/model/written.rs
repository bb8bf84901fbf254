//! Values as people write them: GPU counts (`8x H800`, `A800*8`, `8卡 A800`, `8张A100`), driver
//! branches and driver requirements (`535`, `R535`, `535.x`, `>=535.104.05`), and bare
//! versions that mean a series (`--torch 2.4` is any 2.4.x).
//!
//! Owns: the one reading of each of these, shared by `query`, `check`, `verify`, `show`,
//! the order file and the `GPUENV_*` overrides, so that every command reads an input the
//! same way. Each reading that is not literal carries a note saying how it was read, for
//! the reports to echo. Pure: no database (a GPU name or a driver branch is looked up by
//! the caller), no I/O.
//!
//! Traps this module exists for:
//! - A count is written before or after the name, with `x`, `×`, `*` or `卡` ("cards"),
//!   with or without spaces; but `X` is a letter of `RTX`, and names may start with digits
//!   (`4090`, `2x4090`), so splitting is ambiguous. [`count_candidates`] gives every
//!   reading; the caller keeps the first whose name is a GPU.
//! - A driver's *branch* is its first number: `535` means any 535.x release, never the
//!   version `535.0`. Versions keep their spelling (`535.104.05`, leading zero and all).
//! - `2.4` typed on a command line means "2.4.x" to people and `2.4.0` to PEP 440; `==2.4`
//!   written with its operator keeps the PEP 440 meaning.

use std::fmt;
use std::str::FromStr;

use super::{DriverVersion, ParseError, VersionSpecifiers, parse_specifiers};

/// The most GPUs one written count may name. Counts are per machine (an HGX board holds
/// 8, an NVL72 rack 72); a larger number is a typo, and would make every per-GPU list huge.
pub const MAX_GPU_COUNT: u32 = 1024;

/// How one input was read, when that is not literally what was written.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Reading {
    /// The flag, variable or key it came from (`--torch`, `GPUENV_GPUS`, `order: driver`).
    pub input: String,
    /// The value as written.
    pub given: String,
    /// What it was read as (`==2.4.*`, `535.54.03`, `A100 80GB SXM`).
    pub read_as: String,
    /// Why, in a sentence.
    pub note: String,
}

/// A separator between a count and a GPU name, before or after it.
fn is_count_sep(c: char) -> bool {
    matches!(c, 'x' | 'X' | '×' | '*' | '卡' | '张')
}

/// Every way `text` can be read as `(name, count)`, most literal first: the whole text as a
/// name (count 1), then a count before the name (`8x H800`, `8 x H800`, `8*A800`, `8×A800`,
/// `8卡 A800`), then a count after it (`H800x8`, `H800 x 8`, `A800*8`, `A800 8卡`). A count
/// outside `1..=MAX_GPU_COUNT` is an error only when no other reading exists, which the
/// caller decides; here it is returned as `Err` in its place.
pub fn count_candidates(text: &str) -> Vec<Result<(String, u32), ParseError>> {
    let t = text.trim();
    let mut out = vec![Ok((t.to_string(), 1))];
    let chars: Vec<char> = t.chars().collect();
    let count = |digits: &[char]| -> Result<u32, ParseError> {
        let s: String = digits.iter().collect();
        let n: u64 = s
            .parse()
            .map_err(|_| ParseError::new("GPU count", t, format!("`{s}` is not a count")))?;
        if n == 0 {
            return Err(ParseError::new("GPU count", t, "the count must be at least 1"));
        }
        if n > u64::from(MAX_GPU_COUNT) {
            return Err(ParseError::new(
                "GPU count",
                t,
                format!("{n} GPUs is more than the {MAX_GPU_COUNT} one machine can hold"),
            ));
        }
        Ok(n as u32)
    };
    let name_of = |cs: &[char]| -> String { cs.iter().collect::<String>().trim().to_string() };

    // Before the name: digits, optional spaces, a separator, the name.
    let lead = chars.iter().take_while(|c| c.is_ascii_digit()).count();
    if lead > 0 {
        let mut i = lead;
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if i < chars.len() && is_count_sep(chars[i]) {
            let name = name_of(&chars[i + 1..]);
            if !name.is_empty() {
                out.push(count(&chars[..lead]).map(|n| (name, n)));
            }
        }
    }

    // After the name: a separator (or `卡` after the digits), then digits.
    let trail_digits = chars.iter().rev().take_while(|c| c.is_ascii_digit()).count();
    if trail_digits > 0 && trail_digits < chars.len() {
        let digits = &chars[chars.len() - trail_digits..];
        let mut j = chars.len() - trail_digits;
        let spaced_after = j > 0 && chars[j - 1].is_whitespace();
        while j > 0 && chars[j - 1].is_whitespace() {
            j -= 1;
        }
        if j > 0 && matches!(chars[j - 1], 'x' | '×' | '*' | 'X') {
            let sep = chars[j - 1];
            let head = &chars[..j - 1];
            let spaced_before = head.last().is_some_and(|c| c.is_whitespace());
            // An `X` counts only standing alone (`RTX 4090 X 2`): `RTX5090X2` is no count.
            if sep != 'X' || (spaced_before && spaced_after) {
                let name = name_of(head);
                if !name.is_empty() {
                    out.push(count(digits).map(|n| (name, n)));
                }
            }
        }
    }
    if let Some(rest) = t.strip_suffix(['卡', '张']) {
        let rest = rest.trim_end();
        let d = rest.chars().rev().take_while(|c| c.is_ascii_digit()).count();
        let rc: Vec<char> = rest.chars().collect();
        if d > 0 && d < rc.len() {
            let name = name_of(&rc[..rc.len() - d]);
            if !name.is_empty() {
                out.push(count(&rc[rc.len() - d..]).map(|n| (name, n)));
            }
        }
    }
    out
}

/// A driver as written where one driver is meant: a full version (`535.104.05`) or a
/// branch (`535`, `R535`, `r535`, `535.x`, `535.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriverInput {
    /// A release, kept with its spelling.
    Version(DriverVersion),
    /// Every release of a branch.
    Branch(u32),
}

impl DriverInput {
    /// The branch this input names or belongs to.
    pub fn branch(&self) -> u32 {
        match self {
            DriverInput::Version(v) => v.branch(),
            DriverInput::Branch(b) => *b,
        }
    }
}

impl FromStr for DriverInput {
    type Err = ParseError;
    fn from_str(input: &str) -> Result<Self, ParseError> {
        const WHAT: &str = "driver version";
        // Words listings put around a branch: "driver 570 series", "NVIDIA driver R570".
        let t = without_words(input, &["driver", "drivers", "nvidia", "series", "branch"]);
        let t = t.strip_prefix(['R', 'r']).unwrap_or(t);
        // `550+` where one driver is meant: the branch, whose first release is the least it
        // admits (a requirement reads it as `>=550`, see [`DriverReq`]).
        let t = t.strip_suffix('+').unwrap_or(t);
        let branch_text = [".xx", ".XX", ".x", ".X", ".*"]
            .iter()
            .find_map(|s| t.strip_suffix(s))
            .unwrap_or(t);
        if !branch_text.is_empty() && branch_text.chars().all(|c| c.is_ascii_digit()) {
            return match branch_text.parse::<u32>() {
                Ok(b) if (1..=9999).contains(&b) => Ok(DriverInput::Branch(b)),
                _ => Err(ParseError::new(
                    WHAT,
                    input,
                    "a branch is a number like 535 (R535, 535.x, 535.xx, 535+)",
                )),
            };
        }
        t.parse::<DriverVersion>().map(DriverInput::Version).map_err(|e| {
            ParseError::new(
                WHAT,
                input,
                format!(
                    "{}; expected a release (535.104.05), a branch (535, R535, 535.x, 535.xx, 535+, `driver 535 series`) or, with --driver-cuda, the CUDA version nvidia-smi shows",
                    e.reason
                ),
            )
        })
    }
}

impl fmt::Display for DriverInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriverInput::Version(v) => write!(f, "{v}"),
            DriverInput::Branch(b) => write!(f, "R{b}"),
        }
    }
}

/// The one word of `text` that is not among `noise` (compared without case): what a
/// listing's "driver 570 series" or "CUDA 12.4 driver" says; `text` trimmed when no single
/// word is left.
pub fn without_words<'a>(text: &'a str, noise: &[&str]) -> &'a str {
    let t = text.trim();
    let words: Vec<&str> = t
        .split_whitespace()
        .filter(|w| !noise.iter().any(|n| w.eq_ignore_ascii_case(n)))
        .collect();
    match words.as_slice() {
        [one] => one,
        _ => t,
    }
}

/// A comparison in a [`DriverReq`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DriverOp {
    Eq,
    Ne,
    Ge,
    Gt,
    Le,
    Lt,
}

/// What a driver must be, as an order or a promise says it: `535` (any R535 release),
/// `>=535.104.05`, `>=535,<560`. Clauses are joined by commas and must all hold. A branch
/// compares by branch (`<=535` admits 535.216.01), a version by its numbers; the
/// requirement prints exactly as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverReq {
    clauses: Vec<(DriverOp, DriverInput)>,
    text: String,
}

impl DriverReq {
    /// Whether `v` meets every clause.
    pub fn contains(&self, v: &DriverVersion) -> bool {
        self.clauses.iter().all(|(op, want)| {
            let ord = match want {
                DriverInput::Version(w) => v.cmp(w),
                DriverInput::Branch(b) => v.branch().cmp(b),
            };
            match op {
                DriverOp::Eq => ord.is_eq(),
                DriverOp::Ne => !ord.is_eq(),
                DriverOp::Ge => ord.is_ge(),
                DriverOp::Gt => ord.is_gt(),
                DriverOp::Le => ord.is_le(),
                DriverOp::Lt => ord.is_lt(),
            }
        })
    }

    /// The requirement in words where a branch is involved (`any R535 release`), else as
    /// written.
    pub fn describe(&self) -> String {
        match self.clauses.as_slice() {
            [(DriverOp::Eq, DriverInput::Branch(b))] => format!("any R{b} release"),
            [(DriverOp::Ge, DriverInput::Branch(b))] => format!("R{b} or newer"),
            _ => self.text.clone(),
        }
    }
}

impl FromStr for DriverReq {
    type Err = ParseError;
    fn from_str(input: &str) -> Result<Self, ParseError> {
        const WHAT: &str = "driver requirement";
        let text = input.trim();
        if text.is_empty() {
            return Err(ParseError::new(
                WHAT,
                input,
                "expected a driver version (535.104.05), a branch (535) or a specifier (>=535.104.05)",
            ));
        }
        let mut clauses = Vec::new();
        for clause in text.split(',') {
            let c = clause.trim();
            // `550+` is how listings write `>=550`.
            if let Some(head) = c
                .strip_suffix('+')
                .filter(|h| h.starts_with(|ch: char| ch.is_ascii_alphanumeric()))
            {
                let want: DriverInput = head.parse().map_err(|e: ParseError| {
                    ParseError::new(WHAT, input, format!("in `{c}`: {}", e.reason))
                })?;
                clauses.push((DriverOp::Ge, want));
                continue;
            }
            let (op, rest) = [
                (">=", DriverOp::Ge),
                ("<=", DriverOp::Le),
                ("==", DriverOp::Eq),
                ("!=", DriverOp::Ne),
                (">", DriverOp::Gt),
                ("<", DriverOp::Lt),
                ("=", DriverOp::Eq),
            ]
            .iter()
            .find_map(|(p, op)| c.strip_prefix(p).map(|r| (*op, r)))
            .unwrap_or((DriverOp::Eq, c));
            let want: DriverInput = rest
                .parse()
                .map_err(|e: ParseError| ParseError::new(WHAT, input, format!("in `{c}`: {}", e.reason)))?;
            clauses.push((op, want));
        }
        Ok(DriverReq {
            clauses,
            text: text.to_string(),
        })
    }
}

impl fmt::Display for DriverReq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// What a bare version of a kind means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeriesOf {
    /// torch: `2.4` is 2.4.x, `2` is 2.x, `2.4.1` is exactly 2.4.1.
    Torch,
    /// Python: `3` is 3.x, `3.11` and `3.11.4` are 3.11 (wheels are chosen by minor).
    Python,
    /// CUDA of a build: `12` is 12.x, `12.1` and `12.1.1` are 12.1 (builds are named by
    /// major.minor: `cu121`).
    Cuda,
}

impl SeriesOf {
    /// The release parts beyond which a bare version stops meaning a series.
    fn exact_parts(self) -> usize {
        match self {
            SeriesOf::Torch => 3,
            SeriesOf::Python | SeriesOf::Cuda => 2,
        }
    }
}

impl SeriesOf {
    /// What it is called in a note (`Python 3.10`).
    fn label(self) -> &'static str {
        match self {
            SeriesOf::Torch => "torch",
            SeriesOf::Python => "Python",
            SeriesOf::Cuda => "CUDA",
        }
    }

    /// The forms an input may take, for an error that says what to type.
    fn forms(self) -> &'static str {
        match self {
            SeriesOf::Torch => {
                "a version (2.4, 2.4.1, 2.4.1+cu121), a specifier (>=2.4,<2.6), `torch==2.4.1` or `latest`"
            }
            SeriesOf::Python => {
                "a version (3.10, 3.10.*), a specifier (>=3.9,<3.13), or a tag as wheels and images write it (py310, cp310, python3.10)"
            }
            SeriesOf::Cuda => {
                "a version (12.4, 12.4.1), a specifier (>=12.1), `CUDA 12.4` or a build tag (cu124)"
            }
        }
    }

    /// The names people put before a version of it, longest first (`python3.10`,
    /// `cp310`, `torch==2.3.1`, `PyTorch 2.8`, `CUDA 12.4`).
    fn prefixes(self) -> &'static [&'static str] {
        match self {
            SeriesOf::Torch => &["pytorch", "torch"],
            SeriesOf::Python => &["cpython", "python", "cp", "py"],
            SeriesOf::Cuda => &["cuda", "cu"],
        }
    }
}

/// A version as chats, listings and wheel tags write it, rewritten to what [`read_series`]
/// reads: the package's name in front (`torch==2.3.1`, `PyTorch 2.8`, `python3.10`,
/// `CUDA 12.4`), a tag without its dot (`cp310`, `py310`, `cu124`), a `v` (`v2.4.1`).
/// Returns the text to read and, when it was rewritten, a note.
fn spelled(of: SeriesOf, text: &str) -> (String, Option<String>) {
    let lower = text.to_ascii_lowercase();
    let named = of
        .prefixes()
        .iter()
        .find_map(|p| lower.strip_prefix(p).map(|_| &text[p.len()..]));
    let rest = named.unwrap_or(text).trim_start_matches([' ', '-', '_']);
    let rest = rest
        .strip_prefix(['v', 'V'])
        .filter(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        .unwrap_or(rest);
    // A tag writes major and minor without a dot: `310` (Python 3.10), `124` (CUDA 12.4).
    let undotted = match of {
        SeriesOf::Python if named.is_some() => split_tag(rest, 1),
        SeriesOf::Cuda if named.is_some() => split_tag(rest, rest.len().saturating_sub(1)),
        _ => None,
    };
    let read = undotted.unwrap_or_else(|| rest.to_string());
    if read == text {
        return (read, None);
    }
    let note = format!("`{}` read as {} {read}", crate::text::excerpt(text), of.label());
    (read, Some(note))
}

/// `310` split after `at` digits into `3.10`; `None` unless it is all digits, 2 to 3 long.
fn split_tag(digits: &str, at: usize) -> Option<String> {
    let ok = (2..=3).contains(&digits.len()) && digits.chars().all(|c| c.is_ascii_digit()) && at > 0;
    ok.then(|| format!("{}.{}", &digits[..at], &digits[at..]))
}

/// Reads a version requirement as people type it on a command line. A bare version means
/// a series (`2.4`, `2.4.x`, `2.4.*` are all `==2.4.*`); a full one is exact (`2.4.1`);
/// a clause with an operator keeps its PEP 440 meaning (`==2.4` is 2.4.0). The name of the
/// thing may lead (`torch==2.3.1`, `python3.10`, `CUDA 12.4`), and Python and CUDA may be
/// written as tags (`cp310`, `cu124`). Returns the specifiers and, when the reading is not
/// literal, a note saying how it was read.
pub fn read_series(of: SeriesOf, input: &str) -> Result<(VersionSpecifiers, Option<String>), ParseError> {
    let trimmed = input.trim();
    if trimmed.is_empty() {
        return Err(ParseError::new(
            "version specifier",
            input,
            format!("expected {}", of.forms()),
        ));
    }
    let (text, respelled) = spelled(of, trimmed);
    let text = text.as_str();
    // `py`, `torch`: a name with no version after it says nothing (an empty specifier
    // would admit every version).
    if text.trim().is_empty() {
        return Err(ParseError::new(
            "version specifier",
            input,
            format!("expected {}", of.forms()),
        ));
    }
    let mut clauses = Vec::new();
    let mut notes: Vec<String> = respelled.into_iter().collect();
    for clause in text.split(',') {
        let c = clause.trim();
        if c.starts_with(|ch: char| ch.is_ascii_digit()) {
            let (spec, note) = bare(of, c);
            clauses.push(spec);
            notes.extend(note);
        } else {
            // `==2.4.x` is how people write a wildcard, and PEP 440 spells it `.*`.
            clauses.push(
                ["==", "!="]
                    .iter()
                    .find(|op| c.starts_with(**op))
                    .and_then(|_| c.strip_suffix(".x").or_else(|| c.strip_suffix(".X")))
                    .map_or_else(|| c.to_string(), |head| format!("{head}.*")),
            );
        }
    }
    let joined = clauses.join(",");
    let specs = parse_specifiers(&joined)
        .map_err(|_| ParseError::new("version specifier", input, format!("expected {}", of.forms())))?;
    let note = (!notes.is_empty()).then(|| notes.join("; "));
    Ok((specs, note))
}

/// One bare clause (`2.4`, `2.x`, `3.11.4`): its specifier and how it was read.
fn bare(of: SeriesOf, c: &str) -> (String, Option<String>) {
    let (head, wildcard) = match [".x", ".X", ".*"].iter().find_map(|s| c.strip_suffix(s)) {
        Some(h) => (h, true),
        None => (c, false),
    };
    // A local segment or a pre-release (`2.4.1+cu121`, `2.5.0a0`) names one build.
    if head.contains(|ch: char| !(ch.is_ascii_digit() || ch == '.')) {
        return (format!("=={c}"), None);
    }
    let parts: Vec<&str> = head.split('.').collect();
    let exact = of.exact_parts();
    if wildcard || parts.len() < exact {
        let series = format!("{head}.x");
        return (
            format!("=={head}.*"),
            Some(format!("`{c}` read as any {series} release")),
        );
    }
    if parts.len() > exact && of != SeriesOf::Torch {
        let mm = parts[..exact].join(".");
        let why = match of {
            SeriesOf::Python => "wheels are chosen by Python major.minor",
            _ => "torch builds are named by CUDA major.minor (cu121)",
        };
        return (format!("=={mm}.*"), Some(format!("`{c}` read as {mm}: {why}")));
    }
    (format!("=={head}"), None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::parse_version;

    fn readings(text: &str) -> Vec<(String, u32)> {
        count_candidates(text)
            .into_iter()
            .filter_map(Result::ok)
            .collect()
    }

    #[test]
    fn counts_before_and_after_the_name() {
        for (text, name, n) in [
            ("8x H800", "H800", 8),
            ("8 x H800", "H800", 8),
            ("H800x8", "H800", 8),
            ("H800 x 8", "H800", 8),
            ("8*A800", "A800", 8),
            ("A800*8", "A800", 8),
            ("8×A800", "A800", 8),
            ("8 × A800", "A800", 8),
            ("8卡 A800", "A800", 8),
            ("8张A100", "A100", 8),
            ("A100 8张", "A100", 8),
            ("8卡A800", "A800", 8),
            ("A800 8卡", "A800", 8),
            ("2X RTX 4090", "RTX 4090", 2),
            ("RTX 4090 X 2", "RTX 4090", 2),
            ("A10Gx4", "A10G", 4),
            ("8x H100 SXM", "H100 SXM", 8),
            ("  4 x  A100 80G SXM4 ", "A100 80G SXM4", 4),
        ] {
            assert!(
                readings(text).contains(&(name.to_string(), n)),
                "{text}: {:?}",
                readings(text)
            );
        }
    }

    #[test]
    fn the_whole_text_is_always_the_first_reading() {
        for text in ["RTX 5090", "RTX5090", "4090", "2x4090", "A100 80G"] {
            assert_eq!(readings(text)[0], (text.to_string(), 1));
        }
        // Both splits of `2x4090` are offered; the database decides.
        let r = readings("2x4090");
        assert!(r.contains(&("4090".to_string(), 2)), "{r:?}");
        // A letter X inside a name is no count.
        assert_eq!(readings("RTX5090X2").len(), 1);
        assert_eq!(readings("x8").len(), 1);
    }

    #[test]
    fn zero_and_huge_counts_are_errors() {
        for text in [
            "H100x0",
            "0x H100",
            "H100x99999999",
            "99999999999999999999x H100",
            "H100 x 1025",
        ] {
            assert!(
                count_candidates(text).iter().any(Result::is_err),
                "{text}: {:?}",
                count_candidates(text)
            );
        }
        let e = count_candidates("H100x0").pop().unwrap().unwrap_err();
        assert!(e.to_string().contains("at least 1"), "{e}");
        let e = count_candidates("H100x5000").pop().unwrap().unwrap_err();
        assert!(e.to_string().contains("1024"), "{e}");
    }

    #[test]
    fn driver_branches_and_versions() {
        for text in ["535", "R535", "r535", "535.x", "535.*", " R535 ", "535.X"] {
            assert_eq!(
                text.parse::<DriverInput>().unwrap(),
                DriverInput::Branch(535),
                "{text}"
            );
        }
        let v: DriverInput = "535.104.05".parse().unwrap();
        assert_eq!(v.to_string(), "535.104.05");
        assert_eq!(v.branch(), 535);
        assert_eq!("R570.26".parse::<DriverInput>().unwrap().to_string(), "570.26");
        for bad in ["", "R", "abc", "535.x.1", "535..1", "0", "12345", "535.104.05.1"] {
            assert!(bad.parse::<DriverInput>().is_err(), "{bad}");
        }
        let e = "535.abc".parse::<DriverInput>().unwrap_err();
        assert!(
            e.to_string().contains("a branch (535, R535, 535.x, 535.xx, 535+"),
            "{e}"
        );
        // Listings' spellings of a branch.
        for text in [
            "550.xx",
            "550.XX",
            "550+",
            "driver 550 series",
            "NVIDIA driver R550",
            "R550 branch",
        ] {
            assert_eq!(
                text.parse::<DriverInput>().unwrap(),
                DriverInput::Branch(550),
                "{text}"
            );
        }
    }

    #[test]
    fn driver_requirements() {
        let d = |s: &str| s.parse::<DriverVersion>().unwrap();
        let r = |s: &str| s.parse::<DriverReq>().unwrap();
        for spec in ["535", "R535", "r535", "535.x", "==535"] {
            assert!(r(spec).contains(&d("535.104.05")), "{spec}");
            assert!(r(spec).contains(&d("535.54.03")), "{spec}");
            assert!(!r(spec).contains(&d("550.54.14")), "{spec}");
            assert!(!r(spec).contains(&d("525.60.13")), "{spec}");
        }
        assert!(r(">=535").contains(&d("550.54.14")));
        assert!(!r(">=535").contains(&d("530.30.02")));
        assert!(r("<=535").contains(&d("535.216.01")));
        assert!(!r("<535").contains(&d("535.54.03")));
        assert!(r(">=535.104.05").contains(&d("535.104.05")));
        assert!(!r(">=535.104.05").contains(&d("535.86.10")));
        assert!(r(">=535,<560").contains(&d("550.54.14")));
        assert!(!r(">=535,<560").contains(&d("560.28.03")));
        assert!(r("!=550").contains(&d("535.104.05")));
        // Printed exactly as written.
        assert_eq!(r(">=535.104.05").to_string(), ">=535.104.05");
        assert_eq!(r("535").describe(), "any R535 release");
        assert_eq!(r(">=R570").describe(), "R570 or newer");
        for bad in ["", ">=", ">=abc", "535,", "~=535"] {
            assert!(bad.parse::<DriverReq>().is_err(), "{bad}");
        }
    }

    #[test]
    fn bare_versions_mean_a_series() {
        let contains = |of, spec: &str, v: &str| {
            let (s, _) = read_series(of, spec).unwrap();
            s.contains(&parse_version(v).unwrap())
        };
        for spec in ["2.4", "2.4.x", "2.4.*", "==2.4.*", "==2.4.x"] {
            assert!(contains(SeriesOf::Torch, spec, "2.4.1"), "{spec}");
            assert!(contains(SeriesOf::Torch, spec, "2.4.0"), "{spec}");
            assert!(contains(SeriesOf::Torch, spec, "2.4.1+cu121"), "{spec}");
            assert!(!contains(SeriesOf::Torch, spec, "2.5.0"), "{spec}");
        }
        for spec in ["2", "2.x", "2.*"] {
            assert!(contains(SeriesOf::Torch, spec, "2.7.1"), "{spec}");
            assert!(!contains(SeriesOf::Torch, spec, "1.13.1"), "{spec}");
        }
        // Exact when full, and PEP 440 with an operator.
        assert!(contains(SeriesOf::Torch, "2.4.1", "2.4.1+cu121"));
        assert!(!contains(SeriesOf::Torch, "2.4.1", "2.4.0"));
        assert!(!contains(SeriesOf::Torch, "==2.4", "2.4.1"));
        assert!(contains(SeriesOf::Torch, "==2.4", "2.4.0"));
        assert!(contains(SeriesOf::Torch, ">=2.4,<2.6", "2.5.1"));
        assert!(!contains(SeriesOf::Torch, ">=2.4,<2.6", "2.6.0"));
        assert!(contains(SeriesOf::Torch, "2.4.1+cu121", "2.4.1+cu121"));
        // Python and CUDA by major.minor.
        for (spec, yes, no) in [
            ("3", "3.12", "2.7"),
            ("3.x", "3.9", "4.0"),
            ("3.11", "3.11", "3.12"),
            ("3.11.4", "3.11", "3.10"),
        ] {
            assert!(contains(SeriesOf::Python, spec, yes), "{spec}");
            assert!(!contains(SeriesOf::Python, spec, no), "{spec}");
        }
        assert!(contains(SeriesOf::Cuda, "12", "12.8"));
        assert!(!contains(SeriesOf::Cuda, "12", "11.8"));
        assert!(contains(SeriesOf::Cuda, "12.1.1", "12.1"));
        // Notes say how a bare version was read, and only then.
        assert_eq!(
            read_series(SeriesOf::Torch, "2.4").unwrap().1.as_deref(),
            Some("`2.4` read as any 2.4.x release")
        );
        assert_eq!(read_series(SeriesOf::Torch, "2.4.1").unwrap().1, None);
        assert_eq!(read_series(SeriesOf::Torch, ">=2.4").unwrap().1, None);
        assert!(
            read_series(SeriesOf::Python, "3.11.4")
                .unwrap()
                .1
                .unwrap()
                .contains("major.minor")
        );
    }

    #[test]
    fn malformed_versions_are_errors() {
        for bad in [
            "2.x.1", "abc", ">=2.x", "2..4", "", "2.4,", "~=2", "torch", "PyTorch ", "v",
        ] {
            assert!(read_series(SeriesOf::Torch, bad).is_err(), "{bad}");
        }
        for bad in ["py", "cp", "python", "Python -"] {
            assert!(read_series(SeriesOf::Python, bad).is_err(), "{bad}");
        }
        assert!(read_series(SeriesOf::Cuda, "CUDA").is_err());
        let e = read_series(SeriesOf::Torch, "2.x.1").unwrap_err();
        assert!(e.to_string().contains("`2.x.1`"), "{e}");
    }
}
