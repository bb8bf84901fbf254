//! Download speed from the places a stack pulls from: bytes a second over a bounded read
//! of one URL, through the project's HTTP client ([`crate::net`]).
//!
//! Owns: the list of default URLs (each a large file the stack really downloads) and the
//! bounded read. Must not: keep what it reads (the bytes are counted and dropped), follow
//! anything but the HTTP redirects a plain client follows, or print.
//!
//! The clock starts when the answer's head has arrived, so the figure is the transfer's
//! rate, not the connection's setup; the read stops at its byte limit or its time limit,
//! whichever comes first, and a stalled server is given up after [`crate::deadline::IDLE`].

use std::time::Duration;

use super::HostBenchError;
use crate::bench::{Engine, Figure, Metric};
use crate::deadline::Deadline;
use crate::net::Cap;

/// What the default run downloads: the torch wheel `pip install torch==2.9.1` pulls from
/// PyPI on Linux x86-64 with CPython 3.12, the largest file of a stack's install
/// (899,742,281 bytes; the bench reads a bounded prefix of it). Read from PyPI's JSON API,
/// <https://pypi.org/pypi/torch/json>, `releases["2.9.1"]`, file
/// `torch-2.9.1-cp312-cp312-manylinux_2_28_x86_64.whl` (uploaded 2025-11-12, not yanked,
/// sha256 `27331cd9...c4f07c4`), on 2026-12-05, when a `HEAD` of this URL answered 200 with
/// that length and a ranged `GET` gave a zip's first bytes. PyPI's files are immutable,
/// so the URL stays. Not download.pytorch.org's CUDA builds: that index could not be
/// reached to verify a file there.
pub const DEFAULT_URLS: &[&str] = &[
    "https://files.pythonhosted.org/packages/19/17/e377a460603132b00760511299fceba4102bd95db1a0ee788da21298ccff/torch-2.9.1-cp312-cp312-manylinux_2_28_x86_64.whl",
];

/// What to read.
#[derive(Debug, Clone)]
pub struct DownloadPlan {
    /// The URL.
    pub url: String,
    /// At most this many bytes are read.
    pub max_bytes: u64,
    /// At most this long is spent reading (the head's wait is bounded by the deadline's
    /// idle limit on top).
    pub max_time: Duration,
}

/// Reads up to the plan's bounds and gives the rate.
pub fn measure(plan: &DownloadPlan) -> Result<Figure, HostBenchError> {
    let url = reqwest::Url::parse(&plan.url).map_err(|e| {
        HostBenchError::Input(format!(
            "--download-url `{}` is not a URL ({e}); expected http:// or https://",
            crate::text::excerpt(&plan.url)
        ))
    })?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(HostBenchError::Input(format!(
            "--download-url `{}`: expected http:// or https://",
            crate::text::excerpt(&plan.url)
        )));
    }
    let shown = crate::text::excerpt(url.as_str());
    let host = url.host_str().unwrap_or("").to_string();
    // The head may take the idle limit; the body gets the plan's time on top.
    let deadline = Deadline::new(plan.max_time + crate::deadline::IDLE, false);
    let client = crate::net::client(&deadline, None)
        .map_err(|e| HostBenchError::Environment(format!("cannot make an HTTP client: {e}")))?;
    let answer = crate::net::send(client.get(url.clone()), &deadline, &host, "a download test")
        .map_err(|e| HostBenchError::Environment(e.to_string()))?;
    if !answer.status.is_success() {
        return Err(HostBenchError::Environment(format!(
            "`{shown}` answered {}",
            answer.status
        )));
    }
    let mut body = answer
        .body(Cap::at_most(u64::MAX, "a download test"))
        .map_err(|e| HostBenchError::Environment(e.to_string()))?;
    let (read, took) = super::timed_read(&mut body, plan.max_bytes, plan.max_time, &shown)?;
    Ok(Figure::new(
        Metric::Download,
        read as f64 / took.as_secs_f64().max(1e-9) / 1e9,
        Engine::Gpuenv,
        format!(
            "{} of `{shown}` in {} (at most {} or {} s read)",
            crate::files::bytes(read),
            super::secs(took),
            crate::files::bytes(plan.max_bytes),
            plan.max_time.as_secs()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_urls_are_https_files_of_an_index() {
        for url in DEFAULT_URLS {
            let u = reqwest::Url::parse(url).unwrap();
            assert_eq!(u.scheme(), "https", "{url}");
            assert_eq!(u.host_str(), Some("files.pythonhosted.org"), "{url}");
            assert!(u.path().ends_with(".whl"), "{url}");
        }
    }

    #[test]
    fn a_url_that_is_not_http_is_bad_input() {
        for url in ["ftp://x/y", "not a url", "file:///etc/passwd"] {
            let e = measure(&DownloadPlan {
                url: url.into(),
                max_bytes: 1,
                max_time: Duration::from_secs(1),
            })
            .unwrap_err();
            assert!(matches!(e, HostBenchError::Input(_)), "{url}: {e}");
        }
    }
}
