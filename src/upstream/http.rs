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

    /// GETs `url`, with an `Accept` header when given.
    pub fn get(&self, url: &Url, accept: Option<&str>) -> Result<Fetched, UpstreamError> {
        let net = |reason: String| UpstreamError::Network {
            url: url.to_string(),
            reason,
        };
        let mut req = self.http.get(url.clone());
        if let Some(a) = accept {
            req = req.header(reqwest::header::ACCEPT, a);
        }
        let host = match (url.host_str(), url.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_string(),
            (None, _) => "?".to_string(),
        };
        let peer = format!("upstream at {}", crate::text::excerpt(&host));
        // The URL leads the message (`cannot fetch URL: ...`); the rest names the limit.
        let failed = |e: net::NetError| net(e.to_string());
        let resp = net::send(req, &self.deadline, &peer, "the answer").map_err(failed)?;
        let status = resp.status;
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(Fetched::NotFound);
        }
        if !status.is_success() {
            return Err(net(format!("HTTP {status}")));
        }
        let bytes = resp
            .bytes(Cap::at_most(DOCUMENT_CAP, "an upstream document"))
            .map_err(failed)?;
        let body = String::from_utf8(bytes).map_err(|_| UpstreamError::Format {
            url: url.to_string(),
            reason: "the answer is not UTF-8 text".into(),
        })?;
        if let Some(dir) = &self.record {
            save(dir, url, &body)?;
        }
        Ok(Fetched::Body(body))
    }
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
