//! The one HTTP client of gpuenv: blocking reqwest with timeouts, optional recording.
//!
//! Recording (`gpuenv db refresh --record DIR`) saves every successful response under
//! `DIR/<host>/<path>` so that tests can serve the same bytes from a loopback server. Absolute
//! file URLs inside recorded JSON pages are rewritten to root-relative ones, which PEP 691
//! allows, so the replayed pages point at the replay server.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::Url;

use super::UpstreamError;

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
}

impl Client {
    /// A client with connect and read timeouts; `record` saves responses there.
    pub fn new(record: Option<PathBuf>, timeout: Duration) -> Result<Client, UpstreamError> {
        let http = reqwest::blocking::Client::builder()
            .connect_timeout(timeout)
            .timeout(timeout)
            .user_agent(concat!("gpuenv/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| UpstreamError::Network {
                url: String::new(),
                reason: format!("cannot set up HTTP: {e}"),
            })?;
        Ok(Client { http, record })
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
        let resp = req.send().map_err(|e| net(describe(&e)))?;
        let status = resp.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(Fetched::NotFound);
        }
        if !status.is_success() {
            return Err(net(format!("HTTP {status}")));
        }
        let body = resp
            .text()
            .map_err(|e| net(format!("reading the body failed: {}", describe(&e))))?;
        if let Some(dir) = &self.record {
            save(dir, url, &body)?;
        }
        Ok(Fetched::Body(body))
    }
}

/// reqwest's error chain in one line ("connection failed: ...: connection refused").
pub(crate) fn describe(e: &reqwest::Error) -> String {
    let mut s = if e.is_timeout() {
        "timed out".to_string()
    } else if e.is_connect() {
        "connection failed".to_string()
    } else {
        e.to_string()
    };
    let mut src = std::error::Error::source(e);
    while let Some(inner) = src {
        let text = inner.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        src = inner.source();
    }
    s
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
