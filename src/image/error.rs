//! The one error type of the image readers.
//!
//! Every variant names what was being read (a blob, a layer, an entry path) and why it was
//! refused, so that `gpuenv verify` can print one sentence and exit 2 for a bad or hostile
//! image, or 3 when the bytes could not be read at all. What an image controls (entry
//! paths, names, a JSON parser's words about a value) is shown as an excerpt
//! ([`crate::text::excerpt`]): a tar path may be 64 KiB long, and a message holds a
//! sentence, not a file.

use crate::text::excerpt;

/// Why an image, a layer or one of its entries could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// Reading the bytes failed (a file, a socket): not the image's fault.
    #[error("cannot read {what}: {source}")]
    Io {
        /// What was being read.
        what: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The stream ended in the middle of a header, an entry or a compressed frame.
    #[error("{what} is truncated: {detail}")]
    Truncated {
        /// What ended early.
        what: String,
        /// Where, or the decoder's words.
        detail: String,
    },
    /// The bytes are not what they claim to be (bad tar header, bad gzip/zstd data).
    #[error("{what} is corrupt: {detail}")]
    Corrupt {
        /// What is corrupt.
        what: String,
        /// How.
        detail: String,
    },
    /// An entry's path or hard-link target leaves the image root (`../../etc/passwd`).
    #[error("entry `{}` escapes the image root; refusing the layer", excerpt(.path))]
    PathTraversal {
        /// The path as written in the archive.
        path: String,
    },
    /// An entry is larger than the reader accepts for it.
    #[error("entry `{}` declares {size} bytes, over the limit of {limit} bytes for {what}", excerpt(.path))]
    TooLarge {
        /// The entry.
        path: String,
        /// Its declared size.
        size: u64,
        /// The limit it broke.
        limit: u64,
        /// Which limit: "any entry", "a file whose contents are read", "tar metadata".
        what: &'static str,
    },
    /// A whole-image bound was reached (bytes captured, entries recorded).
    #[error("the image exceeds the reader's bound on {what} ({limit}); refusing to read further")]
    Budget {
        /// Which bound.
        what: &'static str,
        /// Its value.
        limit: u64,
    },
    /// A blob's content does not hash to the digest it is named or listed by.
    #[error("digest mismatch for {}: expected {expected}, the content hashes to {actual}", excerpt(.what))]
    DigestMismatch {
        /// The blob.
        what: String,
        /// The digest it is named by.
        expected: String,
        /// What its bytes hash to.
        actual: String,
    },
    /// A structural document (manifest.json, index.json, a manifest, a config) is wrong.
    #[error("{} is not a valid {expected}: {}", excerpt(.what), excerpt(.detail))]
    Malformed {
        /// The document.
        what: String,
        /// What it should have been.
        expected: &'static str,
        /// Why it is not one.
        detail: String,
    },
    /// Something the manifest names is not in the archive, or the archive names no image.
    #[error("{0}")]
    Missing(String),
    /// A format this reader does not handle (bzip2 or xz layers, foreign-layer URLs).
    #[error("{0}")]
    Unsupported(String),
    /// A file of an `oci:` directory was refused before it was read (not a regular file,
    /// too large), or could not be read.
    #[error(transparent)]
    File(crate::files::ReadError),
    /// An error inside a named blob or layer.
    #[error("{}: {source}", excerpt(.context))]
    In {
        /// The blob or layer (`layer 3 (blobs/sha256/ab12…)`).
        context: String,
        /// The error inside it.
        source: Box<ImageError>,
    },
}

impl ImageError {
    /// Wraps this error with the name of the blob or layer it happened in.
    pub fn within(self, context: impl Into<String>) -> Self {
        ImageError::In {
            context: context.into(),
            source: Box::new(self),
        }
    }

    /// The innermost error, past every [`ImageError::In`].
    pub fn root(&self) -> &ImageError {
        match self {
            ImageError::In { source, .. } => source.root(),
            other => other,
        }
    }

    /// Whether the image (not the machine) is at fault: bad input, exit code 2. An
    /// [`ImageError::Io`] that is not about the data's shape is the environment's (exit 3).
    pub fn is_bad_input(&self) -> bool {
        match self.root() {
            ImageError::Io { .. } => false,
            ImageError::File(e) => e.is_bad_input(),
            _ => true,
        }
    }

    /// Maps an I/O error that happened while decoding `what`: an early end is
    /// [`ImageError::Truncated`], bad data is [`ImageError::Corrupt`], the rest is I/O.
    pub(crate) fn from_io(what: &str, e: std::io::Error) -> Self {
        use std::io::ErrorKind;
        match e.kind() {
            ErrorKind::UnexpectedEof => ImageError::Truncated {
                what: what.to_string(),
                detail: e.to_string(),
            },
            ErrorKind::InvalidData | ErrorKind::InvalidInput | ErrorKind::Other => ImageError::Corrupt {
                what: what.to_string(),
                detail: e.to_string(),
            },
            _ => ImageError::Io {
                what: what.to_string(),
                source: e,
            },
        }
    }
}
