//! Content digests (`sha256:<64 hex>`): parsing, and hashing a stream as it is read.
//!
//! Owns: the one digest algorithm images use in practice (sha256) and the rule that a
//! digest is validated before it is ever turned into a path (`blobs/sha256/<hex>`), so a
//! manifest cannot name `../../etc/passwd` as a blob. Must not: buffer what it hashes.

use std::fmt;
use std::io::{self, Read};

use sha2::{Digest as _, Sha256};

use super::ImageError;

/// A validated `sha256:<64 lowercase hex>` digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct Digest(String);

impl Digest {
    /// Parses `sha256:<hex>`; `what` names the field in the error.
    pub fn parse(text: &str, what: &str) -> Result<Self, ImageError> {
        let malformed = |detail: &str| ImageError::Malformed {
            what: format!("{what} `{}`", text.escape_debug()),
            expected: "sha256 digest",
            detail: detail.to_string(),
        };
        let hex = match text.split_once(':') {
            Some(("sha256", hex)) => hex,
            Some((alg, _)) => {
                return Err(ImageError::Unsupported(format!(
                    "{what} uses digest algorithm `{}`; only sha256 is supported",
                    alg.escape_debug()
                )));
            }
            None => return Err(malformed("expected `sha256:` followed by 64 hex digits")),
        };
        Self::from_hex(hex).ok_or_else(|| malformed("expected 64 lowercase hex digits after `sha256:`"))
    }

    /// A digest from its 64 hex digits (as in a `blobs/sha256/<hex>` file name).
    pub fn from_hex(hex: &str) -> Option<Self> {
        let valid = hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        valid.then(|| Digest(format!("sha256:{hex}")))
    }

    /// The 64 hex digits.
    pub fn hex(&self) -> &str {
        &self.0["sha256:".len()..]
    }

    /// `sha256:<hex>`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 12 hex digits, as Docker shows image ids.
    pub fn short(&self) -> &str {
        &self.hex()[..12]
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Hashes (sha256) and counts every byte read through it.
pub struct HashRead<R> {
    inner: R,
    /// `None`: counting only (see [`HashRead::counting`]).
    hasher: Option<Sha256>,
    count: u64,
}

impl<R: Read> HashRead<R> {
    /// Wraps `inner`.
    pub fn new(inner: R) -> Self {
        HashRead {
            inner,
            hasher: Some(Sha256::new()),
            count: 0,
        }
    }

    /// Wraps `inner`, counting without hashing, for a stream whose digest another
    /// `HashRead` over the same bytes already takes (an uncompressed layer's diff id is
    /// its blob digest): hashing dominates the cost of reading a large image, so it is
    /// done once. [`HashRead::digest`] then gives `None`.
    pub fn counting(inner: R) -> Self {
        HashRead {
            inner,
            hasher: None,
            count: 0,
        }
    }

    /// Reads the rest of the stream (so that the digest covers all of it).
    pub fn drain(&mut self, what: &str) -> Result<(), ImageError> {
        io::copy(self, &mut io::sink())
            .map(|_| ())
            .map_err(|e| ImageError::from_io(what, e))
    }

    /// Bytes read so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The digest of what was read, and how many bytes (for a counting reader, the digest
    /// of nothing: ask [`HashRead::digest`] there).
    pub fn finish(self) -> (Digest, u64) {
        let count = self.count;
        (self.digest().unwrap_or_else(|| Digest::of(Sha256::new())), count)
    }

    /// The digest of what was read (`None` when only counting).
    pub fn digest(self) -> Option<Digest> {
        self.hasher.map(Digest::of)
    }
}

impl Digest {
    fn of(hasher: Sha256) -> Digest {
        let out = hasher.finalize();
        let hex: String = out.iter().map(|b| format!("{b:02x}")).collect();
        Digest(format!("sha256:{hex}"))
    }
}

impl<R: Read> Read for HashRead<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(h) = &mut self.hasher {
            h.update(&buf[..n]);
        }
        self.count += n as u64;
        Ok(n)
    }
}

/// The sha256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> Digest {
    let mut h = HashRead::new(bytes);
    // Reading from a slice cannot fail.
    let _ = io::copy(&mut h, &mut io::sink());
    h.finish().0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses() {
        let d = sha256(b"");
        assert_eq!(
            d.as_str(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(Digest::parse(d.as_str(), "config").unwrap(), d);
        assert_eq!(d.short(), "e3b0c44298fc");
        for bad in [
            "sha256:../../etc/passwd",
            "sha256:E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855",
            "e3b0c4",
            "sha256:",
        ] {
            assert!(Digest::parse(bad, "layer").is_err(), "{bad}");
        }
        let e = Digest::parse("sha512:abcd", "layer").unwrap_err();
        assert!(e.to_string().contains("only sha256"), "{e}");
    }
}
