//! What a Docker Engine says about itself: a fact of a host, which `host` records and
//! `judge` reads, whatever talks to the Engine (that is `docker`).

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
    /// The CDI devices the Engine found in those directories (`nvidia.com/gpu=all`), where
    /// it reports them (Engine 28.2 and later); older Engines leave it empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cdi_devices: Vec<String>,
}
