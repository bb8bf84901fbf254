//! The HTTP client of `db refresh`: blocking reqwest sent through [`crate::net`] (every
//! request and every read under one [`Deadline`], every answer read up to
//! [`DOCUMENT_CAP`]), optional recording.
//!
//! Recording (`gpuenv db refresh --record DIR`) saves every successful response under
//! `DIR/<host>/<path>` so that tests can serve the same bytes from a loopback server. Absolute
//! file URLs inside recorded JSON pages are rewritten to root-relative ones, which PEP 691
//! allows, so the replayed pages point at the replay server.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::Url;

use super::UpstreamError;
use crate::deadline::Deadline;
use crate::net::{self, Cap};

/// The most bytes of one upstream answer (a PEP 691 project page, a PEP 658 metadata
/// file, an index page). PyPI's page of torch, the largest read, is a few MiB.
pub const DOCUMENT_CAP: u64 = 32 << 20;

/// A successful response or a 404 (which APIs use to say "no such thing").
#[derive(Debug)]
pub enum Fetched {
    /// 2xx with its body.
    Body(String),
    /// 404.
    NotFound,
}

/// What a `Range` request got.
#[derive(Debug)]
pub enum Ranged {
    /// 206: the bytes from `start`, and the length of the whole file.
    Piece {
        /// Where the bytes begin in the file.
        start: u64,
        /// The bytes.
        bytes: Vec<u8>,
        /// The length of the whole file.
        total: u64,
    },
    /// The server does not serve ranges (it answered 200, or 416): nothing of the body was
    /// read, so a large file is never downloaded whole by mistake.
    Unsupported,
    /// 404.
    NotFound,
}

/// An HTTP client.
pub struct Client {
    http: reqwest::blocking::Client,
    record: Option<PathBuf>,
    deadline: Deadline,
}

impl Client {
    /// A client whose whole work ends within `timeout` from now; `record` saves responses
    /// there.
    pub fn new(record: Option<PathBuf>, timeout: Duration) -> Result<Client, UpstreamError> {
        Client::with_deadline(record, Deadline::new(timeout, true))
    }

    /// A client whose every request, and every read of an answer, ends by `deadline`.
    pub fn with_deadline(record: Option<PathBuf>, deadline: Deadline) -> Result<Client, UpstreamError> {
        let http = net::client(&deadline, None).map_err(|e| UpstreamError::Network {
            url: String::new(),
            reason: format!("cannot set up HTTP: {e}"),
        })?;
        Ok(Client {
            http,
            record,
            deadline,
        })
    }

    /// The deadline of the whole refresh, for the clients it reads through besides this one
    /// (the registry's, for NGC tags), so that one `--timeout` bounds them all.
    pub fn deadline(&self) -> &Deadline {
        &self.deadline
    }

    /// Sends a GET of `url` with `headers`, under the refresh's deadline.
    fn send(
        &self,
        url: &Url,
        headers: &[(reqwest::header::HeaderName, String)],
    ) -> Result<net::Answer, UpstreamError> {
        let mut req = self.http.get(url.clone());
        for (name, value) in headers {
            req = req.header(name, value);
        }
        let host = match (url.host_str(), url.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_string(),
            (None, _) => "?".to_string(),
        };
        let peer = format!("upstream at {}", crate::text::excerpt(&host));
        // The URL leads the message (`cannot fetch URL: ...`); the rest names the limit.
        net::send(req, &self.deadline, &peer, "the answer").map_err(|e| network(url, e))
    }

    /// GETs `url`, with an `Accept` header when given.
    pub fn get(&self, url: &Url, accept: Option<&str>) -> Result<Fetched, UpstreamError> {
        let headers: Vec<_> = accept
            .map(|a| (reqwest::header::ACCEPT, a.to_string()))
            .into_iter()
            .collect();
        let resp = self.send(url, &headers)?;
        let status = resp.status;
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(Fetched::NotFound);
        }
        if !status.is_success() {
            return Err(network(url, format!("HTTP {status}")));
        }
        let bytes = resp
            .bytes(Cap::at_most(DOCUMENT_CAP, "an upstream document"))
            .map_err(|e| network(url, e))?;
        let body = String::from_utf8(bytes).map_err(|_| UpstreamError::Format {
            url: url.to_string(),
            reason: "the answer is not UTF-8 text".into(),
        })?;
        self.record(url, &body)?;
        Ok(Fetched::Body(body))
    }

    /// Saves `body` as the answer of `url` when this client records.
    pub(crate) fn record(&self, url: &Url, body: &str) -> Result<(), UpstreamError> {
        match &self.record {
            Some(dir) => save(dir, url, body),
            None => Ok(()),
        }
    }

    /// GETs the bytes `range` of `url` (a `Range` header value: `bytes=-65536` for the last
    /// 64 KiB, `bytes=100-199`), at most `cap` of them. Range reads are not recorded: a
    /// recording keeps what they were read for instead (see `lazy_wheel`).
    pub fn get_range(&self, url: &Url, range: &str, cap: u64) -> Result<Ranged, UpstreamError> {
        let resp = self.send(url, &[(reqwest::header::RANGE, range.to_string())])?;
        match resp.status {
            reqwest::StatusCode::NOT_FOUND => return Ok(Ranged::NotFound),
            reqwest::StatusCode::PARTIAL_CONTENT => {}
            s if s.is_success() || s == reqwest::StatusCode::RANGE_NOT_SATISFIABLE => {
                // Dropping the answer unread closes the connection: a server that ignores
                // `Range` would otherwise send the whole (gigabyte) wheel.
                return Ok(Ranged::Unsupported);
            }
            s => return Err(network(url, format!("HTTP {s}"))),
        }
        let content_range = resp
            .headers
            .get(reqwest::header::CONTENT_RANGE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let Some((start, end, total)) = content_range.as_deref().and_then(parse_content_range) else {
            return Err(UpstreamError::Format {
                url: url.to_string(),
                reason: format!(
                    "a 206 answer without a readable Content-Range (got {})",
                    content_range
                        .as_deref()
                        .map_or("none".to_string(), crate::text::excerpt)
                ),
            });
        };
        let len = end - start + 1;
        if len > cap {
            return Err(network(
                url,
                format!("the server sent {len} bytes for a range of at most {cap}"),
            ));
        }
        let bytes = resp
            .bytes(Cap::exactly(len, "its Content-Range declares"))
            .map_err(|e| network(url, e))?;
        Ok(Ranged::Piece { start, bytes, total })
    }
}

/// A network failure of `url`.
fn network(url: &Url, reason: impl ToString) -> UpstreamError {
    UpstreamError::Network {
        url: url.to_string(),
        reason: reason.to_string(),
    }
}

/// `bytes START-END/TOTAL` (RFC 9110 §14.4), with `START <= END < TOTAL`.
fn parse_content_range(v: &str) -> Option<(u64, u64, u64)> {
    let rest = v.trim().strip_prefix("bytes ")?;
    let (span, total) = rest.split_once('/')?;
    let (start, end) = span.split_once('-')?;
    let (start, end, total): (u64, u64, u64) = (
        start.trim().parse().ok()?,
        end.trim().parse().ok()?,
        total.trim().parse().ok()?,
    );
    (start <= end && end < total).then_some((start, end, total))
}

/// Where a recorded response of `url` lives below `dir`.
pub(crate) fn record_path(dir: &Path, url: &Url) -> PathBuf {
    let mut p = dir.to_path_buf();
    for seg in url.path().split('/').filter(|s| !s.is_empty() && *s != "..") {
        p.push(seg);
    }
    if url.path().ends_with('/') {
        p.push("index");
    }
    p
}

fn save(dir: &Path, url: &Url, body: &str) -> Result<(), UpstreamError> {
    let path = record_path(dir, url);
    let werr = |e: std::io::Error| UpstreamError::Write {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    if let Some(parent) = path.parent() {
        fs_err::create_dir_all(parent).map_err(werr)?;
    }
    // Replayed pages must point at the replay server, not at the real hosts.
    let body = body.replace("\"https://files.pythonhosted.org/", "\"/");
    fs_err::write(&path, body).map_err(werr)
}

#[cfg(test)]
mod tests {
    use super::parse_content_range;

    #[test]
    fn content_ranges_are_read_and_checked() {
        assert_eq!(parse_content_range("bytes 0-99/191046"), Some((0, 99, 191046)));
        assert_eq!(
            parse_content_range("bytes 124510-191045/191046"),
            Some((124510, 191045, 191046))
        );
        // An unknown length, a span past the end, a reversed span, another unit: refused.
        assert_eq!(parse_content_range("bytes 0-99/*"), None);
        assert_eq!(parse_content_range("bytes 0-191046/191046"), None);
        assert_eq!(parse_content_range("bytes 99-0/191046"), None);
        assert_eq!(parse_content_range("items 0-9/10"), None);
    }
}
