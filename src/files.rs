//! Files users name: inputs read only when they are regular files, within a cap; output
//! files written so that nothing but a new file, or a regular file when asked, is replaced.
//!
//! Owns: every size cap on a file gpuenv reads whole (one table, [`limits`], which the
//! README's "Limits" section follows); opening an input without blocking or side effects
//! and refusing, by name, whatever is not a regular file ("a FIFO", "a character device",
//! "a socket", "a directory"); reading at most a cap; refusing text that is not text; and
//! writing output files and folders atomically ([`write_file`], [`write_new_dir`]).
//! Must not: parse what it reads, print, or put a byte of a file into an error: errors name
//! the file, what it is and the limit it broke, never its contents.
//!
//! Why each step of a read:
//! - The path is looked at first (`stat`, following links), so that a device is refused
//!   without being opened: opening a tape rewinds it, opening a terminal can make it ours.
//! - The open uses `O_NONBLOCK`: opening a FIFO for reading waits for a writer, and a FIFO
//!   swapped in after the first look must not hang the open either (`O_NOCTTY` likewise
//!   keeps a terminal swapped in from becoming the controlling one).
//! - The decision is made on the opened handle (`fstat`), not on the path, which may have
//!   changed since; a size over the cap is refused there, before anything is read, so a
//!   huge sparse file costs nothing.
//! - The cap is also enforced while reading: files under `/proc` report a size of 0 and
//!   still read (`/proc/self/environ`).
//! - Text with a NUL byte is not text: `/proc/self/environ` is NUL-separated, and refusing
//!   it before any parser runs keeps its contents (tokens, passwords) out of every message
//!   a parser would quote a line in.
//!
//! Why each step of a write: the temporary file gets a random name in the target's folder
//! and is created with `O_CREAT | O_EXCL | O_NOFOLLOW` (the `tempfile` crate), so no one can
//! plant a file or a link where it will be written; it is flushed to disk before it is
//! moved into place; without leave to replace, the move itself refuses anything at the
//! target (`renameat2(RENAME_NOREPLACE)`, or a hard link), so a file that appeared after
//! the first look is never replaced; with leave, what lies there is looked at (`lstat`)
//! right before the move, and only a regular file is replaced: never a link (dangling or
//! not: a rename replaces the link itself, never writes through it), a directory, a FIFO,
//! a device or a socket.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use crate::text::terminal_safe;

/// The caps on what gpuenv reads whole, in bytes, and on how far it follows a file's
/// references. Each is far above what a real file of its kind holds, and low enough that
/// reading it stays well within the memory bound of a run.
pub mod limits {
    /// One requirements file, the one named or one it includes (`-r`, `-c`): a
    /// pip-compile lock file with every hash of a large project is under 1 MiB.
    pub const REQUIREMENTS_FILE: u64 = 4 << 20;
    /// A requirements file and everything it includes, together.
    pub const REQUIREMENTS_TOTAL: u64 = 16 << 20;
    /// How many files a requirements file may pull in with `-r`/`-c`, itself included.
    pub const REQUIREMENTS_FILES: usize = 256;
    /// How deep `-r`/`-c` includes may nest.
    pub const INCLUDE_DEPTH: usize = 16;
    /// A pyproject.toml.
    pub const PYPROJECT: u64 = 4 << 20;
    /// An order file (`check --order`): seven keys.
    pub const ORDER: u64 = 64 << 10;
    /// A recorded host (`--host-facts`): real ones are under 100 KiB, with every command's
    /// output and file a probe read.
    pub const HOST_RECORD: u64 = 32 << 20;
    /// A `gpuenv bench --json` document (`check --bench-results`): every figure of 72 GPUs,
    /// each pair's peer copies included (about 5,300 figures of a few hundred bytes), is
    /// under 2 MiB.
    pub const BENCH_RESULTS: u64 = 16 << 20;
    /// One record of a `--db` directory: the largest shipped record is about 5 KiB.
    pub const DB_RECORD: u64 = 1 << 20;
    /// All records of a `--db` directory, together (the shipped database: about 1.3 MiB).
    pub const DB_TOTAL: u64 = 16 << 20;
    /// How many record files a `--db` directory may hold.
    pub const DB_RECORDS: usize = 10_000;
    /// How many entries (files and folders) a `--db` directory may hold in all, so that
    /// `--db /` is refused instead of walking the whole filesystem.
    pub const DB_ENTRIES: usize = 100_000;
}

/// A path as messages show it: terminal-safe (a name may hold escape sequences or line
/// breaks).
pub fn shown(path: &Path) -> String {
    terminal_safe(&path.display().to_string())
}

/// A byte count in the unit it is a whole number of (`4 MiB`, `64 KiB`, `1000 bytes`).
pub fn bytes(n: u64) -> String {
    if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n % (1 << 10) == 0 {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

/// Why an input file was not read. Every variant names what the file was for (`what`:
/// "requirements file", "order", "archive") and its path; none holds a byte of it.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Nothing at the path.
    #[error("cannot read {what} `{}`: no such file", shown(.path))]
    NotFound {
        /// What the file is for.
        what: String,
        /// The path as given.
        path: PathBuf,
    },
    /// The file or a folder on the way is not ours to read.
    #[error("cannot read {what} `{}`: permission denied", shown(.path))]
    Denied {
        /// What the file is for.
        what: String,
        /// The path as given.
        path: PathBuf,
    },
    /// A FIFO, a device, a socket, a directory: refused before anything is read.
    #[error("refusing {what} `{}`: it is {kind}, not a regular file", shown(.path))]
    NotRegular {
        /// What the file is for.
        what: String,
        /// The path as given.
        path: PathBuf,
        /// What it is instead (`a FIFO`).
        kind: &'static str,
    },
    /// Larger than the cap for its kind.
    #[error("refusing {what} `{}`: it is larger than {}, the limit for one {what}", shown(.path), bytes(*.cap))]
    TooLarge {
        /// What the file is for.
        what: String,
        /// The path as given.
        path: PathBuf,
        /// The cap.
        cap: u64,
    },
    /// A NUL byte where text was expected.
    #[error("refusing {what} `{}`: it holds a NUL byte (at byte {at}), so it is not a text file", shown(.path))]
    NotText {
        /// What the file is for.
        what: String,
        /// The path as given.
        path: PathBuf,
        /// The offset of the first NUL.
        at: usize,
    },
    /// Not UTF-8.
    #[error(
        "refusing {what} `{}`: it is not UTF-8 text (at byte {at}){}",
        shown(.path),
        encoding.map(|e| format!(
            "; it looks like {e}, as Excel and Windows editors save text on a Chinese system: save it as UTF-8 (\"CSV UTF-8\" in Excel), or convert it: iconv -f {} -t UTF-8",
            if e == "UTF-16" { "UTF-16" } else { "GB18030" }
        )).unwrap_or_else(|| "; save it as UTF-8".to_string())
    )]
    NotUtf8 {
        /// What the file is for.
        what: String,
        /// The path as given.
        path: PathBuf,
        /// The offset of the first byte that is not UTF-8.
        at: usize,
        /// The encoding it looks like (`GBK`, `UTF-16`), when one does.
        encoding: Option<&'static str>,
    },
    /// A path that cannot name a file: a loop of links, a name too long, a file used as a
    /// folder.
    #[error("cannot read {what} `{}`: {reason}", shown(.path))]
    BadPath {
        /// What the file is for.
        what: String,
        /// The path as given.
        path: PathBuf,
        /// Why.
        reason: &'static str,
    },
    /// The machine failed to read it (an I/O error): not the input's fault.
    #[error("cannot read {what} `{}`: {source}", shown(.path))]
    Io {
        /// What the file is for.
        what: String,
        /// The path as given.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

impl ReadError {
    /// Whether the input is at fault (exit 2); an I/O error is the environment's (exit 3).
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, ReadError::Io { .. })
    }
}

/// What a file type is, in words.
fn kind_of(ft: std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "a directory"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else if ft.is_fifo() {
        "a FIFO (named pipe)"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// The error of a failed `stat` or `open` of an input.
fn open_error(what: &str, path: &Path, e: io::Error) -> ReadError {
    let (what, path) = (what.to_string(), path.to_path_buf());
    let bad = |reason| ReadError::BadPath {
        what: what.clone(),
        path: path.clone(),
        reason,
    };
    match e.raw_os_error() {
        Some(libc::ENOENT) => ReadError::NotFound { what, path },
        Some(libc::EACCES | libc::EPERM) => ReadError::Denied { what, path },
        Some(libc::ELOOP) => bad("a loop of symbolic links"),
        Some(libc::ENAMETOOLONG) => bad("the name is too long"),
        Some(libc::ENOTDIR) => bad("a part of the path is not a directory"),
        Some(libc::EISDIR) => ReadError::NotRegular {
            what,
            path,
            kind: "a directory",
        },
        // `open` of a socket, or of a device without its driver.
        Some(libc::ENXIO | libc::EOPNOTSUPP | libc::ENODEV) => ReadError::NotRegular {
            kind: std::fs::metadata(&path).map_or("not a regular file", |m| kind_of(m.file_type())),
            what,
            path,
        },
        _ => ReadError::Io {
            what,
            path,
            source: e,
        },
    }
}

/// Opens `path` for reading when it is a regular file (a link to one is followed), and
/// returns it with its size. Anything else is refused before it is read, and a FIFO
/// before it is opened, or without waiting if it was swapped in since (see the module
/// docs). `what` names the file in errors.
pub fn open_regular(path: &Path, what: &str) -> Result<(File, u64), ReadError> {
    let not_regular = |kind| ReadError::NotRegular {
        what: what.to_string(),
        path: path.to_path_buf(),
        kind,
    };
    let meta = std::fs::metadata(path).map_err(|e| open_error(what, path, e))?;
    if !meta.is_file() {
        return Err(not_regular(kind_of(meta.file_type())));
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| open_error(what, path, e))?;
    let meta = file.metadata().map_err(|e| ReadError::Io {
        what: what.to_string(),
        path: path.to_path_buf(),
        source: e,
    })?;
    if !meta.is_file() {
        return Err(not_regular(kind_of(meta.file_type())));
    }
    Ok((file, meta.len()))
}

/// The bytes of the regular file at `path`, at most `cap` of them: a larger file is
/// refused (at once when its size says so, else once `cap` bytes are passed).
pub fn read_bytes(path: &Path, cap: u64, what: &str) -> Result<Vec<u8>, ReadError> {
    let too_large = || ReadError::TooLarge {
        what: what.to_string(),
        path: path.to_path_buf(),
        cap,
    };
    let (file, len) = open_regular(path, what)?;
    if len > cap {
        return Err(too_large());
    }
    let mut buf = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(cap.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| ReadError::Io {
            what: what.to_string(),
            path: path.to_path_buf(),
            source: e,
        })?;
    if buf.len() as u64 > cap {
        return Err(too_large());
    }
    Ok(buf)
}

/// [`read_bytes`] of a text file: refused when it holds a NUL byte (not text, whatever
/// else it is) or is not UTF-8.
pub fn read_text(path: &Path, cap: u64, what: &str) -> Result<String, ReadError> {
    let bytes = read_bytes(path, cap, what)?;
    // UTF-16 (Excel's "Unicode Text") is full of NULs: say what it is, not "not text".
    if bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]) {
        return Err(ReadError::NotUtf8 {
            what: what.to_string(),
            path: path.to_path_buf(),
            at: 0,
            encoding: Some("UTF-16"),
        });
    }
    if let Some(at) = bytes.iter().position(|&b| b == 0) {
        return Err(ReadError::NotText {
            what: what.to_string(),
            path: path.to_path_buf(),
            at,
        });
    }
    String::from_utf8(bytes).map_err(|e| {
        let encoding = looks_like_gbk(e.as_bytes()).then_some("GBK");
        ReadError::NotUtf8 {
            what: what.to_string(),
            path: path.to_path_buf(),
            at: e.utf8_error().valid_up_to(),
            encoding,
        }
    })
}

/// Whether every byte above ASCII pairs up as a GBK (GB18030 two-byte) character: a lead
/// byte 0x81-0xFE, then a trail 0x40-0xFE but 0x7F. Chinese text that Excel saved as GBK
/// does; Latin-1 text rarely does for long, and UTF-8 is tried first.
fn looks_like_gbk(bytes: &[u8]) -> bool {
    let mut i = 0;
    let mut pairs = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b < 0x80 {
            i += 1;
            continue;
        }
        let trail = bytes.get(i + 1).copied();
        let ok = (0x81..=0xFE).contains(&b) && trail.is_some_and(|t| (0x40..=0xFE).contains(&t) && t != 0x7F);
        if !ok {
            return false;
        }
        pairs += 1;
        i += 2;
    }
    pairs > 0
}

// ---------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------

/// What an output file may replace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replace {
    /// Nothing: the file must not exist (`dockerfile --out` without `--force`).
    Nothing,
    /// A regular file, and nothing else (`--force`; `doctor --record`'s `host.json`).
    RegularFile,
}

/// Why an output was not written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The file exists, and nothing may be replaced: bad input.
    #[error("`{}` exists", shown(.path))]
    Exists {
        /// The target.
        path: PathBuf,
    },
    /// What lies at the target must not be replaced (a link, a FIFO, a device, a
    /// directory, a folder that is not empty), or the target names no file: bad input.
    #[error("`{}` {reason}", shown(.path))]
    Refused {
        /// The target.
        path: PathBuf,
        /// What it is, and what is replaced instead.
        reason: String,
    },
    /// Writing failed (no space, no permission, a read-only filesystem): the environment.
    #[error("cannot write `{}`: {source}", shown(.path))]
    Failed {
        /// The target.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

impl WriteError {
    /// Whether the target given is at fault (exit 2) rather than the machine (exit 3).
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, WriteError::Failed { .. })
    }
}

fn failed(path: &Path) -> impl Fn(io::Error) -> WriteError + '_ {
    move |source| WriteError::Failed {
        path: path.to_path_buf(),
        source,
    }
}

/// The folder a path lies in (`.` for a bare name).
fn folder_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// A prefix for temporary names beside `name`: hidden, recognisable, short enough that the
/// random part still fits in a file name.
fn temp_prefix(name: &std::ffi::OsStr) -> String {
    let name: String = name.to_string_lossy().chars().take(64).collect();
    format!(".{name}.")
}

/// Checks what lies at `path` (without following a link there): nothing, or a regular
/// file where `replace` allows it. Anything else is refused, naming what it is.
pub fn check_target(path: &Path, replace: Replace) -> Result<(), WriteError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(WriteError::Failed {
            path: path.to_path_buf(),
            source: e,
        }),
        Ok(m) if m.file_type().is_file() => match replace {
            Replace::Nothing => Err(WriteError::Exists {
                path: path.to_path_buf(),
            }),
            Replace::RegularFile => Ok(()),
        },
        Ok(m) => Err(WriteError::Refused {
            path: path.to_path_buf(),
            reason: format!(
                "is {}; only a regular file is ever replaced, and never through a link",
                kind_of(m.file_type())
            ),
        }),
    }
}

/// Writes `data` to `path` atomically: through a temporary file of a random name in the
/// same folder, flushed to disk, then moved into place; replacing only what `replace`
/// allows (see the module docs). Nothing is left behind on failure.
pub fn write_file(path: &Path, data: &[u8], replace: Replace) -> Result<(), WriteError> {
    check_target(path, replace)?;
    let Some(name) = path.file_name() else {
        return Err(WriteError::Refused {
            path: path.to_path_buf(),
            reason: "names no file".into(),
        });
    };
    let dir = folder_of(path);
    let mut tmp = tempfile::Builder::new()
        .prefix(&temp_prefix(name))
        .suffix(".tmp")
        .make_in(dir, |p| {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o666)
                .custom_flags(libc::O_NOFOLLOW)
                .open(p)
        })
        .map_err(failed(path))?;
    tmp.as_file_mut().write_all(data).map_err(failed(path))?;
    tmp.as_file().sync_all().map_err(failed(path))?;
    match replace {
        Replace::Nothing => {
            tmp.persist_noclobber(path).map_err(|e| {
                if e.error.kind() == io::ErrorKind::AlreadyExists {
                    // Something appeared since the first look: say what it is.
                    match check_target(path, Replace::Nothing) {
                        Err(refused) => refused,
                        Ok(()) => WriteError::Exists {
                            path: path.to_path_buf(),
                        },
                    }
                } else {
                    failed(path)(e.error)
                }
            })?;
        }
        Replace::RegularFile => {
            check_target(path, replace)?;
            tmp.persist(path).map_err(|e| failed(path)(e.error))?;
        }
    };
    sync_folder(dir);
    Ok(())
}

/// Flushes a folder's entries, so a rename into it survives a crash. Best effort: some
/// filesystems cannot sync a directory, and the data itself is already on disk.
fn sync_folder(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Checks that `dir` can receive a new folder's contents: it does not exist, or it is an
/// empty directory (not a link to one).
pub fn check_new_dir(dir: &Path) -> Result<(), WriteError> {
    let refused = |reason: &str| WriteError::Refused {
        path: dir.to_path_buf(),
        reason: reason.to_string(),
    };
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(WriteError::Failed {
            path: dir.to_path_buf(),
            source: e,
        }),
        Ok(m) if m.file_type().is_symlink() => Err(refused("is a symbolic link")),
        Ok(m) if !m.is_dir() => Err(refused("is not a directory")),
        Ok(_) => match std::fs::read_dir(dir) {
            Ok(mut entries) => match entries.next() {
                None => Ok(()),
                Some(_) => Err(refused("is not empty")),
            },
            Err(e) => Err(WriteError::Failed {
                path: dir.to_path_buf(),
                source: e,
            }),
        },
    }
}

/// Writes `files` (paths relative to `dir`, and their bytes) as the new folder `dir`, all
/// at once: into a temporary folder of a random name beside it, then renamed into place.
/// The rename itself refuses a `dir` that is not empty or not a directory by then, so a
/// folder filled or swapped in since [`check_new_dir`] is never replaced. Nothing is left
/// behind on failure.
pub fn write_new_dir<'a>(
    dir: &Path,
    files: impl IntoIterator<Item = (&'a str, &'a [u8])>,
) -> Result<(), WriteError> {
    check_new_dir(dir)?;
    let Some(name) = dir.file_name() else {
        return Err(WriteError::Refused {
            path: dir.to_path_buf(),
            reason: "names no folder of its own (give a new folder's name)".into(),
        });
    };
    let parent = folder_of(dir);
    std::fs::create_dir_all(parent).map_err(failed(parent))?;
    let tmp = tempfile::Builder::new()
        .prefix(&temp_prefix(name))
        .suffix(".tmp")
        // As `mkdir` makes folders: what the umask allows.
        .permissions(std::fs::Permissions::from_mode(0o777))
        .tempdir_in(parent)
        .map_err(failed(dir))?;
    // Removed by hand on failure: once renamed, its old name may be someone else's.
    let tmp = tmp.keep();
    let result = (|| {
        for (rel, data) in files {
            let target = dir.join(rel);
            let rel = Path::new(rel);
            if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
                return Err(WriteError::Refused {
                    path: target,
                    reason: "is not a path inside the folder".into(),
                });
            }
            let at = tmp.join(rel);
            if let Some(p) = at.parent() {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o777)
                    .create(p)
                    .map_err(failed(&target))?;
            }
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o666)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&at)
                .map_err(failed(&target))?;
            f.write_all(data).map_err(failed(&target))?;
            f.sync_all().map_err(failed(&target))?;
        }
        place(&tmp, dir)
    })();
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    } else {
        sync_folder(parent);
    }
    result
}

/// Renames the finished folder `tmp` to `dir`. `rename` replaces an empty directory and
/// nothing else: a folder filled meanwhile (`ENOTEMPTY`), or a file or a link put there
/// (`ENOTDIR`), makes it fail, and is left as it is.
fn place(tmp: &Path, dir: &Path) -> Result<(), WriteError> {
    std::fs::rename(tmp, dir).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOTEMPTY | libc::EEXIST) => WriteError::Refused {
            path: dir.to_path_buf(),
            reason: "is not empty (it was filled while the files were written)".into(),
        },
        Some(libc::ENOTDIR) => WriteError::Refused {
            path: dir.to_path_buf(),
            reason: "is not a directory (it was replaced while the files were written)".into(),
        },
        _ => failed(dir)(e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    }

    #[test]
    fn only_regular_files_are_read_and_each_refusal_names_what_it_met() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        mkfifo(&fifo);
        let sock = dir.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let linked_fifo = dir.path().join("to-fifo");
        symlink(&fifo, &linked_fifo).unwrap();
        for (path, kind) in [
            (fifo.as_path(), "a FIFO (named pipe)"),
            (linked_fifo.as_path(), "a FIFO (named pipe)"),
            (sock.as_path(), "a socket"),
            (Path::new("/dev/zero"), "a character device"),
            (dir.path(), "a directory"),
        ] {
            let e = read_text(path, 1024, "order").unwrap_err();
            assert!(
                matches!(&e, ReadError::NotRegular { kind: k, .. } if *k == kind),
                "{}: {e}",
                path.display()
            );
            assert!(e.to_string().starts_with("refusing order `"), "{e}");
            assert!(e.is_bad_input());
        }
        let e = read_text(&dir.path().join("none"), 10, "order").unwrap_err();
        assert!(matches!(e, ReadError::NotFound { .. }), "{e}");
        let dangling = dir.path().join("dangling");
        symlink(dir.path().join("gone"), &dangling).unwrap();
        assert!(matches!(
            read_text(&dangling, 10, "order").unwrap_err(),
            ReadError::NotFound { .. }
        ));
    }

    #[test]
    fn caps_hold_for_sparse_files_and_for_proc_files_that_report_no_size() {
        let dir = tempfile::tempdir().unwrap();
        let huge = dir.path().join("huge");
        File::create(&huge).unwrap().set_len(1 << 40).unwrap();
        let e = read_bytes(&huge, 1 << 20, "host record").unwrap_err();
        assert!(
            matches!(e, ReadError::TooLarge { cap, .. } if cap == 1 << 20),
            "{e}"
        );
        assert!(e.to_string().contains("larger than 1 MiB"), "{e}");
        // /proc/self/environ says 0 bytes; the cap still holds while reading, and as text
        // it is refused for its NUL separators, before anything could quote it.
        let environ = Path::new("/proc/self/environ");
        if std::fs::metadata(environ).is_ok_and(|m| m.len() == 0)
            && !read_bytes(environ, 1 << 20, "x").unwrap().is_empty()
        {
            assert!(matches!(
                read_bytes(environ, 1, "x").unwrap_err(),
                ReadError::TooLarge { .. }
            ));
            let e = read_text(environ, 1 << 20, "requirements file").unwrap_err();
            assert!(matches!(e, ReadError::NotText { .. }), "{e}");
        }
        let f = dir.path().join("f");
        std::fs::write(&f, "abc").unwrap();
        assert_eq!(read_text(&f, 3, "x").unwrap(), "abc");
        assert!(matches!(
            read_text(&f, 2, "x").unwrap_err(),
            ReadError::TooLarge { .. }
        ));
        std::fs::write(&f, b"a\xffb").unwrap();
        assert!(matches!(
            read_text(&f, 10, "x").unwrap_err(),
            ReadError::NotUtf8 { at: 1, .. }
        ));
    }

    /// An offers CSV that Excel saved on a Chinese system: GBK ("名称,gpu" is
    /// C3FB B3C6 2C 67 70 75), or UTF-16 with its byte-order mark ("Unicode Text").
    #[test]
    fn text_in_another_encoding_is_named_with_the_way_out() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("offers.csv");
        std::fs::write(&f, b"\xc3\xfb\xb3\xc6,gpu\r\nA,\xcb\xc4\xbf\xa8 4090\r\n").unwrap();
        let e = read_text(&f, 100, "offers").unwrap_err();
        assert!(
            matches!(
                e,
                ReadError::NotUtf8 {
                    at: 0,
                    encoding: Some("GBK"),
                    ..
                }
            ),
            "{e}"
        );
        let msg = e.to_string();
        assert!(msg.contains("looks like GBK"), "{msg}");
        assert!(msg.contains("iconv -f GB18030 -t UTF-8"), "{msg}");
        std::fs::write(&f, b"\xff\xfen\x00a\x00").unwrap();
        let e = read_text(&f, 100, "offers").unwrap_err();
        assert!(
            matches!(
                e,
                ReadError::NotUtf8 {
                    encoding: Some("UTF-16"),
                    ..
                }
            ),
            "{e}"
        );
        // A byte that pairs with nothing is no GBK: only "save it as UTF-8".
        std::fs::write(&f, b"caf\xe9\n").unwrap();
        let msg = read_text(&f, 100, "offers").unwrap_err().to_string();
        assert!(msg.ends_with("; save it as UTF-8"), "{msg}");
    }

    fn left(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn writes_replace_only_a_regular_file_when_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("Dockerfile");
        write_file(&f, b"one", Replace::Nothing).unwrap();
        assert!(matches!(
            write_file(&f, b"two", Replace::Nothing),
            Err(WriteError::Exists { .. })
        ));
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "one");
        write_file(&f, b"two", Replace::RegularFile).unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "two");
        assert_eq!(left(dir.path()), ["Dockerfile"], "no temporary file is left");

        // A dangling link, a link to a file, a FIFO and a directory: refused with or
        // without leave to replace, and left as they were.
        let outside = dir.path().join("outside");
        let dangling = dir.path().join("dangling");
        symlink(&outside, &dangling).unwrap();
        let linked = dir.path().join("linked");
        symlink(&f, &linked).unwrap();
        let fifo = dir.path().join("fifo");
        mkfifo(&fifo);
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        for target in [&dangling, &linked, &fifo, &sub] {
            for replace in [Replace::Nothing, Replace::RegularFile] {
                let e = write_file(target, b"x", replace).unwrap_err();
                assert!(
                    matches!(e, WriteError::Refused { .. }) && e.is_bad_input(),
                    "{}: {e}",
                    target.display()
                );
            }
        }
        assert!(!outside.exists(), "nothing was written through the dangling link");
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "two");
        assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        assert_eq!(
            left(dir.path()),
            ["Dockerfile", "dangling", "fifo", "linked", "sub"]
        );
        // A folder that does not exist is the environment failing.
        let e = write_file(&dir.path().join("no/such/folder/x"), b"x", Replace::Nothing).unwrap_err();
        assert!(!e.is_bad_input(), "{e}");
    }

    #[test]
    fn a_new_folder_is_written_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("proposals");
        let files = [("torch/2.9.0.toml", &b"a"[..]), ("torch/2.9.1.toml", &b"b"[..])];
        write_new_dir(&out, files).unwrap();
        assert_eq!(
            std::fs::read_to_string(out.join("torch/2.9.1.toml")).unwrap(),
            "b"
        );
        assert_eq!(left(dir.path()), ["proposals"]);
        // Not empty now: refused, and nothing changes.
        let e = write_new_dir(&out, files).unwrap_err();
        assert!(matches!(e, WriteError::Refused { .. }), "{e}");
        assert!(e.to_string().ends_with("is not empty"), "{e}");
        // An empty folder is taken; a link to one is not.
        let empty = dir.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        let link = dir.path().join("link");
        symlink(&empty, &link).unwrap();
        let e = write_new_dir(&link, files).unwrap_err();
        assert!(e.to_string().ends_with("is a symbolic link"), "{e}");
        write_new_dir(&empty, files).unwrap();
        assert_eq!(left(&empty), ["torch"]);
        // A path that climbs out is refused, and the temporary folder goes.
        let e = write_new_dir(&dir.path().join("x"), [("../escape", &b"x"[..])]).unwrap_err();
        assert!(matches!(e, WriteError::Refused { .. }), "{e}");
        assert_eq!(left(dir.path()), ["empty", "link", "proposals"]);
        assert!(write_new_dir(Path::new("."), files).is_err());
    }

    /// The race [`check_new_dir`] cannot close: what appears at the target between the
    /// check and the rename is refused by the rename itself, and left alone.
    #[test]
    fn the_final_rename_replaces_only_an_empty_folder() {
        let dir = tempfile::tempdir().unwrap();
        let tmp = dir.path().join(".out.tmp");
        std::fs::create_dir(&tmp).unwrap();
        std::fs::write(tmp.join("a.toml"), "a").unwrap();
        let filled = dir.path().join("filled");
        std::fs::create_dir(&filled).unwrap();
        std::fs::write(filled.join("mine"), "mine").unwrap();
        let e = place(&tmp, &filled).unwrap_err();
        assert!(e.to_string().contains("is not empty"), "{e}");
        assert_eq!(std::fs::read_to_string(filled.join("mine")).unwrap(), "mine");
        let file = dir.path().join("file");
        std::fs::write(&file, "mine").unwrap();
        let e = place(&tmp, &file).unwrap_err();
        assert!(e.to_string().contains("is not a directory"), "{e}");
        let empty = dir.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        let link = dir.path().join("link");
        symlink(&empty, &link).unwrap();
        let e = place(&tmp, &link).unwrap_err();
        assert!(e.is_bad_input(), "{e}");
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        place(&tmp, &empty).unwrap();
        assert_eq!(std::fs::read_to_string(empty.join("a.toml")).unwrap(), "a");
    }

    #[test]
    fn sizes_read_in_their_unit() {
        assert_eq!(bytes(4 << 20), "4 MiB");
        assert_eq!(bytes(64 << 10), "64 KiB");
        assert_eq!(bytes(1000), "1000 bytes");
    }
}
