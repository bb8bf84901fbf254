//! A fact and where it came from.

use serde::{Deserialize, Serialize};

/// A value and where it was read: a command (`nvidia-smi -q -x`), a file or path inside an
/// image (`/usr/local/cuda-12.4/version.json`), a file name, an environment variable
/// (`GPUENV_DRIVER`, `env NV_CUDNN_VERSION=9.1.0.70`) or a label. Reports show both, so a
/// user can check any fact at its source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sourced<T> {
    /// The value.
    pub value: T,
    /// Where it was read.
    pub source: String,
}

impl<T> Sourced<T> {
    /// `value`, read at `source`.
    pub fn new(value: T, source: impl Into<String>) -> Self {
        Sourced {
            value,
            source: source.into(),
        }
    }
}
