//! A wheel's core metadata read out of the wheel itself with HTTP range requests, for an
//! index that does not serve its PEP 658 `.metadata` file: older uploads, private indexes,
//! and the PyPI mirrors renters in China use, which serve the wheels but often not their
//! metadata. pip (`--use-feature=fast-deps`) and uv fall back the same way.
//!
//! Owns: reading the zip's end records, its central directory and the one
//! `*.dist-info/METADATA` member, each through a capped `Range` request, under the refresh's
//! deadline. Must not: download a wheel whole (a server that ignores `Range` gets nothing
//! read, and the bytes read per wheel are capped at [`WHEEL_READ_CAP`]), or parse what the
//! metadata says (that is `pypi::parse_metadata`'s).
//!
//! A wheel is a zip: its central directory sits at the end, so the last 64 KiB usually hold
//! it whole, and one more request reads the metadata member. A torch wheel of 900 MB costs
//! two or three requests of well under a megabyte.

use std::io::{self, Read, Seek, SeekFrom};

use reqwest::Url;

use super::UpstreamError;
use super::http::{Client, Ranged};

/// The first request's size: the end of the zip, where its directory lies.
const TAIL: u64 = 64 << 10;

/// The most bytes one request asks for.
const RANGE_CAP: u64 = 4 << 20;

/// The most bytes read from one wheel in all: a central directory of 100,000 members and
/// the metadata member fit many times over.
pub const WHEEL_READ_CAP: u64 = 16 << 20;

/// The most bytes of the metadata member, unpacked.
const METADATA_CAP: u64 = 4 << 20;

/// The wheel at `url` read as a file, each piece fetched when the zip reader first needs it.
struct Remote<'a> {
    client: &'a Client,
    url: &'a Url,
    len: u64,
    pos: u64,
    pieces: Vec<(u64, Vec<u8>)>,
    fetched: u64,
    /// The failure behind an `io::Error` the zip reader saw, returned as itself.
    failure: Option<UpstreamError>,
}

impl Remote<'_> {
    fn fetch(&mut self, want: u64) -> io::Result<()> {
        let end = self.pos.saturating_add(want.clamp(TAIL, RANGE_CAP)).min(self.len) - 1;
        let len = end - self.pos + 1;
        if self.fetched + len > WHEEL_READ_CAP {
            return Err(self.fail(UpstreamError::Format {
                url: self.url.to_string(),
                reason: format!(
                    "reading its metadata would take more than the {} gpuenv reads of one wheel",
                    crate::net::size(WHEEL_READ_CAP)
                ),
            }));
        }
        let got = self
            .client
            .get_range(self.url, &format!("bytes={}-{end}", self.pos), len);
        match got {
            Ok(Ranged::Piece { start, bytes, total })
                if start == self.pos && total == self.len && !bytes.is_empty() =>
            {
                self.fetched += bytes.len() as u64;
                self.pieces.push((start, bytes));
                Ok(())
            }
            Ok(_) => Err(self.fail(UpstreamError::Format {
                url: self.url.to_string(),
                reason: "the server answered a range request with another range or file".into(),
            })),
            Err(e) => Err(self.fail(e)),
        }
    }

    fn fail(&mut self, e: UpstreamError) -> io::Error {
        let msg = e.to_string();
        self.failure = Some(e);
        io::Error::other(msg)
    }
}

impl Read for Remote<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pos >= self.len || buf.is_empty() {
            return Ok(0);
        }
        let pos = self.pos;
        let held = |pieces: &[(u64, Vec<u8>)]| {
            pieces
                .iter()
                .position(|(s, b)| *s <= pos && pos < s + b.len() as u64)
        };
        let i = match held(&self.pieces) {
            Some(i) => i,
            None => {
                self.fetch(buf.len() as u64)?;
                self.pieces.len() - 1
            }
        };
        let (start, bytes) = &self.pieces[i];
        let from = (pos - start) as usize;
        let n = buf.len().min(bytes.len() - from);
        buf[..n].copy_from_slice(&bytes[from..from + n]);
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for Remote<'_> {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let next = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::End(d) => self.len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos =
            next.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "seek before the start"))?;
        Ok(self.pos)
    }
}

/// The text of the `*.dist-info/METADATA` member of the wheel at `url`; `None` where the
/// server serves no ranges of it (or no such file), or the wheel has no such member.
pub fn read_metadata(client: &Client, url: &Url) -> Result<Option<String>, UpstreamError> {
    let (start, bytes, total) = match client.get_range(url, &format!("bytes=-{TAIL}"), TAIL)? {
        Ranged::Piece { start, bytes, total } => (start, bytes, total),
        Ranged::Unsupported | Ranged::NotFound => return Ok(None),
    };
    let mut remote = Remote {
        client,
        url,
        len: total,
        pos: 0,
        fetched: bytes.len() as u64,
        pieces: vec![(start, bytes)],
        failure: None,
    };
    let text = member_text(&mut remote);
    if let Some(e) = remote.failure.take() {
        return Err(e);
    }
    text.map_err(|reason| UpstreamError::Format {
        url: url.to_string(),
        reason,
    })
}

/// The metadata member of the zip `file`, as text.
fn member_text(file: &mut Remote<'_>) -> Result<Option<String>, String> {
    let mut zip = zip::ZipArchive::new(file).map_err(|e| format!("not a readable wheel (zip): {e}"))?;
    // `NAME-VERSION.dist-info/METADATA` at the top level (the wheel spec, PEP 427): one
    // directory deep, never a vendored package's.
    let name = zip
        .file_names()
        .find(|n| n.ends_with(".dist-info/METADATA") && n.matches('/').count() == 1)
        .map(str::to_string);
    let Some(name) = name else {
        return Ok(None);
    };
    let member = zip
        .by_name(&name)
        .map_err(|e| format!("cannot read its {}: {e}", crate::text::excerpt(&name)))?;
    let mut raw = Vec::new();
    member
        .take(METADATA_CAP + 1)
        .read_to_end(&mut raw)
        .map_err(|e| format!("cannot unpack its {}: {e}", crate::text::excerpt(&name)))?;
    if raw.len() as u64 > METADATA_CAP {
        return Err(format!(
            "its {} unpacks to more than the {} gpuenv reads",
            crate::text::excerpt(&name),
            crate::net::size(METADATA_CAP)
        ));
    }
    String::from_utf8(raw)
        .map(Some)
        .map_err(|_| format!("its {} is not UTF-8 text", crate::text::excerpt(&name)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    /// A loopback server of one file that answers `Range: bytes=...` with 206, counting the
    /// body bytes it sends.
    fn serve(file: Vec<u8>) -> (Url, Arc<AtomicU64>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let sent = Arc::new(AtomicU64::new(0));
        let counter = sent.clone();
        std::thread::spawn(move || {
            for s in listener.incoming().flatten() {
                let mut reader = BufReader::new(s.try_clone().unwrap());
                let mut range = None;
                let mut line = String::new();
                while reader.read_line(&mut line).map(|n| n > 2).unwrap_or(false) {
                    if let Some(v) = line
                        .strip_prefix("range: bytes=")
                        .or(line.strip_prefix("Range: bytes="))
                    {
                        range = Some(v.trim().to_string());
                    }
                    line.clear();
                }
                let len = file.len();
                let (a, b) = match range.as_deref().and_then(|r| r.split_once('-')) {
                    Some(("", n)) => (len - n.parse::<usize>().unwrap().min(len), len - 1),
                    Some((a, b)) => (a.parse().unwrap(), b.parse::<usize>().unwrap().min(len - 1)),
                    None => (0, len - 1),
                };
                counter.fetch_add((b - a + 1) as u64, Ordering::SeqCst);
                let mut out = s;
                let _ = write!(
                    out,
                    "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {a}-{b}/{len}\r\nConnection: close\r\n\r\n",
                    b - a + 1
                );
                let _ = out.write_all(&file[a..=b]);
            }
        });
        (
            format!("http://{addr}/x-1.0-py3-none-any.whl").parse().unwrap(),
            sent,
        )
    }

    /// A zip of `members`, stored (not deflated) so that its size is what it holds.
    fn zip_of(members: &[(&str, &[u8])], deflate: bool) -> Vec<u8> {
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let method = if deflate {
            zip::CompressionMethod::Deflated
        } else {
            zip::CompressionMethod::Stored
        };
        let opts = zip::write::SimpleFileOptions::default().compression_method(method);
        for (name, body) in members {
            w.start_file(*name, opts).unwrap();
            w.write_all(body).unwrap();
        }
        w.finish().unwrap().into_inner()
    }

    fn client() -> Client {
        Client::new(None, Duration::from_secs(20)).unwrap()
    }

    #[test]
    fn the_metadata_member_is_read_without_the_rest_of_the_wheel() {
        let filler = vec![7u8; 3 << 20];
        let file = zip_of(
            &[
                ("x/big.so", &filler),
                ("x/_vendor/y-2.0.dist-info/METADATA", b"Name: y\n"),
                (
                    "x-1.0.dist-info/METADATA",
                    b"Name: x\nRequires-Dist: torch==2.4.0\n",
                ),
            ],
            false,
        );
        let (url, sent) = serve(file);
        let text = read_metadata(&client(), &url).unwrap().unwrap();
        assert!(text.contains("torch==2.4.0"), "{text}");
        // The tail (the directory, and here the member too): nothing of the 3 MiB member.
        assert!(
            sent.load(Ordering::SeqCst) <= 2 * TAIL,
            "{}",
            sent.load(Ordering::SeqCst)
        );
    }

    #[test]
    fn a_member_that_unpacks_past_the_cap_is_refused() {
        let bomb = vec![b'a'; (METADATA_CAP + 10) as usize];
        let (url, _) = serve(zip_of(&[("x-1.0.dist-info/METADATA", &bomb)], true));
        let e = read_metadata(&client(), &url).unwrap_err().to_string();
        assert!(e.contains("unpacks to more than the 4 MiB"), "{e}");
    }

    #[test]
    fn a_wheel_without_metadata_or_not_a_zip_says_so() {
        let (url, _) = serve(zip_of(&[("x/__init__.py", b"")], false));
        assert!(read_metadata(&client(), &url).unwrap().is_none());
        let (url, _) = serve(b"<html>a login page, not a wheel</html>".to_vec());
        let e = read_metadata(&client(), &url).unwrap_err().to_string();
        assert!(e.contains("not a readable wheel"), "{e}");
    }
}
