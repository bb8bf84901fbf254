//! Image archives read offline: `docker save` tars (the legacy layout and Docker 25+'s
//! OCI-style one), OCI image layouts as a tar (`oci-archive:`) or a directory (`oci:`),
//! and any blob store that can open a blob by digest (a registry client).
//!
//! Owns: finding the image in an archive (manifest.json or index.json, platform
//! selection from an index), reading its config and its layers in order, verifying every
//! digest, and building the merged filesystem. Must not: extract to disk, talk to a
//! daemon or a registry, or interpret files (that is `detect`).
//!
//! A stream (the daemon's export, a pipe) in one pass: an archive's member order is not
//! guaranteed (manifest.json may come last), so each layer is streamed when it passes by,
//! keeping only what the selector wants (see [`super::layer`]), keyed by its member path;
//! small JSON members (manifests, configs, indexes) are kept whole up to [`MAX_CONFIG`]
//! each. Once the end is reached the manifest says which layers, in which order, make the
//! image, and they are applied. Layers of other platforms in a multi-platform archive are
//! read too (a single pass cannot skip them without knowing the index first).
//!
//! An archive must end with its end-of-archive marker: one cut between two members is
//! truncated, not an archive that happens to lack the rest (see [`super::tar`]).
//!
//! A file is walked header by header first, seeking over the data, so the manifest is
//! known before any layer is read; then only the chosen image's layers are read, where
//! they lie, on one thread per core ([`read_archive_file`]). Blob sources (an OCI
//! directory, a registry) are read layer by layer too, as many at once as the source
//! allows ([`BlobSource::parallelism`]). Hashing every byte is what bounds the time of a
//! plain archive, and hashing is per layer: threads are what bring it down.
//!
//! Memory is bounded by the [`Limits`] however large the archive, whichever the path: the
//! [`Budget`] is shared by every layer and thread.
//!
//! Digests verified: every `blobs/sha256/<hex>` member read against its name (in one pass,
//! a mismatch is an error even for a blob no manifest uses; a file's unused blobs are not
//! read), a legacy `<hex>.json` config against its name,
//! each descriptor's size (required, whole and not negative: a blob is read no further
//! than it, and an `oci:` blob file of another size is refused before it is read), and
//! each layer's uncompressed sha256 against the config's
//! `rootfs.diff_ids` (which is how legacy `<id>/layer.tar` members, not named by digest,
//! are checked).

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::ImageError;
use super::config::{ImageConfig, MAX_CONFIG};
use super::detect;
use super::digest::{Digest, HashRead, sha256};
use super::fs::MergedFs;
use super::layer::{self, Budget, Compression, Layer, Limits, Select, normalize_path};
use super::tar::{Kind, TarReader};

/// How deep image indexes may nest (an index naming an index naming a manifest).
const MAX_INDEX_DEPTH: usize = 4;

/// A platform to pick from a multi-platform index: the OCI descriptor's `platform`, as an
/// archive's index and a registry's (the registry client uses this type too) name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Platform {
    /// `linux`.
    pub os: String,
    /// `amd64`, `arm64`.
    pub architecture: String,
    /// `v8` for arm64, when it matters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

impl Default for Platform {
    fn default() -> Self {
        Platform {
            os: "linux".into(),
            architecture: "amd64".into(),
            variant: None,
        }
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

/// How to read an archive.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    /// The bounds (see [`Limits`]).
    pub limits: Limits,
    /// The platform to pick from an index.
    pub platform: Platform,
    /// Which image of an archive holding several: a repo tag (`pytorch/pytorch:2.4.0-...`)
    /// or an OCI `org.opencontainers.image.ref.name`.
    pub name: Option<String>,
    /// Who is told how the reading of layers goes (none by default).
    pub progress: Watch,
}

/// What a reader tells while it reads an image's layers, for a progress display. Layers
/// are read on several threads at once, so every call may come from any of them.
pub trait ReadProgress: Send + Sync {
    /// The layers about to be read: how many, and their size in all as stored.
    fn layers(&self, count: usize, bytes: u64);
    /// `n` more bytes of a layer were read, as stored (compressed).
    fn read(&self, n: u64);
    /// One more layer was read and verified.
    fn layer_done(&self);
}

/// The [`ReadProgress`] a read reports to, if any. Followed where the layers to read are
/// known before they are read: an archive file, an OCI directory, a registry (a stream,
/// such as the daemon's export, is read in one pass and tells nothing).
#[derive(Clone, Default)]
pub struct Watch(Option<std::sync::Arc<dyn ReadProgress>>);

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Watch(on)"
        } else {
            "Watch(none)"
        })
    }
}

impl Watch {
    /// Reports to `to`.
    pub fn new(to: std::sync::Arc<dyn ReadProgress>) -> Watch {
        Watch(Some(to))
    }

    fn layers(&self, count: usize, bytes: u64) {
        if let Some(p) = &self.0 {
            p.layers(count, bytes);
        }
    }

    fn layer_done(&self) {
        if let Some(p) = &self.0 {
            p.layer_done();
        }
    }

    /// `inner`, telling each read's bytes.
    fn counted<R: Read>(&self, inner: R) -> Counted<'_, R> {
        Counted {
            inner,
            to: self.0.as_deref(),
        }
    }
}

/// A reader that tells a [`ReadProgress`] how many bytes went through it.
struct Counted<'a, R> {
    inner: R,
    to: Option<&'a dyn ReadProgress>,
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(p) = self.to {
            p.read(n as u64);
        }
        Ok(n)
    }
}

/// The layout an archive was in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// `docker save` before Docker 25: `<id>/layer.tar`, `<hex>.json`.
    DockerLegacy,
    /// `docker save` from Docker 25: manifest.json naming `blobs/sha256/<hex>`.
    DockerOci,
    /// An OCI image layout (index.json).
    Oci,
    /// No archive: chosen paths read one by one from a container of the image (the
    /// Docker Engine's container archive API), as one synthetic layer.
    ContainerPaths,
}

/// One layer as read.
#[derive(Debug, Clone, Serialize)]
pub struct LayerInfo {
    /// Where it was in the archive, or its digest.
    pub source: String,
    /// sha256 of the blob as stored.
    pub digest: Digest,
    /// sha256 of the uncompressed tar.
    pub diff_id: Digest,
    /// Its compression.
    pub compression: Compression,
    /// Its size as stored.
    pub size: u64,
}

/// An image read from an archive: its config and the merged filesystem.
#[derive(Debug, Clone)]
pub struct Image {
    /// The configuration.
    pub config: ImageConfig,
    /// The layers, merged in order (only what the selector kept).
    pub fs: MergedFs,
    /// The layers, base first.
    pub layers: Vec<LayerInfo>,
    /// The manifest's digest, where the image was found through one.
    pub manifest_digest: Option<Digest>,
    /// The repo tags or reference names the archive gives the image.
    pub names: Vec<String>,
    /// The archive's layout.
    pub layout: Layout,
}

impl Image {
    /// Detection over this image.
    pub fn facts(&self) -> detect::ImageFacts {
        detect::detect(&self.config, &self.fs)
    }
}

/// Opens blobs by digest, for [`read_from_blobs`] (an OCI directory, a registry client).
/// `Sync`: layers may be opened and read on several threads at once.
pub trait BlobSource: Sync {
    /// A reader over the blob's bytes; `size` is what its descriptor declares, which a
    /// source may check before anything is read. The caller reads no further than `size`
    /// and verifies the digest.
    fn open(&self, digest: &Digest, size: u64) -> Result<Box<dyn Read + '_>, ImageError>;

    /// How many layers to read at once (1: one after another).
    fn parallelism(&self) -> usize {
        1
    }
}

/// How many threads read layers of a local file or directory: one per core, at most
/// [`MAX_THREADS`].
pub fn threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .min(MAX_THREADS)
}

/// The buffer between a layer member of an archive file and its reader: large enough
/// that positioned reads cost few system calls.
const READ_BUFFER: usize = 256 * 1024;

/// A member of an archive file, read where it lies without moving the file's cursor, so
/// that several threads read one file at once.
struct At<'a> {
    file: &'a File,
    pos: u64,
    end: u64,
}

impl Read for At<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = usize::try_from(self.end.saturating_sub(self.pos)).unwrap_or(usize::MAX);
        let want = buf.len().min(left);
        if want == 0 {
            return Ok(0);
        }
        #[cfg(unix)]
        let n = std::os::unix::fs::FileExt::read_at(self.file, &mut buf[..want], self.pos)?;
        #[cfg(windows)]
        let n = std::os::windows::fs::FileExt::seek_read(self.file, &mut buf[..want], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl std::io::Seek for At<'_> {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        let pos = match to {
            std::io::SeekFrom::Start(n) => Some(n),
            std::io::SeekFrom::Current(d) => self.pos.checked_add_signed(d),
            std::io::SeekFrom::End(d) => self.end.checked_add_signed(d),
        };
        // Past the end is allowed, as for a file: reads there find nothing.
        self.pos = pos.ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "a seek before the start")
        })?;
        Ok(self.pos)
    }
}

/// Runs `f` over `items` on up to `threads` threads and returns the results in order.
/// Items are started in order and none is started after a failure, so the error returned,
/// that of the earliest failing item, is the one reading them one by one would meet.
fn in_order<T: Sync, O: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> Result<O, ImageError> + Sync,
) -> Result<Vec<O>, (usize, ImageError)> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Mutex, PoisonError};
    let threads = threads.min(items.len());
    if threads <= 1 {
        return items
            .iter()
            .enumerate()
            .map(|(i, t)| f(t).map_err(|e| (i, e)))
            .collect();
    }
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let slots: Vec<Mutex<Option<Result<O, ImageError>>>> = items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while !failed.load(Ordering::Acquire) {
                    let i = next.fetch_add(1, Ordering::AcqRel);
                    let Some(item) = items.get(i) else { break };
                    let r = f(item);
                    if r.is_err() {
                        failed.store(true, Ordering::Release);
                    }
                    *slots[i].lock().unwrap_or_else(PoisonError::into_inner) = Some(r);
                }
            });
        }
    });
    let mut out = Vec::with_capacity(items.len());
    for (i, slot) in slots.into_iter().enumerate() {
        match slot.into_inner().unwrap_or_else(PoisonError::into_inner) {
            Some(Ok(o)) => out.push(o),
            Some(Err(e)) => return Err((i, e)),
            // Items are taken in order, so one never started follows a failed one whose
            // error was returned above; were that ever not so, this is still an error,
            // never a short list.
            None => {
                return Err((
                    i,
                    ImageError::Missing("the read stopped before this layer".into()),
                ));
            }
        }
    }
    Ok(out)
}

/// Reads a `docker save` or OCI-layout tar in one streaming pass, keeping what
/// [`detect::select`] wants.
pub fn read_archive<R: Read>(reader: R, opts: &ReadOptions) -> Result<Image, ImageError> {
    read_archive_with(reader, opts, &detect::select)
}

/// [`read_archive`] with another selector.
pub fn read_archive_with<R: Read>(
    reader: R,
    opts: &ReadOptions,
    select: &dyn Select,
) -> Result<Image, ImageError> {
    let mut budget = Budget::new(opts.limits);
    let members = scan(
        &mut TarReader::new(reader, "the archive").requiring_end(),
        &mut budget,
        select,
        None,
    )?;
    members.resolve(opts, &mut budget, select, None)
}

/// Reads an archive that is a file: its members are indexed by walking the headers alone
/// (seeking over the data), then only the layers the chosen image uses are read, each
/// where it lies in the file and several at once (one per core, up to
/// [`MAX_THREADS`]), so the time is the largest layer's or the whole image's divided
/// among the cores, whichever is more. Layers of other platforms and blobs no manifest
/// uses are not read at all, so not verified either.
pub fn read_archive_file(file: &File, opts: &ReadOptions) -> Result<Image, ImageError> {
    read_archive_file_with(file, opts, &detect::select)
}

/// [`read_archive_file`] with another selector.
pub fn read_archive_file_with(
    file: &File,
    opts: &ReadOptions,
    select: &dyn Select,
) -> Result<Image, ImageError> {
    let len = file
        .metadata()
        .map_err(|e| ImageError::from_io("the archive", e))?
        .len();
    let mut budget = Budget::new(opts.limits);
    // From the file's start wherever its cursor is, and without moving the cursor.
    let whole = At {
        file,
        pos: 0,
        end: len,
    };
    let mut tar = TarReader::seekable(std::io::BufReader::new(whole), "the archive").requiring_end();
    let members = scan(&mut tar, &mut budget, select, Some(len))?;
    members.resolve(opts, &mut budget, select, Some(file))
}

/// The most threads that read layers at once.
pub const MAX_THREADS: usize = 8;

/// One walk over an archive's members. Layers are read as they pass by, unless the
/// archive is a file of `file_len` bytes: then where each lies is noted, to be read later.
fn scan<R: Read>(
    tar: &mut TarReader<R>,
    budget: &mut Budget,
    select: &dyn Select,
    file_len: Option<u64>,
) -> Result<Members, ImageError> {
    let mut members = Members::default();
    while let Some(header) = tar.next_header()? {
        let Some(path) = normalize_path(&header.path)? else {
            continue;
        };
        match header.kind {
            Kind::Symlink | Kind::HardLink => {
                // Legacy `docker save` links duplicate layers: `<id>/layer.tar -> ../<id2>/layer.tar`.
                let base = path.rsplit_once('/').map_or("", |(d, _)| d);
                let target = if header.kind == Kind::Symlink && !header.link.starts_with(b"/") {
                    let mut joined = base.as_bytes().to_vec();
                    joined.push(b'/');
                    joined.extend_from_slice(&header.link);
                    normalize_path(&joined)?
                } else {
                    normalize_path(&header.link)?
                };
                if let Some(t) = target {
                    members.aliases.insert(path, t);
                }
                continue;
            }
            Kind::File => {}
            _ => continue,
        }
        let named = blob_digest_of(&path);
        let is_doc = is_doc_name(&path);
        let at = tar.position();
        if let Some(len) = file_len {
            if at.saturating_add(header.size) > len {
                return Err(ImageError::Truncated {
                    what: "the archive".into(),
                    detail: format!(
                        "member `{path}` declares {} bytes from byte {at}, past the end of the file ({len} bytes)",
                        header.size
                    ),
                });
            }
        }
        let mut data = tar.data();
        // Decide from the first bytes: JSON documents are kept whole, the rest streamed.
        let mut head = [0u8; 1];
        let got = read_fully(&mut data, &mut head).map_err(|e| outer(&mut data, e))?;
        let looks_json = got == 1 && (head[0] == b'{' || head[0] == b'[');
        let replay = std::io::Cursor::new(head[..got].to_vec()).chain(&mut data);
        if is_doc || (named.is_some() && looks_json && header.size <= MAX_CONFIG) {
            if header.size > MAX_CONFIG {
                if is_doc && !path.contains('/') && path != "repositories" {
                    return Err(ImageError::TooLarge {
                        path,
                        size: header.size,
                        limit: MAX_CONFIG,
                        what: "a JSON document",
                    });
                }
                continue;
            }
            budget.capture(header.size)?;
            let mut bytes = Vec::with_capacity(header.size as usize);
            let mut replay = replay;
            let read = replay.read_to_end(&mut bytes);
            drop(replay);
            if let Err(e) = read {
                return Err(outer(&mut data, e));
            }
            if let Some(d) = &named {
                let actual = sha256(&bytes);
                if &actual != d {
                    return Err(mismatch(&path, d, &actual));
                }
            }
            members.docs.insert(path, bytes);
            continue;
        }
        if named.is_none() && !looks_like_layer_name(&path) {
            continue;
        }
        if file_len.is_some() {
            drop(replay);
            members.spans.insert(
                path,
                Span {
                    offset: at,
                    size: header.size,
                },
            );
            continue;
        }
        match layer::read_layer(replay, select, budget) {
            Ok(l) => {
                if let Some(d) = &named {
                    if &l.blob_digest != d {
                        return Err(mismatch(&path, d, &l.blob_digest));
                    }
                }
                members.layers.insert(path, l);
            }
            Err(e) => {
                if let Some(outer_error) = data.take_error() {
                    return Err(outer_error);
                }
                match e {
                    // Bounds and hostile paths are the image's problem whichever blob has them.
                    ImageError::Budget { .. }
                    | ImageError::PathTraversal { .. }
                    | ImageError::TooLarge { .. } => {
                        return Err(e.within(format!("`{path}`")));
                    }
                    // Not a layer, maybe (an attestation, a foreign blob): only an error if used.
                    _ => {
                        members.failed.insert(path, e);
                    }
                }
            }
        }
    }
    Ok(members)
}

/// The error of the outer stream, if reading the member failed because of it.
fn outer<R: Read>(data: &mut super::tar::DataReader<'_, R>, e: impl Into<OuterOr>) -> ImageError {
    match data.take_error() {
        Some(o) => o,
        None => e.into().0,
    }
}

/// A small adapter so [`outer`] takes both I/O and image errors.
struct OuterOr(ImageError);
impl From<std::io::Error> for OuterOr {
    fn from(e: std::io::Error) -> Self {
        OuterOr(ImageError::from_io("the archive", e))
    }
}
impl From<ImageError> for OuterOr {
    fn from(e: ImageError) -> Self {
        OuterOr(e)
    }
}

fn read_fully<R: Read>(r: &mut R, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn mismatch(path: &str, expected: &Digest, actual: &Digest) -> ImageError {
    ImageError::DigestMismatch {
        what: format!("blob `{path}`"),
        expected: expected.to_string(),
        actual: actual.to_string(),
    }
}

/// `blobs/sha256/<hex>` → its digest.
fn blob_digest_of(path: &str) -> Option<Digest> {
    Digest::from_hex(path.strip_prefix("blobs/sha256/")?)
}

/// Members read whole: the archive's own documents and legacy configs.
fn is_doc_name(path: &str) -> bool {
    matches!(
        path,
        "manifest.json" | "index.json" | "oci-layout" | "repositories"
    ) || (!path.contains('/') && path.ends_with(".json"))
}

fn looks_like_layer_name(path: &str) -> bool {
    path.ends_with("layer.tar")
        || path.ends_with(".tar")
        || path.ends_with(".tar.gz")
        || path.ends_with(".tar.zst")
}

/// Where a member's data lies in an archive file.
#[derive(Debug, Clone, Copy)]
struct Span {
    offset: u64,
    size: u64,
}

/// What one pass over an archive collected.
#[derive(Default)]
struct Members {
    docs: HashMap<String, Vec<u8>>,
    layers: HashMap<String, Layer>,
    failed: HashMap<String, ImageError>,
    aliases: HashMap<String, String>,
    /// Layers not read in the pass (an archive file): where they lie.
    spans: HashMap<String, Span>,
    /// Who is told how reading the layers of an archive file goes.
    watch: Watch,
}

impl Members {
    /// Follows member links (bounded).
    fn real<'a>(&'a self, mut path: &'a str) -> &'a str {
        for _ in 0..8 {
            match self.aliases.get(path) {
                Some(t) => path = t,
                None => break,
            }
        }
        path
    }

    fn resolve(
        mut self,
        opts: &ReadOptions,
        budget: &mut Budget,
        select: &dyn Select,
        file: Option<&File>,
    ) -> Result<Image, ImageError> {
        self.watch = opts.progress.clone();
        if self.docs.contains_key("manifest.json") {
            return self.resolve_docker(opts, budget, select, file);
        }
        if let Some(index) = self.docs.get("index.json").cloned() {
            let mut store = MemberStore {
                members: &mut self,
                select,
                file,
            };
            return resolve_oci(&mut store, &index, "index.json", opts, budget, Layout::Oci);
        }
        Err(ImageError::Missing(
            "the archive has neither manifest.json (`docker save`) nor index.json (OCI layout): not an image archive"
                .into(),
        ))
    }

    /// The layers at `paths`, in order. Those of an archive file not read yet are read
    /// now, each once, several at once. An error comes with the index of the layer.
    fn take_layers(
        &mut self,
        paths: &[String],
        budget: &mut Budget,
        select: &dyn Select,
        file: Option<&File>,
    ) -> Result<Vec<Layer>, (usize, ImageError)> {
        if let Some(file) = file {
            let mut todo: Vec<(usize, String, Span)> = Vec::new();
            for (i, path) in paths.iter().enumerate() {
                let real = self.real(path);
                if let Some(span) = self.spans.get(real) {
                    if !todo.iter().any(|t| t.1 == real) {
                        todo.push((i, real.to_string(), *span));
                    }
                }
            }
            let shared: &Budget = budget;
            let watch = &self.watch;
            watch.layers(todo.len(), todo.iter().map(|(_, _, span)| span.size).sum());
            let read = in_order(&todo, threads(), |(_, real, span)| {
                let member = At {
                    file,
                    pos: span.offset,
                    end: span.offset + span.size,
                };
                let l = layer::read_layer(
                    std::io::BufReader::with_capacity(READ_BUFFER, watch.counted(member)),
                    select,
                    &mut shared.clone(),
                )
                .map_err(|e| e.within(format!("layer `{real}`")))?;
                match blob_digest_of(real) {
                    Some(d) if d != l.blob_digest => Err(mismatch(real, &d, &l.blob_digest)),
                    _ => {
                        watch.layer_done();
                        Ok(l)
                    }
                }
            })
            .map_err(|(j, e)| (todo[j].0, e))?;
            for ((_, real, _), l) in todo.into_iter().zip(read) {
                self.spans.remove(&real);
                self.layers.insert(real, l);
            }
        }
        paths
            .iter()
            .enumerate()
            .map(|(i, p)| self.take_layer(p, budget, select).map_err(|e| (i, e)))
            .collect()
    }

    fn take_layer(
        &mut self,
        path: &str,
        budget: &mut Budget,
        select: &dyn Select,
    ) -> Result<Layer, ImageError> {
        let real = self.real(path).to_string();
        if let Some(e) = self.failed.remove(&real) {
            return Err(e.within(format!("layer `{path}`")));
        }
        if let Some(l) = self.layers.get(&real) {
            // Cloned: one layer may be listed twice (an empty layer shared by two steps).
            return Ok(l.clone());
        }
        if let Some(bytes) = self.docs.get(&real) {
            // A small layer that looked like JSON from its first byte.
            return layer::read_layer(&bytes[..], select, budget)
                .map_err(|e| e.within(format!("layer `{path}`")));
        }
        Err(ImageError::Missing(format!(
            "the manifest lists layer `{}`, which is not in the archive",
            crate::text::excerpt(path)
        )))
    }

    fn resolve_docker(
        &mut self,
        opts: &ReadOptions,
        budget: &mut Budget,
        select: &dyn Select,
        file: Option<&File>,
    ) -> Result<Image, ImageError> {
        let what = "manifest.json";
        let malformed = |detail: String| ImageError::Malformed {
            what: what.into(),
            expected: "docker save manifest",
            detail,
        };
        let bytes = self
            .docs
            .get(what)
            .ok_or_else(|| ImageError::Missing("the archive has no manifest.json".into()))?;
        let doc: Value = serde_json::from_slice(bytes).map_err(|e| malformed(e.to_string()))?;
        let entries = doc
            .as_array()
            .ok_or_else(|| malformed("expected a list".into()))?;
        let tags_of = |e: &Value| -> Vec<String> {
            e.get("RepoTags")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|t| t.as_str().map(str::to_string)).collect())
                .unwrap_or_default()
        };
        let chosen = match (&opts.name, entries.as_slice()) {
            (_, []) => return Err(ImageError::Missing("manifest.json lists no image".into())),
            (Some(name), list) => list
                .iter()
                .find(|e| tags_of(e).iter().any(|t| t == name || tag_matches(t, name)))
                .ok_or_else(|| {
                    ImageError::Missing(format!(
                        "no image tagged `{}` in the archive; it holds: {}",
                        crate::text::excerpt(name),
                        listed(list.iter().flat_map(tags_of))
                    ))
                })?,
            (None, [one]) => one,
            (None, list) => {
                return Err(ImageError::Missing(format!(
                    "the archive holds {} images; name one: {}",
                    list.len(),
                    listed(list.iter().flat_map(tags_of))
                )));
            }
        };
        let config_path = chosen
            .get("Config")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("an entry without `Config`".into()))?;
        let layer_paths: Vec<String> = chosen
            .get("Layers")
            .and_then(Value::as_array)
            .ok_or_else(|| malformed("an entry without `Layers`".into()))?
            .iter()
            .map(|l| {
                l.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| malformed("a layer that is not a path".into()))
            })
            .collect::<Result<_, _>>()?;
        let config_path = normalize_path(config_path.as_bytes())?.unwrap_or_default();
        let real = self.real(&config_path).to_string();
        let bytes = self.docs.get(&real).ok_or_else(|| {
            ImageError::Missing(format!(
                "the manifest names config `{}`, which is not in the archive",
                crate::text::excerpt(&config_path)
            ))
        })?;
        // Legacy configs are named `<hex>.json` after their own digest.
        if let Some(d) = real.strip_suffix(".json").and_then(Digest::from_hex) {
            let actual = sha256(bytes);
            if actual != d {
                return Err(mismatch(&real, &d, &actual));
            }
        }
        let config = ImageConfig::parse(bytes, &format!("config `{config_path}`"))?;
        let layout = if config_path.starts_with("blobs/") {
            Layout::DockerOci
        } else {
            Layout::DockerLegacy
        };
        let layer_paths: Vec<String> = layer_paths
            .iter()
            .map(|p| Ok(normalize_path(p.as_bytes())?.unwrap_or_default()))
            .collect::<Result<_, ImageError>>()?;
        let names = tags_of(chosen);
        let layers = self
            .take_layers(&layer_paths, budget, select, file)
            .map_err(|(_, e)| e)?;
        build(
            config,
            layer_paths.into_iter().zip(layers).collect(),
            None,
            names,
            layout,
        )
    }
}

/// The most names a message lists (an archive's tags, an index's platforms).
const LISTED: usize = 10;

/// Names from an archive for a message: the first [`LISTED`], each an excerpt, and how
/// many more there are.
fn listed(names: impl Iterator<Item = String>) -> String {
    let mut shown = Vec::new();
    let mut more = 0usize;
    for n in names {
        if shown.len() < LISTED {
            shown.push(crate::text::excerpt(&n));
        } else {
            more += 1;
        }
    }
    let mut out = shown.join(", ");
    if more > 0 {
        out.push_str(&format!(" and {more} more"));
    }
    out
}

/// Whether a repo tag names what the user typed (`busybox` matches `busybox:latest`).
fn tag_matches(tag: &str, name: &str) -> bool {
    let strip = |s: &str| {
        s.trim_start_matches("docker.io/")
            .trim_start_matches("library/")
            .to_string()
    };
    let (t, n) = (strip(tag), strip(name));
    t == n || (!n.contains(':') && t == format!("{n}:latest"))
}

/// Applies the layers in order, checking the config's diff_ids.
fn build(
    config: ImageConfig,
    layers: Vec<(String, Layer)>,
    manifest_digest: Option<Digest>,
    names: Vec<String>,
    layout: Layout,
) -> Result<Image, ImageError> {
    if !config.diff_ids.is_empty() && config.diff_ids.len() != layers.len() {
        return Err(ImageError::Malformed {
            what: "the image".into(),
            expected: "consistent manifest and config",
            detail: format!(
                "the manifest lists {} layers, the config's rootfs.diff_ids {}",
                layers.len(),
                config.diff_ids.len()
            ),
        });
    }
    let mut fs = MergedFs::new();
    let mut infos = Vec::new();
    for (i, (source, layer)) in layers.into_iter().enumerate() {
        if let Some(expected) = config.diff_ids.get(i) {
            if *expected != layer.diff_id {
                return Err(ImageError::DigestMismatch {
                    what: format!("layer {} (`{source}`), uncompressed", i + 1),
                    expected: expected.to_string(),
                    actual: layer.diff_id.to_string(),
                });
            }
        }
        infos.push(LayerInfo {
            source,
            digest: layer.blob_digest.clone(),
            diff_id: layer.diff_id.clone(),
            compression: layer.compression,
            size: layer.blob_size,
        });
        fs.apply(layer);
    }
    Ok(Image {
        config,
        fs,
        layers: infos,
        manifest_digest,
        names,
        layout,
    })
}

// ---------------------------------------------------------------------------------------
// OCI: index → manifest → config + layers, over any store of blobs.

/// Where OCI resolution gets its blobs from.
trait Store {
    /// A small document of the size its descriptor declares, verified against its digest.
    fn doc(&mut self, d: &Descriptor, what: &str) -> Result<Vec<u8>, ImageError>;
    /// The layers, in order, each read no further than its declared size and verified
    /// against its digest; an error comes with the index of the layer.
    fn layers(
        &mut self,
        wanted: &[Descriptor],
        budget: &mut Budget,
    ) -> Result<Vec<Layer>, (usize, ImageError)>;
}

struct MemberStore<'a> {
    members: &'a mut Members,
    select: &'a dyn Select,
    file: Option<&'a File>,
}

impl Store for MemberStore<'_> {
    fn doc(&mut self, d: &Descriptor, what: &str) -> Result<Vec<u8>, ImageError> {
        let digest = &d.digest;
        let path = format!("blobs/sha256/{}", digest.hex());
        let real = self.members.real(&path).to_string();
        // Verified when it was read (its name is its digest).
        self.members
            .docs
            .get(&real)
            .cloned()
            .ok_or_else(|| ImageError::Missing(format!("{what} `{digest}` is not in the archive")))
    }

    fn layers(
        &mut self,
        wanted: &[Descriptor],
        budget: &mut Budget,
    ) -> Result<Vec<Layer>, (usize, ImageError)> {
        // A member's size is its tar header's; the descriptor's is checked after.
        let paths: Vec<String> = wanted
            .iter()
            .map(|d| format!("blobs/sha256/{}", d.digest.hex()))
            .collect();
        self.members.take_layers(&paths, budget, self.select, self.file)
    }
}

struct SourceStore<'a> {
    source: &'a dyn BlobSource,
    select: &'a dyn Select,
    watch: &'a Watch,
}

/// A blob read as exactly its declared size: never past it (nothing beyond is taken in), and
/// a source that has more than that is refused once the declared bytes are read, rather
/// than cut silently to a prefix that might verify. A shorter one ends early and fails its
/// digest.
struct Exactly<R> {
    inner: R,
    left: u64,
    declared: u64,
}

impl<R: Read> Exactly<R> {
    fn new(inner: R, declared: u64) -> Self {
        Exactly {
            inner,
            left: declared,
            declared,
        }
    }
}

impl<R: Read> Read for Exactly<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.left == 0 {
            // One byte more would be past the declaration: ask for it only to refuse it.
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "the blob holds more than the {} bytes its descriptor declares",
                        self.declared
                    ),
                )),
            };
        }
        let want = buf.len().min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        self.left -= n as u64;
        Ok(n)
    }
}

impl Store for SourceStore<'_> {
    fn doc(&mut self, d: &Descriptor, what: &str) -> Result<Vec<u8>, ImageError> {
        let digest = &d.digest;
        if d.size > MAX_CONFIG {
            return Err(ImageError::TooLarge {
                path: format!("{what} {digest}"),
                size: d.size,
                limit: MAX_CONFIG,
                what: "a JSON document",
            });
        }
        let reader = self.source.open(digest, d.size)?;
        let mut hashed = HashRead::new(Exactly::new(reader, d.size));
        let mut bytes = Vec::new();
        hashed
            .read_to_end(&mut bytes)
            .map_err(|e| ImageError::from_io(what, e))?;
        if bytes.len() as u64 > MAX_CONFIG {
            return Err(ImageError::TooLarge {
                path: format!("{what} {digest}"),
                size: bytes.len() as u64,
                limit: MAX_CONFIG,
                what: "a JSON document",
            });
        }
        let (actual, _) = hashed.finish();
        if &actual != digest {
            return Err(mismatch(&format!("{what} {}", digest.short()), digest, &actual));
        }
        Ok(bytes)
    }

    fn layers(
        &mut self,
        wanted: &[Descriptor],
        budget: &mut Budget,
    ) -> Result<Vec<Layer>, (usize, ImageError)> {
        let (source, select, shared, watch): (&dyn BlobSource, &dyn Select, &Budget, &Watch) =
            (self.source, self.select, budget, self.watch);
        watch.layers(wanted.len(), wanted.iter().map(|d| d.size).sum());
        in_order(wanted, source.parallelism(), |d| {
            let digest = &d.digest;
            let reader = Exactly::new(watch.counted(source.open(digest, d.size)?), d.size);
            let l = layer::read_layer(reader, select, &mut shared.clone())?;
            if &l.blob_digest != digest {
                return Err(mismatch(
                    &format!("layer {}", digest.short()),
                    digest,
                    &l.blob_digest,
                ));
            }
            watch.layer_done();
            Ok(l)
        })
    }
}

/// A descriptor: what a manifest or an index says about a blob.
#[derive(Debug, Clone)]
struct Descriptor {
    media_type: String,
    digest: Digest,
    /// The blob's length in bytes: required by the OCI image spec and Docker's manifest
    /// schema 2, and what bounds reading the blob.
    size: u64,
    platform: Option<Platform>,
    annotations: BTreeMap<String, String>,
    urls: bool,
}

fn descriptor(v: &Value, what: &str) -> Result<Descriptor, ImageError> {
    let malformed = |detail: &str| ImageError::Malformed {
        what: what.to_string(),
        expected: "OCI descriptor",
        detail: detail.to_string(),
    };
    let obj = v.as_object().ok_or_else(|| malformed("expected an object"))?;
    let digest = obj
        .get("digest")
        .and_then(Value::as_str)
        .ok_or_else(|| malformed("no `digest`"))?;
    let digest = Digest::parse(digest, what)?;
    let size = match obj.get("size") {
        None => return Err(malformed("no `size`; expected the blob's length in bytes")),
        Some(v) => match (v.as_u64(), v.as_i64()) {
            (Some(n), _) => n,
            (None, Some(n)) => {
                return Err(malformed(&format!(
                    "`size` is negative ({n}); expected the blob's length in bytes"
                )));
            }
            _ => {
                return Err(malformed(&format!(
                    "`size` is {}, not a whole number; expected the blob's length in bytes",
                    crate::text::excerpt(&v.to_string())
                )));
            }
        },
    };
    let platform = obj.get("platform").and_then(Value::as_object).map(|p| Platform {
        os: p.get("os").and_then(Value::as_str).unwrap_or("").to_string(),
        architecture: p
            .get("architecture")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        variant: p.get("variant").and_then(Value::as_str).map(str::to_string),
    });
    let annotations = obj
        .get("annotations")
        .and_then(Value::as_object)
        .map(|a| {
            a.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default();
    Ok(Descriptor {
        media_type: obj
            .get("mediaType")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        digest,
        size,
        platform,
        annotations,
        urls: obj
            .get("urls")
            .is_some_and(|u| u.as_array().is_some_and(|a| !a.is_empty())),
    })
}

fn is_index(doc: &Value, media_type: &str) -> bool {
    media_type.contains("image.index")
        || media_type.contains("manifest.list")
        || doc.get("manifests").is_some()
}

fn platform_matches(have: &Platform, want: &Platform) -> bool {
    have.os == want.os
        && have.architecture == want.architecture
        && match (&want.variant, &have.variant) {
            (Some(w), Some(h)) => w == h,
            (Some(w), None) => want.architecture == "arm64" && w == "v8",
            _ => true,
        }
}

/// Picks the manifest of `opts.platform` from an index document.
fn pick(index: &Value, what: &str, opts: &ReadOptions) -> Result<Descriptor, ImageError> {
    let list = index
        .get("manifests")
        .and_then(Value::as_array)
        .ok_or_else(|| ImageError::Malformed {
            what: what.to_string(),
            expected: "image index",
            detail: "no `manifests` list".into(),
        })?;
    let all: Vec<Descriptor> = list
        .iter()
        .enumerate()
        .map(|(i, d)| descriptor(d, &format!("{what} manifests[{i}]")))
        .collect::<Result<_, _>>()?;
    // Attestations (buildx provenance, SBOMs) ride along as manifests of platform unknown/unknown.
    let images: Vec<&Descriptor> = all
        .iter()
        .filter(|d| {
            d.annotations.get("vnd.docker.reference.type").map(String::as_str) != Some("attestation-manifest")
        })
        .filter(|d| d.platform.as_ref().is_none_or(|p| p.os != "unknown"))
        .collect();
    let named: Vec<&Descriptor> = match &opts.name {
        Some(name) => images
            .iter()
            .copied()
            .filter(|d| {
                d.annotations
                    .get("org.opencontainers.image.ref.name")
                    .is_some_and(|r| r == name)
                    || d.annotations
                        .get("io.containerd.image.name")
                        .is_some_and(|r| r == name || tag_matches(r, name))
            })
            .collect(),
        None => images.clone(),
    };
    let pool = if named.is_empty() && opts.name.is_some() && images.len() == 1 {
        images.clone()
    } else {
        named
    };
    let with_platform: Vec<&Descriptor> = pool
        .iter()
        .copied()
        .filter(|d| {
            d.platform
                .as_ref()
                .is_some_and(|p| platform_matches(p, &opts.platform))
        })
        .collect();
    match (with_platform.as_slice(), pool.as_slice()) {
        ([one, ..], _) => Ok((*one).clone()),
        (_, [one]) if one.platform.is_none() => Ok((*one).clone()),
        (_, []) => Err(ImageError::Missing(match &opts.name {
            Some(n) => format!("{what} names no image `{}`", crate::text::excerpt(n)),
            None => format!("{what} lists no image"),
        })),
        (_, list) => {
            let have = list.iter().map(|d| {
                d.platform
                    .as_ref()
                    .map_or_else(|| "unknown platform".to_string(), |p| p.to_string())
            });
            Err(ImageError::Missing(format!(
                "{what} has no image for {}; it has: {}",
                opts.platform,
                listed(have)
            )))
        }
    }
}

fn resolve_oci(
    store: &mut dyn Store,
    top: &[u8],
    top_what: &str,
    opts: &ReadOptions,
    budget: &mut Budget,
    layout: Layout,
) -> Result<Image, ImageError> {
    let parse = |bytes: &[u8], what: &str, expected: &'static str| -> Result<Value, ImageError> {
        serde_json::from_slice(bytes).map_err(|e| ImageError::Malformed {
            what: what.to_string(),
            expected,
            detail: e.to_string(),
        })
    };
    let mut doc = parse(top, top_what, "OCI index or manifest")?;
    let mut what = top_what.to_string();
    let mut media = doc
        .get("mediaType")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let mut manifest_digest = None;
    let mut names = Vec::new();
    for _ in 0..MAX_INDEX_DEPTH {
        if !is_index(&doc, &media) {
            break;
        }
        let d = pick(&doc, &what, opts)?;
        if let Some(n) = d.annotations.get("org.opencontainers.image.ref.name") {
            names.push(n.clone());
        }
        let bytes = store.doc(&d, "manifest")?;
        check_size(&d, bytes.len() as u64, "manifest")?;
        what = format!("manifest {}", d.digest.short());
        doc = parse(&bytes, &what, "OCI manifest")?;
        media = doc
            .get("mediaType")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or(d.media_type.clone());
        manifest_digest = Some(d.digest);
    }
    if is_index(&doc, &media) {
        return Err(ImageError::Malformed {
            what,
            expected: "OCI manifest",
            detail: format!("indexes nest deeper than {MAX_INDEX_DEPTH}"),
        });
    }
    let config_desc = descriptor(
        doc.get("config").ok_or_else(|| ImageError::Malformed {
            what: what.clone(),
            expected: "OCI manifest",
            detail: "no `config`".into(),
        })?,
        &format!("{what} config"),
    )?;
    let config_bytes = store.doc(&config_desc, "config")?;
    check_size(&config_desc, config_bytes.len() as u64, "config")?;
    let config = ImageConfig::parse(&config_bytes, &format!("config {}", config_desc.digest.short()))?;
    let layer_descs: Vec<Descriptor> = doc
        .get("layers")
        .and_then(Value::as_array)
        .ok_or_else(|| ImageError::Malformed {
            what: what.clone(),
            expected: "OCI manifest",
            detail: "no `layers` list".into(),
        })?
        .iter()
        .enumerate()
        .map(|(i, d)| descriptor(d, &format!("{what} layers[{i}]")))
        .collect::<Result<_, _>>()?;
    if let Some((i, d)) = layer_descs.iter().enumerate().find(|(_, d)| d.urls) {
        return Err(ImageError::Unsupported(format!(
            "layer {} ({}) is a foreign layer fetched from elsewhere; it is not in the image",
            i + 1,
            d.digest
        )));
    }
    let read = store.layers(&layer_descs, budget).map_err(|(i, e)| {
        let short = layer_descs.get(i).map(|d| d.digest.short()).unwrap_or_default();
        e.within(format!("layer {} ({short})", i + 1))
    })?;
    let mut layers = Vec::new();
    for (d, l) in layer_descs.iter().zip(read) {
        check_size(d, l.blob_size, "layer")?;
        layers.push((d.digest.to_string(), l));
    }
    build(config, layers, manifest_digest, names, layout)
}

fn check_size(d: &Descriptor, actual: u64, what: &str) -> Result<(), ImageError> {
    if d.size == actual {
        return Ok(());
    }
    Err(ImageError::Malformed {
        what: format!("{what} {}", d.digest),
        expected: "blob of the size its descriptor gives",
        detail: format!("the descriptor says {} bytes, the blob has {actual}", d.size),
    })
}

/// Reads an image from a blob store, starting from an index or manifest document (what a
/// registry returns for a tag, or an OCI layout's index.json). Layers are streamed in
/// order, each verified against its digest.
pub fn read_from_blobs(
    source: &dyn BlobSource,
    top: &[u8],
    opts: &ReadOptions,
    select: &dyn Select,
) -> Result<Image, ImageError> {
    let mut budget = Budget::new(opts.limits);
    let mut store = SourceStore {
        source,
        select,
        watch: &opts.progress,
    };
    resolve_oci(&mut store, top, "the index", opts, &mut budget, Layout::Oci)
}

/// An OCI image layout in a directory (`oci:DIR`).
pub struct OciDir {
    root: PathBuf,
}

impl BlobSource for OciDir {
    fn parallelism(&self) -> usize {
        threads()
    }

    /// A blob is a regular file of exactly the size its descriptor declares, checked
    /// before a byte is read: a FIFO, a device or a huge sparse file under its name is
    /// refused at once.
    fn open(&self, digest: &Digest, size: u64) -> Result<Box<dyn Read + '_>, ImageError> {
        // The digest was validated as 64 hex digits: it cannot climb out of the directory.
        let path = self.root.join("blobs").join("sha256").join(digest.hex());
        let (file, len) = crate::files::open_regular(&path, "blob").map_err(|e| match e {
            crate::files::ReadError::NotFound { .. } => {
                ImageError::Missing(format!("blob `{}` is missing", crate::files::shown(&path)))
            }
            other => ImageError::File(other),
        })?;
        if len != size {
            return Err(ImageError::Malformed {
                what: format!("blob {digest}"),
                expected: "blob of the size its descriptor gives",
                detail: format!("the descriptor says {size} bytes, the file has {len}"),
            });
        }
        Ok(Box::new(std::io::BufReader::new(file.take(size))))
    }
}

/// Reads an OCI image layout directory (`oci:DIR`): `index.json` and every blob it
/// reaches must be regular files, `index.json` and the manifests and configs at most
/// [`MAX_CONFIG`] bytes, each blob exactly its declared size.
pub fn read_oci_dir(dir: &Path, opts: &ReadOptions) -> Result<Image, ImageError> {
    let index_path = dir.join("index.json");
    let bytes = crate::files::read_bytes(&index_path, MAX_CONFIG, "OCI index").map_err(|e| match e {
        crate::files::ReadError::NotFound { .. } => ImageError::Missing(format!(
            "`{}` has no index.json: not an OCI image layout",
            crate::files::shown(dir)
        )),
        other => ImageError::File(other),
    })?;
    let source = OciDir {
        root: dir.to_path_buf(),
    };
    let mut budget = Budget::new(opts.limits);
    let mut store = SourceStore {
        source: &source,
        select: &detect::select,
        watch: &opts.progress,
    };
    resolve_oci(&mut store, &bytes, "index.json", opts, &mut budget, Layout::Oci)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_blob_is_read_as_exactly_its_declared_size() {
        let read = |data: &[u8], declared: u64| {
            let mut out = Vec::new();
            Exactly::new(data, declared).read_to_end(&mut out).map(|_| out)
        };
        assert_eq!(read(b"abc", 3).unwrap(), b"abc");
        // Shorter: ends early (the digest then fails).
        assert_eq!(read(b"ab", 3).unwrap(), b"ab");
        // Longer: refused, not cut to a prefix that might verify.
        let e = read(b"abcd", 3).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("more than the 3 bytes"), "{e}");
        // Nothing past the declaration is taken in, however much there is.
        let mut endless = std::io::repeat(7);
        let mut r = Exactly::new(&mut endless, 5);
        let mut buf = [0u8; 64];
        assert_eq!(r.read(&mut buf).unwrap(), 5);
        assert!(r.read(&mut buf).is_err());
    }

    #[test]
    fn work_shared_among_threads_comes_back_in_order() {
        let items: Vec<usize> = (0..200).collect();
        let out = in_order(&items, 4, |&i| Ok(i * 2)).unwrap();
        assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        assert!(in_order(&[] as &[usize], 4, |&i| Ok(i)).unwrap().is_empty());
    }

    #[test]
    fn the_earliest_failure_is_the_one_returned_and_stops_the_rest() {
        let items: Vec<usize> = (0..1000).collect();
        let started = AtomicUsize::new(0);
        let e = in_order(&items, 4, |&i| {
            started.fetch_add(1, Ordering::Relaxed);
            // A later item fails first in time; the earlier one is still the answer.
            if i == 30 {
                std::thread::sleep(std::time::Duration::from_millis(50));
                return Err(ImageError::Missing(format!("item {i}")));
            }
            if i == 31 {
                return Err(ImageError::Missing(format!("item {i}")));
            }
            // Later items take a while, as layers do: a thread that did not see the
            // failure yet (the failing one may be descheduled before it says so) gets
            // through a few of them, never the 968 left.
            if i > 31 {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Ok(i)
        })
        .unwrap_err();
        assert_eq!(e.0, 30);
        assert_eq!(e.1.to_string(), ImageError::Missing("item 30".into()).to_string());
        // Nothing is started once a failure is known: a run that went on would start all
        // 1000.
        assert!(started.load(Ordering::Relaxed) < 200, "{started:?}");
    }

    #[test]
    fn an_archive_member_is_read_where_it_lies() {
        let mut file = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut file, b"0123456789").unwrap();
        let mut at = At {
            file: &file,
            pos: 3,
            end: 7,
        };
        let mut got = String::new();
        at.read_to_string(&mut got).unwrap();
        assert_eq!(got, "3456");
        use std::io::Seek;
        assert_eq!(at.seek(std::io::SeekFrom::Current(-2)).unwrap(), 5);
        assert!(at.seek(std::io::SeekFrom::Current(-6)).is_err());
        // Past the end: nothing to read, not an error.
        at.seek(std::io::SeekFrom::Start(100)).unwrap();
        assert_eq!(at.read(&mut [0u8; 4]).unwrap(), 0);
    }
}
