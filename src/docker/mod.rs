//! The only module that talks to the Docker Engine (through bollard).
//!
//! Owns: connecting (DOCKER_HOST or the default socket, API version negotiated), and
//! turning Engine answers into plain data. Must not: decide compatibility or print.
//! Blocking callers get a facade over a small single-threaded runtime.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What the Engine says about itself, for `doctor`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineInfo {
    /// Engine version (`28.2.2`).
    pub server_version: Option<String>,
    /// API version negotiated.
    pub api_version: Option<String>,
    /// Container runtimes configured (`runc`, `nvidia`).
    pub runtimes: Vec<String>,
    /// The default runtime.
    pub default_runtime: Option<String>,
    /// CDI spec directories, where the Engine reports them (CDI is the NVIDIA toolkit's
    /// newer way to expose GPUs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cdi_spec_dirs: Vec<String>,
}

/// Why the Engine could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DockerError {
    /// Nothing answers at the socket or address.
    #[error("the Docker daemon is not reachable{}: {reason}", host.as_deref().map(|h| format!(" at `{h}`")).unwrap_or_default())]
    Unreachable {
        /// DOCKER_HOST, if set.
        host: Option<String>,
        /// Why.
        reason: String,
    },
    /// The socket exists but this user may not use it.
    #[error("permission denied on the Docker socket{}: add the user to the `docker` group or run with access to it", host.as_deref().map(|h| format!(" `{h}`")).unwrap_or_default())]
    PermissionDenied {
        /// DOCKER_HOST, if set.
        host: Option<String>,
    },
    /// The Engine answered with an error.
    #[error("the Docker daemon refused: {0}")]
    Api(String),
    /// No answer in time.
    #[error("the Docker daemon did not answer within {0:?}")]
    Timeout(Duration),
}

fn runtime() -> Result<tokio::runtime::Runtime, DockerError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| DockerError::Api(format!("cannot start an I/O runtime: {e}")))
}

fn classify(e: bollard::errors::Error) -> DockerError {
    let host = std::env::var("DOCKER_HOST").ok();
    let text = e.to_string();
    let mut chain = text.clone();
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        chain.push_str(": ");
        chain.push_str(&s.to_string());
        src = s.source();
    }
    let lower = chain.to_lowercase();
    if lower.contains("permission denied") {
        DockerError::PermissionDenied { host }
    } else if matches!(e, bollard::errors::Error::DockerResponseServerError { .. }) {
        DockerError::Api(text)
    } else {
        DockerError::Unreachable { host, reason: chain }
    }
}

/// Connects as the `docker` CLI would (DOCKER_HOST or the local socket).
pub(crate) fn connect() -> Result<bollard::Docker, DockerError> {
    bollard::Docker::connect_with_defaults().map_err(classify)
}

/// Asks the Engine about itself.
pub fn info(timeout: Duration) -> Result<EngineInfo, DockerError> {
    let rt = runtime()?;
    rt.block_on(async {
        let docker = connect()?;
        let work = async {
            let docker = docker.negotiate_version().await.map_err(classify)?;
            let info = docker.info().await.map_err(classify)?;
            let api = docker.client_version().to_string();
            let mut runtimes: Vec<String> = info.runtimes.unwrap_or_default().into_keys().collect();
            runtimes.sort();
            Ok(EngineInfo {
                server_version: info.server_version,
                api_version: Some(api),
                runtimes,
                default_runtime: info.default_runtime,
                cdi_spec_dirs: info.cdi_spec_dirs.unwrap_or_default(),
            })
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| DockerError::Timeout(timeout))?
    })
}
