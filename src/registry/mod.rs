//! The OCI distribution API, without a daemon: manifests (with platform selection from an
//! index or manifest list), configs and layers over reqwest, with token authentication and
//! every digest verified.
//!
//! Owns: talking to registries. Must not: read what is inside a layer (that is `image`),
//! decide anything, or print. Credentials come from `docker::auth` (the lookup `pull`
//! uses) and never appear in errors or output.

use std::io::{self, Read};
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::blocking::{Client, Response};
use reqwest::header::{ACCEPT, AUTHORIZATION, WWW_AUTHENTICATE};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::docker::Credentials;

/// Media types asked for, most specific first: an index/list lets us choose the platform.
const MANIFEST_TYPES: &str = "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";

/// Why a registry could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// No connection.
    #[error("cannot reach registry `{registry}`: {reason}")]
    Unreachable {
        /// Host.
        registry: String,
        /// Why.
        reason: String,
    },
    /// 401 after authenticating, or 403.
    #[error(
        "registry `{registry}` refused access to `{what}` (HTTP {status}): check the credentials in ~/.docker/config.json or GPUENV_REGISTRY_USER/GPUENV_REGISTRY_PASSWORD"
    )]
    Denied {
        /// Host.
        registry: String,
        /// What was asked for.
        what: String,
        /// 401 or 403.
        status: u16,
    },
    /// 404.
    #[error("registry `{registry}` has no `{what}` (HTTP 404)")]
    NotFound {
        /// Host.
        registry: String,
        /// What was asked for.
        what: String,
    },
    /// Any other error status.
    #[error("registry `{registry}` failed on `{what}`: HTTP {status}")]
    Server {
        /// Host.
        registry: String,
        /// What was asked for.
        what: String,
        /// Status code.
        status: u16,
    },
    /// A document that is not what the API documents.
    #[error("registry `{registry}` sent an unusable {what}: {reason}")]
    Format {
        /// Host.
        registry: String,
        /// What.
        what: String,
        /// Why.
        reason: String,
    },
    /// Content that does not hash to its digest.
    #[error("digest mismatch for {what}: expected {expected}, got {actual}")]
    Digest {
        /// What.
        what: String,
        /// The digest asked for.
        expected: String,
        /// What the bytes hash to.
        actual: String,
    },
    /// The image has no manifest for this platform.
    #[error("`{what}` has no image for {platform} (it has: {available})")]
    Platform {
        /// What.
        what: String,
        /// Wanted platform.
        platform: String,
        /// Platforms offered.
        available: String,
    },
}

/// A content descriptor (OCI).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Descriptor {
    /// Media type.
    #[serde(rename = "mediaType", default)]
    pub media_type: String,
    /// `sha256:...`.
    pub digest: String,
    /// Bytes.
    #[serde(default)]
    pub size: u64,
    /// For index entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
}

/// A platform of an index entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Platform {
    /// `amd64`.
    pub architecture: String,
    /// `linux`.
    pub os: String,
    /// `v8` for arm64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Index {
    manifests: Vec<Descriptor>,
}

/// An image manifest.
#[derive(Debug, Clone, Deserialize)]
pub struct Manifest {
    /// The config blob.
    pub config: Descriptor,
    /// Layers, base first.
    pub layers: Vec<Descriptor>,
}

/// A registry endpoint.
pub struct Registry {
    http: Client,
    /// Host as written (`127.0.0.1:5000`, `nvcr.io`).
    pub host: String,
    base: String,
    creds: Option<Credentials>,
    token: std::sync::Mutex<Option<String>>,
}

/// `docker.io` is served at registry-1.docker.io.
fn api_host(host: &str) -> &str {
    if host == "docker.io" {
        "registry-1.docker.io"
    } else {
        host
    }
}

impl Registry {
    /// A client for `host`. Loopback registries are spoken to over plain HTTP, as Docker
    /// does for them; every other over HTTPS.
    pub fn new(host: &str, creds: Option<Credentials>, timeout: Duration) -> Result<Registry, RegistryError> {
        let loopback = host.starts_with("127.") || host.starts_with("localhost") || host.starts_with("[::1]");
        let scheme = if loopback { "http" } else { "https" };
        let http = Client::builder()
            .connect_timeout(timeout)
            .timeout(None)
            .user_agent(concat!("gpuenv/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| RegistryError::Unreachable {
                registry: host.to_string(),
                reason: e.to_string(),
            })?;
        Ok(Registry {
            http,
            host: host.to_string(),
            base: format!("{scheme}://{}/v2", api_host(host)),
            creds,
            token: std::sync::Mutex::new(None),
        })
    }

    fn unreachable(&self, e: &reqwest::Error) -> RegistryError {
        RegistryError::Unreachable {
            registry: self.host.clone(),
            reason: crate::upstream::http::describe(e),
        }
    }

    fn status_error(&self, status: StatusCode, what: &str) -> RegistryError {
        match status.as_u16() {
            401 | 403 => RegistryError::Denied {
                registry: self.host.clone(),
                what: what.into(),
                status: status.as_u16(),
            },
            404 => RegistryError::NotFound {
                registry: self.host.clone(),
                what: what.into(),
            },
            s => RegistryError::Server {
                registry: self.host.clone(),
                what: what.into(),
                status: s,
            },
        }
    }

    /// GETs a path under /v2, authenticating once on a 401 Bearer challenge.
    fn get(&self, path: &str, accept: Option<&str>, what: &str) -> Result<Response, RegistryError> {
        let url = format!("{}/{path}", self.base);
        let send = |token: Option<&str>| {
            let mut req = self.http.get(&url);
            if let Some(a) = accept {
                req = req.header(ACCEPT, a);
            }
            match (token, &self.creds) {
                (Some(t), _) => req = req.header(AUTHORIZATION, format!("Bearer {t}")),
                // An identity token is only ever exchanged at the token endpoint.
                (None, Some(c)) if c.identity_token().is_none() => {
                    req = req.basic_auth(&c.username, Some(c.password()));
                }
                (None, _) => {}
            }
            req.send().map_err(|e| self.unreachable(&e))
        };
        let cached = self.token.lock().ok().and_then(|t| t.clone());
        let resp = send(cached.as_deref())?;
        if resp.status() == StatusCode::UNAUTHORIZED {
            if let Some(challenge) = resp
                .headers()
                .get(WWW_AUTHENTICATE)
                .and_then(|h| h.to_str().ok())
                .map(str::to_string)
            {
                if let Some(token) = self.fetch_token(&challenge)? {
                    if let Ok(mut t) = self.token.lock() {
                        *t = Some(token.clone());
                    }
                    let again = send(Some(&token))?;
                    return self.check(again, what);
                }
            }
        }
        self.check(resp, what)
    }

    fn check(&self, resp: Response, what: &str) -> Result<Response, RegistryError> {
        if resp.status().is_success() {
            Ok(resp)
        } else {
            Err(self.status_error(resp.status(), what))
        }
    }

    /// The Bearer token flow (`WWW-Authenticate: Bearer realm=...,service=...,scope=...`).
    fn fetch_token(&self, challenge: &str) -> Result<Option<String>, RegistryError> {
        let Some(params) = challenge.strip_prefix("Bearer ") else {
            return Ok(None);
        };
        let mut realm = None;
        let mut query: Vec<(String, String)> = Vec::new();
        for part in split_params(params) {
            if let Some((k, v)) = part.split_once('=') {
                let v = v.trim_matches('"').to_string();
                match k.trim() {
                    "realm" => realm = Some(v),
                    key => query.push((key.to_string(), v)),
                }
            }
        }
        let Some(realm) = realm else { return Ok(None) };
        let req = match self.creds.as_ref().map(|c| (c, c.identity_token())) {
            // The distribution token spec's OAuth2 form: an identity token is a refresh
            // token, exchanged by POST; `scope` is space-separated there.
            Some((_, Some(refresh))) => {
                let mut form: Vec<(String, String)> = vec![
                    ("grant_type".into(), "refresh_token".into()),
                    ("refresh_token".into(), refresh.to_string()),
                    ("client_id".into(), "gpuenv".into()),
                ];
                let scopes: Vec<&str> = query
                    .iter()
                    .filter(|(k, _)| k == "scope")
                    .map(|(_, v)| v.as_str())
                    .collect();
                form.extend(query.iter().filter(|(k, _)| k == "service").cloned());
                if !scopes.is_empty() {
                    form.push(("scope".into(), scopes.join(" ")));
                }
                self.http.post(&realm).form(&form)
            }
            Some((c, None)) => self
                .http
                .get(&realm)
                .query(&query)
                .basic_auth(&c.username, Some(c.password())),
            None => self.http.get(&realm).query(&query),
        };
        let resp = req.send().map_err(|e| self.unreachable(&e))?;
        if !resp.status().is_success() {
            return Err(self.status_error(resp.status(), "a token"));
        }
        let bytes = resp.bytes().map_err(|e| self.unreachable(&e))?;
        let body: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| RegistryError::Format {
            registry: self.host.clone(),
            what: "token".into(),
            reason: e.to_string(),
        })?;
        Ok(body
            .get("token")
            .or_else(|| body.get("access_token"))
            .and_then(|t| t.as_str())
            .map(str::to_string))
    }

    /// The image manifest of `repo:reference` for `platform` (`linux/amd64`), parsed, with
    /// its digest.
    pub fn manifest(
        &self,
        repo: &str,
        reference: &str,
        platform: (&str, &str),
    ) -> Result<(Manifest, String), RegistryError> {
        let (body, digest) = self.manifest_document(repo, reference, platform)?;
        let m: Manifest =
            serde_json::from_slice(&body).map_err(|e| self.format("manifest", e.to_string()))?;
        Ok((m, digest))
    }

    /// The image manifest's bytes for `platform` (an index or manifest list resolved to its
    /// entry), with its digest; verified against the digest asked for or announced.
    pub fn manifest_document(
        &self,
        repo: &str,
        reference: &str,
        platform: (&str, &str),
    ) -> Result<(Vec<u8>, String), RegistryError> {
        let what = format!("{repo}:{reference}");
        let (body, digest, media) = self.manifest_bytes(repo, reference, &what)?;
        let v: serde_json::Value =
            serde_json::from_slice(&body).map_err(|e| self.format("manifest", e.to_string()))?;
        let media = v
            .get("mediaType")
            .and_then(|m| m.as_str())
            .map(str::to_string)
            .unwrap_or(media);
        if !(media.contains("index") || media.contains("manifest.list") || v.get("manifests").is_some()) {
            return Ok((body, digest));
        }
        let index: Index = serde_json::from_value(v).map_err(|e| self.format("index", e.to_string()))?;
        let chosen = index.manifests.iter().find(|d| {
            d.platform
                .as_ref()
                .is_some_and(|p| p.os == platform.0 && p.architecture == platform.1)
        });
        let Some(chosen) = chosen else {
            let available: Vec<String> = index
                .manifests
                .iter()
                .filter_map(|d| d.platform.as_ref())
                .map(|p| format!("{}/{}", p.os, p.architecture))
                .collect();
            return Err(RegistryError::Platform {
                what,
                platform: format!("{}/{}", platform.0, platform.1),
                available: available.join(", "),
            });
        };
        let (body, digest, _) = self.manifest_bytes(repo, &chosen.digest, &what)?;
        Ok((body, digest))
    }

    fn format(&self, what: &str, reason: String) -> RegistryError {
        RegistryError::Format {
            registry: self.host.clone(),
            what: what.into(),
            reason,
        }
    }

    /// A manifest's bytes and digest; when fetched by digest, the bytes are checked.
    fn manifest_bytes(
        &self,
        repo: &str,
        reference: &str,
        what: &str,
    ) -> Result<(Vec<u8>, String, String), RegistryError> {
        let resp = self.get(
            &format!("{repo}/manifests/{reference}"),
            Some(MANIFEST_TYPES),
            what,
        )?;
        let media = resp
            .headers()
            .get("content-type")
            .and_then(|h| h.to_str().ok())
            .unwrap_or("")
            .to_string();
        let announced = resp
            .headers()
            .get("docker-content-digest")
            .and_then(|h| h.to_str().ok())
            .map(str::to_string);
        let body = resp.bytes().map_err(|e| self.unreachable(&e))?.to_vec();
        if body.len() > 4 << 20 {
            return Err(self.format("manifest", "larger than 4 MiB".into()));
        }
        let actual = format!("sha256:{:x}", Sha256::digest(&body));
        let expected = if reference.starts_with("sha256:") {
            Some(reference.to_string())
        } else {
            announced
        };
        if let Some(e) = expected {
            if e != actual {
                return Err(RegistryError::Digest {
                    what: format!("the manifest of {what}"),
                    expected: e,
                    actual,
                });
            }
        }
        Ok((body, actual, media))
    }

    /// A blob as a stream; reading it to the end checks its digest (an error at EOF on
    /// mismatch), so no byte of a tampered blob is trusted silently.
    pub fn blob(&self, repo: &str, desc: &Descriptor) -> Result<VerifyingReader<Response>, RegistryError> {
        let what = format!("blob {} of {repo}", desc.digest);
        let resp = self.get(&format!("{repo}/blobs/{}", desc.digest), None, &what)?;
        Ok(VerifyingReader::new(resp, &desc.digest, what))
    }
}

/// Splits `a="x,y",b=c` at the commas outside quotes.
fn split_params(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in s.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                cur.push(c);
            }
            ',' if !quoted => {
                out.push(std::mem::take(&mut cur));
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// A reader that hashes what passes through and fails at the end if the digest differs.
pub struct VerifyingReader<R> {
    inner: R,
    hasher: Sha256,
    expected: String,
    what: String,
    done: bool,
    /// Bytes read so far.
    pub bytes: u64,
}

impl<R: Read> VerifyingReader<R> {
    /// Wraps `inner`, expecting `sha256:<hex>`.
    pub fn new(inner: R, expected: &str, what: String) -> Self {
        VerifyingReader {
            inner,
            hasher: Sha256::new(),
            expected: expected.to_string(),
            what,
            done: false,
            bytes: 0,
        }
    }
}

impl<R: Read> Read for VerifyingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 {
            if !self.done {
                self.done = true;
                let actual = format!("sha256:{:x}", self.hasher.clone().finalize());
                if !self.expected.starts_with("sha256:") {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{}: unsupported digest algorithm `{}`", self.what, self.expected),
                    ));
                }
                if actual != self.expected {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "digest mismatch for {}: expected {}, got {actual}",
                            self.what, self.expected
                        ),
                    ));
                }
            }
            return Ok(0);
        }
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifying_reader() {
        let data = b"hello";
        let good = format!("sha256:{:x}", Sha256::digest(data));
        let mut r = VerifyingReader::new(&data[..], &good, "x".into());
        let mut out = Vec::new();
        r.read_to_end(&mut out).unwrap();
        assert_eq!(out, data);
        let mut bad = VerifyingReader::new(&data[..], "sha256:00", "blob y".into());
        let e = bad.read_to_end(&mut Vec::new()).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("digest mismatch for blob y: expected sha256:00"),
            "{e}"
        );
    }

    #[test]
    fn challenge_params() {
        let p = split_params(r#"realm="http://a/token",service="reg",scope="repository:x/y:pull,push""#);
        assert_eq!(p.len(), 3);
        assert_eq!(p[2], r#"scope="repository:x/y:pull,push""#);
    }
}
