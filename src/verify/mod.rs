//! `gpuenv verify`: what is really inside an image, against its claims and a host.
//!
//! Owns: reading an image from any of its sources (the local daemon's export stream, a
//! registry through the distribution API, a `docker save` or OCI archive, an OCI
//! directory) into `image`'s readers; the target a host describes ([`Target::from_host`]);
//! and the judgement: claims (`--expect`, or each name's tag read by its scheme whatever
//! the registry, NGC releases through compat-db's catalog), consistency inside the image
//! (torch's CUDA against the libraries beside it, the CUDA wheels torch pins against what
//! is installed and what the loader would find instead), and the target (will the NVIDIA
//! runtime start it; will its torch run, through the resolver). Must not: parse layers
//! itself (that is `image`), talk to Docker but through `docker`, probe the host, or print.
//!
//! A missing fact is never a pass: a claim with nothing to compare fails, a missing wheel
//! with no copy the loader finds fails, a target without a driver or a GPU fails every
//! CUDA build, and a verdict reached with no claim checked says so ([`Verification::covers`]).
//!
//! Reading is `read.rs`, the judgement `judge.rs`; this file keeps the types both share
//! and the report carries (what was read, the target, the verdict).

pub mod catalog;
mod judge;
pub mod paths;
pub mod propose;
mod read;

use serde::{Deserialize, Serialize};

use crate::db::Db;
use crate::docker;
use crate::host::HostReport;
use crate::image::ImageError;
use crate::image::claims::ClaimCheck;
use crate::image::detect::ImageFacts;
use crate::image::require::RequireOutcome;
use crate::model::{CudaVersion, DriverVersion};
use crate::registry::RegistryError;
use crate::resolve::{Finding, GpuAsk, Stack};

pub(crate) use judge::{ForwardCompat, judge_target, machine};
pub use judge::{judge, tag_claims};
pub use read::read;

/// Why an image could not be read.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The reference or a file named is not usable: bad input.
    #[error("{0}")]
    Input(String),
    /// Something on the machine failed (a credential helper): not the input's fault.
    #[error("{0}")]
    Environment(String),
    /// The archive or blob is not a readable image.
    #[error(transparent)]
    Image(#[from] ImageError),
    /// The daemon failed.
    #[error(transparent)]
    Docker(#[from] docker::DockerError),
    /// The registry failed.
    #[error(transparent)]
    Registry(#[from] RegistryError),
}

/// How an image can be read ([`Origin::transport`]); `catalog` when the facts are
/// compat-db's record of it.
pub const TRANSPORTS: [&str; 6] = [
    "daemon",
    "registry",
    "docker-archive",
    "oci-archive",
    "oci",
    "catalog",
];

/// How an image's files were read ([`Origin::read`]).
pub const READS: [&str; 3] = ["paths", "layers", "catalog"];

/// What a verdict can cover ([`Verification::covers`]).
pub const COVERS: [&str; 4] = ["claims", "consistency", "target", "catalog"];

fn transport<'de, D: serde::Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    crate::model::known::one_of(d, "transport", TRANSPORTS)
}

fn read_how<'de, D: serde::Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    crate::model::known::one_of(d, "way of reading", READS)
}

fn covers<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<&'static str>, D::Error> {
    crate::model::known::each_of(d, "cover", COVERS)
}

/// Where the image was read from, for the report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Origin {
    /// One of [`TRANSPORTS`]: `daemon`, `registry`, `docker-archive`, `oci-archive`, `oci`.
    #[serde(deserialize_with = "transport")]
    pub transport: crate::model::known::Word,
    /// The reference as given.
    pub reference: String,
    /// The manifest digest, when the source names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The digest of the index (or manifest list) the manifest was chosen from for the
    /// platform, when the registry's reference named one; `digest` is the manifest read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_digest: Option<String>,
    /// Names the image carries (repo tags).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// How it was read: `paths` (a local image, chosen paths through a never-started
    /// container) or `layers` (every layer streamed).
    #[serde(deserialize_with = "read_how")]
    pub read: crate::model::known::Word,
    /// How many paths were asked for, when read by `paths`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths_asked: Option<usize>,
    /// Why a local image's layers were read after all, when they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layers_because: Option<String>,
}

/// The machine an image is meant for.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Target {
    /// Where this came from (`this host`, `the target given`).
    pub source: String,
    /// The driver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<DriverVersion>,
    /// The driver's CUDA version, when the host reported it (else derived from the driver).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_cuda: Option<CudaVersion>,
    /// The GPUs as the report writes them (`8x H100 SXM`), one per record in
    /// [`Target::gpu_records`]; set both with [`Target::set_gpus`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    gpus: Vec<String>,
    /// The GPUs judged: their records, with their brand where the host reported it. Not
    /// part of the document: a target read back has only the names.
    #[serde(skip)]
    gpu_records: Vec<(GpuAsk, Option<String>)>,
    /// Why the host has no driver: none was found there, which is a fact about the host,
    /// not a gap in what was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_driver: Option<String>,
    /// Why the host shows no GPU, when it shows none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_gpu: Option<String>,
    /// GPUs of the host that compat-db has no record of, as the host names them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown_gpus: Vec<String>,
    /// The `GPUENV_*` overrides the host's facts went through (`GPUENV_DRIVER=535.104.05`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<String>,
    /// How `--driver` and `--gpu` were read where not literally (a branch as its earliest
    /// release, a name covering several GPUs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub readings: Vec<crate::model::Reading>,
}

impl Target {
    /// Sets the GPUs judged, and the names the report writes for them.
    pub fn set_gpus(&mut self, gpus: Vec<(GpuAsk, Option<String>)>) {
        self.gpus = gpus
            .iter()
            .map(|(g, _)| format!("{}x {}", g.count.max(1), g.gpu.name))
            .collect();
        self.gpu_records = gpus;
    }

    /// The GPUs as written: `8x H100 SXM`.
    pub fn gpus(&self) -> &[String] {
        &self.gpus
    }

    /// The GPUs judged, with their brand where the host reported it; empty for a target
    /// read back from a document.
    pub fn gpu_records(&self) -> &[(GpuAsk, Option<String>)] {
        &self.gpu_records
    }

    /// Whether nothing is known: no target to judge.
    pub fn is_empty(&self) -> bool {
        self.driver.is_none()
            && self.gpus.is_empty()
            && self.no_driver.is_none()
            && self.no_gpu.is_none()
            && self.unknown_gpus.is_empty()
    }

    /// The target a probed (or recorded) host describes: its driver and GPUs, what it
    /// lacks of them and why, the GPUs compat-db does not know, and the overrides applied.
    pub fn from_host(db: &Db, host: &HostReport) -> Target {
        let (asks, unknown_gpus) = crate::judge::host_gpus(db, host);
        let gpus = asks
            .into_iter()
            .map(|a| {
                let brand = host
                    .gpus
                    .iter()
                    .find(|g| {
                        db.gpu_reported(&g.name, g.memory_total_mib)
                            .is_ok_and(|r| r.id == a.gpu.id)
                    })
                    .and_then(|g| g.brand.clone());
                (a, brand)
            })
            .collect();
        let mut target = Target {
            source: "this host".into(),
            driver: host.driver.as_ref().map(|d| d.value.clone()),
            driver_cuda: host.driver_cuda.as_ref().map(|c| c.value.clone()),
            // One reason serves both: the first failure in the chain driver, devices.
            no_driver: host
                .driver
                .is_none()
                .then(|| crate::judge::gpu_unusable(host))
                .flatten(),
            no_gpu: host
                .gpus
                .is_empty()
                .then(|| crate::judge::gpu_unusable(host))
                .flatten(),
            unknown_gpus,
            overrides: host.overrides.clone(),
            ..Target::default()
        };
        target.set_gpus(gpus);
        target
    }

    /// Why no GPU is usable on the target, as a clause (`the NVIDIA kernel module is not
    /// loaded`); `None` when no lack was found.
    fn lacks(&self) -> Option<String> {
        match (&self.no_driver, &self.no_gpu) {
            (Some(d), Some(g)) if d == g => Some(d.clone()),
            (Some(d), Some(g)) => Some(format!("{d} and {g}")),
            (Some(x), None) | (None, Some(x)) => Some(x.clone()),
            (None, None) => None,
        }
    }
}

/// The verdict of `verify`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Verification {
    /// Where the image came from.
    pub origin: Origin,
    /// What is in it.
    pub facts: ImageFacts,
    /// The claims, each beside what was found and with where it came from.
    pub claims: Vec<ClaimCheck>,
    /// Where the claims came from.
    pub claims_source: Vec<String>,
    /// How many claims were compared with something found in the image.
    pub claims_checked: usize,
    /// What the verdict covers: `claims` (when there were any), `consistency`, `target`
    /// (when one was given); `catalog` when the facts are compat-db's record of the image,
    /// not read from it. A pass says nothing of what is not listed.
    #[serde(deserialize_with = "covers")]
    pub covers: Vec<crate::model::known::Word>,
    /// Findings, with the same codes as `query`.
    pub findings: Vec<Finding>,
    /// The target judged: its facts, what it lacks, and the overrides behind them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
    /// How the NVIDIA runtime would judge it on the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require: Option<RequireOutcome>,
    /// Each torch of the image on the target, judged by the resolver.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub torch_on_target: Vec<Stack>,
    /// A claim, the image's consistency or the target check failed.
    pub failed: bool,
}
