//! The OCI distribution API, without a daemon: manifests (with platform selection from an
//! index or manifest list), configs and layers, and a repository's tag list (every page),
//! over reqwest, with token authentication and every digest verified.
//!
//! Owns: talking to registries: which scheme a host gets ([`plain_http`]), when and where
//! credentials are sent, how long the registry may take (a [`Deadline`] over the whole
//! read) and how much it may send (a cap per kind of document, and each blob exactly the
//! size its descriptor declares). Must not: read what is inside a layer (that is
//! `image`), decide anything, or print. Credentials come from `crate::credentials` (the lookup
//! `pull` uses) and never appear in errors or output.
//!
//! Types: [`Descriptor`] and an index entry's [`Platform`] are the image readers'
//! ([`crate::image::archive`]), read as strictly: a descriptor without a whole,
//! non-negative size is a malformed manifest, since the size bounds the blob's read.
//!
//! Credentials, as Docker's own registry client sends them (distribution/distribution,
//! `registry/client/auth/session.go`: `endpointAuthorizer.ModifyRequest` adds them only to
//! requests for an endpoint whose ping answered a challenge; `tokenHandler.fetchToken`
//! sends basic auth to the challenge's realm):
//! - Nothing is sent before the registry asks: the first request is anonymous, and only a
//!   `401` answered by the registry itself (not by a host a redirect led to) with a
//!   `WWW-Authenticate` challenge brings them out.
//! - `Basic`: the user and password to the registry, on that request and those after it.
//! - `Bearer realm=...`: the user and password as basic auth to the realm, as Docker sends
//!   them, or an identity token as the OAuth2 refresh token (POST, the distribution token
//!   spec); the access token it answers goes to the registry. A realm over plain HTTP gets
//!   credentials only on a host that gets plain HTTP at all ([`plain_http`]): elsewhere
//!   they would cross the network in clear text, so gpuenv refuses and says so.
//! - A redirect (blobs are often served from another host) never carries them to another
//!   host or port: reqwest drops `Authorization` there, and gpuenv adds none.
//!
//! Limits: every request, and every read of its body, ends by the [`Deadline`] (see
//! [`crate::net`]); a manifest or index is read up to [`MANIFEST_CAP`], a token answer up
//! to [`TOKEN_CAP`], a page of a tag list up to [`TAGS_PAGE_CAP`] (and a list to
//! [`MAX_TAG_PAGES`] pages and [`MAX_TAGS`] tags), a blob up to exactly the size its
//! descriptor declares; redirects are
//! followed at most [`MAX_REDIRECTS`] times, never in a loop, never to plain HTTP on a
//! host that gets none, and a token request's never to another host.

use std::io::{self, Read};
use std::net::IpAddr;
use std::sync::Mutex;

use reqwest::StatusCode;
use reqwest::blocking::Client;
use reqwest::header::{ACCEPT, WWW_AUTHENTICATE};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use crate::credentials::Credentials;
use crate::deadline::Deadline;
use crate::net::{self, Body, Cap, NetError};

/// Media types asked for, most specific first: an index/list lets us choose the platform.
const MANIFEST_TYPES: &str = "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";

/// The most bytes of a manifest or an index: the distribution registry refuses to store a
/// larger one (its `maxManifestBodySize`), and containers/image reads no more
/// (`iolimits.MaxManifestBodySize`).
pub const MANIFEST_CAP: u64 = 4 << 20;

/// The most bytes of a token service's answer (a JSON object holding a token of a few
/// KiB): containers/image's `iolimits.MaxAuthTokenBodySize`.
pub const TOKEN_CAP: u64 = 1 << 20;

/// The most requests one request may become through redirects (Go's `net/http` default,
/// `stopped after 10 redirects`, which Docker's client keeps).
pub const MAX_REDIRECTS: usize = 10;

/// The most bytes of one page of a tag list (`GET /v2/<name>/tags/list`): `nvidia/pytorch`
/// has a few hundred tags (tens of KiB of JSON); a tag is at most 128 characters, so a page
/// this size holds 30,000 of the longest.
pub const TAGS_PAGE_CAP: u64 = 4 << 20;

/// The most pages of a tag list followed through `Link` headers: with the page size asked
/// ([`TAGS_PAGE_SIZE`]) that is 100,000 tags, far above any repository gpuenv reads.
pub const MAX_TAG_PAGES: usize = 100;

/// The most tags kept from one repository, whatever the pages hold.
pub const MAX_TAGS: usize = 100_000;

/// The page size asked for (`n`): distribution's registry defaults to 100 and accepts up
/// to 1000 (its `maxEntries`); a registry may send fewer and link to the rest.
pub const TAGS_PAGE_SIZE: usize = 1000;

/// The environment variable listing registries gpuenv's own client may speak plain HTTP
/// to, comma-separated (`HOST` or `HOST:PORT`); `--insecure-registry` adds to it.
pub const INSECURE_VAR: &str = "GPUENV_INSECURE_REGISTRIES";

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
    /// The registry's token service would get credentials in clear text.
    #[error(
        "registry `{registry}` asks for credentials at the token service `{realm}`, over plain HTTP on a host that is not loopback: gpuenv sends no credentials there in clear text (if that host is yours, list it with --insecure-registry or {INSECURE_VAR})"
    )]
    PlainRealm {
        /// Host.
        registry: String,
        /// The realm, as an excerpt.
        realm: String,
    },
    /// The registry was too slow, sent too much or too little, or the connection failed.
    #[error(transparent)]
    Net(#[from] NetError),
}

/// A platform of an index entry: the image readers' type.
pub use crate::image::archive::Platform;

/// A content descriptor (OCI): the image readers' type, read as strictly.
pub use crate::image::archive::Descriptor;

/// One page of `GET /v2/<name>/tags/list`; `tags` is `null` for a repository without tags.
#[derive(Debug, Deserialize)]
struct TagPage {
    #[serde(default)]
    tags: Option<Vec<String>>,
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

/// How the registry is being authenticated to.
#[derive(Debug, Clone)]
enum Auth {
    /// No challenge yet: nothing is sent.
    Anonymous,
    /// The registry challenged `Basic`: user and password on each request.
    Basic,
    /// An access token from the realm the registry named.
    Bearer(String),
}

/// A registry endpoint.
pub struct Registry {
    http: Client,
    /// For token requests: redirects only within the realm's origin.
    token_http: Client,
    /// Host as written (`127.0.0.1:5000`, `nvcr.io`).
    pub host: String,
    base: reqwest::Url,
    creds: Option<Credentials>,
    auth: Mutex<Auth>,
    deadline: Deadline,
    insecure: Vec<String>,
}

/// `docker.io` is served at registry-1.docker.io.
fn api_host(host: &str) -> &str {
    if host == "docker.io" || host == "index.docker.io" {
        "registry-1.docker.io"
    } else {
        host
    }
}

/// `host` without its port: `127.0.0.1:5000` → `127.0.0.1`, `[::1]:5000` → `::1`.
fn bare_host(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split_once(']').map_or(rest, |(h, _)| h);
    }
    match host.rsplit_once(':') {
        // One colon and digits after it: a port. More colons: a bare IPv6 address.
        Some((h, port)) if !h.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    }
}

/// Whether gpuenv's own client speaks plain HTTP to `host` (`HOST[:PORT]`), where Docker
/// would: an IP literal in `127.0.0.0/8` or `::1` (the daemon's default insecure
/// registries), exactly `localhost`, or a host the user listed (`--insecure-registry`,
/// [`INSECURE_VAR`]; an entry without a port covers every port of that host). Names are
/// never resolved: `localhost.attacker.example` is a name like any other, and a name that
/// resolves to loopback today may not tomorrow.
pub fn plain_http(host: &str, insecure: &[String]) -> bool {
    let bare = bare_host(host);
    let loopback = match bare.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => ip.octets()[0] == 127,
        Ok(IpAddr::V6(ip)) => ip.is_loopback(),
        Err(_) => bare.eq_ignore_ascii_case("localhost"),
    };
    loopback
        || insecure.iter().map(|e| e.trim()).any(|entry| {
            entry.eq_ignore_ascii_case(host)
                || (entry.eq_ignore_ascii_case(bare) && bare_host(entry) == entry)
        })
}

/// The `host[:port]` of a URL, as [`plain_http`] reads it.
fn url_host(url: &reqwest::Url) -> String {
    // `host_str` writes an IPv6 address in brackets, as a registry host is written.
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    }
}

/// The redirects a registry client follows: at most [`MAX_REDIRECTS`], no loop, only to
/// http(s), and to plain HTTP only where [`plain_http`] allows it. (Credentials never
/// follow to another host: reqwest removes `Authorization` on such a hop.)
fn redirect_policy(insecure: Vec<String>) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        let url = attempt.url().clone();
        if attempt.previous().len() >= MAX_REDIRECTS {
            return attempt.error(format!("stopped after {MAX_REDIRECTS} redirects"));
        }
        if attempt.previous().contains(&url) {
            return attempt.error("the redirects go round in a loop");
        }
        match url.scheme() {
            "https" => attempt.follow(),
            "http" if plain_http(&url_host(&url), &insecure) => attempt.follow(),
            "http" => attempt.error(format!(
                "to plain HTTP on `{}`, which is neither loopback nor listed as insecure",
                crate::text::excerpt(&url_host(&url))
            )),
            other => attempt.error(format!("to a `{}:` address", crate::text::excerpt(other))),
        }
    })
}

/// The redirects a token request follows: those of [`redirect_policy`], and only within
/// the realm's own scheme, host and port. reqwest drops `Authorization` on a hop to
/// another host but re-sends a POST's body on a 307 or 308, and that body holds the
/// identity token: so such a hop is not made at all.
fn token_redirect_policy(insecure: Vec<String>) -> reqwest::redirect::Policy {
    let general = redirect_policy(insecure);
    reqwest::redirect::Policy::custom(move |attempt| {
        let first = attempt.previous().first().cloned();
        let same_origin = first.as_ref().is_some_and(|f| {
            f.scheme() == attempt.url().scheme()
                && f.host_str() == attempt.url().host_str()
                && f.port_or_known_default() == attempt.url().port_or_known_default()
        });
        if !same_origin {
            let to = crate::text::excerpt(&url_host(attempt.url()));
            return attempt.error(format!(
                "to another host (`{to}`), where the credentials sent with a token request do not go"
            ));
        }
        general.redirect(attempt)
    })
}

impl Registry {
    /// A client for `host` whose every request ends by `deadline`. Plain HTTP where
    /// [`plain_http`] allows it (loopback, `localhost`, the hosts in `insecure`), HTTPS
    /// everywhere else.
    pub fn new(
        host: &str,
        creds: Option<Credentials>,
        deadline: Deadline,
        insecure: &[String],
    ) -> Result<Registry, RegistryError> {
        let scheme = if plain_http(host, insecure) {
            "http"
        } else {
            "https"
        };
        let unreachable = |reason: String| RegistryError::Unreachable {
            registry: host.to_string(),
            reason,
        };
        let client =
            |policy| net::client(&deadline, Some(policy)).map_err(|e| unreachable(net::describe(&e)));
        let http = client(redirect_policy(insecure.to_vec()))?;
        let token_http = client(token_redirect_policy(insecure.to_vec()))?;
        let base = reqwest::Url::parse(&format!("{scheme}://{}/v2/", api_host(host)))
            .map_err(|e| unreachable(format!("not a host: {e}")))?;
        Ok(Registry {
            http,
            token_http,
            host: host.to_string(),
            base,
            creds,
            auth: Mutex::new(Auth::Anonymous),
            deadline,
            insecure: insecure.to_vec(),
        })
    }

    /// How errors name this registry.
    fn peer(&self) -> String {
        format!("the registry at {}", self.host)
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

    /// Whether an answer came from the registry itself (same scheme, host and port), not
    /// from a host a redirect led to.
    fn is_the_registry(&self, url: &reqwest::Url) -> bool {
        url.scheme() == self.base.scheme()
            && url.host_str() == self.base.host_str()
            && url.port_or_known_default() == self.base.port_or_known_default()
    }

    fn current_auth(&self) -> Auth {
        self.auth.lock().map(|a| a.clone()).unwrap_or(Auth::Anonymous)
    }

    fn set_auth(&self, auth: Auth) {
        if let Ok(mut a) = self.auth.lock() {
            *a = auth;
        }
    }

    /// GETs a path under /v2/. Anonymous until the registry answers a 401 with a challenge;
    /// then once more with what the challenge asks for (see the module's docs).
    fn get(&self, path: &str, accept: Option<&str>, what: &str) -> Result<net::Answer, RegistryError> {
        // Appended, not joined: a relative reference whose first segment held a `:` would
        // be read as a scheme.
        let url = reqwest::Url::parse(&format!("{}{path}", self.base))
            .map_err(|e| self.format("request", format!("cannot form the URL: {e}")))?;
        let during = format!("`{what}`");
        let send = |auth: &Auth| -> Result<net::Answer, RegistryError> {
            let mut req = self.http.get(url.clone());
            if let Some(a) = accept {
                req = req.header(ACCEPT, a);
            }
            match (auth, &self.creds) {
                (Auth::Bearer(t), _) => req = req.bearer_auth(t),
                (Auth::Basic, Some(c)) => req = req.basic_auth(&c.username, Some(c.password())),
                _ => {}
            }
            Ok(net::send(req, &self.deadline, &self.peer(), &during)?)
        };
        let resp = send(&self.current_auth())?;
        if resp.status != StatusCode::UNAUTHORIZED || !self.is_the_registry(&resp.url) {
            return self.check(resp, what);
        }
        let challenges: Vec<String> = resp
            .headers
            .get_all(WWW_AUTHENTICATE)
            .iter()
            .filter_map(|h| h.to_str().ok())
            .map(str::to_string)
            .collect();
        let Some(auth) = self.answer_challenge(&challenges)? else {
            return self.check(resp, what);
        };
        drop(resp);
        self.set_auth(auth.clone());
        let again = send(&auth)?;
        self.check(again, what)
    }

    fn check(&self, resp: net::Answer, what: &str) -> Result<net::Answer, RegistryError> {
        if resp.status.is_success() {
            Ok(resp)
        } else {
            Err(self.status_error(resp.status, what))
        }
    }

    /// What to send after a 401 with these challenges: a token from a Bearer realm, the
    /// credentials on a Basic challenge (only with credentials to send), or nothing that
    /// would help (`None`).
    fn answer_challenge(&self, challenges: &[String]) -> Result<Option<Auth>, RegistryError> {
        let parsed: Vec<(String, &str)> = challenges
            .iter()
            .map(|c| {
                let c = c.trim();
                match c.split_once(' ') {
                    Some((scheme, params)) => (scheme.to_ascii_lowercase(), params),
                    None => (c.to_ascii_lowercase(), ""),
                }
            })
            .collect();
        if let Some((_, params)) = parsed.iter().find(|(s, _)| s == "bearer") {
            return Ok(self.fetch_token(params)?.map(Auth::Bearer));
        }
        let basic = parsed.iter().any(|(s, _)| s == "basic");
        let has_password = self.creds.as_ref().is_some_and(|c| c.identity_token().is_none());
        Ok((basic && has_password).then_some(Auth::Basic))
    }

    /// The Bearer token flow (`WWW-Authenticate: Bearer realm=...,service=...,scope=...`).
    fn fetch_token(&self, params: &str) -> Result<Option<String>, RegistryError> {
        let mut realm = None;
        let mut query: Vec<(String, String)> = Vec::new();
        for part in split_params(params) {
            if let Some((k, v)) = part.split_once('=') {
                let v = v.trim().trim_matches('"').to_string();
                match k.trim() {
                    "realm" => realm = Some(v),
                    key => query.push((key.to_string(), v)),
                }
            }
        }
        let Some(realm) = realm else { return Ok(None) };
        let realm_url = reqwest::Url::parse(&realm)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
            .ok_or_else(|| {
                self.format(
                    "challenge",
                    format!(
                        "its realm `{}` is not an http(s) URL",
                        crate::text::excerpt(&realm)
                    ),
                )
            })?;
        let clear_text = realm_url.scheme() == "http" && !plain_http(&url_host(&realm_url), &self.insecure);
        if clear_text && self.creds.is_some() {
            return Err(RegistryError::PlainRealm {
                registry: self.host.clone(),
                realm: crate::text::excerpt(&realm),
            });
        }
        let peer = format!("the token service at {}", url_host(&realm_url));
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
                self.token_http.post(realm_url).form(&form)
            }
            Some((c, None)) => self
                .token_http
                .get(realm_url)
                .query(&query)
                .basic_auth(&c.username, Some(c.password())),
            None => self.token_http.get(realm_url).query(&query),
        };
        let during = format!("a token for the registry at {}", self.host);
        let resp = net::send(req, &self.deadline, &peer, &during)?;
        if !resp.status.is_success() {
            return Err(self.status_error(resp.status, "a token"));
        }
        let bytes = resp.bytes(Cap::at_most(TOKEN_CAP, "a token service's answer"))?;
        let body: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| RegistryError::Format {
            registry: self.host.clone(),
            what: "token".into(),
            reason: e.to_string(),
        })?;
        Ok(body
            .get("token")
            .or_else(|| body.get("access_token"))
            .and_then(|t| t.as_str())
            .filter(|t| !t.is_empty())
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
        self.platform_manifest(repo, reference, platform)
            .map(|(body, digest, _)| (body, digest))
    }

    /// [`Registry::manifest_document`], with the digest of the index or manifest list the
    /// manifest was chosen from, when `reference` named one: a record citing what was read
    /// names both (the manifest is what was read, the index what the tag pointed to).
    pub fn platform_manifest(
        &self,
        repo: &str,
        reference: &str,
        platform: (&str, &str),
    ) -> Result<(Vec<u8>, String, Option<String>), RegistryError> {
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
            return Ok((body, digest, None));
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
                available: crate::text::excerpt(&available.join(", ")),
            });
        };
        let (body, chosen_digest, _) = self.manifest_bytes(repo, chosen.digest.as_str(), &what)?;
        Ok((body, chosen_digest, Some(digest)))
    }

    fn format(&self, what: &str, reason: String) -> RegistryError {
        RegistryError::Format {
            registry: self.host.clone(),
            what: what.into(),
            reason: crate::text::excerpt(&reason),
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
            &format!("the manifest of {what}"),
        )?;
        let media = resp
            .headers
            .get("content-type")
            .and_then(|h| h.to_str().ok())
            .unwrap_or("")
            .to_string();
        let announced = resp
            .headers
            .get("docker-content-digest")
            .and_then(|h| h.to_str().ok())
            .map(str::to_string);
        let body = resp.bytes(Cap::at_most(MANIFEST_CAP, "a manifest"))?;
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
                    expected: crate::text::excerpt(&e),
                    actual,
                });
            }
        }
        Ok((body, actual, media))
    }

    /// Every tag of `repo`, in the order the registry lists them, following the pagination
    /// of the distribution spec: `n` asks for a page size, and each page that has more after
    /// it names the next in a `Link: <...>; rel="next"` header. The first request is
    /// anonymous and a 401 challenge is answered as for manifests (a Bearer token from the
    /// realm), so a public repository is read without credentials.
    ///
    /// Bounded: each page up to [`TAGS_PAGE_CAP`], at most [`MAX_TAG_PAGES`] pages and
    /// [`MAX_TAGS`] tags, all under the registry's [`Deadline`]; a next link must stay on the
    /// registry (same scheme, host and port, under `/v2/`) and never repeat. Beyond a bound
    /// the list is refused, not cut: a partial list would make releases look missing.
    pub fn tags(&self, repo: &str) -> Result<Vec<String>, RegistryError> {
        let what = format!("the tags of {repo}");
        let mut path = format!("{repo}/tags/list?n={TAGS_PAGE_SIZE}");
        let mut seen: Vec<String> = Vec::new();
        let mut tags: Vec<String> = Vec::new();
        loop {
            if seen.len() >= MAX_TAG_PAGES {
                return Err(self.format(
                    "tag list",
                    format!("it goes on past {MAX_TAG_PAGES} pages; gpuenv reads no more"),
                ));
            }
            seen.push(path.clone());
            let resp = self.get(&path, Some("application/json"), &what)?;
            let at = resp.url.clone();
            let next = resp
                .headers
                .get_all(reqwest::header::LINK)
                .iter()
                .filter_map(|h| h.to_str().ok())
                .find_map(next_link)
                .map(|target| self.next_page(&at, &target))
                .transpose()?;
            let body = resp.bytes(Cap::at_most(TAGS_PAGE_CAP, "a page of a tag list"))?;
            let page: TagPage =
                serde_json::from_slice(&body).map_err(|e| self.format("tag list", e.to_string()))?;
            let page = page.tags.unwrap_or_default();
            if tags.len() + page.len() > MAX_TAGS {
                return Err(self.format(
                    "tag list",
                    format!("it holds more than {MAX_TAGS} tags; gpuenv reads no more"),
                ));
            }
            tags.extend(page);
            match next {
                None => return Ok(tags),
                Some(p) if seen.contains(&p) => {
                    return Err(self.format(
                        "tag list",
                        "its pages link back to a page already read".to_string(),
                    ));
                }
                Some(p) => path = p,
            }
        }
    }

    /// The path under `/v2/` (with its query) of a next page's link `target`, resolved
    /// against the page `at`: only a page of this registry, since the request carries its
    /// token.
    fn next_page(&self, at: &reqwest::Url, target: &str) -> Result<String, RegistryError> {
        let refused = |why: &str| {
            self.format(
                "tag list",
                format!("its next page `{}` {why}", crate::text::excerpt(target)),
            )
        };
        let url = at.join(target).map_err(|_| refused("is not a URL"))?;
        if !self.is_the_registry(&url) {
            return Err(refused("is on another host"));
        }
        let Some(rest) = url.path().strip_prefix(self.base.path()) else {
            return Err(refused("is not under /v2/"));
        };
        Ok(match url.query() {
            Some(q) => format!("{rest}?{q}"),
            None => rest.to_string(),
        })
    }

    /// A blob as a stream of exactly the size its descriptor declares (a `Content-Length`
    /// or a body that says otherwise is refused); reading it to the end checks its digest
    /// (an error at EOF on mismatch), so no byte of a tampered blob is trusted silently.
    pub fn blob(&self, repo: &str, desc: &Descriptor) -> Result<VerifyingReader<Body>, RegistryError> {
        let what = format!("blob {} of {repo}", desc.digest);
        let resp = self.get(&format!("{repo}/blobs/{}", desc.digest), None, &what)?;
        let body = resp.body(Cap::exactly(desc.size, "its descriptor declares"))?;
        Ok(VerifyingReader::new(body, desc.digest.as_str(), what))
    }
}

/// The sizes the manifest of `image` declares for its layers (by digest), for the daemon's
/// `platform`, read by gpuenv's own client under `deadline`: what [`crate::docker::pull`]
/// holds each layer's download to.
///
/// `Ok(None)` when the manifest cannot be had from here although the daemon may have it
/// (no connection: the daemon may pull through a mirror or a proxy; a status the daemon
/// will report itself, with its own words; a document this client does not read, such
/// as a schema 1 manifest; a token service refused credentials in clear text): the pull
/// is then held to the sizes the registry announces to the daemon. An error when the
/// registry answered but was too slow, sent too much or too little, or lied about a
/// digest: the daemon would get the same.
pub fn declared_sizes(
    image: &crate::docker::Reference,
    creds: Option<Credentials>,
    deadline: &Deadline,
    insecure: &[String],
    platform: (&str, &str),
) -> Result<Option<std::collections::BTreeMap<String, u64>>, RegistryError> {
    let host = image.registry_host();
    let hub = matches!(host, "docker.io" | "index.docker.io");
    let repo = if hub && !image.repository.contains('/') {
        format!("library/{}", image.repository)
    } else {
        image.repository.clone()
    };
    let reference = match (&image.digest, image.tag_or_latest()) {
        (Some(d), _) => d.clone(),
        (None, Some(t)) => t.to_string(),
        (None, None) => "latest".to_string(),
    };
    let reg = Registry::new(host, creds, deadline.clone(), insecure)?;
    match reg.manifest(&repo, &reference, platform) {
        Ok((m, _)) => Ok(Some(
            m.layers
                .into_iter()
                .map(|d| (d.digest.to_string(), d.size))
                .collect(),
        )),
        Err(RegistryError::Net(NetError::Unreachable { .. }))
        | Err(RegistryError::Unreachable { .. })
        | Err(RegistryError::Denied { .. })
        | Err(RegistryError::NotFound { .. })
        | Err(RegistryError::Server { .. })
        | Err(RegistryError::Format { .. })
        | Err(RegistryError::Platform { .. })
        | Err(RegistryError::PlainRealm { .. }) => Ok(None),
        Err(e @ (RegistryError::Net(_) | RegistryError::Digest { .. })) => Err(e),
    }
}

/// The target of a `Link` header's `rel="next"` entry (RFC 8288: `<target>; rel="next"`,
/// several entries separated by commas, `rel` possibly holding several relations).
fn next_link(header: &str) -> Option<String> {
    let mut rest = header;
    loop {
        let open = rest.find('<')?;
        let close = open + rest[open..].find('>')?;
        let target = &rest[open + 1..close];
        let after = &rest[close + 1..];
        // The parameters run to the next entry's `<`.
        let params = &after[..after.find('<').unwrap_or(after.len())];
        let is_next = params.split(';').any(|p| {
            p.trim().split_once('=').is_some_and(|(k, v)| {
                k.trim().eq_ignore_ascii_case("rel")
                    && v.trim()
                        .trim_matches('"')
                        .split_ascii_whitespace()
                        .any(|r| r.eq_ignore_ascii_case("next"))
            })
        });
        if is_next {
            return Some(target.to_string());
        }
        rest = after;
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

    /// A manifest's descriptors are read as an archive's are: a layer without a size, or
    /// with a negative one, is a malformed manifest, not a blob of 0 bytes.
    #[test]
    fn a_descriptor_without_a_whole_size_is_refused() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let m = |size: &str| {
            format!(
                r#"{{"config": {{"mediaType": "c", "digest": "{digest}", "size": 2}}, "layers": [{{"mediaType": "l", "digest": "{digest}"{size}}}]}}"#
            )
        };
        let ok: Manifest = serde_json::from_str(&m(r#", "size": 7"#)).unwrap();
        assert_eq!(ok.layers[0].size, 7);
        assert_eq!(ok.layers[0].digest.as_str(), digest);
        for (size, says) in [("", "no `size`"), (r#", "size": -1"#, "negative")] {
            let e = serde_json::from_str::<Manifest>(&m(size))
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{e}");
        }
    }

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
    fn plain_http_only_where_docker_would_use_it() {
        let none: Vec<String> = Vec::new();
        for host in [
            "127.0.0.1:5555",
            "127.0.0.1",
            "127.200.3.4:80",
            "[::1]:5000",
            "::1",
            "localhost",
            "localhost:5000",
            "LOCALHOST:5000",
        ] {
            assert!(plain_http(host, &none), "{host}");
        }
        for host in [
            "localhost.attacker.example",
            "localhost.attacker.example:5000",
            "127.0.0.1.attacker.example",
            "128.0.0.1:5000",
            "10.0.0.1:5000",
            "[::2]:5000",
            "mylocalhost:5000",
            "nvcr.io",
        ] {
            assert!(!plain_http(host, &none), "{host}");
        }
        let listed = vec!["reg.lan".to_string(), "10.0.0.1:5000".to_string()];
        assert!(
            plain_http("reg.lan:5000", &listed),
            "an entry without a port covers its ports"
        );
        assert!(plain_http("reg.lan", &listed));
        assert!(plain_http("10.0.0.1:5000", &listed));
        assert!(
            !plain_http("10.0.0.1:5001", &listed),
            "an entry with a port covers that port"
        );
        assert!(!plain_http("reg.lan.attacker.example", &listed));
    }

    #[test]
    fn the_next_link_is_found_among_others() {
        assert_eq!(
            next_link(r#"</v2/nvidia/pytorch/tags/list?last=24.08-py3&n=100>; rel="next""#).as_deref(),
            Some("/v2/nvidia/pytorch/tags/list?last=24.08-py3&n=100")
        );
        assert_eq!(
            next_link(r#"<https://a/prev>; rel="prev", <https://a/next>; rel=next"#).as_deref(),
            Some("https://a/next")
        );
        assert_eq!(
            next_link(r#"<x>; title="a, <b>"; rel="prev start", <y>; REL="Next""#).as_deref(),
            Some("y")
        );
        for none in [
            "",
            "garbage",
            "<unclosed; rel=next",
            r#"</a>; rel="prev""#,
            "<>",
            ">< rel=next",
        ] {
            assert_eq!(next_link(none), None, "{none}");
        }
        assert_eq!(next_link(r#"<>; rel="next""#).as_deref(), Some(""));
        // Hostile: huge, many entries, multi-byte text; never a panic.
        let many = "<é>; rel=\"prev\", ".repeat(10_000);
        assert_eq!(next_link(&many), None);
        assert_eq!(next_link(&format!("{many}<z>; rel=next")).as_deref(), Some("z"));
    }

    #[test]
    fn challenge_params() {
        let p = split_params(r#"realm="http://a/token",service="reg",scope="repository:x/y:pull,push""#);
        assert_eq!(p.len(), 3);
        assert_eq!(p[2], r#"scope="repository:x/y:pull,push""#);
    }
}
