//! What is wrong with the database: one [`Problem`] per fact, with file, line and key.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A key path inside a record: `variants[2].cudnn`.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
pub struct KeyPath(pub Vec<Seg>);

/// One step of a [`KeyPath`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Seg {
    /// A table key.
    Key(String),
    /// An array index.
    Index(usize),
}

impl KeyPath {
    /// The path of a top-level key.
    pub fn key(k: &str) -> Self {
        KeyPath(vec![Seg::Key(k.to_string())])
    }

    /// This path extended by a key.
    pub fn join(&self, k: &str) -> Self {
        let mut p = self.clone();
        p.0.push(Seg::Key(k.to_string()));
        p
    }

    /// This path extended by an index.
    pub fn index(&self, i: usize) -> Self {
        let mut p = self.clone();
        p.0.push(Seg::Index(i));
        p
    }

    /// Whether the path names the record itself.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Key(k) if i == 0 => write!(f, "{k}")?,
                Seg::Key(k) => write!(f, ".{k}")?,
                Seg::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// The path a written one names: `variants[2].cudnn` (as [`fmt::Display`] writes it).
impl From<String> for KeyPath {
    fn from(text: String) -> KeyPath {
        let mut segs = Vec::new();
        for part in text.split('.').filter(|p| !p.is_empty()) {
            let (key, mut rest) = part.split_once('[').map_or((part, ""), |(k, r)| (k, r));
            if !key.is_empty() {
                segs.push(Seg::Key(key.to_string()));
            }
            while let Some((n, after)) = rest.split_once(']') {
                match n.parse() {
                    Ok(i) => segs.push(Seg::Index(i)),
                    Err(_) => segs.push(Seg::Key(format!("[{n}]"))),
                }
                rest = after.strip_prefix('[').unwrap_or(after);
            }
        }
        KeyPath(segs)
    }
}

impl From<KeyPath> for String {
    fn from(p: KeyPath) -> String {
        p.to_string()
    }
}

/// The kinds of problem the loader and linter report. The kebab-case names are part of
/// `gpuenv db lint --json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProblemKind {
    /// Not valid TOML, or not UTF-8, or unreadable.
    Syntax,
    /// A key the schema does not have.
    UnknownKey,
    /// A required key is absent.
    MissingKey,
    /// A value of the wrong type or form.
    BadValue,
    /// No sources, or a source that is not an address.
    MissingSources,
    /// A reference to a record that does not exist.
    DanglingReference,
    /// Two records with the same identity.
    DuplicateId,
    /// Two GPUs answering to the same name.
    DuplicateAlias,
    /// Two version ranges that overlap.
    OverlappingRange,
    /// Facts that contradict each other.
    Inconsistent,
    /// A file in the wrong place or with the wrong name.
    Layout,
}

impl ProblemKind {
    /// The kebab-case name.
    pub fn code(&self) -> &'static str {
        use ProblemKind::*;
        match self {
            Syntax => "syntax",
            UnknownKey => "unknown-key",
            MissingKey => "missing-key",
            BadValue => "bad-value",
            MissingSources => "missing-sources",
            DanglingReference => "dangling-reference",
            DuplicateId => "duplicate-id",
            DuplicateAlias => "duplicate-alias",
            OverlappingRange => "overlapping-range",
            Inconsistent => "inconsistent",
            Layout => "layout",
        }
    }
}

/// One problem in one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// The file, relative to the database root: `cuda/12.4.0.toml`.
    pub file: String,
    /// 1-based line, where the problem has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// The key, where the problem has one.
    #[serde(default, skip_serializing_if = "KeyPath::is_root")]
    pub key: KeyPath,
    /// What kind of problem.
    pub kind: ProblemKind,
    /// What is wrong, in a sentence.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        write!(f, ": {}", self.kind.code())?;
        if !self.key.is_root() {
            write!(f, ": `{}`", self.key)?;
        }
        write!(f, ": {}", self.message)
    }
}
