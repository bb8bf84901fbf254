//! What is inside an image, read without running it: config, layers, files.
//!
//! Owns: pure readers over byte streams, from the outside in:
//! - [`reference`](mod@reference): the references users type (`docker://...`, `docker-archive:PATH`,
//!   `oci:DIR`, a bare name for the daemon), and Docker's name grammar under them, the
//!   one `docker` pulls, pushes and tags with.
//! - [`archive`]: `docker save` and OCI-layout archives (tar or directory) and any
//!   [`archive::BlobSource`], every digest verified: a stream in one pass, an archive
//!   file or a blob source layer by layer, several layers at once.
//! - [`layer`]: one layer blob (plain, gzip or zstd tar) entry by entry, with whiteouts,
//!   keeping only what a selector asks for; [`tar`] is the bounded tar reader under it.
//! - [`fs`]: the layers merged in order, queried by path and pattern.
//! - [`config`]: the image configuration.
//! - [`detect`](mod@detect): OS, Pythons, torch and its pins, CUDA, cuDNN, NCCL, cuda-compat, from the
//!   config and the merged files, every fact with where it was read; [`pyfiles`] and
//!   [`elfnote`] parse the files it reads.
//! - [`require`]: `NVIDIA_REQUIRE_*` evaluated as libnvidia-container does.
//! - [`claims`]: `--expect` and the claims of well-known tag schemes.
//! - [`cudalibs`]: the libraries of the `nvidia-*` wheels torch pins, and the copies the
//!   loader would find instead of a missing one.
//!
//! Must not: talk to the Docker daemon or a registry (that is `docker` and the registry
//! client; they hand this module byte streams or a blob source), extract anything to
//! disk, print, or judge compatibility (the verify judgement and the resolver do, with
//! these facts as data).
//!
//! Safety, whatever the image: memory is bounded ([`layer::Limits`]: per entry, per
//! captured file, per image), never in proportion to a layer's size; a path climbing out
//! of the root, an absurd entry size, a truncated or corrupt tar, gzip or zstd stream, a
//! digest mismatch or a malformed manifest gives an [`ImageError`] that says which blob
//! and why, never a panic. The readers are fuzzed (`fuzz/`) and property-tested.

pub mod archive;
pub mod claims;
pub mod config;
pub mod cudalibs;
pub mod detect;
pub mod digest;
pub mod elfnote;
mod error;
pub mod fs;
pub mod layer;
pub mod pyfiles;
pub mod reference;
pub mod require;
pub mod tar;

#[cfg(test)]
mod proptests;

pub use archive::{Image, ReadOptions, ReadProgress, Watch, read_archive, read_oci_dir};
pub use claims::{Claims, parse_expect};
pub use detect::{ImageFacts, detect};
pub use error::ImageError;
pub use reference::{ImageRef, RegistryRef};
pub use require::{HostTarget, RequireOutcome, evaluate};
