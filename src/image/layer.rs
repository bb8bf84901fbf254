//! One layer blob, streamed entry by entry: what it adds, what it deletes.
//!
//! Owns: detecting the compression (gzip and zstd by their magic bytes, else a plain
//! tar), normalizing entry paths, refusing hostile entries, recognizing whiteouts, and
//! keeping only what a [`Select`] asks for. Must not: extract anything to disk, hold a
//! layer in memory, or know what the kept files mean (that is `detect`).
//!
//! Bounded memory, whatever the layer's size: entries are read one at a time from the
//! stream; only entries the selector wants are kept, as metadata (path, kind, size, link
//! target) or, for the few small files detection parses, with their bytes. Per-entry and
//! whole-image bounds live in [`Limits`] and are enforced through a [`Budget`] shared by
//! every layer of an image. The zstd decoder's window is capped at 128 MiB
//! ([`ZSTD_WINDOW_LOG_MAX`]); gzip needs 32 KiB.
//!
//! Refused, with an error and never a panic: a path or hard-link target that climbs out of
//! the root (`../../etc/passwd`), an entry larger than [`Limits::max_entry`], a captured
//! file larger than [`Limits::max_capture_file`], a truncated or corrupt tar or
//! compressed stream (gzip's CRC and length and zstd's frame checks are verified by
//! reading every stream to its end), and bzip2 or xz layers (named as unsupported).
//!
//! Whiteouts (OCI image spec, "Representing Changes"): `dir/.wh.name` deletes `dir/name`
//! and everything under it in the layers below; `dir/.wh..wh..opq` hides everything the
//! layers below had under `dir`. Both are reported, not applied: [`super::fs`] applies
//! them in layer order. Other `.wh..wh.*` names (AUFS bookkeeping) are ignored.

use std::collections::HashMap;
use std::io::{self, BufReader, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

use super::ImageError;
use super::digest::{Digest, HashRead};
use super::elfnote;
use super::tar::{Kind, TarReader};

/// The largest zstd window accepted (2^27 = 128 MiB), zstd's own default limit.
pub const ZSTD_WINDOW_LOG_MAX: u32 = 27;

/// The bounds the readers enforce. Defaults suit any real image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest entry accepted at all (default 64 GiB: model weights baked into an
    /// image reach tens of GiB; a declared size past this is an attack or corruption).
    pub max_entry: u64,
    /// The largest file whose contents are captured (default 1 MiB: `version.py`,
    /// `METADATA`, headers and `version.json` are kilobytes).
    pub max_capture_file: u64,
    /// The most bytes captured over a whole image (default 64 MiB).
    pub max_capture_total: u64,
    /// The most entries recorded over a whole image, whiteouts included (default 500 000).
    pub max_recorded: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_entry: 64 << 30,
            max_capture_file: 1 << 20,
            max_capture_total: 64 << 20,
            max_recorded: 500_000,
        }
    }
}

/// What has been spent of the [`Limits`] so far; shared by all layers of an image.
///
/// A clone shares what is spent with its original, so layers read on several threads at
/// once draw on one budget and the bounds hold for the image as a whole.
#[derive(Debug, Clone, Default)]
pub struct Budget {
    /// The limits.
    pub limits: Limits,
    spent: Arc<Spent>,
}

#[derive(Debug, Default)]
struct Spent {
    captured: AtomicU64,
    recorded: AtomicU64,
}

impl Budget {
    /// A fresh budget under `limits`.
    pub fn new(limits: Limits) -> Self {
        Budget {
            limits,
            spent: Arc::default(),
        }
    }

    fn record(&mut self) -> Result<(), ImageError> {
        let recorded = self.spent.recorded.fetch_add(1, Ordering::Relaxed) + 1;
        if recorded > self.limits.max_recorded {
            return Err(ImageError::Budget {
                what: "entries recorded",
                limit: self.limits.max_recorded,
            });
        }
        Ok(())
    }

    pub(crate) fn capture(&mut self, bytes: u64) -> Result<(), ImageError> {
        let captured = self
            .spent
            .captured
            .fetch_add(bytes, Ordering::Relaxed)
            .saturating_add(bytes);
        if captured > self.limits.max_capture_total {
            return Err(ImageError::Budget {
                what: "bytes of file contents captured",
                limit: self.limits.max_capture_total,
            });
        }
        Ok(())
    }
}

/// What to keep of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interest {
    /// Nothing.
    Ignore,
    /// Its path, kind, size and link target.
    Record,
    /// That, and its contents (regular files within [`Limits::max_capture_file`]).
    Capture,
    /// That, and the `cuda-compat` ELF note found by scanning its contents.
    ScanCompatNote,
}

/// Decides what to keep of each entry, from its normalized path and kind. `Sync`: the
/// layers of an image may be read on several threads at once.
pub trait Select: Sync {
    /// What to keep of the entry at `path` (normalized: no leading `/`, no `.` or `..`).
    fn select(&self, path: &str, kind: Kind) -> Interest;
}

impl<F: Fn(&str, Kind) -> Interest + Sync> Select for F {
    fn select(&self, path: &str, kind: Kind) -> Interest {
        self(path, kind)
    }
}

/// One kept entry.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    /// Normalized path: relative to the root, no leading `/`.
    pub path: String,
    /// What it is.
    pub kind: Kind,
    /// Size of its data (0 for links and directories).
    pub size: u64,
    /// Permission bits.
    pub mode: u32,
    /// Link target: as written for symlinks, normalized for hard links.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// The contents, when captured.
    #[serde(skip)]
    pub content: Option<Arc<[u8]>>,
    /// The `cuda-compat` note's description, when scanned and found.
    #[serde(skip)]
    pub note: Option<Vec<u8>>,
}

/// How a layer blob was compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// A plain tar (`docker save` layers).
    None,
    /// gzip.
    Gzip,
    /// zstd.
    Zstd,
}

/// What one layer adds and deletes, as far as the selector cared.
#[derive(Debug, Clone)]
pub struct Layer {
    /// Kept entries, in archive order (a later entry for the same path wins).
    pub entries: Vec<Entry>,
    /// Paths deleted by `.wh.<name>` whiteouts (normalized).
    pub deleted: Vec<String>,
    /// Directories made opaque by `.wh..wh..opq` (normalized).
    pub opaque: Vec<String>,
    /// The blob's compression.
    pub compression: Compression,
    /// sha256 of the blob as stored, and its size.
    pub blob_digest: Digest,
    /// Size of the blob as stored.
    pub blob_size: u64,
    /// sha256 of the uncompressed tar: the config's `rootfs.diff_ids` entry.
    pub diff_id: Digest,
}

/// Normalizes an entry path: `./usr//lib/` → `usr/lib`; `None` for the root itself.
///
/// `..` is resolved lexically and refused when it would climb above the root, as
/// archive extractors are told to (a hostile layer writes `../../etc/passwd`). A
/// non-UTF-8 path is read lossily: no path detection looks for can contain such bytes.
pub fn normalize_path(raw: &[u8]) -> Result<Option<String>, ImageError> {
    let text = String::from_utf8_lossy(raw);
    let mut parts: Vec<&str> = Vec::new();
    for comp in text.split('/') {
        match comp {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(ImageError::PathTraversal {
                        path: text.into_owned(),
                    });
                }
            }
            c => parts.push(c),
        }
    }
    Ok((!parts.is_empty()).then(|| parts.join("/")))
}

/// The decompressor chosen from a blob's first bytes.
enum Decoder<R: Read> {
    Plain(R),
    Gzip(Box<flate2::read::MultiGzDecoder<R>>),
    Zstd(Box<zstd::stream::read::Decoder<'static, BufReader<R>>>),
}

impl<R: Read> Read for Decoder<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Decoder::Plain(r) => r.read(buf),
            Decoder::Gzip(r) => r.read(buf),
            Decoder::Zstd(r) => r.read(buf),
        }
    }
}

/// A reader that replays peeked bytes before the rest.
type Replay<R> = io::Chain<io::Cursor<Vec<u8>>, R>;

/// Reads up to `N` bytes without losing them: returns them and a reader that replays them.
fn peek<R: Read, const N: usize>(mut r: R) -> io::Result<([u8; N], usize, Replay<R>)> {
    let mut head = [0u8; N];
    let mut n = 0;
    while n < N {
        match r.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    let replay = io::Cursor::new(head[..n].to_vec());
    Ok((head, n, replay.chain(r)))
}

/// Streams a layer blob (compressed or not) and keeps what `select` asks for.
///
/// The whole stream is read, including what follows the tar's end, so that the
/// compressed stream's checks run and [`Layer::blob_digest`] covers every byte.
pub fn read_layer<R: Read>(reader: R, select: &dyn Select, budget: &mut Budget) -> Result<Layer, ImageError> {
    let what = "layer";
    let mut raw = HashRead::new(reader);
    let (head, n, replay) = peek::<_, 6>(&mut raw).map_err(|e| ImageError::from_io(what, e))?;
    let head = &head[..n];
    let (compression, decoder) = if head.starts_with(&[0x1f, 0x8b]) {
        (
            Compression::Gzip,
            Decoder::Gzip(Box::new(flate2::read::MultiGzDecoder::new(replay))),
        )
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let mut d = zstd::stream::read::Decoder::new(replay).map_err(|e| ImageError::from_io(what, e))?;
        d.window_log_max(ZSTD_WINDOW_LOG_MAX)
            .map_err(|e| ImageError::from_io(what, e))?;
        (Compression::Zstd, Decoder::Zstd(Box::new(d)))
    } else if head.starts_with(b"BZh") {
        return Err(ImageError::Unsupported(
            "bzip2-compressed layers are not supported".into(),
        ));
    } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        return Err(ImageError::Unsupported(
            "xz-compressed layers are not supported".into(),
        ));
    } else {
        (Compression::None, Decoder::Plain(replay))
    };
    let plain = compression == Compression::None;
    let mut tar_stream = if plain {
        HashRead::counting(decoder)
    } else {
        HashRead::new(decoder)
    };
    let (entries, deleted, opaque) = {
        let mut tar = TarReader::new(&mut tar_stream, what);
        let kept = read_entries(&mut tar, select, budget)?;
        // Whatever follows the end-of-archive blocks (padding to the record size, the
        // compressed stream's trailer) is read too: the checksums live there.
        io::copy(&mut tar.into_inner(), &mut io::sink()).map_err(|e| ImageError::from_io(what, e))?;
        kept
    };
    let diff_id = tar_stream.digest();
    raw.drain(what)?;
    let (blob_digest, blob_size) = raw.finish();
    // An uncompressed blob is its own tar: one digest serves both.
    let diff_id = diff_id.unwrap_or_else(|| blob_digest.clone());
    Ok(Layer {
        entries,
        deleted,
        opaque,
        compression,
        blob_digest,
        blob_size,
        diff_id,
    })
}

type Kept = (Vec<Entry>, Vec<String>, Vec<String>);

fn read_entries<R: Read>(
    tar: &mut TarReader<R>,
    select: &dyn Select,
    budget: &mut Budget,
) -> Result<Kept, ImageError> {
    let mut entries: Vec<Entry> = Vec::new();
    let mut deleted = Vec::new();
    let mut opaque = Vec::new();
    // Captured contents by path, for hard links to them later in the same layer.
    let mut captured: HashMap<String, Arc<[u8]>> = HashMap::new();
    while let Some(header) = tar.next_header()? {
        let Some(path) = normalize_path(&header.path)? else {
            continue;
        };
        if header.size > budget.limits.max_entry {
            return Err(ImageError::TooLarge {
                path,
                size: header.size,
                limit: budget.limits.max_entry,
                what: "any entry",
            });
        }
        let (dir, base) = match path.rsplit_once('/') {
            Some((d, b)) => (d, b),
            None => ("", path.as_str()),
        };
        if let Some(name) = base.strip_prefix(".wh.") {
            if name == ".wh..opq" {
                budget.record()?;
                opaque.push(dir.to_string());
            } else if !name.starts_with(".wh.") && !name.is_empty() {
                budget.record()?;
                deleted.push(if dir.is_empty() {
                    name.to_string()
                } else {
                    format!("{dir}/{name}")
                });
            }
            continue;
        }
        let link = match header.kind {
            Kind::HardLink => match normalize_path(&header.link)? {
                Some(t) => Some(t),
                None => {
                    return Err(ImageError::Corrupt {
                        what: format!("entry `{path}`"),
                        detail: "a hard link to the root directory".into(),
                    });
                }
            },
            Kind::Symlink => Some(String::from_utf8_lossy(&header.link).into_owned()),
            _ => None,
        };
        let interest = select.select(&path, header.kind);
        if interest == Interest::Ignore {
            continue;
        }
        budget.record()?;
        let mut entry = Entry {
            path,
            kind: header.kind,
            size: header.size,
            mode: header.mode,
            link,
            content: None,
            note: None,
        };
        match (interest, header.kind) {
            (Interest::Capture, Kind::File) => {
                if header.size > budget.limits.max_capture_file {
                    return Err(ImageError::TooLarge {
                        path: entry.path,
                        size: header.size,
                        limit: budget.limits.max_capture_file,
                        what: "a file whose contents are read",
                    });
                }
                budget.capture(header.size)?;
                let mut data = Vec::with_capacity(header.size as usize);
                let mut reader = tar.data();
                let read = reader.read_to_end(&mut data);
                if let Some(e) = reader.take_error() {
                    return Err(e);
                }
                read.map_err(|e| ImageError::from_io("layer", e))?;
                let data: Arc<[u8]> = data.into();
                captured.insert(entry.path.clone(), data.clone());
                entry.content = Some(data);
            }
            (Interest::Capture, Kind::HardLink) => {
                entry.content = entry.link.as_ref().and_then(|t| captured.get(t).cloned());
            }
            (Interest::ScanCompatNote, Kind::File) => {
                let mut reader = tar.data();
                let found = elfnote::find_compat_note(&mut reader);
                if let Some(e) = reader.take_error() {
                    return Err(e);
                }
                entry.note = found.map_err(|e| ImageError::from_io("layer", e))?;
            }
            _ => {}
        }
        entries.push(entry);
    }
    Ok((entries, deleted, opaque))
}
