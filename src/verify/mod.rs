//! `gpuenv verify`: what is really inside an image, against its claims and a host.
//!
//! Owns: reading an image from any of its sources (the local daemon's export stream, a
//! registry through the distribution API, a `docker save` or OCI archive, an OCI
//! directory) into `image`'s readers, and the judgement: consistency inside the image,
//! claims (`--expect` or the tag's scheme), and the target (will the NVIDIA runtime start
//! it; will its torch run, through the resolver). Must not: parse layers itself (that is
//! `image`), talk to Docker but through `docker`, or print.

pub mod paths;

use std::io::Read;
use std::time::Duration;

use serde::Serialize;

use crate::db::{Db, ImageFamily};
use crate::docker::{self, Engine};
use crate::image::claims::ClaimCheck;
use crate::image::detect::{ImageFacts, LibOrigin};
use crate::image::require::{GpuTarget, HostTarget, RequireOutcome, normalize_brand};
use crate::image::{Claims, ImageError, ImageRef, ReadOptions, archive, detect};
use crate::model::{CudaVersion, DriverVersion};
use crate::registry::{Registry, RegistryError};
use crate::resolve::{Finding, GpuAsk, Index, Installed, Query, Severity, Stack, Status, judge_installed};

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

/// Where the image was read from, for the report.
#[derive(Debug, Clone, Serialize)]
pub struct Origin {
    /// `daemon`, `registry`, `docker-archive`, `oci-archive`, `oci`.
    pub transport: &'static str,
    /// The reference as given.
    pub reference: String,
    /// The manifest digest, when the source names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Names the image carries (repo tags).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// How it was read: `paths` (a local image, chosen paths through a never-started
    /// container) or `layers` (every layer streamed).
    pub read: &'static str,
    /// How many paths were asked for, when read by `paths`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paths_asked: Option<usize>,
    /// Why a local image's layers were read after all, when they were.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layers_because: Option<String>,
}

/// Reads an image from its source.
///
/// A local image is read by paths (see [`paths`]) unless `full`, or unless what those
/// paths show calls for every layer; every other source is read layer by layer.
pub fn read(
    reference: &ImageRef,
    given: &str,
    timeout: Duration,
    full: bool,
) -> Result<(archive::Image, Origin), VerifyError> {
    let mut paths_asked = None;
    let mut layers_because = None;
    let mut opts = ReadOptions::default();
    // A regular file is read where its layers lie, several at once; a pipe or a device
    // (`docker-archive:/dev/stdin`) in one pass.
    let read_file = |path: &std::path::Path, opts: &ReadOptions| -> Result<archive::Image, VerifyError> {
        let file = std::fs::File::open(path).map_err(|e| {
            VerifyError::Input(format!(
                "cannot read `{}`: {}",
                path.display(),
                if e.kind() == std::io::ErrorKind::NotFound {
                    "no such file".to_string()
                } else {
                    e.to_string()
                }
            ))
        })?;
        Ok(if file.metadata().is_ok_and(|m| m.is_file()) {
            archive::read_archive_file(&file, opts)?
        } else {
            archive::read_archive(std::io::BufReader::new(file), opts)?
        })
    };
    let (image, transport) = match reference {
        ImageRef::DockerArchive { path, image } => {
            opts.name = image.clone();
            (read_file(path, &opts)?, "docker-archive")
        }
        ImageRef::OciArchive { path, image } => {
            opts.name = image.clone();
            (read_file(path, &opts)?, "oci-archive")
        }
        ImageRef::OciDir { path, image } => {
            opts.name = image.clone();
            (archive::read_oci_dir(path, &opts)?, "oci")
        }
        ImageRef::Daemon(name) => 'daemon: {
            let engine = docker::Bollard::connect(timeout)?;
            if !full {
                match paths::read(&engine, name)? {
                    paths::Outcome::Read(image, asked) => {
                        paths_asked = Some(asked);
                        break 'daemon (*image, "daemon");
                    }
                    paths::Outcome::NeedsLayers(why) => layers_because = Some(why),
                }
            }
            let stream = engine.export(name)?;
            opts.name = Some(name.clone()).filter(|n| !n.starts_with("sha256:"));
            let mut image = match archive::read_archive(stream, &opts) {
                // An id, or a name the archive spells differently: the only image it holds.
                Err(ImageError::Missing(_)) if opts.name.is_some() => {
                    opts.name = None;
                    archive::read_archive(engine.export(name)?, &opts)?
                }
                other => other?,
            };
            if image.names.is_empty() {
                image.names.push(name.clone());
            }
            (image, "daemon")
        }
        ImageRef::Registry(r) => {
            let creds = docker::auth::lookup(&r.registry, &|k| std::env::var(k).ok()).map_err(|e| {
                if e.is_environment() {
                    VerifyError::Environment(e.to_string())
                } else {
                    VerifyError::Input(e.to_string())
                }
            })?;
            let reg = Registry::new(&r.registry, creds, timeout)?;
            let reference = match &r.reference {
                crate::image::reference::Reference::Tag(t) => t.clone(),
                crate::image::reference::Reference::Digest(d) => d.as_str().to_string(),
            };
            let (top, digest) = reg.manifest_document(&r.repository, &reference, ("linux", "amd64"))?;
            let source = RegistryBlobs {
                reg: &reg,
                repo: &r.repository,
            };
            let mut image = archive::read_from_blobs(&source, &top, &opts, &detect::select)?;
            image.manifest_digest = crate::image::digest::Digest::parse(&digest, "the manifest").ok();
            image.names.push(match r.tag() {
                Some(tag) => format!("{}:{tag}", r.familiar_name()),
                None => r.familiar_name(),
            });
            (image, "registry")
        }
    };
    let origin = Origin {
        transport,
        reference: given.to_string(),
        digest: image.manifest_digest.as_ref().map(|d| d.as_str().to_string()),
        names: image.names.clone(),
        read: if paths_asked.is_some() { "paths" } else { "layers" },
        paths_asked,
        layers_because,
    };
    Ok((image, origin))
}

/// Blobs of one repository of a registry, for the image reader (which verifies them).
struct RegistryBlobs<'a> {
    reg: &'a Registry,
    repo: &'a str,
}

impl archive::BlobSource for RegistryBlobs<'_> {
    /// Docker's own default (`max-concurrent-downloads`): a registry is not hit harder
    /// than `docker pull` hits it.
    fn parallelism(&self) -> usize {
        3
    }

    fn open(&self, digest: &crate::image::digest::Digest) -> Result<Box<dyn Read + '_>, ImageError> {
        let desc = crate::registry::Descriptor {
            media_type: String::new(),
            digest: digest.as_str().to_string(),
            size: 0,
            platform: None,
        };
        let reader = self
            .reg
            .blob(self.repo, &desc)
            .map_err(|e| ImageError::Missing(e.to_string()))?;
        Ok(Box::new(reader))
    }
}

/// The machine an image is meant for.
#[derive(Debug, Clone, Default)]
pub struct Target {
    /// The driver.
    pub driver: Option<DriverVersion>,
    /// The driver's CUDA version, when the host reported it (else derived from the driver).
    pub driver_cuda: Option<CudaVersion>,
    /// The GPUs, with their brand where the host reported it.
    pub gpus: Vec<(GpuAsk, Option<String>)>,
    /// Where this came from (`--driver/--gpu`, `the host`).
    pub source: String,
}

impl Target {
    /// Whether anything is known.
    pub fn is_empty(&self) -> bool {
        self.driver.is_none() && self.gpus.is_empty()
    }
}

/// The verdict of `verify`.
#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    /// Where the image came from.
    pub origin: Origin,
    /// What is in it.
    pub facts: ImageFacts,
    /// The claims, each beside what was found.
    pub claims: Vec<ClaimCheck>,
    /// Where the claims came from.
    pub claims_source: Vec<String>,
    /// Findings, with the same codes as `query`.
    pub findings: Vec<Finding>,
    /// How the NVIDIA runtime would judge it on the target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub require: Option<RequireOutcome>,
    /// Each torch of the image on the target, judged by the resolver.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub torch_on_target: Vec<Stack>,
    /// A claim or the target check failed.
    pub failed: bool,
}

fn finding(code: &'static str, severity: Severity, message: String) -> Finding {
    debug_assert!(
        crate::resolve::codes::is_known(code),
        "unregistered finding code {code}"
    );
    Finding {
        code,
        severity,
        message,
        facts: Default::default(),
        source: None,
        unverified: false,
    }
}

/// The claims a well-known tag makes; NGC releases are looked up in the database.
pub fn tag_claims(db: &Db, name: &str) -> Option<Claims> {
    let mut claims = crate::image::claims::from_tag(name)?;
    if let Some(release) = claims.ngc_release.clone() {
        let tag = format!("{release}-py3");
        if let Some(rec) = db
            .images
            .iter()
            .find(|i| i.family == ImageFamily::Ngc && i.tag.as_deref() == Some(&tag))
        {
            claims.torch = rec.torch.as_ref().map(|t| t.to_string());
            claims.cuda = rec.cuda.as_ref().map(|c| format!("{}.{}", c.major(), c.minor()));
            claims.python = rec.python.as_ref().map(|p| p.to_string());
            claims.source = format!("{} (contents from compat-db image/{})", claims.source, rec.id);
        }
    }
    (!claims.is_empty()).then_some(claims)
}

/// The lowest CUDA version of a driver that an `NVIDIA_REQUIRE_CUDA` lets start: the
/// smallest `cuda>=` of its alternatives, or, for an alternative with only `driver`
/// conditions, the CUDA its lowest driver reports.
fn require_floor(ix: &Index<'_>, expr: &str) -> Option<CudaVersion> {
    let mut floor: Option<CudaVersion> = None;
    for alt in expr.split_whitespace() {
        let mut cuda: Option<CudaVersion> = None;
        let mut driver: Option<DriverVersion> = None;
        for cond in alt.split(',') {
            if let Some(v) = cond.strip_prefix("cuda>=") {
                cuda = v.parse().ok();
            } else if let Some(v) = cond.strip_prefix("driver>=") {
                driver = v.parse().ok().or_else(|| {
                    // `driver>=470` names a branch: its first release is the lowest driver
                    // that meets it (470.0 would map to the CUDA of an older branch).
                    let bare: DriverVersion = format!("{v}.0").parse().ok()?;
                    match ix.branch_of(&bare) {
                        Some((b, true)) => b.first_version.clone().or(Some(bare)),
                        _ => Some(bare),
                    }
                });
            }
        }
        let alt_floor = cuda.or_else(|| driver.and_then(|d| ix.driver_cuda(&d)));
        if let Some(a) = alt_floor {
            if floor.as_ref().is_none_or(|f| a < *f) {
                floor = Some(a);
            }
        }
    }
    floor
}

/// Judges what an image holds.
pub fn judge(
    db: &Db,
    image: &archive::Image,
    origin: Origin,
    expect: Option<Claims>,
    infer: bool,
    target: &Target,
) -> Verification {
    let facts = image.facts();
    let ix = Index::new(db);
    let mut findings = Vec::new();

    // Claims: what was asked, and what the tag says.
    let mut claim_sets: Vec<Claims> = expect.into_iter().collect();
    if infer {
        if let Some(c) = origin.names.iter().find_map(|n| tag_claims(db, n)) {
            claim_sets.push(c);
        }
    }
    let mut claims = Vec::new();
    let mut claims_source = Vec::new();
    for set in &claim_sets {
        claims_source.push(set.source.clone());
        for check in set.compare(&facts) {
            let found: Vec<String> = check
                .found
                .iter()
                .map(|f| format!("{} ({})", f.value, f.source))
                .collect();
            match check.matches {
                Some(false) => findings.push(finding(
                    "image-claim-mismatch",
                    Severity::Incompatible,
                    format!(
                        "{} claims {} {}, but the image holds {}",
                        set.source,
                        check.component,
                        check.claimed,
                        found.join(", ")
                    ),
                )),
                None => findings.push(finding(
                    "image-claim-unchecked",
                    Severity::Warning,
                    format!(
                        "{} claims {} {}, but no {} was found to compare",
                        set.source, check.component, check.claimed, check.component
                    ),
                )),
                Some(true) => {}
            }
            claims.push(check);
        }
    }

    // Inside the image.
    if facts.torch.is_empty() {
        findings.push(finding(
            "image-no-torch",
            Severity::Warning,
            "no torch installation found in any site-packages".into(),
        ));
    }
    for t in &facts.torch {
        let Some(tc) = t.cuda_version() else { continue };
        let version = t.version_str().unwrap_or("?");
        // The CUDA runtimes present, wherever they are.
        let runtimes: Vec<(u32, String)> = facts
            .cudart
            .iter()
            .filter_map(|l| {
                l.version
                    .as_deref()
                    .and_then(|v| v.split('.').next()?.parse::<u32>().ok())
                    .map(|m| (m, l.path.clone()))
            })
            .chain(
                facts
                    .packages
                    .iter()
                    .filter(|p| p.name.starts_with("nvidia-cuda-runtime-cu"))
                    .filter_map(|p| {
                        p.name
                            .trim_start_matches("nvidia-cuda-runtime-cu")
                            .parse::<u32>()
                            .ok()
                            .map(|m| (m, p.source.clone()))
                    }),
            )
            .collect();
        if !runtimes.is_empty() && !runtimes.iter().any(|(m, _)| *m == tc.major()) {
            let list: Vec<String> = runtimes.iter().map(|(m, p)| format!("CUDA {m} ({p})")).collect();
            findings.push(finding(
                "image-torch-cuda-libs-mismatch",
                Severity::Incompatible,
                format!(
                    "torch {version} is built for CUDA {tc}, but the image's CUDA runtimes are {}",
                    list.join(", ")
                ),
            ));
        }
        // The cuDNN the wheel brings, against a system one found first on the search path.
        let wheel = facts
            .cudnn
            .pip
            .iter()
            .map(|s| s.value.clone())
            .next()
            .or_else(|| {
                facts
                    .cudnn
                    .libraries
                    .iter()
                    .find(|l| matches!(l.origin, LibOrigin::PipWheel | LibOrigin::TorchBundled))
                    .and_then(|l| l.version.clone())
            });
        let system: Vec<&crate::image::detect::LibraryFile> = facts
            .cudnn
            .libraries
            .iter()
            .filter(|l| {
                matches!(
                    l.origin,
                    LibOrigin::System | LibOrigin::CudaToolkit | LibOrigin::Conda
                )
            })
            .collect();
        if let Some(w) = &wheel {
            for s in &system {
                let sv = s.version.clone().unwrap_or_default();
                let same = !sv.is_empty() && w.split('.').zip(sv.split('.')).all(|(a, b)| a == b);
                if !same {
                    findings.push(finding(
                        "image-cudnn-shadowing",
                        Severity::Warning,
                        format!(
                            "two cuDNNs: torch {version}'s wheel brings {w}, and {} holds {}; whichever the loader finds first on LD_LIBRARY_PATH wins, and an older one fails with \"runtime cuDNN older than compile time\"",
                            s.path,
                            if sv.is_empty() { "another".to_string() } else { sv }
                        ),
                    ));
                }
            }
        }
        // What the runtime enforces, against what torch needs.
        for req in facts
            .env
            .require
            .iter()
            .filter(|r| r.source.contains("NVIDIA_REQUIRE_CUDA"))
        {
            if let Some(floor) = require_floor(&ix, &req.value) {
                if floor.major() < tc.major()
                    || (floor.major() == tc.major()
                        && ix.line(&tc).and_then(|l| l.floor.clone()).is_none()
                        && floor < tc)
                {
                    findings.push(finding(
                        "image-require-weaker",
                        Severity::Warning,
                        format!(
                            "NVIDIA_REQUIRE_CUDA lets the container start on a driver of CUDA {floor}, but torch {version} needs CUDA {tc}: the runtime starts it where torch then fails"
                        ),
                    ));
                }
            }
        }
    }

    // The target.
    let mut require = None;
    let mut torch_on_target = Vec::new();
    if !target.is_empty() {
        let driver_cuda = target
            .driver_cuda
            .clone()
            .or_else(|| target.driver.as_ref().and_then(|d| ix.driver_cuda(d)));
        let host = HostTarget {
            cuda: driver_cuda,
            driver: target.driver.clone(),
            gpus: target
                .gpus
                .iter()
                .flat_map(|(g, brand)| {
                    let t = GpuTarget {
                        arch: Some(g.gpu.compute_capability),
                        brand: Some(
                            brand
                                .as_deref()
                                .map(normalize_brand)
                                .unwrap_or_else(|| default_brand(&g.gpu)),
                        ),
                    };
                    std::iter::repeat_n(t, g.count.max(1) as usize)
                })
                .collect(),
        };
        let outcome = crate::image::evaluate(&facts.env.all, &host);
        if outcome.disabled {
            findings.push(finding(
                "image-starts",
                Severity::Warning,
                "NVIDIA_DISABLE_REQUIRE is set: the runtime starts it on any host".into(),
            ));
        } else if outcome.satisfied {
            findings.push(finding(
                "image-starts",
                Severity::Info,
                format!("the NVIDIA runtime starts it on {}", target.source),
            ));
        } else {
            for c in outcome.failing() {
                findings.push(finding(
                    "image-will-not-start",
                    Severity::Incompatible,
                    format!(
                        "the NVIDIA runtime refuses it on {}: {} ({}); {}",
                        target.source,
                        c.message.as_deref().unwrap_or("requirement error"),
                        c.variable,
                        if c.failing.is_empty() {
                            String::new()
                        } else {
                            format!("unmet: {}", c.failing.join("; "))
                        }
                    ),
                ));
            }
        }
        require = Some(outcome);
        let q = Query {
            gpus: target.gpus.iter().map(|(g, _)| g.clone()).collect(),
            driver: target.driver.clone(),
            ..Query::default()
        };
        for t in &facts.torch {
            let Some(version) = t.version_str() else { continue };
            let python = t
                .python
                .clone()
                .or_else(|| facts.pythons.first().map(|p| p.version.clone()))
                .unwrap_or_else(|| "3.11".into());
            let installed = Installed {
                version: version.to_string(),
                cuda: t.cuda.as_ref().map(|c| c.value.clone()),
                arch_list: Vec::new(),
                python,
            };
            if let Ok(stack) = judge_installed(db, &q, &installed) {
                torch_on_target.push(stack);
            }
        }
    }
    let failed = claims.iter().any(|c| c.matches == Some(false))
        || require.as_ref().is_some_and(|r| !r.satisfied && !r.disabled)
        || torch_on_target.iter().any(|s| s.status == Status::Incompatible)
        || findings
            .iter()
            .any(|f| f.code == "image-torch-cuda-libs-mismatch");
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    Verification {
        origin,
        facts,
        claims,
        claims_source,
        findings,
        require,
        torch_on_target,
        failed,
    }
}

/// The brand libnvidia-container sees when the host does not say: data-center boards
/// report `Tesla` before Ampere and `NVIDIA` from it; GeForce `GeForce`; workstation RTX
/// boards `NVIDIA RTX` (Quadro before Ampere).
fn default_brand(g: &crate::db::Gpu) -> String {
    use crate::db::Segment;
    use crate::model::Architecture;
    let modern = g.architecture >= Architecture::Ampere;
    normalize_brand(match (g.segment, modern) {
        (Segment::Datacenter, false) => "Tesla",
        (Segment::Datacenter, true) => "NVIDIA",
        (Segment::Consumer, _) => "GeForce",
        (Segment::Workstation, true) => "NVIDIA RTX",
        (Segment::Workstation, false) => "Quadro RTX",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_requirements_floor_is_its_weakest_alternative() {
        let db = Db::embedded().unwrap();
        let ix = Index::new(db);
        let floor = |e: &str| require_floor(&ix, e).map(|c| c.major_minor());
        assert_eq!(floor("cuda>=12.4"), Some((12, 4)));
        // `driver>=470` is the R470 branch, whose first release is CUDA 11.4's driver, not
        // the 470.0 that would fall to CUDA 11.3.
        assert_eq!(
            floor("cuda>=12.4 brand=tesla,driver>=470,driver<471 brand=tesla,driver>=535,driver<536"),
            Some((11, 4))
        );
        assert_eq!(floor("brand=tesla,driver>=535.104.05"), Some((12, 2)));
        assert_eq!(floor("arch>=9.0"), None);
    }
}
