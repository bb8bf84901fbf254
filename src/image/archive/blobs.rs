//! An image read from any store of blobs opened by digest (a registry client, an OCI
//! directory), starting from an index or manifest document.
//!
//! Owns: reading each blob as exactly its declared size ([`Exactly`]) and verifying it,
//! documents bounded by [`MAX_CONFIG`], layers as many at once as the source allows. Must
//! not: know where the blobs come from (that is the [`BlobSource`]).

use std::io::{self, Read};

use super::oci::{Descriptor, Store, resolve_oci};
use super::{BlobSource, Image, Layout, ReadOptions, Watch, in_order, mismatch};
use crate::image::ImageError;
use crate::image::config::MAX_CONFIG;
use crate::image::digest::HashRead;
use crate::image::layer::{self, Budget, Layer, Select};

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

pub(super) struct SourceStore<'a> {
    pub(super) source: &'a dyn BlobSource,
    pub(super) select: &'a dyn Select,
    pub(super) watch: &'a Watch,
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
