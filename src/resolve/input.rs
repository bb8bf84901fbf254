//! Placeholder replaced by the project-file parsers; holds the pin type the resolver uses.

use crate::model::{Variant, VersionSpecifiers};

/// Where a constraint came from, for messages.
pub type Origin = String;

/// One requirement on torch, torchvision or torchaudio.
#[derive(Debug, Clone)]
pub struct Pin {
    /// Empty means any version.
    pub specifiers: VersionSpecifiers,
    /// The CUDA variant named by a local version in an `==` pin.
    pub variant: Option<Variant>,
    /// The environment marker, if any.
    pub marker: Option<pep508_rs::MarkerTree>,
    /// Where it came from.
    pub origin: Origin,
}

/// Whether a pin's marker holds on Linux x86_64 CPython `python`.
pub fn marker_applies(marker: Option<&pep508_rs::MarkerTree>, _python: &str) -> bool {
    marker.is_none()
}
