//! The build context, made in memory: the generated Dockerfile, the requirements files and
//! the project's files, as the tar the Engine's `/build` takes.
//!
//! Deterministic (sorted paths, zero times, root owner) so that the same project gives the
//! same context. `.git` and `target` folders are left out, and so is a project's own
//! root `Dockerfile` (the generated one takes its place). Symbolic links travel as links,
//! as `docker build` sends them. The whole context is bounded: it is held in memory.

use std::collections::BTreeMap;
use std::path::Path;

/// The largest context gpuenv will hold in memory.
pub const MAX_CONTEXT_BYTES: u64 = 1 << 30;

/// Folders never sent.
const EXCLUDED_DIRS: &[&str] = &[".git", "target"];

#[derive(Debug, Clone)]
enum Entry {
    File { data: Vec<u8>, mode: u32 },
    Link(String),
}

/// A build context under construction.
#[derive(Debug, Clone, Default)]
pub struct Context {
    entries: BTreeMap<String, Entry>,
    bytes: u64,
}

/// Why a context could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    /// A file or folder could not be read.
    #[error("cannot read `{path}` for the build context: {source}")]
    Read {
        /// The path.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// Too much to hold in memory.
    #[error(
        "the build context is larger than {} MiB; point --context at the project's code, not its data",
        MAX_CONTEXT_BYTES >> 20
    )]
    TooLarge,
    /// A path cannot be stored in a tar.
    #[error("`{0}` cannot be stored in the build context (a name that is not UTF-8, or too long)")]
    Path(String),
}

impl Context {
    /// An empty context.
    pub fn new() -> Context {
        Context::default()
    }

    /// Adds (or replaces) a file at a context path (`/`-separated, relative).
    pub fn add_file(&mut self, path: &str, data: Vec<u8>, mode: u32) -> Result<(), ContextError> {
        self.bytes += data.len() as u64;
        if self.bytes > MAX_CONTEXT_BYTES {
            return Err(ContextError::TooLarge);
        }
        self.entries.insert(path.to_string(), Entry::File { data, mode });
        Ok(())
    }

    /// Whether the context holds a path.
    pub fn contains(&self, path: &str) -> bool {
        self.entries.contains_key(path)
    }

    /// Paths held, sorted.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// Adds every file below `root`, at paths relative to it.
    pub fn add_dir(&mut self, root: &Path) -> Result<(), ContextError> {
        self.walk(root, root)
    }

    fn walk(&mut self, root: &Path, dir: &Path) -> Result<(), ContextError> {
        let read_err = |p: &Path, e: std::io::Error| ContextError::Read {
            path: p.display().to_string(),
            source: e,
        };
        let mut items: Vec<_> = fs_err::read_dir(dir)
            .map_err(|e| read_err(dir, e))?
            .collect::<Result<_, _>>()
            .map_err(|e| read_err(dir, e))?;
        items.sort_by_key(|e| e.file_name());
        for item in items {
            let path = item.path();
            let rel = path
                .strip_prefix(root)
                .ok()
                .and_then(|r| r.to_str())
                .ok_or_else(|| ContextError::Path(path.display().to_string()))?
                .replace(std::path::MAIN_SEPARATOR, "/");
            let meta = fs_err::symlink_metadata(&path).map_err(|e| read_err(&path, e))?;
            let name = item.file_name();
            if meta.is_dir() {
                if EXCLUDED_DIRS.iter().any(|x| name == *x) {
                    continue;
                }
                self.walk(root, &path)?;
            } else if meta.file_type().is_symlink() {
                let target = fs_err::read_link(&path).map_err(|e| read_err(&path, e))?;
                let target = target
                    .to_str()
                    .ok_or_else(|| ContextError::Path(path.display().to_string()))?;
                self.entries.insert(rel, Entry::Link(target.to_string()));
            } else if meta.is_file() {
                if rel == "Dockerfile" {
                    continue; // the generated one is the Dockerfile of this build
                }
                if self.bytes + meta.len() > MAX_CONTEXT_BYTES {
                    return Err(ContextError::TooLarge);
                }
                let data = fs_err::read(&path).map_err(|e| read_err(&path, e))?;
                use std::os::unix::fs::PermissionsExt;
                let mode = meta.permissions().mode() & 0o777;
                self.add_file(&rel, data, mode)?;
            }
            // Sockets, FIFOs and devices are not project files.
        }
        Ok(())
    }

    /// The tar the Engine takes.
    pub fn to_tar(&self) -> Result<Vec<u8>, ContextError> {
        let mut b = tar::Builder::new(Vec::with_capacity(self.bytes as usize + 4096));
        let werr = |p: &str, e: std::io::Error| ContextError::Read {
            path: p.to_string(),
            source: e,
        };
        for (path, entry) in &self.entries {
            let mut h = tar::Header::new_gnu();
            h.set_mtime(0);
            h.set_uid(0);
            h.set_gid(0);
            match entry {
                Entry::File { data, mode } => {
                    h.set_entry_type(tar::EntryType::Regular);
                    h.set_mode(*mode);
                    h.set_size(data.len() as u64);
                    b.append_data(&mut h, path, data.as_slice())
                        .map_err(|e| werr(path, e))?;
                }
                Entry::Link(target) => {
                    h.set_entry_type(tar::EntryType::Symlink);
                    h.set_mode(0o777);
                    h.set_size(0);
                    b.append_link(&mut h, path, target).map_err(|e| werr(path, e))?;
                }
            }
        }
        b.into_inner().map_err(|e| werr("<tar>", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_folder_becomes_a_sorted_tar_without_git_target_or_its_dockerfile() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::create_dir_all(p.join(".git/objects")).unwrap();
        std::fs::write(p.join(".git/HEAD"), "ref").unwrap();
        std::fs::create_dir_all(p.join("target/debug")).unwrap();
        std::fs::write(p.join("target/debug/x"), "big").unwrap();
        std::fs::create_dir_all(p.join("src")).unwrap();
        std::fs::write(p.join("src/train.py"), "print(1)").unwrap();
        std::fs::write(p.join("requirements.txt"), "numpy==2.0.0\n").unwrap();
        std::fs::write(p.join("Dockerfile"), "FROM theirs").unwrap();
        std::os::unix::fs::symlink("src/train.py", p.join("main.py")).unwrap();
        let mut c = Context::new();
        c.add_dir(p).unwrap();
        c.add_file("Dockerfile", b"FROM ours".to_vec(), 0o644).unwrap();
        let paths: Vec<&str> = c.paths().collect();
        assert_eq!(
            paths,
            ["Dockerfile", "main.py", "requirements.txt", "src/train.py"]
        );
        let tar = c.to_tar().unwrap();
        let mut a = tar::Archive::new(tar.as_slice());
        let mut seen = Vec::new();
        for e in a.entries().unwrap() {
            let mut e = e.unwrap();
            let path = e.path().unwrap().display().to_string();
            if path == "Dockerfile" {
                let mut s = String::new();
                std::io::Read::read_to_string(&mut e, &mut s).unwrap();
                assert_eq!(s, "FROM ours");
            }
            if path == "main.py" {
                assert_eq!(e.header().entry_type(), tar::EntryType::Symlink);
            }
            seen.push(path);
        }
        assert_eq!(seen, paths);
    }
}
