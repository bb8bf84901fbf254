//! Registry credentials: `GPUENV_REGISTRY_USER`/`GPUENV_REGISTRY_PASSWORD`, else the
//! `auths` of the Docker client's config (`$DOCKER_CONFIG/config.json`, default
//! `~/.docker/config.json`), as `docker login` writes them.
//!
//! Credentials never leave this module but to the Engine: [`Credentials`] prints as
//! `<redacted>`, and [`Credentials::redact`] scrubs the password (and its base64 forms)
//! from any text that goes to the user. Credential helpers (`credsStore`, `credHelpers`)
//! are programs gpuenv does not run; their registries need the environment variables.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::reference::DOCKER_HUB;

/// The environment variable naming the registry user.
pub const USER_VAR: &str = "GPUENV_REGISTRY_USER";
/// The environment variable holding the registry password or token.
pub const PASSWORD_VAR: &str = "GPUENV_REGISTRY_PASSWORD";

/// Where credentials came from (safe to print).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialSource {
    /// `GPUENV_REGISTRY_USER` and `GPUENV_REGISTRY_PASSWORD`.
    Environment,
    /// An `auths` entry of this Docker config file.
    DockerConfig(PathBuf),
}

/// A user name and password for one registry.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The user.
    pub username: String,
    password: String,
    /// The registry they are for, as the Engine expects it (`docker.io` is written
    /// `https://index.docker.io/v1/`).
    pub server: String,
    /// Where they came from.
    pub source: CredentialSource,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .field("server", &self.server)
            .field("source", &self.source)
            .finish()
    }
}

impl Credentials {
    /// Credentials for `registry` (a host, `docker.io` for Docker Hub).
    pub fn new(username: &str, password: &str, registry: &str, source: CredentialSource) -> Credentials {
        Credentials {
            username: username.to_string(),
            password: password.to_string(),
            server: server_address(registry),
            source,
        }
    }

    /// The password, for the Engine only.
    pub(crate) fn password(&self) -> &str {
        &self.password
    }

    /// `text` with the password, and the base64 forms a daemon or registry might echo,
    /// replaced by `***`.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        let pair = format!("{}:{}", self.username, self.password);
        let secrets = [
            STANDARD.encode(&pair),
            STANDARD.encode(&self.password),
            pair,
            self.password.clone(),
        ];
        for s in secrets.iter().filter(|s| s.len() >= 3) {
            out = out.replace(s.as_str(), "***");
        }
        out
    }
}

/// Why credentials could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// Only one of the two variables is set.
    #[error("set both {USER_VAR} and {PASSWORD_VAR}, or neither")]
    HalfSet,
    /// The Docker config exists but is not what `docker login` writes.
    #[error("cannot read registry credentials from `{path}`: {why}")]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong (never its contents).
        why: String,
    },
}

/// What the Engine calls a registry: Docker Hub keeps its historical address.
fn server_address(registry: &str) -> String {
    if is_docker_hub(registry) {
        "https://index.docker.io/v1/".to_string()
    } else {
        registry.to_string()
    }
}

fn is_docker_hub(host: &str) -> bool {
    matches!(
        host,
        DOCKER_HUB | "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com"
    )
}

/// The host of an `auths` key: keys may carry a scheme and a path
/// (`https://index.docker.io/v1/`, `http://127.0.0.1:5000`).
fn key_host(key: &str) -> &str {
    let k = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    k.split('/').next().unwrap_or(k)
}

/// The Docker client's config file: `$DOCKER_CONFIG/config.json`, else
/// `$HOME/.docker/config.json`.
pub fn docker_config_path(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(dir) = env("DOCKER_CONFIG").filter(|d| !d.is_empty()) {
        return Some(Path::new(&dir).join("config.json"));
    }
    env("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| Path::new(&h).join(".docker/config.json"))
}

/// Credentials for `registry`: the environment variables first (they name no registry,
/// so they apply to the one being used), then the Docker config's `auths`. `None` when
/// neither has any: the pull goes anonymous.
pub fn lookup(
    registry: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Credentials>, AuthError> {
    let user = env(USER_VAR).filter(|v| !v.is_empty());
    let pass = env(PASSWORD_VAR).filter(|v| !v.is_empty());
    match (user, pass) {
        (Some(u), Some(p)) => {
            return Ok(Some(Credentials::new(
                &u,
                &p,
                registry,
                CredentialSource::Environment,
            )));
        }
        (None, None) => {}
        _ => return Err(AuthError::HalfSet),
    }
    let Some(path) = docker_config_path(env) else {
        return Ok(None);
    };
    let text = match fs_err::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(AuthError::Config {
                path,
                why: match e.kind() {
                    std::io::ErrorKind::PermissionDenied => "permission denied".into(),
                    _ => "cannot be read".into(),
                },
            });
        }
    };
    from_config(&text, registry, &path)
}

/// Credentials for `registry` in the text of a Docker config file.
pub fn from_config(text: &str, registry: &str, path: &Path) -> Result<Option<Credentials>, AuthError> {
    let bad = |why: &str| AuthError::Config {
        path: path.to_path_buf(),
        why: why.to_string(),
    };
    // serde_json's errors quote no input, so they are safe to show.
    let doc: serde_json::Value =
        serde_json::from_str(text).map_err(|e| bad(&format!("not JSON ({})", e.classify_name())))?;
    let Some(auths) = doc.get("auths").and_then(|a| a.as_object()) else {
        return Ok(None);
    };
    let hub = is_docker_hub(registry);
    let entry = auths.iter().find(|(key, _)| {
        let host = key_host(key);
        host == registry || (hub && is_docker_hub(host))
    });
    let Some((_, entry)) = entry else {
        return Ok(None);
    };
    if let Some(auth) = entry
        .get("auth")
        .and_then(|a| a.as_str())
        .filter(|a| !a.is_empty())
    {
        let decoded = STANDARD
            .decode(auth.trim())
            .map_err(|_| bad("an `auth` entry is not base64"))?;
        let decoded = String::from_utf8(decoded).map_err(|_| bad("an `auth` entry is not UTF-8"))?;
        let Some((u, p)) = decoded.split_once(':') else {
            return Err(bad("an `auth` entry is not `user:password` in base64"));
        };
        return Ok(Some(Credentials::new(
            u,
            p,
            registry,
            CredentialSource::DockerConfig(path.to_path_buf()),
        )));
    }
    let u = entry.get("username").and_then(|v| v.as_str());
    let p = entry.get("password").and_then(|v| v.as_str());
    Ok(match (u, p) {
        (Some(u), Some(p)) => Some(Credentials::new(
            u,
            p,
            registry,
            CredentialSource::DockerConfig(path.to_path_buf()),
        )),
        _ => None,
    })
}

trait ClassifyName {
    fn classify_name(&self) -> &'static str;
}

impl ClassifyName for serde_json::Error {
    fn classify_name(&self) -> &'static str {
        match self.classify() {
            serde_json::error::Category::Io => "unreadable",
            serde_json::error::Category::Syntax => "a syntax error",
            serde_json::error::Category::Data => "unexpected data",
            serde_json::error::Category::Eof => "it ends early",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k: &str| pairs.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn the_environment_comes_first_and_needs_both_variables() {
        let env = env_of(&[(USER_VAR, "ci"), (PASSWORD_VAR, "s3cret-pass")]);
        let c = lookup("127.0.0.1:5555", &env).unwrap().unwrap();
        assert_eq!(c.username, "ci");
        assert_eq!(c.password(), "s3cret-pass");
        assert_eq!(c.source, CredentialSource::Environment);
        let env = env_of(&[(USER_VAR, "ci")]);
        assert_eq!(lookup("x.io", &env).unwrap_err(), AuthError::HalfSet);
    }

    #[test]
    fn docker_config_auths_are_decoded_for_the_registry_asked() {
        let auth = STANDARD.encode("alice:pa55word");
        let text = format!(
            r#"{{"auths": {{"http://127.0.0.1:5555": {{"auth": "{auth}"}},
                 "https://index.docker.io/v1/": {{"auth": "{}"}}}}}}"#,
            STANDARD.encode("hub:hubpass")
        );
        let p = Path::new("/x/config.json");
        let c = from_config(&text, "127.0.0.1:5555", p).unwrap().unwrap();
        assert_eq!((c.username.as_str(), c.password()), ("alice", "pa55word"));
        assert_eq!(c.server, "127.0.0.1:5555");
        let c = from_config(&text, "docker.io", p).unwrap().unwrap();
        assert_eq!(c.username, "hub");
        assert_eq!(c.server, "https://index.docker.io/v1/");
        assert!(from_config(&text, "nvcr.io", p).unwrap().is_none());
        assert!(from_config("{}", "nvcr.io", p).unwrap().is_none());
    }

    #[test]
    fn a_broken_config_names_the_file_but_never_its_contents() {
        let p = Path::new("/x/config.json");
        let e = from_config(
            r#"{"auths": {"r.io": {"auth": "%%%notbase64-s3cret"}}}"#,
            "r.io",
            p,
        )
        .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("/x/config.json") && msg.contains("not base64"),
            "{msg}"
        );
        assert!(!msg.contains("s3cret"));
        let e = from_config("{\"auths\": s3cret", "r.io", p).unwrap_err();
        assert!(!e.to_string().contains("s3cret"), "{e}");
    }

    #[test]
    fn credentials_never_print_and_redact_scrubs_every_form() {
        let c = Credentials::new("bob", "hunter2-long", "r.io", CredentialSource::Environment);
        let dbg = format!("{c:?}");
        assert!(!dbg.contains("hunter2") && dbg.contains("<redacted>"), "{dbg}");
        let b64 = STANDARD.encode("bob:hunter2-long");
        let text = format!("denied: hunter2-long and {b64}");
        let r = c.redact(&text);
        assert!(!r.contains("hunter2") && !r.contains(&b64), "{r}");
    }

    #[test]
    fn the_config_path_follows_docker_config_then_home() {
        let env = env_of(&[("DOCKER_CONFIG", "/cfg"), ("HOME", "/home/u")]);
        assert_eq!(docker_config_path(&env), Some(PathBuf::from("/cfg/config.json")));
        let env = env_of(&[("HOME", "/home/u")]);
        assert_eq!(
            docker_config_path(&env),
            Some(PathBuf::from("/home/u/.docker/config.json"))
        );
    }
}
