//! Reading a project's files from disk: the `pyproject.toml` and the requirements file
//! named, and every file a requirements file includes (`-r`, `-c`), depth first and each
//! once, as pip reads them.
//!
//! Owns: following includes, and the bounds on it (depth, number of files, total size,
//! [`crate::files::limits`]). Must not: parse (that is [`super::grammar`]), or decide what
//! a refusal means for the command (the caller maps [`ReadError`] to its exit code).

use std::path::{Path, PathBuf};

use super::grammar::{InputError, ProjectNeeds, parse_pyproject, parse_requirements};
use crate::files::{self, limits};

/// Why project files could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// A file says something pip would refuse.
    #[error(transparent)]
    Input(#[from] InputError),
    /// A file was refused: too large, too deeply included, not text (bad input).
    #[error("{0}")]
    Refused(String),
    /// Reading failed (the environment's fault).
    #[error("{0}")]
    Io(String),
}

impl ReadError {
    fn of(e: files::ReadError) -> ReadError {
        if e.is_bad_input() {
            ReadError::Refused(e.to_string())
        } else {
            ReadError::Io(e.to_string())
        }
    }

    /// The error as the line `origin` (the include that named the file) says it.
    fn at(self, origin: Option<&str>) -> ReadError {
        match (origin, self) {
            (Some(o), ReadError::Refused(m)) => ReadError::Refused(format!("{o}: {m}")),
            (Some(o), ReadError::Io(m)) => ReadError::Io(format!("{o}: {m}")),
            (_, e) => e,
        }
    }
}

/// What reading a requirements file and its includes has taken so far, against
/// [`limits::REQUIREMENTS_TOTAL`] and [`limits::REQUIREMENTS_FILES`].
#[derive(Default)]
struct Taken {
    /// Canonical paths read, in the order pip reads them.
    files: Vec<PathBuf>,
    bytes: u64,
}

/// Reads the project files named, merged, and the requirements file with every file it
/// includes in the order pip reads them, as canonical paths (empty without one).
pub fn read_files(
    pyproject: Option<&Path>,
    requirements: Option<&Path>,
) -> Result<(ProjectNeeds, Vec<PathBuf>), ReadError> {
    let mut needs = ProjectNeeds::default();
    let mut taken = Taken::default();
    if let Some(p) = pyproject {
        let text = files::read_text(p, limits::PYPROJECT, "pyproject file").map_err(ReadError::of)?;
        needs.merge(parse_pyproject(&files::shown(p), &text)?);
    }
    if let Some(r) = requirements {
        needs.merge(read_requirements(r, None, 0, &mut taken)?);
    }
    Ok((needs, taken.files))
}

/// Reads a requirements file and, depth first, every file it includes (`-r`, `-c`), as
/// pip does; `included` is the line that named it, for messages.
fn read_requirements(
    path: &Path,
    included: Option<&str>,
    depth: usize,
    taken: &mut Taken,
) -> Result<ProjectNeeds, ReadError> {
    let canonical = fs_err::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    if taken.files.contains(&canonical) {
        return Ok(ProjectNeeds::default()); // pip reads a file once, however often it is included
    }
    let what = "requirements file";
    // An include's error starts with the line that names it, as a parse error would.
    let refuse = |why: String| {
        Err(ReadError::Refused(format!("refusing {what} `{}`: {why}", files::shown(path))).at(included))
    };
    if depth > limits::INCLUDE_DEPTH {
        return refuse(format!(
            "requirements includes nest deeper than {}",
            limits::INCLUDE_DEPTH
        ));
    }
    if taken.files.len() >= limits::REQUIREMENTS_FILES {
        return refuse(format!(
            "a requirements file may include at most {} files",
            limits::REQUIREMENTS_FILES
        ));
    }
    taken.files.push(canonical);
    let text =
        files::read_text(path, limits::REQUIREMENTS_FILE, what).map_err(|e| ReadError::of(e).at(included))?;
    taken.bytes += text.len() as u64;
    if taken.bytes > limits::REQUIREMENTS_TOTAL {
        return refuse(format!(
            "the requirements files together are larger than {}, the most gpuenv reads",
            files::bytes(limits::REQUIREMENTS_TOTAL)
        ));
    }
    let mut needs = parse_requirements(&files::shown(path), &text)?;
    let includes = std::mem::take(&mut needs.includes);
    for (rel, origin) in includes {
        let base = path.parent().unwrap_or(Path::new("."));
        let child = read_requirements(&base.join(rel), Some(&origin), depth + 1, taken)?;
        needs.merge(child);
    }
    Ok(needs)
}
