//! The judgement of `verify`: what an image holds against its claims, itself, and a
//! target.
//!
//! Owns: the claims (`--expect`, and each name's tag read by its scheme, NGC releases
//! through compat-db's catalog), consistency inside the image (torch's CUDA against the
//! libraries beside it, the CUDA wheels torch pins against what is installed and what the
//! loader would find instead), the target (will the NVIDIA runtime start it; will its
//! torch run, through the resolver) and the image's `cuda-compat` on it. Must not: read
//! an image (facts arrive as [`ImageFacts`] and an [`archive::Image`]), restate the
//! resolver's rules (torch on the target is the resolver's judgement), or print.

use super::{Origin, Target, Verification};
use crate::db::{Db, ImageFamily};
use crate::image::claims::ClaimCheck;
use crate::image::detect::{ImageFacts, LibOrigin};
use crate::image::require::{GpuTarget, HostTarget, RequireOutcome, normalize_brand};
use crate::image::{Claims, archive};
use crate::model::{CudaVersion, DriverVersion};
use crate::resolve::Code;
use crate::resolve::{Finding, Index, Installed, Query, Severity, Stack, Status, judge_installed};

/// The claims a name's tag makes, or why it makes none (a phrase about the name). An NGC
/// release is looked up in compat-db's catalog, which says what the release holds.
pub fn tag_claims(db: &Db, name: &str) -> Result<Claims, String> {
    let mut claims = crate::image::claims::read_tag(name)?;
    let Some(release) = claims.ngc_release.clone() else {
        return Ok(claims);
    };
    let tag = format!("{release}-py3");
    let rec = db
        .images
        .iter()
        .find(|i| i.family == ImageFamily::Ngc && i.tag.as_deref() == Some(&tag))
        .ok_or_else(|| {
            format!(
                "`{name}` names NGC release {release}, which compat-db has no record of, so what it should hold is not known"
            )
        })?;
    claims.torch = rec.torch.as_ref().map(|t| t.to_string());
    claims.cuda = rec.cuda.as_ref().map(|c| format!("{}.{}", c.major(), c.minor()));
    claims.python = rec.python.as_ref().map(|p| p.to_string());
    if claims.torch.is_none() && claims.cuda.is_none() && claims.python.is_none() {
        return Err(format!(
            "compat-db's record image/{} of NGC release {release} names no torch, CUDA or Python to compare",
            rec.id
        ));
    }
    let unverified: Vec<&str> = ["torch", "cuda", "python"]
        .into_iter()
        .filter(|k| rec.unverified.iter().any(|u| u == k))
        .collect();
    claims.source = format!(
        "catalog {}:{tag} (compat-db image/{}{}), for {}",
        rec.repository,
        rec.id,
        if unverified.is_empty() {
            String::new()
        } else {
            format!("; unverified there: {}", unverified.join(", "))
        },
        claims.source
    );
    Ok(claims)
}

/// The lowest CUDA version of a driver that an `NVIDIA_REQUIRE_CUDA` lets start: the
/// smallest `cuda>=` of its alternatives, or, for an alternative with only `driver`
/// conditions, the CUDA its lowest driver reports.
fn require_floor(ix: &Index<'_>, expr: &str) -> Option<CudaVersion> {
    use crate::image::require::{Op, Property, read_alternatives};
    let mut floor: Option<CudaVersion> = None;
    for alt in read_alternatives(expr) {
        let mut cuda: Option<CudaVersion> = None;
        let mut driver: Option<DriverVersion> = None;
        // Only lower bounds make a floor; a malformed condition is skipped here (the
        // runtime's verdict on it is `require`'s).
        for cond in alt.into_iter().filter_map(|(_, c)| c.ok()) {
            let v = cond.value.as_str();
            match (cond.property, cond.op) {
                (Property::Cuda, Op::Ge) => cuda = v.parse().ok(),
                (Property::Driver, Op::Ge) => {
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
                _ => {}
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

/// `x86_64` for `amd64`: how PEP 508 markers name the machine.
pub(crate) fn machine(architecture: Option<&str>) -> &'static str {
    match architecture {
        Some("arm64") => "aarch64",
        Some("ppc64le") => "ppc64le",
        Some("s390x") => "s390x",
        _ => "x86_64",
    }
}

/// Judges what an image holds: its claims (`expect`, and with `infer` its names' tags),
/// its consistency, and the target when one is given.
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

    let expected = expect.is_some();
    let (claims, claims_source) = judge_claims(db, &facts, &origin, expect, infer, &mut findings);
    judge_consistency(&ix, &facts, &mut findings);
    judge_wheels(image, &facts, &mut findings);
    let (require, torch_on_target) = if target.is_empty() {
        (None, Vec::new())
    } else {
        let shipped = ForwardCompat::from_facts(&facts);
        judge_target(db, &ix, &facts, &shipped, true, target, &mut findings)
    };

    let mut covers = Vec::new();
    if !claims.is_empty() {
        covers.push("claims");
    }
    covers.push("consistency");
    if !target.is_empty() {
        covers.push("target");
    }
    if claims.is_empty() {
        let why = if expected {
            "--expect named nothing detection can compare".to_string()
        } else if !infer {
            "no --expect, and --no-infer".to_string()
        } else if origin.names.is_empty() {
            "no --expect, and the image carries no name whose tag could say what it holds".to_string()
        } else {
            let mut why: Vec<String> = origin
                .names
                .iter()
                .filter_map(|n| tag_claims(db, n).err())
                .collect();
            why.dedup();
            format!("no --expect, and {}", why.join("; "))
        };
        findings.push(Finding::new(
            Code::ImageClaimsNone,
            Severity::Warning,
            format!(
                "no claim was checked ({why}): a pass covers {} only; --expect torch=X,cuda=Y says what to check",
                if target.is_empty() {
                    "consistency"
                } else {
                    "consistency and the target"
                }
            ),
        ));
    }
    let claims_checked = claims.iter().filter(|c| c.matches.is_some()).count();
    let failed = claims.iter().any(|c| c.matches != Some(true))
        || findings.iter().any(|f| f.severity == Severity::Incompatible)
        || require.as_ref().is_some_and(|r| !r.satisfied && !r.disabled)
        || torch_on_target.iter().any(|s| s.status == Status::Incompatible);
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    Verification {
        origin,
        facts,
        claims,
        claims_source,
        claims_checked,
        covers,
        findings,
        target: (!target.is_empty()).then(|| target.clone()),
        require,
        torch_on_target,
        failed,
    }
}

/// The image's names, the one the user typed first: of two names making the same claims
/// (a mirror's and the original's), the one given is the source reported.
fn names_typed_first(origin: &Origin) -> Vec<&String> {
    let typed = origin
        .reference
        .strip_prefix("docker-daemon:")
        .or_else(|| origin.reference.strip_prefix("docker://"))
        .unwrap_or(&origin.reference);
    let typed = crate::image::RegistryRef::parse(typed).ok();
    let mut names: Vec<&String> = origin.names.iter().collect();
    names.sort_by_key(|n| typed.is_none() || crate::image::RegistryRef::parse(n).ok() != typed);
    names
}

/// The claims (`--expect`, then each name's tag), each beside what was found. A claim
/// whose component the image shows no trace of fails: a missing fact is never a pass.
fn judge_claims(
    db: &Db,
    facts: &ImageFacts,
    origin: &Origin,
    expect: Option<Claims>,
    infer: bool,
    findings: &mut Vec<Finding>,
) -> (Vec<ClaimCheck>, Vec<String>) {
    let mut sets: Vec<Claims> = expect.into_iter().collect();
    if infer {
        for name in names_typed_first(origin) {
            // A mirror's name and the original's make the same claims: checked once.
            if let Ok(c) = tag_claims(db, name) {
                let same = |s: &Claims| {
                    Claims {
                        source: String::new(),
                        ..s.clone()
                    } == Claims {
                        source: String::new(),
                        ..c.clone()
                    }
                };
                if !sets.iter().any(same) {
                    sets.push(c);
                }
            }
        }
    }
    let mut claims = Vec::new();
    let mut sources = Vec::new();
    for set in &sets {
        sources.push(set.source.clone());
        for check in set.compare(facts) {
            let found: Vec<String> = check
                .found
                .iter()
                .map(|f| format!("{} ({})", f.value, f.source))
                .collect();
            match check.matches {
                Some(false) => findings.push(Finding::new(
                    Code::ImageClaimMismatch,
                    Severity::Incompatible,
                    format!(
                        "{} claims {} {}, but the image holds {}",
                        set.source,
                        check.component,
                        check.claimed,
                        if found.is_empty() {
                            format!("no {}", check.component)
                        } else {
                            found.join(", ")
                        }
                    ),
                )),
                None => findings.push(Finding::new(
                    Code::ImageClaimUnchecked,
                    Severity::Incompatible,
                    format!(
                        "{} claims {} {}, but the image shows no trace of {}: the claim cannot be confirmed",
                        set.source, check.component, check.claimed, check.component
                    ),
                )),
                Some(true) => {}
            }
            claims.push(check);
        }
    }
    (claims, sources)
}

/// Inside the image: torch's CUDA against the runtimes beside it, two cuDNNs, and what
/// `NVIDIA_REQUIRE_CUDA` lets start against what torch needs.
fn judge_consistency(ix: &Index<'_>, facts: &ImageFacts, findings: &mut Vec<Finding>) {
    if facts.torch.is_empty() {
        findings.push(Finding::new(
            Code::ImageNoTorch,
            Severity::Warning,
            "no torch installation found in any site-packages".into(),
        ));
    }
    for t in &facts.torch {
        let Some(tc) = t.cuda_version() else { continue };
        let version = t.version_str().unwrap_or("?");
        cuda_runtimes(facts, version, &tc, findings);
        cudnn_shadowing(facts, version, findings);
        require_weaker(ix, facts, version, &tc, findings);
    }
}

/// The CUDA runtimes present, wherever they are, against the CUDA torch `version` is built
/// for (`tc`).
fn cuda_runtimes(facts: &ImageFacts, version: &str, tc: &CudaVersion, findings: &mut Vec<Finding>) {
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
        findings.push(Finding::new(
            Code::ImageTorchCudaLibsMismatch,
            Severity::Incompatible,
            format!(
                "torch {version} is built for CUDA {tc}, but the image's CUDA runtimes are {}",
                list.join(", ")
            ),
        ));
    }
}

/// The cuDNN the wheel brings, against a system one found first on the search path.
fn cudnn_shadowing(facts: &ImageFacts, version: &str, findings: &mut Vec<Finding>) {
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
                findings.push(Finding::new(
                    Code::ImageCudnnShadowing,
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
}

/// What the runtime enforces (`NVIDIA_REQUIRE_CUDA`), against what torch `version` needs.
fn require_weaker(
    ix: &Index<'_>,
    facts: &ImageFacts,
    version: &str,
    tc: &CudaVersion,
    findings: &mut Vec<Finding>,
) {
    for req in facts
        .env
        .require
        .iter()
        .filter(|r| r.source.contains("NVIDIA_REQUIRE_CUDA"))
    {
        if let Some(floor) = require_floor(ix, &req.value) {
            if floor.major() < tc.major()
                || (floor.major() == tc.major()
                    && ix.line(tc).and_then(|l| l.floor.clone()).is_none()
                    && floor < *tc)
            {
                findings.push(Finding::new(
                    Code::ImageRequireWeaker,
                    Severity::Warning,
                    format!(
                        "NVIDIA_REQUIRE_CUDA lets the container start on a driver of CUDA {floor}, but torch {version} needs CUDA {tc}: the runtime starts it where torch then fails"
                    ),
                ));
            }
        }
    }
}

/// The `nvidia-*` wheels each torch pins (for this image's machine and torch's Python)
/// against what is installed for that Python; a missing one against the copies of its
/// libraries the loader would find instead (see [`crate::image::cudalibs`]).
fn judge_wheels(image: &archive::Image, facts: &ImageFacts, findings: &mut Vec<Finding>) {
    use crate::image::cudalibs::{stand_ins, wheel_sonames};
    let machine = machine(image.config.architecture.as_deref());
    let ld_library_path = image.config.env_var("LD_LIBRARY_PATH");
    for t in &facts.torch {
        let version = t.version_str().unwrap_or("?");
        // The Python torch belongs to: every site directory of it is on its sys.path, and
        // torch's fallback loader looks for the wheels' libraries along sys.path.
        let owner = facts
            .pythons
            .iter()
            .find(|p| p.site_packages.contains(&t.site_packages));
        let python = t
            .python
            .clone()
            .or_else(|| owner.map(|p| p.version.trim_end_matches('t').to_string()));
        let sites: Vec<&String> = match owner {
            Some(p) => p.site_packages.iter().collect(),
            None => vec![&t.site_packages],
        };
        for pin in t.pins.iter().filter(|p| p.name.starts_with("nvidia-")) {
            if !crate::model::pep508::linux_marker_may_hold(pin.marker.as_deref(), machine, python.as_deref())
            {
                continue;
            }
            let installed = facts
                .packages
                .iter()
                .any(|p| p.name == pin.name && sites.contains(&&p.site_packages));
            if installed {
                continue;
            }
            let pinned = format!("{}{}", pin.name, pin.specifier);
            let head = format!(
                "torch {version} pins {pinned}, which is not installed in {}",
                t.site_packages
            );
            let Some(sonames) = wheel_sonames(&pin.name, &pin.specifier) else {
                findings.push(Finding::new(
                    Code::ImageTorchWheelMissing,
                    Severity::Incompatible,
                    format!(
                        "{head}, and gpuenv does not know which library it brings, so no copy of it could be looked for: what torch needs of it is missing"
                    ),
                ));
                continue;
            };
            if image.layout == crate::image::archive::Layout::ContainerPaths {
                // The read by paths falls back to every layer for a missing pinned wheel, so
                // this is only reached by a layout it did not foresee.
                findings.push(Finding::new(
                    Code::ImageTorchWheelMissing,
                    Severity::Incompatible,
                    format!(
                        "{head}; a read by paths cannot look for a system {} torch would load instead: --full reads every layer",
                        sonames.join(" or ")
                    ),
                ));
                continue;
            }
            let mut found = Vec::new();
            let mut missing = Vec::new();
            for soname in &sonames {
                match stand_ins(&image.fs, soname, &t.site_packages, ld_library_path)
                    .into_iter()
                    .next()
                {
                    Some(copy) => found.push(format!("{} ({})", copy.path, copy.place.describe())),
                    None => missing.push(soname.as_str()),
                }
            }
            if missing.is_empty() {
                findings.push(Finding::new(
                    Code::ImageTorchWheelStandIn,
                    Severity::Warning,
                    format!(
                        "{head}; the loader finds {} and torch loads that instead of the build it was released with",
                        found.join(" and ")
                    ),
                ));
            } else {
                findings.push(Finding::new(
                    Code::ImageTorchWheelMissing,
                    Severity::Incompatible,
                    format!(
                        "{head}, and no {} is where the loader looks (the wheel's directory, torch/lib, LD_LIBRARY_PATH, the system library directories, the CUDA toolkit's lib64): `import torch` fails",
                        missing.join(" or ")
                    ),
                ));
            }
        }
    }
}

/// The CUDA an image is built on, with where that was read, when it shows any.
fn image_cuda(facts: &ImageFacts) -> Option<(String, String)> {
    facts
        .env
        .cuda_version
        .as_ref()
        .map(|v| (v.value.to_string(), v.source.clone()))
        .or_else(|| {
            facts.cuda_toolkits.iter().find_map(|k| {
                k.version
                    .as_ref()
                    .map(|v| (v.value.to_string(), v.source.clone()))
            })
        })
        .or_else(|| {
            facts.cudart.first().map(|l| {
                (
                    l.version.clone().unwrap_or_else(|| "?".into()),
                    format!("file name {}", l.path),
                )
            })
        })
}

/// The target: whether the NVIDIA runtime starts the image there, and whether each torch
/// runs there. A target without a driver or a GPU fails every CUDA build; one with a GPU
/// compat-db does not know cannot confirm one.
pub(crate) fn judge_target(
    db: &Db,
    ix: &Index<'_>,
    facts: &ImageFacts,
    shipped: &[ForwardCompat],
    require_known: bool,
    target: &Target,
    findings: &mut Vec<Finding>,
) -> (Option<RequireOutcome>, Vec<Stack>) {
    let lacks = target.lacks();
    let mut require = None;
    // The driver CUDA sees: the host's, or the image's cuda-compat where it serves the
    // host's branch on data-center boards.
    let mut driver = target.driver.clone();
    if let Some(lacks) = &lacks {
        no_gpu(facts, target, lacks, findings);
    } else {
        let outcome = runtime_verdict(ix, facts, require_known, target, findings);
        require = require_known.then_some(outcome);
        driver = forward_compat(ix, facts, shipped, target, findings).or(driver);
        unknown_gpus(facts, target, findings);
    }
    let torch_on_target = torch_on_target(db, facts, target, driver, lacks.is_none());
    (require, torch_on_target)
}

/// A target on which no GPU is usable (`lacks` says why): nothing to hold
/// `NVIDIA_REQUIRE_*` against, and nothing for CUDA to run on.
fn no_gpu(facts: &ImageFacts, target: &Target, lacks: &str, findings: &mut Vec<Finding>) {
    let on = &target.source;
    for t in &facts.torch {
        let version = t.version_str().unwrap_or("?");
        if t.cpu_only {
            findings.push(Finding::new(
                Code::CpuBuild,
                Severity::Info,
                format!("torch {version} is a CPU build: it runs on {on} without a GPU"),
            ));
        } else {
            let build = match &t.cuda {
                Some(c) => format!("a CUDA {} build", c.value),
                None => "not known to be a CPU build (its version.py says no CUDA version)".into(),
            };
            findings.push(Finding::new(
                Code::ImageTargetNoGpu,
                Severity::Incompatible,
                format!("torch {version} is {build}, but no GPU is usable on {on} ({lacks}): it cannot use a GPU there"),
            ));
        }
    }
    if facts.torch.is_empty() {
        if let Some((cuda, source)) = image_cuda(facts) {
            findings.push(Finding::new(
                Code::ImageTargetNoGpu,
                Severity::Incompatible,
                format!(
                    "the image is built on CUDA {cuda} ({source}), but no GPU is usable on {on} ({lacks}): nothing in it can use a GPU there"
                ),
            ));
        }
    }
}

/// How the NVIDIA runtime judges the image's `NVIDIA_REQUIRE_*` on the target; said in
/// findings only when what it checks was read (`require_known`).
fn runtime_verdict(
    ix: &Index<'_>,
    facts: &ImageFacts,
    require_known: bool,
    target: &Target,
    findings: &mut Vec<Finding>,
) -> RequireOutcome {
    let on = &target.source;
    let driver_cuda = target
        .driver_cuda
        .clone()
        .or_else(|| target.driver.as_ref().and_then(|d| ix.driver_cuda(d)));
    let host = HostTarget {
        cuda: driver_cuda,
        driver: target.driver.clone(),
        gpus: target
            .gpu_records
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
    if !require_known {
        // Nothing read of what the runtime checks: no word on whether it starts.
    } else if outcome.disabled {
        findings.push(Finding::new(
            Code::ImageStarts,
            Severity::Warning,
            "NVIDIA_DISABLE_REQUIRE is set: the runtime starts it on any host".into(),
        ));
    } else if outcome.satisfied {
        findings.push(Finding::new(
            Code::ImageStarts,
            Severity::Info,
            format!("the NVIDIA runtime starts it on {on}"),
        ));
    } else {
        for c in outcome.failing() {
            findings.push(Finding::new(
                Code::ImageWillNotStart,
                Severity::Incompatible,
                format!(
                    "the NVIDIA runtime refuses it on {on}: {} ({}); {}",
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
    outcome
}

/// Each CUDA torch of the image, on a target with GPUs compat-db has no record of.
fn unknown_gpus(facts: &ImageFacts, target: &Target, findings: &mut Vec<Finding>) {
    let on = &target.source;
    if !target.unknown_gpus.is_empty() {
        for t in facts.torch.iter().filter(|t| !t.cpu_only) {
            findings.push(Finding::new(
                Code::ImageTargetGpuUnknown,
                Severity::Incompatible,
                format!(
                    "{on} has {}, which compat-db has no record of: whether torch {}'s kernels run there is not known",
                    target.unknown_gpus.join(", "),
                    t.version_str().unwrap_or("?")
                ),
            ));
        }
    }
}

/// Each torch of the image judged by the resolver on the target's GPUs and the driver CUDA
/// sees there; only CPU builds unless a GPU is `usable`.
fn torch_on_target(
    db: &Db,
    facts: &ImageFacts,
    target: &Target,
    driver: Option<DriverVersion>,
    usable: bool,
) -> Vec<Stack> {
    let q = Query {
        gpus: target.gpu_records.iter().map(|(g, _)| g.clone()).collect(),
        driver,
        ..Query::default()
    };
    let mut torch_on_target = Vec::new();
    // Without a driver or a GPU only a CPU build has anything left to judge.
    for t in facts.torch.iter().filter(|t| usable || t.cpu_only) {
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
    torch_on_target
}

/// A `cuda-compat` user-mode driver an image ships, and the host branches it serves.
#[derive(Debug, Clone)]
pub(crate) struct ForwardCompat {
    /// The driver it provides (`560.28.03`): what CUDA sees where it is used.
    pub provides: DriverVersion,
    /// The CUDA it provides.
    pub cuda: Option<CudaVersion>,
    /// Each host branch served, as its earliest release served (`535.86`; `535.0` where
    /// only the branch is known).
    pub hosts: Vec<DriverVersion>,
    /// Where this was read.
    pub source: String,
    /// The branches come from a record that marks them unverified.
    pub unverified: bool,
}

impl ForwardCompat {
    /// The compat libraries detection found, with the branches their ELF notes list.
    fn from_facts(facts: &ImageFacts) -> Vec<ForwardCompat> {
        facts
            .cuda_compat
            .iter()
            .filter_map(|c| {
                let note = c.note.as_ref()?;
                Some(ForwardCompat {
                    provides: c.driver.clone()?,
                    cuda: note.cuda_version.as_deref().and_then(|v| v.parse().ok()),
                    hosts: note
                        .driver_branches
                        .iter()
                        .filter_map(|b| format!("{b}.0").parse().ok())
                        .collect(),
                    source: format!("the ELF note of {}", c.path),
                    unverified: false,
                })
            })
            .collect()
    }
}

/// Whether the image's `cuda-compat` serves the target's driver: it does on a branch it
/// lists, from the release it names, for data-center boards only (others fail with CUDA
/// error 804). Returns the driver CUDA then sees, when that is newer than the host's.
fn forward_compat(
    ix: &Index<'_>,
    facts: &ImageFacts,
    shipped: &[ForwardCompat],
    target: &Target,
    findings: &mut Vec<Finding>,
) -> Option<DriverVersion> {
    let d = target.driver.as_ref()?;
    let (fc, from) = shipped.iter().find_map(|fc| {
        fc.hosts
            .iter()
            .find(|h| h.branch() == d.branch())
            .map(|h| (fc, h))
    })?;
    if fc.provides <= *d {
        return None;
    }
    // Only worth a word when the host's own driver falls short of what the image needs.
    let needs = facts
        .torch
        .iter()
        .filter_map(|t| t.cuda_version())
        .chain(fc.cuda.clone())
        .max()?;
    let native = ix.driver_cuda(d);
    if native
        .as_ref()
        .is_some_and(|n| n.major_minor() >= needs.major_minor())
    {
        return None;
    }
    if d < from {
        findings.push(Finding::new(
            Code::ImageForwardCompat,
            Severity::Warning,
            format!(
                "the image's cuda-compat (driver {}) serves R{} from {from} ({}), and driver {d} is older: CUDA sees driver {d} itself on {}",
                fc.provides,
                from.branch(),
                fc.source,
                target.source
            ),
        ));
        return None;
    }
    let on = &target.source;
    let from_text = if from.as_str().ends_with(".0") {
        format!("R{}", from.branch())
    } else {
        format!("{from} or later R{}", from.branch())
    };
    if target.gpu_records.is_empty() {
        findings.push(Finding::new(
            Code::ImageForwardCompat,
            Severity::Warning,
            format!(
                "driver {d} is too old for CUDA {needs} natively; the image's cuda-compat (driver {}) serves {from_text} ({}), but only on data-center GPUs, and no GPU was given",
                fc.provides, fc.source
            ),
        ));
        return None;
    }
    // Not eligible: the compat library is not used (the NGC entrypoint says so and goes
    // on), and CUDA sees the host's own driver, which the resolver judges below.
    if let Some((g, _)) = target.gpu_records.iter().find(|(g, _)| !g.gpu.forward_compat) {
        findings.push(Finding::new(
            Code::ImageForwardCompat,
            Severity::Warning,
            format!(
                "driver {d} is too old for CUDA {needs} natively; the image's cuda-compat (driver {}) serves {from_text} ({}), but only on data-center GPUs, and the {} is not one: CUDA sees driver {d} itself on {on}",
                fc.provides, fc.source, g.gpu.name
            ),
        ));
        return None;
    }
    let mut served = Finding::new(
        Code::ImageForwardCompat,
        Severity::Info,
        format!(
            "driver {d} is too old for CUDA {needs} natively, but the image's cuda-compat (driver {}) serves {from_text} ({}) on data-center GPUs: CUDA sees driver {} on {on}",
            fc.provides, fc.source, fc.provides
        ),
    );
    served.unverified = fc.unverified;
    findings.push(served);
    Some(fc.provides.clone())
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
    use crate::resolve::GpuAsk;

    /// An image as detection sees one: torch of CUDA 12.6 and a cuda-compat whose ELF
    /// note serves R535, judged on a 535 host with `gpu`.
    fn on_535(gpu: &str) -> (Vec<Finding>, Vec<Stack>) {
        use crate::image::detect::{CompatLib, TorchFacts};
        use crate::image::elfnote::CompatNote;
        use crate::model::Sourced;
        let db = Db::embedded().unwrap();
        let mut facts = ImageFacts::default();
        facts.torch.push(TorchFacts::declared(
            "/usr/local/lib/python3.10/dist-packages".into(),
            Some("3.10".into()),
            Sourced::new("2.5.0a0+872d972e41".into(), "torch/version.py"),
            Some(Sourced::new("12.6".into(), "torch/version.py")),
        ));
        facts.cuda_compat.push(CompatLib {
            path: "/usr/local/cuda-12.6/compat/libcuda.so.560.35.03".into(),
            driver: Some("560.35.03".parse().unwrap()),
            note: Some(CompatNote {
                format: Some(1),
                cuda_version: Some("12.6".into()),
                driver_branches: vec![470, 535, 550],
                devices: Vec::new(),
            }),
        });
        let mut target = Target {
            source: "the target given".into(),
            driver: Some("535.104.05".parse().unwrap()),
            ..Target::default()
        };
        target.set_gpus(vec![(
            GpuAsk {
                gpu: db.gpu(gpu).unwrap().clone(),
                count: 1,
            },
            None,
        )]);
        let ix = Index::new(db);
        let shipped = ForwardCompat::from_facts(&facts);
        let mut findings = Vec::new();
        let (_, stacks) = judge_target(db, &ix, &facts, &shipped, true, &target, &mut findings);
        (findings, stacks)
    }

    #[test]
    fn an_images_cuda_compat_serves_the_branches_its_note_lists_on_data_center_boards() {
        let (findings, stacks) = on_535("H100 SXM");
        let fc: Vec<_> = findings
            .iter()
            .filter(|f| f.code == Code::ImageForwardCompat)
            .collect();
        assert_eq!(fc.len(), 1);
        assert_eq!(fc[0].severity, Severity::Info);
        assert!(
            fc[0].message.contains("libcuda.so.560.35.03"),
            "{}",
            fc[0].message
        );
        assert!(stacks[0].findings.iter().any(|f| f.code == Code::DriverNative));
        // A GeForce board: the compat library is not used, and 535 itself is judged.
        let (findings, stacks) = on_535("RTX 4090");
        assert!(
            findings
                .iter()
                .any(|f| f.code == Code::ImageForwardCompat && f.severity == Severity::Warning)
        );
        assert!(
            stacks[0]
                .findings
                .iter()
                .any(|f| f.code == Code::DriverMinorVersionCompat)
        );
    }

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
