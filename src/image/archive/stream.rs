//! The one-pass read of an archive: every member walked once, in the order the archive
//! has them (a stream cannot seek, and manifest.json may come last).
//!
//! Owns: the walk over the members ([`scan`], which the archive file's index uses too,
//! noting where layers lie instead of reading them), which members are documents kept
//! whole and which are layers, and the errors of the outer stream. Must not: decide which
//! image the archive holds (that is the manifest formats', once the walk is over).

use std::io::Read;

use super::members::{Members, Span, blob_digest_of, is_doc_name, looks_like_layer_name};
use super::{Image, ReadOptions, mismatch};
use crate::image::ImageError;
use crate::image::config::MAX_CONFIG;
use crate::image::detect;
use crate::image::digest::{Digest, sha256};
use crate::image::layer::{self, Budget, Select, normalize_path};
use crate::image::tar::{DataReader, Header, Kind, TarReader};

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

/// One walk over an archive's members. Layers are read as they pass by, unless the
/// archive is a file of `file_len` bytes: then where each lies is noted, to be read later.
pub(super) fn scan<R: Read>(
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
                if let Some(t) = link_target(&header, &path)? {
                    members.aliases.insert(path, t);
                }
                continue;
            }
            Kind::File => {}
            _ => continue,
        }
        member(tar, &header, path, &mut members, budget, select, file_len)?;
    }
    Ok(members)
}

/// Where a link member at `path` points, as a member path. Legacy `docker save` links
/// duplicate layers: `<id>/layer.tar -> ../<id2>/layer.tar`.
fn link_target(header: &Header, path: &str) -> Result<Option<String>, ImageError> {
    let base = path.rsplit_once('/').map_or("", |(d, _)| d);
    if header.kind == Kind::Symlink && !header.link.starts_with(b"/") {
        let mut joined = base.as_bytes().to_vec();
        joined.push(b'/');
        joined.extend_from_slice(&header.link);
        normalize_path(&joined)
    } else {
        normalize_path(&header.link)
    }
}

/// A regular member: a document kept whole, a layer read (or, in a file, where it lies
/// noted), or something else passed over.
fn member<R: Read>(
    tar: &mut TarReader<R>,
    header: &Header,
    path: String,
    members: &mut Members,
    budget: &mut Budget,
    select: &dyn Select,
    file_len: Option<u64>,
) -> Result<(), ImageError> {
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
    let head = &head[..got];
    let looks_json = got == 1 && (head[0] == b'{' || head[0] == b'[');
    if is_doc || (named.is_some() && looks_json && header.size <= MAX_CONFIG) {
        return keep_doc(
            &mut data,
            head,
            header.size,
            path,
            named.as_ref(),
            members,
            budget,
        );
    }
    if named.is_none() && !looks_like_layer_name(&path) {
        return Ok(());
    }
    if file_len.is_some() {
        members.spans.insert(
            path,
            Span {
                offset: at,
                size: header.size,
            },
        );
        return Ok(());
    }
    stream_layer(&mut data, head, path, named.as_ref(), members, budget, select)
}

/// A JSON document (a manifest, an index, a config) kept whole, up to [`MAX_CONFIG`]; one
/// named by its digest is verified against it. `head` is what was read of it already.
fn keep_doc<R: Read>(
    data: &mut DataReader<'_, R>,
    head: &[u8],
    size: u64,
    path: String,
    named: Option<&Digest>,
    members: &mut Members,
    budget: &mut Budget,
) -> Result<(), ImageError> {
    if size > MAX_CONFIG {
        if is_doc_name(&path) && !path.contains('/') && path != "repositories" {
            return Err(ImageError::TooLarge {
                path,
                size,
                limit: MAX_CONFIG,
                what: "a JSON document",
            });
        }
        return Ok(());
    }
    budget.capture(size)?;
    let mut bytes = Vec::with_capacity(size as usize);
    let mut replay = std::io::Cursor::new(head.to_vec()).chain(&mut *data);
    let read = replay.read_to_end(&mut bytes);
    drop(replay);
    if let Err(e) = read {
        return Err(outer(data, e));
    }
    if let Some(d) = named {
        let actual = sha256(&bytes);
        if &actual != d {
            return Err(mismatch(&path, d, &actual));
        }
    }
    members.docs.insert(path, bytes);
    Ok(())
}

/// A layer read as it passes by; `head` is what was read of it already. One that fails
/// to read is kept as its error, an error only if a manifest uses it, unless the failure
/// is the image's whichever blob has it.
fn stream_layer<R: Read>(
    data: &mut DataReader<'_, R>,
    head: &[u8],
    path: String,
    named: Option<&Digest>,
    members: &mut Members,
    budget: &mut Budget,
    select: &dyn Select,
) -> Result<(), ImageError> {
    let replay = std::io::Cursor::new(head.to_vec()).chain(&mut *data);
    match layer::read_layer(replay, select, budget) {
        Ok(l) => {
            if let Some(d) = named {
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
    Ok(())
}

/// The error of the outer stream, if reading the member failed because of it.
fn outer<R: Read>(data: &mut DataReader<'_, R>, e: impl Into<OuterOr>) -> ImageError {
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
