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
//! small JSON members (manifests, configs, indexes) are kept whole up to
//! [`MAX_CONFIG`](super::config::MAX_CONFIG) each. Once the end is reached the manifest
//! says which layers, in which order, make the image, and they are applied. Layers of other platforms in a multi-platform archive are
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
//! [`Budget`](super::layer::Budget) is shared by every layer and thread.
//!
//! Digests verified: every `blobs/sha256/<hex>` member read against its name (in one pass,
//! a mismatch is an error even for a blob no manifest uses; a file's unused blobs are not
//! read), a legacy `<hex>.json` config against its name,
//! each descriptor's size (required, whole and not negative: a blob is read no further
//! than it, and an `oci:` blob file of another size is refused before it is read), and
//! each layer's uncompressed sha256 against the config's
//! `rootfs.diff_ids` (which is how legacy `<id>/layer.tar` members, not named by digest,
//! are checked).
//!
//! The files: the one-pass walk over an archive's members (`stream.rs`) and what it
//! collects (`members.rs`), the indexed archive file (`file.rs`), any blob source such as
//! a registry (`blobs.rs`) and an OCI directory (`oci_dir.rs`); the two manifest formats,
//! `docker save`'s manifest.json (`docker.rs`) and OCI indexes and manifests (`oci.rs`).
//! This file keeps the types they share and applies the layers (`build`).

use std::io::{self, Read};

use serde::Serialize;

use super::ImageError;
use super::config::ImageConfig;
use super::detect;
use super::digest::Digest;
use super::fs::MergedFs;
use super::layer::{Compression, Layer, Limits};

mod blobs;
mod docker;
mod file;
mod members;
mod oci;
mod oci_dir;
mod stream;

pub use blobs::read_from_blobs;
pub use file::{read_archive_file, read_archive_file_with};
pub use oci::Descriptor;
pub use oci_dir::{OciDir, read_oci_dir};
pub use stream::{read_archive, read_archive_with};

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

/// The most threads that read layers at once.
pub const MAX_THREADS: usize = 8;

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

fn mismatch(path: &str, expected: &Digest, actual: &Digest) -> ImageError {
    ImageError::DigestMismatch {
        what: format!("blob `{path}`"),
        expected: expected.to_string(),
        actual: actual.to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

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
}
