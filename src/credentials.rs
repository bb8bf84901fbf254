//! Registry credentials: `GPUENV_REGISTRY_USER`/`GPUENV_REGISTRY_PASSWORD`, else the
//! Docker client's config (`$DOCKER_CONFIG/config.json`, default `~/.docker/config.json`)
//! read as the Docker CLI reads it: the credential helper `credHelpers` names for the
//! registry, else the one `credsStore` names for all, else the `auths` entry that
//! `docker login` writes without a helper.
//!
//! A helper is the program `docker-credential-<name>` on PATH, asked with `get` and the
//! server's address on its standard input; it answers `{"Username", "Secret"}` JSON, or
//! "credentials not found" (then the pull goes anonymous, as Docker's does). A username
//! of `<token>` makes the secret an identity token (a refresh token), which the Engine
//! and the registry client exchange for access tokens.
//!
//! Owns: finding the credentials for a registry, and keeping them out of what is shown.
//! Must not: talk to a registry or the Docker Engine (`docker` and `registry` use it; it
//! uses neither).
//!
//! Credentials never leave this module but to the Engine and the registry client:
//! [`Credentials`] prints as `<redacted>`, [`Credentials::redact`] scrubs the password (and
//! its base64 forms) from any text that goes to the user, and what a helper prints is
//! never shown.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// Docker Hub's registry name, as references spell it when they name none.
pub const DOCKER_HUB: &str = "docker.io";

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
    /// The credential helper `program` that this Docker config file names.
    Helper {
        /// `docker-credential-<name>`.
        program: String,
        /// The config file.
        config: PathBuf,
    },
}

/// How long a credential helper may take: one that waits on a keychain prompt nobody can
/// see must not hang the command.
pub const HELPER_TIMEOUT: Duration = Duration::from_secs(30);

/// The most a credential helper may print on either output: its answer is a JSON object
/// of a few hundred bytes (a few KiB with a cloud's token). One that floods is stopped.
pub const HELPER_OUTPUT_CAP: u64 = 1 << 20;

/// The username credential helpers give with an identity token.
const IDENTITY_TOKEN_USER: &str = "<token>";

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

    /// The identity token, when a helper gave one instead of a password (its username is
    /// `<token>`): it is exchanged for access tokens, never sent as a password.
    pub(crate) fn identity_token(&self) -> Option<&str> {
        (self.username == IDENTITY_TOKEN_USER).then_some(self.password.as_str())
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
    /// The Docker config names a credential helper that is not installed.
    #[error(
        "`{config}` says to ask `{program}` for registry credentials, and no such program is on PATH: install it, take `credsStore`/`credHelpers` out of that file, or set {USER_VAR} and {PASSWORD_VAR}"
    )]
    HelperMissing {
        /// `docker-credential-<name>`.
        program: String,
        /// The config file.
        config: PathBuf,
    },
    /// A credential helper failed, hung, or answered something else than credentials.
    #[error("the credential helper `{program}` (named in `{config}`) {why}")]
    HelperFailed {
        /// `docker-credential-<name>`.
        program: String,
        /// The config file.
        config: PathBuf,
        /// What went wrong (never what it printed).
        why: String,
    },
}

impl AuthError {
    /// Whether the machine is at fault (a helper that failed or hung: exit 3), not what
    /// the user gave (exit 2).
    pub fn is_environment(&self) -> bool {
        matches!(self, AuthError::HelperFailed { .. })
    }
}

/// What the Engine calls a registry, and the key the Docker CLI looks its credentials up
/// by: Docker Hub keeps its historical address (docker/cli's `registry.GetAuthConfigKey`:
/// `https://index.docker.io/v1/` for the official index, else the index's name).
fn server_address(registry: &str) -> String {
    if is_docker_hub(registry) {
        "https://index.docker.io/v1/".to_string()
    } else {
        registry.to_string()
    }
}

/// Docker Hub as the Docker CLI names it: `docker.io`, and `index.docker.io`, which it
/// normalises to `docker.io`. Any other host (`registry-1.docker.io` included) is a
/// registry of its own, with credentials of its own.
fn is_docker_hub(host: &str) -> bool {
    matches!(host, DOCKER_HUB | "index.docker.io")
}

/// The host of an `auths` key as docker/cli's `credentials.ConvertToHostname` reads it: a
/// key with a scheme (`https://index.docker.io/v1/`, `http://127.0.0.1:5000`) is its
/// URL's `host[:port]` (without user information), any other key its text up to the
/// first `/`.
fn key_host(key: &str) -> &str {
    match key.split_once("://") {
        Some((_, rest)) => {
            let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            // An empty port (`host:`) is no port.
            host.strip_suffix(':').unwrap_or(host)
        }
        None => key.split('/').next().unwrap_or(key),
    }
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
/// neither has any: the pull goes anonymous. A helper gets [`HELPER_TIMEOUT`].
pub fn lookup(
    registry: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Credentials>, AuthError> {
    lookup_within(registry, env, HELPER_TIMEOUT)
}

/// [`lookup`], a credential helper given at most `helper_timeout` (what is left of a
/// command's deadline, when less than [`HELPER_TIMEOUT`]).
pub fn lookup_within(
    registry: &str,
    env: &dyn Fn(&str) -> Option<String>,
    helper_timeout: Duration,
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
    let doc = parse_config(&text, &path)?;
    match helper_for(&doc, registry, &path)? {
        Some(program) => ask_helper(&program, registry, &path, env, helper_timeout),
        None => from_auths(&doc, registry, &path),
    }
}

fn parse_config(text: &str, path: &Path) -> Result<serde_json::Value, AuthError> {
    // serde_json's errors quote no input, so they are safe to show.
    serde_json::from_str(text).map_err(|e| AuthError::Config {
        path: path.to_path_buf(),
        why: format!("not JSON ({})", e.classify_name()),
    })
}

/// Whether an `auths` key holds `registry`'s credentials, as docker/cli's file store
/// decides (`fileStore.Get`): the key is the server address exactly, or converts to it
/// (`http://127.0.0.1:5000` for `127.0.0.1:5000`). Docker Hub's entry is the one keyed
/// `https://index.docker.io/v1/`.
fn key_is_for(key: &str, registry: &str) -> bool {
    let server = server_address(registry);
    key == server || key_host(key) == server
}

/// The helper program the config names for `registry`: the `credHelpers` entry keyed by
/// its server address exactly, else `credsStore` for every registry (docker/cli's
/// `getConfiguredCredentialStore`).
fn helper_for(doc: &serde_json::Value, registry: &str, path: &Path) -> Result<Option<String>, AuthError> {
    let server = server_address(registry);
    let by_registry = doc
        .get("credHelpers")
        .and_then(|h| h.as_object())
        .and_then(|h| h.get(&server))
        .and_then(|name| name.as_str());
    let name = by_registry.or_else(|| doc.get("credsStore").and_then(|s| s.as_str()));
    let Some(name) = name.filter(|n| !n.is_empty()) else {
        return Ok(None);
    };
    // The name becomes part of a program's name: nothing that could make it a path.
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        || name.starts_with('.')
    {
        return Err(AuthError::Config {
            path: path.to_path_buf(),
            why: "a credential helper's name has characters other than letters, digits, `-`, `_` and `.`"
                .into(),
        });
    }
    Ok(Some(format!("docker-credential-{name}")))
}

/// `program` in one of the absolute directories of PATH, if it is an executable file
/// there (relative entries would make the answer depend on where gpuenv was started).
fn find_on_path(program: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let path = env("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| {
            let Ok(meta) = candidate.metadata() else {
                return false;
            };
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                meta.is_file() && meta.permissions().mode() & 0o111 != 0
            }
            #[cfg(not(unix))]
            {
                meta.is_file()
            }
        })
}

/// Asks the credential helper `program` for `registry`'s credentials.
fn ask_helper(
    program: &str,
    registry: &str,
    config: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    timeout: Duration,
) -> Result<Option<Credentials>, AuthError> {
    let failed = |why: String| AuthError::HelperFailed {
        program: program.to_string(),
        config: config.to_path_buf(),
        why,
    };
    let Some(exe) = find_on_path(program, env) else {
        return Err(AuthError::HelperMissing {
            program: program.to_string(),
            config: config.to_path_buf(),
        });
    };
    let server = server_address(registry);
    let ran = crate::process::run_capped(
        &exe,
        &["get"],
        Some(server.as_bytes()),
        timeout,
        HELPER_OUTPUT_CAP,
    )
    .map_err(|e| failed(format!("could not be started: {e}")))?;
    if ran.overflowed {
        return Err(failed(format!(
            "printed more than {} (an answer is a few hundred bytes); it was stopped",
            crate::net::size(HELPER_OUTPUT_CAP)
        )));
    }
    if ran.timed_out {
        return Err(failed(format!(
            "did not answer within {} (is it waiting for a prompt?); it was stopped",
            crate::deadline::Seconds(timeout)
        )));
    }
    let said = |bytes: &[u8]| String::from_utf8_lossy(bytes).to_ascii_lowercase();
    if ran.status != Some(0) {
        // Every helper of docker/docker-credential-helpers says this for an unknown server.
        if said(&ran.stdout).contains("credentials not found")
            || said(&ran.stderr).contains("credentials not found")
        {
            return Ok(None);
        }
        return Err(failed(match ran.status {
            Some(code) => format!("failed (exit status {code})"),
            None => "was killed by a signal".into(),
        }));
    }
    let answer: serde_json::Value = serde_json::from_slice(&ran.stdout)
        .map_err(|_| failed("answered something other than JSON".into()))?;
    let field = |k: &str| answer.get(k).and_then(|v| v.as_str()).filter(|v| !v.is_empty());
    let (Some(user), Some(secret)) = (field("Username"), field("Secret")) else {
        return Ok(None);
    };
    Ok(Some(Credentials::new(
        user,
        secret,
        registry,
        CredentialSource::Helper {
            program: program.to_string(),
            config: config.to_path_buf(),
        },
    )))
}

/// Credentials for `registry` in the `auths` of the text of a Docker config file (no
/// helper is asked).
pub fn from_config(text: &str, registry: &str, path: &Path) -> Result<Option<Credentials>, AuthError> {
    from_auths(&parse_config(text, path)?, registry, path)
}

fn from_auths(
    doc: &serde_json::Value,
    registry: &str,
    path: &Path,
) -> Result<Option<Credentials>, AuthError> {
    let bad = |why: &str| AuthError::Config {
        path: path.to_path_buf(),
        why: why.to_string(),
    };
    let Some(auths) = doc.get("auths").and_then(|a| a.as_object()) else {
        return Ok(None);
    };
    let entry = auths.iter().find(|(key, _)| key_is_for(key, registry));
    let Some((_, entry)) = entry else {
        return Ok(None);
    };
    // `docker login` to a registry that answers with an identity token stores it beside
    // (or instead of) the password; the token is what the Engine and the token service
    // get then.
    if let Some(token) = entry
        .get("identitytoken")
        .and_then(|t| t.as_str())
        .filter(|t| !t.is_empty())
    {
        return Ok(Some(Credentials::new(
            IDENTITY_TOKEN_USER,
            token,
            registry,
            CredentialSource::DockerConfig(path.to_path_buf()),
        )));
    }
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

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
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
    fn credentials_belong_to_the_host_the_docker_cli_keys_them_by() {
        let p = Path::new("/x/config.json");
        let entry = |user: &str| format!(r#"{{"auth": "{}"}}"#, STANDARD.encode(format!("{user}:pw")));
        let text = format!(
            r#"{{"auths": {{
                "https://index.docker.io/v1/": {hub},
                "registry-1.docker.io": {r1},
                "https://reg.example:5000/v2/": {reg},
                "localhost": {lh},
                "http://user@127.0.0.1:5555/": {lo}
            }}}}"#,
            hub = entry("hub"),
            r1 = entry("r1"),
            reg = entry("reg"),
            lh = entry("lh"),
            lo = entry("lo")
        );
        let user = |registry: &str| from_config(&text, registry, p).unwrap().map(|c| c.username);
        assert_eq!(user("docker.io").as_deref(), Some("hub"));
        assert_eq!(user("index.docker.io").as_deref(), Some("hub"));
        // Another name of Docker Hub's servers is a registry of its own to the CLI.
        assert_eq!(user("registry-1.docker.io").as_deref(), Some("r1"));
        assert_eq!(user("reg.example:5000").as_deref(), Some("reg"));
        assert_eq!(
            user("reg.example").as_deref(),
            None,
            "the port is part of the key"
        );
        assert_eq!(user("localhost").as_deref(), Some("lh"));
        assert_eq!(user("localhost:5000").as_deref(), None);
        assert_eq!(user("localhost.attacker.example").as_deref(), None);
        assert_eq!(user("127.0.0.1:5555").as_deref(), Some("lo"));
        assert_eq!(key_host("https://index.docker.io/v1/"), "index.docker.io");
        assert_eq!(key_host("http://h:"), "h");
        assert_eq!(key_host("h.io/path"), "h.io");

        // An identity token `docker login` stored is what goes out, never as a password.
        let text = r#"{"auths": {"r.io": {"auth": "dTpw", "identitytoken": "id-t0ken-long"}}}"#;
        let c = from_config(text, "r.io", p).unwrap().unwrap();
        assert_eq!(c.identity_token(), Some("id-t0ken-long"));
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

    /// A credential helper in a directory of its own: a shell script that keeps what it
    /// was asked (arguments, then standard input) in `asked` beside it and runs `body`.
    fn helper(dir: &Path, name: &str, body: &str) {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(format!("docker-credential-{name}"));
        let asked = dir.join("asked");
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\necho \"$@\" > '{asked}'\ncat >> '{asked}'\n{body}\n",
                asked = asked.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn credential_helpers_are_asked_as_the_docker_cli_asks_them() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        helper(
            &bin,
            "store",
            r#"echo '{"ServerURL":"x","Username":"from-store","Secret":"st0re-secret"}'"#,
        );
        helper(
            &bin,
            "ecr",
            r#"echo '{"ServerURL":"x","Username":"<token>","Secret":"refresh-tok3n"}'"#,
        );
        helper(
            &bin,
            "empty",
            "echo 'credentials not found in native keychain'; exit 1",
        );
        helper(&bin, "broken", "echo 'st0re-secret' >&2; exit 4");
        helper(&bin, "chatty", "echo 'Username: st0re-secret'");
        helper(&bin, "slow", "sleep 20");
        helper(&bin, "flood", "yes st0re-secret");
        helper(&bin, "trickle", "while true; do printf x; sleep 0.05; done");
        let config = dir.path().join("config.json");
        let path_var = format!("/nonexistent:relative/bin:{}", bin.display());
        let auth = STANDARD.encode("file-user:file-pass");
        let write = |helpers: &str| {
            let text = format!(
                r#"{{"auths": {{"r.io": {{"auth": "{auth}"}}, "other.io": {{"auth": "{auth}"}}}}, {helpers}}}"#
            );
            std::fs::write(&config, text).unwrap();
        };
        let dir_s = dir.path().to_str().unwrap().to_string();
        let env = env_of(&[("DOCKER_CONFIG", &dir_s), ("PATH", &path_var)]);
        let asked = || std::fs::read_to_string(bin.join("asked")).unwrap();

        // credsStore answers for every registry: asked with `get` and the server address.
        write(r#""credsStore": "store""#);
        let c = lookup("r.io", &env).unwrap().unwrap();
        assert_eq!(
            (c.username.as_str(), c.password()),
            ("from-store", "st0re-secret")
        );
        assert_eq!(asked(), "get\nr.io");
        assert!(
            matches!(&c.source, CredentialSource::Helper { program, .. } if program == "docker-credential-store")
        );
        assert!(c.identity_token().is_none());
        let c = lookup("docker.io", &env).unwrap().unwrap();
        assert_eq!(c.server, "https://index.docker.io/v1/");
        assert_eq!(asked(), "get\nhttps://index.docker.io/v1/");

        // credHelpers wins for its registry; an identity token is told apart.
        write(r#""credsStore": "store", "credHelpers": {"r.io": "ecr"}"#);
        let c = lookup("r.io", &env).unwrap().unwrap();
        assert_eq!(c.identity_token(), Some("refresh-tok3n"));
        assert_eq!(lookup("other.io", &env).unwrap().unwrap().username, "from-store");

        // Nothing stored there: anonymous, as Docker does (the `auths` entry is not used).
        write(r#""credsStore": "empty""#);
        assert!(lookup("r.io", &env).unwrap().is_none());

        // Without a helper, the `auths` entry.
        write(r#""credsStore": """#);
        assert_eq!(lookup("r.io", &env).unwrap().unwrap().username, "file-user");

        // Failures name the helper and the file, never what the helper printed.
        for (name, needle) in [
            ("broken", "failed (exit status 4)"),
            ("chatty", "answered something other than JSON"),
        ] {
            write(&format!(r#""credsStore": "{name}""#));
            let e = lookup("r.io", &env).unwrap_err();
            let msg = e.to_string();
            assert!(
                msg.contains(needle) && msg.contains(&format!("docker-credential-{name}")),
                "{msg}"
            );
            assert!(
                msg.contains("config.json") && !msg.contains("st0re-secret"),
                "{msg}"
            );
            assert!(e.is_environment());
        }
        let e = ask_helper(
            "docker-credential-slow",
            "r.io",
            &config,
            &env,
            Duration::from_millis(300),
        )
        .unwrap_err();
        assert!(e.to_string().contains("did not answer within 0.3 s"), "{e}");
        // One that floods is stopped at the cap at once; one that trickles at the deadline.
        let t = std::time::Instant::now();
        let e = ask_helper(
            "docker-credential-flood",
            "r.io",
            &config,
            &env,
            Duration::from_secs(20),
        )
        .unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        let msg = e.to_string();
        assert!(
            msg.contains("`docker-credential-flood`") && msg.contains("printed more than 1 MiB"),
            "{msg}"
        );
        assert!(!msg.contains("st0re-secret") && e.is_environment(), "{msg}");
        let e = ask_helper(
            "docker-credential-trickle",
            "r.io",
            &config,
            &env,
            Duration::from_millis(400),
        )
        .unwrap_err();
        assert!(e.to_string().contains("did not answer within 0.4 s"), "{e}");

        // Not installed, or not a name: bad input, with the way out.
        write(r#""credsStore": "desktop""#);
        let e = lookup("r.io", &env).unwrap_err();
        assert!(!e.is_environment());
        assert!(
            e.to_string().contains(
                "`docker-credential-desktop` for registry credentials, and no such program is on PATH"
            ),
            "{e}"
        );
        assert!(e.to_string().contains(USER_VAR), "{e}");
        write(r#""credHelpers": {"r.io": "../../bin/sh"}"#);
        let e = lookup("r.io", &env).unwrap_err();
        assert!(e.to_string().contains("credential helper's name"), "{e}");
        // A helper only in a relative PATH entry is not found.
        let rel = env_of(&[("DOCKER_CONFIG", &dir_s), ("PATH", "bin")]);
        write(r#""credsStore": "store""#);
        assert!(matches!(
            lookup("r.io", &rel).unwrap_err(),
            AuthError::HelperMissing { .. }
        ));
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
