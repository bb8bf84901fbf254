//! Domain types and their parsers: versions, compute capabilities, variants, wheel tags.
//!
//! Owns: every string-to-value rule of the field, with errors that name the input and the
//! offending character. Pure: no I/O, no knowledge of the database or the host. Must not
//! decide compatibility (that is `resolve`); helpers here only describe values.
//!
//! The traps of the field that these types encode:
//! - Three version grammars coexist. Python and torch are PEP 440 ([`Version`]); CUDA,
//!   drivers, cuDNN and NCCL are dotted numbers ([`CudaVersion`], [`DriverVersion`],
//!   [`CudnnVersion`], [`NcclVersion`]); semver is used by none of them.
//! - Drivers compare numerically (`535.104.05` > `535.86.10`) and print as given.
//! - CUDA compatibility is decided by major.minor; runfile installs write a date as the
//!   patch (`12.1.20230222`).
//! - A compute capability may carry `a` (arch-specific: `sm_90a` runs only on 9.0) or `f`
//!   (family-specific) suffixes.
//! - `cu121` means CUDA 12.1; the PyPI default torch build has no `+cuXYZ` at all.
//! - Wheel tags, not `Requires-Python`, decide which Pythons a wheel installs on; the
//!   manylinux tag sets the glibc floor (`manylinux_2_28` needs glibc 2.28).

mod arch;
mod cc;
mod date;
mod dotted;
mod engine;
mod error;
pub mod hf_config;
pub mod known;
pub mod metadata;
mod os;
mod pep440;
pub mod pep508;
mod python;
mod sourced;
mod variant;
mod written;

#[cfg(test)]
mod proptests;

pub use arch::{ARCH_FORMS, HostArch};
pub use cc::{ArchSuffix, Architecture, ComputeCapability};
pub use date::PartialDate;
pub use dotted::{CudaVersion, CudnnVersion, Dotted, DriverVersion, GlibcVersion, NcclVersion};
pub use engine::EngineInfo;
pub use error::ParseError;
pub use os::{glibc_of_os, known_os, oldest_os_with};
pub use pep440::{
    Operator, Version, VersionSpecifier, VersionSpecifiers, local_variant, parse_specifiers, parse_version,
    public,
};
pub use python::{Manylinux, PythonTag};
pub use sourced::Sourced;
pub use variant::Variant;
pub use written::{
    DriverInput, DriverReq, MAX_GPU_COUNT, Reading, SeriesOf, count_candidates, read_series, without_words,
};
