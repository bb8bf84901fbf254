//! An OCI image layout in a directory (`oci:DIR`): index.json and `blobs/sha256/<hex>`
//! files.
//!
//! Owns: which files may be read (regular files only, each of exactly its declared size,
//! checked before a byte is read). Must not: follow a digest out of the directory.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::blobs::SourceStore;
use super::oci::resolve_oci;
use super::{BlobSource, Image, Layout, ReadOptions, threads};
use crate::image::ImageError;
use crate::image::config::MAX_CONFIG;
use crate::image::detect;
use crate::image::digest::Digest;
use crate::image::layer::Budget;

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
