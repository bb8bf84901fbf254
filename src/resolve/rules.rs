//! The rules, applied to every candidate stack, and the search that enumerates them.
//!
//! Each rule decides and returns its decision as data, an `Outcome`: the findings, the
//! status and the graph's edges are views of the same outcomes (module `outcome`), so the
//! full answer (`search`) and the fast verdict path ([`super::verdicts`]) cannot differ.
//!
//! Pruning: the rules that do not depend on Python (driver, GPU, glibc, extensions) are
//! evaluated once per build and shared by its Pythons.

use crate::resolve::Code;
use std::borrow::Cow;
use std::sync::Arc;

use super::graph::Graph;
use super::index::{CudaLine, Index};
use super::outcome::{FindingExt, Outcome, Render};
use super::{CudaAsk, Finding, Findings, Needs, Query, Rank, Severity, Stack, Status};
use crate::db::{DriverBranch, Gpu, TorchRelease, TorchVariant};
use crate::model::{
    ArchSuffix, ComputeCapability, CudaVersion, DriverVersion, HostArch, PythonTag, Variant, Version,
};
use crate::project::marker_applies;

/// The query's GPU models, each once (eight H100s are judged once).
fn distinct_gpus(q: &Query) -> impl Iterator<Item = &Gpu> {
    q.gpus
        .iter()
        .enumerate()
        .filter(|(i, a)| !q.gpus[..*i].iter().any(|b| b.gpu.id == a.gpu.id))
        .map(|(_, a)| &a.gpu)
}

/// How a build reaches a GPU's architecture.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kernels {
    Sass(ComputeCapability),
    Ptx(ComputeCapability),
    Unknown,
    None,
}

/// SASS for `sm_XY` runs on `sm_XZ` with Z >= Y (same major); `sm_XYa` only on exactly
/// X.Y; `sm_XYf` on the family (same major, minor at least Y). PTX JIT-compiles forward to
/// any newer compute capability.
fn kernels_for(v: &TorchVariant, cc: ComputeCapability) -> Kernels {
    let runs = |s: &ComputeCapability| match s.suffix {
        ArchSuffix::None | ArchSuffix::Family => s.major == cc.major && s.minor <= cc.minor,
        ArchSuffix::Arch => s.major == cc.major && s.minor == cc.minor,
    };
    if let Some(s) = v.sass.iter().filter(|s| runs(s)).max() {
        return Kernels::Sass(*s);
    }
    if let Some(p) = v
        .ptx
        .iter()
        .filter(|p| p.suffix == ArchSuffix::None && (p.major, p.minor) <= (cc.major, cc.minor))
        .max()
    {
        return Kernels::Ptx(*p);
    }
    if v.sass.is_empty() && v.ptx.is_empty() {
        return Kernels::Unknown;
    }
    Kernels::None
}

/// The host's architecture as far as the query says (see [`Query::host_arch`]), without
/// where it came from: the rules ask it once per build.
pub(crate) fn arch_of(q: &Query) -> Option<HostArch> {
    q.arch.as_ref().map(|(a, _)| *a).or_else(|| {
        q.gpus
            .iter()
            .find_map(|g| g.gpu.host_arch.as_deref().and_then(|a| a.parse().ok()))
    })
}

/// Where pip gets a build's CUDA wheel for an architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WheelSource {
    /// PyPI's own wheel is this build there.
    Pypi,
    /// The build's index (`download.pytorch.org/whl/cu128`) has it.
    Index,
    /// Nowhere: pip installs a CPU-only wheel (aarch64) or nothing.
    None,
}

/// Where the CUDA wheel of `v` for `arch` comes from. A record that lists no platforms (a
/// build made at run time) is taken as an x86_64 one.
pub(crate) fn cuda_wheel_source(rel: &TorchRelease, v: &TorchVariant, arch: HostArch) -> WheelSource {
    let has = |list: &[HostArch]| list.contains(&arch) || (list.is_empty() && arch == HostArch::X86_64);
    if v.tag == rel.pypi_default && has(&rel.pypi_platforms) {
        WheelSource::Pypi
    } else if has(&v.platforms) {
        WheelSource::Index
    } else {
        WheelSource::None
    }
}

/// The oldest build with a CUDA wheel for `arch`, for the message of a build without one.
pub(crate) fn first_cuda_wheel(
    torch: &[TorchRelease],
    arch: HostArch,
) -> Option<(&TorchRelease, &TorchVariant)> {
    torch.iter().find_map(|rel| {
        rel.variants
            .iter()
            .filter(|v| v.tag.is_cuda())
            .find(|v| cuda_wheel_source(rel, v, arch) != WheelSource::None)
            .map(|v| (rel, v))
    })
}

fn build_name(rel: &TorchRelease, v: &TorchVariant) -> String {
    format!("{}+{}", rel.version, v.tag)
}

/// Applies the rules that do not depend on Python to one build, handing each decision to
/// `emit` in the order the findings are listed. `branch` is the query's driver branch
/// ([`Index::branch_of`]), resolved once per query. Returns the CUDA line the driver was
/// judged against: `None` for a CPU build, and for a CUDA build that was not judged (no
/// usable GPU, or no curated toolkit record).
pub(crate) fn build_rules<'x>(
    ix: &'x Index<'_>,
    q: &'x Query,
    branch: Option<(&'x DriverBranch, bool)>,
    rel: &'x TorchRelease,
    v: &'x TorchVariant,
    emit: &mut impl FnMut(Outcome<'x>),
) -> Option<&'x CudaLine<'x>> {
    glibc_rule(q, rel, emit);
    if v.tag == Variant::Cpu {
        if !q.gpus.is_empty() {
            emit(Outcome::CpuBuild);
        }
        return None;
    }
    if let Some(why) = &q.no_cuda_device {
        emit(Outcome::NoCudaDevice { why });
        return None;
    }
    // An Arm host (Grace) gets torch's CUDA build only where one was published for it:
    // elsewhere pip installs a CPU-only aarch64 wheel.
    if let Some(arch) = arch_of(q).filter(|a| *a != HostArch::X86_64) {
        match cuda_wheel_source(rel, v, arch) {
            WheelSource::None => emit(Outcome::NoArchWheel {
                arch,
                unverified: v.unverified.iter().any(|u| u == "platforms")
                    || (v.tag == rel.pypi_default && rel.unverified.iter().any(|u| u == "pypi_platforms")),
            }),
            source => emit(Outcome::ArchWheel {
                arch,
                source,
                unverified: match source {
                    WheelSource::Pypi => rel.unverified.iter().any(|u| u == "pypi_platforms"),
                    _ => v.unverified.iter().any(|u| u == "platforms"),
                },
            }),
        }
    }
    let cuda: Cow<'x, CudaVersion> = match &v.cuda {
        Some(c) => Cow::Borrowed(c),
        None => Cow::Owned(v.tag.cuda()?),
    };
    emit(Outcome::BuiltWith { cuda: cuda.clone() });
    if let Some(cudnn) = &v.cudnn {
        emit(Outcome::Bundles { cudnn });
    }
    let Some(line) = ix.line(&cuda) else {
        emit(cuda_unjudged(ix, cuda));
        return None;
    };
    let needs_ptx_jit = gpu_rules(q, branch, v, emit);
    // A branch past its end of life still runs, but gets no fixes, and NVIDIA drops it as a
    // forward-compatibility host. The exact date decides where a source gives one; else the
    // day a list of the supported branches was read without it.
    if let (Some((branch, true)), Some(today)) = (branch, &q.today) {
        if let Some(eol) = branch.end_of_life.as_ref().filter(|e| *e <= today) {
            emit(Outcome::DriverEndOfLife {
                branch,
                eol,
                exact: true,
            });
        } else if let Some(by) = branch.end_of_life_by.as_ref().filter(|e| *e <= today) {
            emit(Outcome::DriverEndOfLife {
                branch,
                eol: by,
                exact: false,
            });
        }
    }
    // The driver against the CUDA of the build.
    match &q.driver {
        None => emit(Outcome::NeedsDriver { line }),
        Some(driver) => {
            let eligible = q.gpus.iter().all(|a| a.gpu.forward_compat);
            let outcome = driver_outcome(driver, line, needs_ptx_jit, branch, eligible);
            emit(Outcome::Driver {
                driver,
                line,
                outcome,
            });
        }
    }
    // Extensions: nvcc's major must equal torch's CUDA major, and nvcc must target the GPU.
    if q.extensions || q.nvcc.is_some() {
        nvcc_rules(ix, q, cuda, emit);
    }
    Some(line)
}

/// glibc: the manylinux tag is a floor, and pip refuses wheels above the host's glibc;
/// where the wheels' libraries need more than their tag says (`manylinux1` wheels that
/// need GLIBC_2.17), pip installs them and `import torch` fails.
/// The wheels are those of the host's architecture: on aarch64, PyPI's aarch64 tag (where
/// none is recorded, the rule has nothing to judge; the wheels' own findings say so).
fn glibc_rule<'x>(q: &'x Query, rel: &'x TorchRelease, emit: &mut impl FnMut(Outcome<'x>)) {
    if let Some((host, origin)) = &q.glibc {
        let arch = q.host_arch().map_or(HostArch::X86_64, |(a, _)| a);
        let (Some(floor), Some(manylinux)) = (rel.glibc_floor_on(arch), rel.manylinux_on(arch)) else {
            return;
        };
        if &floor > host {
            emit(Outcome::GlibcTooOld {
                host,
                origin,
                floor,
                manylinux,
            });
        }
    }
}

/// A CUDA line the index has no thresholds for: its records' facts are pending, or there is
/// no record. Only this rare branch looks at the records again, off the usual path.
fn cuda_unjudged<'x>(ix: &'x Index<'_>, cuda: Cow<'x, CudaVersion>) -> Outcome<'x> {
    let first = ix
        .cat
        .cuda()
        .iter()
        .find(|c| c.version.major_minor() == cuda.major_minor());
    match first {
        Some(first) => Outcome::CudaPending { cuda, first },
        None => Outcome::CudaUnknown { cuda },
    }
}

/// GPUs: kernels in the wheel, and whether the driver drives the architecture. Returns
/// whether a GPU needs the build's PTX JIT-compiled.
fn gpu_rules<'x>(
    q: &'x Query,
    branch: Option<(&'x DriverBranch, bool)>,
    v: &'x TorchVariant,
    emit: &mut impl FnMut(Outcome<'x>),
) -> bool {
    let mut needs_ptx_jit = false;
    for gpu in distinct_gpus(q) {
        let kernels = kernels_for(v, gpu.compute_capability);
        needs_ptx_jit |= matches!(kernels, Kernels::Ptx(_));
        emit(Outcome::Kernels { gpu, kernels });
        if let Some(arch) = gpu.host_arch.as_deref().filter(|a| *a != "x86_64") {
            emit(Outcome::GpuHostArch { gpu, arch });
        }
        if let (Some(driver), Some((branch, exact))) = (&q.driver, branch) {
            if !exact {
                emit(Outcome::DriverBranchAssumed { driver, branch });
            }
            emit(Outcome::DriverDrives {
                driver,
                branch,
                gpu,
                drives: branch.architectures.contains(&gpu.architecture),
            });
        }
    }
    needs_ptx_jit
}

/// How a driver runs a CUDA release line: the decision of domain.md's four outcomes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum DriverOutcome<'a> {
    /// At or above the toolkit's own minimum.
    Native,
    /// Within the family floor: minor-version compatibility.
    MinorCompat,
    /// Older than the major: the branch hosts this line's `cuda-compat`, on eligible GPUs.
    ForwardCompat(&'a crate::db::DriverBranch),
    /// Forward compatibility would apply, but a GPU is not eligible (error 804).
    FcGpuNotEligible(&'a crate::db::DriverBranch),
    /// Minor-version compatibility applies, but the GPU needs PTX JIT, which it cannot do.
    PtxJitNeedsNewer,
    /// No rule lets it run.
    TooOld,
}

/// Decides a driver against a CUDA line. `branch` is the driver's branch record (exact or
/// assumed), `eligible` whether every GPU may use forward compatibility.
pub(crate) fn driver_outcome<'a>(
    d: &DriverVersion,
    line: &CudaLine<'_>,
    needs_ptx_jit: bool,
    branch: Option<(&'a crate::db::DriverBranch, bool)>,
    eligible: bool,
) -> DriverOutcome<'a> {
    if d >= &line.native {
        return DriverOutcome::Native;
    }
    let mvc = line.floor.as_ref().is_some_and(|floor| d >= floor);
    if mvc && !needs_ptx_jit {
        return DriverOutcome::MinorCompat;
    }
    // Forward compatibility lifts minor-version compatibility's limits (PTX JIT too), but
    // only on a branch NVIDIA's table lists for this line: an assumed branch is not one.
    let mm = line.version.major_minor();
    if let Some((b, true)) = branch {
        if b.forward_compat.iter().any(|c| c.major_minor() == mm) {
            return if eligible {
                DriverOutcome::ForwardCompat(b)
            } else {
                DriverOutcome::FcGpuNotEligible(b)
            };
        }
    }
    if mvc {
        DriverOutcome::PtxJitNeedsNewer
    } else {
        DriverOutcome::TooOld
    }
}

/// What nvcc of a toolkit can build for a GPU.
#[derive(Debug, Clone, Copy)]
pub(crate) enum NvccTarget {
    /// SASS for the GPU's major at or below its minor.
    Sass,
    /// Only an older architecture, whose PTX the driver can JIT.
    PtxOnly(ComputeCapability),
    /// Nothing at or below the GPU.
    None,
}

pub(crate) fn nvcc_targets(toolkit: &crate::db::CudaRelease, cc: ComputeCapability) -> NvccTarget {
    let plain = |s: &&ComputeCapability| s.suffix == ArchSuffix::None;
    if toolkit
        .sass
        .iter()
        .filter(plain)
        .any(|s| s.major == cc.major && s.minor <= cc.minor)
    {
        return NvccTarget::Sass;
    }
    match toolkit
        .sass
        .iter()
        .filter(plain)
        .filter(|s| (s.major, s.minor) < (cc.major, cc.minor))
        .max()
    {
        Some(p) => NvccTarget::PtxOnly(*p),
        None => NvccTarget::None,
    }
}

/// Extensions: what the nvcc of the host (or torch's own CUDA, when none is given) can
/// build for torch and for each GPU.
fn nvcc_rules<'x>(
    ix: &'x Index<'_>,
    q: &'x Query,
    cuda: Cow<'x, CudaVersion>,
    emit: &mut impl FnMut(Outcome<'x>),
) {
    let nvcc: Cow<'x, CudaVersion> = q.nvcc.as_ref().map_or_else(|| cuda.clone(), Cow::Borrowed);
    if nvcc.major() != cuda.major() {
        emit(Outcome::NvccMajorMismatch { nvcc, cuda });
        return;
    }
    let exact = q
        .extensions_from
        .iter()
        .any(|e| e.assumed && e.nvcc_match == crate::db::NvccMatch::MajorMinor);
    if nvcc.minor() != cuda.minor() && exact {
        emit(Outcome::NvccNotExact { nvcc, cuda });
        return;
    }
    if nvcc.minor() != cuda.minor() {
        emit(Outcome::NvccMinorMismatch {
            nvcc: nvcc.clone(),
            cuda,
        });
    }
    let Some(line) = ix.line(&nvcc) else {
        emit(Outcome::NvccUnavailable { nvcc });
        return;
    };
    let toolkit = line.newest;
    if q.nvcc.is_none() {
        emit(Outcome::ExtensionsNvcc { toolkit });
    }
    for gpu in distinct_gpus(q) {
        let target = nvcc_targets(toolkit, gpu.compute_capability);
        emit(Outcome::NvccGpu { toolkit, gpu, target });
    }
}

/// The rules of one Python of a build: its wheel, and its end of life.
fn python_rules<'x>(ix: &'x Index<'_>, q: &'x Query, tag: &'x TagEntry, emit: &mut impl FnMut(Outcome<'x>)) {
    emit(Outcome::PythonWheel { tag });
    if let Some(today) = &q.today {
        let line = [u64::from(tag.tag.major), u64::from(tag.tag.minor)];
        if let Some(release) = ix.cat.python().iter().find(|p| p.version.release() == line) {
            if release.end_of_life <= *today {
                emit(Outcome::PythonEndOfLife { tag, release });
            }
        }
    }
}

/// The Pythons of a build the mask allows.
fn allowed_tags<'b>(b: &'b BuildEntry<'_>, mask: u64) -> impl Iterator<Item = &'b TagEntry> {
    b.tags
        .iter()
        .enumerate()
        .filter(move |(i, _)| *i < 64 && mask & (1 << i) != 0)
        .map(|(_, t)| t)
}

/// What a build needs of facts the query did not give; `line` is what [`build_rules`]
/// returned.
fn needs_of(
    ix: &Index<'_>,
    q: &Query,
    rel: &TorchRelease,
    v: &TorchVariant,
    line: Option<&CudaLine<'_>>,
) -> Needs {
    let mut needs = Needs {
        sass: v.sass.iter().map(|c| c.sm()).collect(),
        ptx: v.ptx.iter().map(|c| c.compute()).collect(),
        glibc: rel
            .glibc_floor_on(q.host_arch().map_or(HostArch::X86_64, |(a, _)| a))
            .map(|g| g.to_string())
            .unwrap_or_default(),
        ..Needs::default()
    };
    let Some(line) = line else { return needs };
    needs.driver_native = Some(line.native.to_string());
    needs.driver_minor_compat = line.floor.as_ref().map(|d| d.to_string());
    needs.forward_compat_branches = line.fc_branches.clone();
    if q.driver.is_none() {
        // The GPUs' first branch raises the native minimum.
        for gpu in distinct_gpus(q) {
            if let Some(b) = ix.first_branch(gpu.architecture) {
                let min = b
                    .first_version
                    .as_ref()
                    .map_or(format!("R{}", b.branch), |v| v.to_string());
                needs.driver_native = Some(match &needs.driver_native {
                    Some(n) if n.parse::<DriverVersion>().ok() >= b.first_version.clone() => n.clone(),
                    _ => min,
                });
            }
        }
    }
    needs
}

/// The findings of outcomes, in their order, with their edges added to the graph.
fn view(r: &Render<'_>, outcomes: &[Outcome<'_>], graph: &mut Option<&mut Graph>) -> Vec<Finding> {
    let mut out = Vec::with_capacity(outcomes.len());
    for o in outcomes {
        if let Some(g) = graph.as_deref_mut() {
            if let Some((from, to, e)) = o.edge(r) {
                g.edge(from, to, e);
            }
        }
        out.extend(o.finding(r));
    }
    out
}

fn install_line(rel: &TorchRelease, v: &TorchVariant, python: &str, arch: Option<HostArch>) -> String {
    let mut pkgs = vec![format!("torch=={}", rel.version)];
    if let Some(tv) = &rel.torchvision {
        pkgs.push(format!("torchvision=={tv}"));
    }
    if let Some(ta) = &rel.torchaudio {
        pkgs.push(format!("torchaudio=={ta}"));
    }
    // PyPI's own wheel is this build only on the architectures it lists: on the others
    // (aarch64 to 2.10) it is a CPU-only build, and the CUDA one comes from the index.
    let from_pypi = match arch {
        Some(a) if v.tag.is_cuda() => cuda_wheel_source(rel, v, a) == WheelSource::Pypi,
        _ => v.tag == rel.pypi_default,
    };
    let index = if from_pypi {
        String::new() // PyPI's own wheels are this build
    } else {
        format!(" --index-url {}", v.index_url)
    };
    format!("python{python} -m pip install {}{index}", pkgs.join(" "))
}

fn pins_hold(pins: &[super::Pin], version: &Version, python: &str) -> bool {
    pins.iter()
        .filter(|p| marker_applies(p.marker.as_ref(), python))
        .all(|p| p.specifiers.contains(version))
}

fn variant_wanted(q: &Query, v: &TorchVariant) -> bool {
    if let Some((ask, _)) = &q.cuda {
        match ask {
            CudaAsk::Cpu => return v.tag == Variant::Cpu,
            CudaAsk::Spec(spec) => {
                let Some(c) = v.tag.cuda() else { return false };
                let cv: Version = c.to_string().parse().expect("major.minor is a version");
                if !spec.contains(&cv) {
                    return false;
                }
            }
        }
    }
    if !q.variants.is_empty() && !q.variants.iter().any(|(t, _)| *t == v.tag) {
        return false;
    }
    let named = q.torch.iter().any(|p| p.variant == Some(v.tag));
    if q.torch.iter().any(|p| p.variant.is_some()) && !named {
        return false;
    }
    // CPU builds only when asked for: a GPU renter wants CUDA.
    v.tag != Variant::Cpu
        || named
        || q.variants.iter().any(|(t, _)| *t == Variant::Cpu)
        || matches!(q.cuda, Some((CudaAsk::Cpu, _)))
}

fn variant_distance(q: &Query, rel: &TorchRelease, v: &TorchVariant) -> u32 {
    let asked = q
        .variants
        .first()
        .map(|(t, _)| *t)
        .or_else(|| q.torch.iter().find_map(|p| p.variant));
    let cuda_num = |t: Variant| t.cuda().map_or(0, |c| c.major() * 10 + c.minor());
    match asked {
        Some(a) => cuda_num(a).abs_diff(cuda_num(v.tag)),
        // Nothing asked: PyPI's default build first, then newer CUDA.
        None if v.tag == rel.pypi_default => 0,
        None => 1000 - cuda_num(v.tag).min(999),
    }
}

/// Which of a build's Pythons the query allows, as a bit per entry of `b.tags`; `None`
/// when the pins exclude the build itself.
fn allowed(q: &Query, b: &BuildEntry<'_>) -> Option<u64> {
    if !variant_wanted(q, b.v) {
        return None;
    }
    // Pins without markers decide the build; marked ones are checked per Python.
    let unmarked_ok = q
        .torch
        .iter()
        .filter(|p| p.marker.is_none())
        .all(|p| p.specifiers.contains(&b.local) || p.specifiers.contains(&b.rel.version));
    if !unmarked_ok {
        return None;
    }
    let companions_ok = |pins: &[super::Pin], v: &Option<Version>, py: &str| {
        pins.iter()
            .filter(|p| marker_applies(p.marker.as_ref(), py))
            .all(|p| v.as_ref().is_some_and(|cv| p.specifiers.contains(cv)))
    };
    let simple =
        q.torch.iter().all(|p| p.marker.is_none()) && q.torchvision.is_empty() && q.torchaudio.is_empty();
    if simple && q.python.is_empty() {
        return Some(if b.tags.len() >= 64 {
            u64::MAX
        } else {
            (1u64 << b.tags.len()) - 1
        });
    }
    let mut companions_any = false;
    let mut mask = 0u64;
    for (i, t) in b.tags.iter().enumerate().take(64) {
        let comp = simple
            || (companions_ok(&q.torchvision, &b.rel.torchvision, &t.py)
                && companions_ok(&q.torchaudio, &b.rel.torchaudio, &t.py));
        companions_any |= comp;
        let ok = comp
            && q.python.iter().all(|(s, _)| s.contains(&t.pv))
            && (simple || pins_hold(&q.torch, &b.local, &t.py) || pins_hold(&q.torch, &b.rel.version, &t.py));
        if ok {
            mask |= 1 << i;
        }
    }
    companions_any.then_some(mask)
}

/// A build as the search sees it, computed once per database.
pub(crate) struct BuildEntry<'a> {
    pub rel: &'a TorchRelease,
    pub v: &'a TorchVariant,
    /// `2.4.1+cu121`: what `==...+cu121` pins match.
    pub local: Version,
    /// Its CPython tags (free-threaded builds are not offered).
    pub tags: Vec<TagEntry>,
}

/// A CPython tag with its forms precomputed.
#[derive(Debug)]
pub(crate) struct TagEntry {
    pub tag: PythonTag,
    pub py: String,
    pub pv: Version,
}

/// Every build, newest release first, as the search walks them.
pub(crate) fn build_entries<'a>(torch: &'a [TorchRelease]) -> Vec<BuildEntry<'a>> {
    let mut out = Vec::new();
    for rel in torch.iter().rev() {
        for v in &rel.variants {
            let tags = v
                .python
                .as_deref()
                .unwrap_or(&rel.python)
                .iter()
                .filter(|t| !t.free_threaded)
                .map(|t| TagEntry {
                    tag: *t,
                    py: t.version(),
                    pv: Version::new([u64::from(t.major), u64::from(t.minor)]),
                })
                .collect();
            let local = rel
                .version
                .clone()
                .with_local(vec![pep440_rs::LocalSegment::String(v.tag.to_string())]);
            out.push(BuildEntry { rel, v, local, tags });
        }
    }
    out
}

/// The status of one build for a query, without findings: the weightiest status of the
/// same outcomes [`search`] renders, for the full matrix where millions of verdicts are
/// asked for. No sentence is rendered.
fn build_status(ix: &Index<'_>, q: &Query, ctx: &DriverCtx<'_>, b: &BuildEntry<'_>, mask: u64) -> Status {
    let mut worst = Status::Compatible;
    let mut fold = |o: Outcome<'_>| worst = worst.max(o.status());
    if mask == 0 {
        fold(Outcome::PythonNoWheel { tags: &b.tags });
    } else {
        for t in allowed_tags(b, mask) {
            python_rules(ix, q, t, &mut fold);
        }
    }
    build_rules(ix, q, ctx.branch, b.rel, b.v, &mut fold);
    worst
}

/// What the driver of a query resolves to once, for every build.
pub(crate) struct DriverCtx<'a> {
    pub branch: Option<(&'a crate::db::DriverBranch, bool)>,
}

impl<'a> DriverCtx<'a> {
    pub(crate) fn new(ix: &Index<'a>, q: &Query) -> DriverCtx<'a> {
        DriverCtx {
            branch: q.driver.as_ref().and_then(|d| ix.branch_of(d)),
        }
    }
}

/// One verdict of the fast path: a build, how many of its Pythons the query allows, and
/// its status (a build with none gets `Incompatible`, as its stack does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The torch release.
    pub torch: Version,
    /// The build.
    pub variant: Variant,
    /// Pythons allowed.
    pub pythons: u32,
    /// The verdict.
    pub status: Status,
    /// The lowest driver that runs it natively on the query's GPUs.
    pub driver_native: Option<DriverVersion>,
    /// Rank against the other builds (as [`search`] orders stacks).
    pub(crate) distance: u32,
}

/// Verdicts for every build a query allows, without findings, ranks or suggestions.
pub(crate) fn verdicts(ix: &Index<'_>, q: &Query) -> Vec<Verdict> {
    let ctx = DriverCtx::new(ix, q);
    let mut out = Vec::new();
    for b in ix.builds() {
        let Some(mask) = allowed(q, b) else { continue };
        let pythons = mask.count_ones();
        let status = build_status(ix, q, &ctx, b, mask);
        out.push(Verdict {
            torch: b.rel.version.clone(),
            variant: b.v.tag,
            pythons,
            status,
            driver_native: native_driver(ix, q, b),
            distance: variant_distance(q, b.rel, b.v),
        });
    }
    out
}

/// The lowest driver that runs a build natively on the query's GPUs: the CUDA line's own
/// minimum, raised to the first release of a branch that drives every GPU.
fn native_driver(ix: &Index<'_>, q: &Query, b: &BuildEntry<'_>) -> Option<DriverVersion> {
    let mut need =
        b.v.cuda
            .as_ref()
            .and_then(|c| ix.line(c))
            .map(|l| l.native.clone())?;
    for ask in &q.gpus {
        if let Some(first) = ix
            .first_branch(ask.gpu.architecture)
            .and_then(|br| br.first_version.clone())
        {
            if first > need {
                need = first;
            }
        }
    }
    Some(need)
}

/// How much an experienced engineer would prefer a Python of a build, as a sort key (0
/// first): a released line the build does not merely support last (0); the newest line
/// of a build that supports three or more, the least tested and the one other packages
/// lag on (1); a line not yet released as of today, or unknown to compat-db (2).
/// Free-threaded builds are never offered (see [`build_entries`]).
fn python_class(ix: &Index<'_>, q: &Query, b: &BuildEntry<'_>, t: &TagEntry) -> u8 {
    let line = [u64::from(t.tag.major), u64::from(t.tag.minor)];
    let released = ix
        .cat
        .python()
        .iter()
        .find(|p| p.version.release() == line)
        .is_some_and(|p| q.today.is_none_or(|today| p.released <= today));
    if !released {
        return 2;
    }
    let newest = b.tags.iter().map(|x| (x.tag.major, x.tag.minor)).max();
    if b.tags.len() >= 3 && newest == Some((t.tag.major, t.tag.minor)) {
        1
    } else {
        0
    }
}

/// The Python a build is best run on when none is asked for (see [`python_class`]).
pub(crate) fn preferred_python<'b>(ix: &Index<'_>, q: &Query, b: &'b BuildEntry<'_>) -> Option<&'b TagEntry> {
    b.tags.iter().min_by_key(|t| {
        (
            python_class(ix, q, b, t),
            std::cmp::Reverse((t.tag.major, t.tag.minor)),
        )
    })
}

/// Enumerates and evaluates every candidate stack, best first.
pub(crate) fn search(ix: &Index<'_>, q: &Query, mut graph: Option<&mut Graph>) -> Vec<Stack> {
    let mut stacks = Vec::new();
    let dcuda = q
        .driver
        .as_ref()
        .map(|d| ix.driver_cuda(d).map_or("unknown".to_string(), |c| c.to_string()));
    let ctx = DriverCtx::new(ix, q);
    for b in ix.builds() {
        let Some(mask) = allowed(q, b) else { continue };
        build_stacks(ix, q, &ctx, b, mask, dcuda.as_deref(), &mut graph, &mut stacks);
    }
    // No build matching: an empty list, which `resolve` answers with why and what exists.
    stacks.sort_by(|a, b| a.rank.cmp(&b.rank));
    stacks
}

/// The stacks of one build: one per Python the mask allows, or one without a wheel.
#[allow(clippy::too_many_arguments)]
fn build_stacks(
    ix: &Index<'_>,
    q: &Query,
    ctx: &DriverCtx<'_>,
    b: &BuildEntry<'_>,
    mask: u64,
    dcuda: Option<&str>,
    graph: &mut Option<&mut Graph>,
    stacks: &mut Vec<Stack>,
) {
    let (rel, v) = (b.rel, b.v);
    let name = build_name(rel, v);
    let mut outcomes = Vec::new();
    let line = build_rules(ix, q, ctx.branch, rel, v, &mut |o| outcomes.push(o));
    let needs = Arc::new(needs_of(ix, q, rel, v, line));
    let r = Render {
        ix,
        q,
        rel,
        v,
        name: &name,
        dcuda: dcuda.unwrap_or("unknown"),
        needs: &needs,
    };
    let mut shared = view(&r, &outcomes, graph);
    shared.sort_by_key(|f| std::cmp::Reverse(f.severity));
    let shared: Arc<[Finding]> = shared.into();
    let torch = rel.version.clone();
    let cuda = v.cuda.clone();
    let cudnn = v.cudnn.clone();
    let nccl = v.nccl.clone();
    let distance = variant_distance(q, rel, v);
    let mk = |python: String, own: Vec<Finding>, py: (u8, u8, u8), install: String| {
        let findings = Findings::new(shared.clone(), own);
        let status = findings.status();
        let failures = findings
            .iter()
            .filter(|f| f.severity == Severity::Incompatible)
            .count();
        Stack {
            torch: torch.clone(),
            variant: v.tag,
            python,
            cuda: cuda.clone(),
            cudnn: cudnn.clone(),
            nccl: nccl.clone(),
            status,
            findings,
            needs: needs.clone(),
            install,
            rank: Rank {
                status: status as u8,
                failures,
                torch: std::cmp::Reverse(rel.version.clone()),
                variant_distance: distance,
                python: (py.0, std::cmp::Reverse((py.1, py.2))),
            },
        }
    };
    if mask == 0 {
        let own = view(&r, &[Outcome::PythonNoWheel { tags: &b.tags }], graph);
        let python = q.python.first().map_or("-".to_string(), |(s, _)| s.to_string());
        stacks.push(mk(python, own, (0, 0, 0), String::new()));
        return;
    }
    for t in allowed_tags(b, mask) {
        let mut outcomes = Vec::new();
        python_rules(ix, q, t, &mut |o| outcomes.push(o));
        let own = view(&r, &outcomes, graph);
        let install = install_line(rel, v, &t.py, arch_of(q));
        let class = python_class(ix, q, b, t);
        stacks.push(mk(t.py.clone(), own, (class, t.tag.major, t.tag.minor), install));
    }
}

/// Why no build matches what was asked, as findings of the whole answer: always
/// `no-matching-build` (each pin and what the torch pins alone allow), and `cuda-no-build`
/// when `--cuda` names a CUDA no build of the pinned torch uses, with the CUDA versions
/// that exist, and the likely mix-up with the CUDA version `nvidia-smi` shows.
pub(crate) fn no_build_findings(ix: &Index<'_>, q: &Query) -> Vec<Finding> {
    let mut parts = Vec::new();
    for p in &q.torch {
        parts.push(format!(
            "torch {} ({})",
            if p.specifiers.is_empty() {
                "any".to_string()
            } else {
                p.specifiers.to_string()
            },
            p.origin
        ));
    }
    for p in &q.torchvision {
        parts.push(format!("torchvision {} ({})", p.specifiers, p.origin));
    }
    for p in &q.torchaudio {
        parts.push(format!("torchaudio {} ({})", p.specifiers, p.origin));
    }
    if let Some((ask, origin)) = &q.cuda {
        parts.push(match ask {
            CudaAsk::Cpu => format!("a cpu build ({origin})"),
            CudaAsk::Spec(s) => format!("CUDA {s} ({origin})"),
        });
    }
    for (v, origin) in &q.variants {
        parts.push(format!("the {v} build ({origin})"));
    }
    // The releases the torch pins alone allow, newest first.
    let pinned: Vec<&TorchRelease> = ix
        .cat
        .torch()
        .iter()
        .rev()
        .filter(|r| q.torch.iter().all(|p| p.specifiers.contains(&r.version)))
        .collect();
    let shown: Vec<String> = pinned
        .iter()
        .take(3)
        .map(|r| {
            let tags: Vec<String> = r.variants.iter().map(|v| v.tag.to_string()).collect();
            format!("{} ({})", r.version, tags.join(", "))
        })
        .collect();
    let mut msg = format!("no torch build satisfies all of: {}", parts.join("; "));
    if !q.torch.is_empty() {
        if shown.is_empty() {
            msg.push_str(". compat-db has no torch release matching the torch pins");
        } else {
            msg.push_str(&format!(". Builds matching the torch pins: {}", shown.join("; ")));
        }
    }
    let mut out = vec![
        Finding::new(Code::NoMatchingBuild, Severity::Incompatible, msg).fact("asked", parts.join("; ")),
    ];
    out.extend(cuda_no_build(ix, q, &pinned));
    out
}

/// `cuda-no-build`: `--cuda` names a CUDA no build of the pinned torch (`pinned`) uses.
fn cuda_no_build(ix: &Index<'_>, q: &Query, pinned: &[&TorchRelease]) -> Option<Finding> {
    let Some((CudaAsk::Spec(spec), origin)) = &q.cuda else {
        return None;
    };
    let mut existing: Vec<CudaVersion> = pinned
        .iter()
        .flat_map(|r| r.variants.iter().filter_map(|v| v.tag.cuda()))
        .collect();
    existing.sort();
    existing.dedup();
    let in_spec = |c: &CudaVersion| c.to_string().parse::<Version>().is_ok_and(|v| spec.contains(&v));
    if pinned.is_empty() || existing.iter().any(in_spec) {
        return None;
    }
    let list: Vec<String> = existing.iter().map(|c| c.to_string()).collect();
    let torch = if q.torch.is_empty() {
        "torch".to_string()
    } else {
        format!(
            "torch {}",
            q.torch
                .iter()
                .map(|p| p.specifiers.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let mut msg = format!(
        "no build of {torch} uses CUDA {spec} ({origin}); its builds are for CUDA {}",
        list.join(", ")
    );
    // `--cuda 12.2` on a 535 host: the version nvidia-smi prints is the newest CUDA
    // the driver supports, not the CUDA of a torch build.
    let any_build = ix
        .builds()
        .iter()
        .any(|b| b.v.tag.cuda().is_some_and(|c| in_spec(&c)));
    let single = match spec.iter().collect::<Vec<_>>().as_slice() {
        [one] if one.operator() == &crate::model::Operator::Equal => {
            one.version().to_string().parse::<CudaVersion>().ok()
        }
        _ => None,
    };
    if let (false, Some(asked)) = (any_build, single) {
        let driver = ix
            .line(&asked)
            .map(|l| format!(" (drivers from {} show CUDA {asked})", l.native))
            .unwrap_or_default();
        msg.push_str(&format!(
            ". No torch build at all uses CUDA {asked}: it is usually the CUDA version nvidia-smi shows for the driver{driver}, which is the newest CUDA the driver runs, not the CUDA of a build; give the driver with --driver, and --cuda only to choose among the builds above"
        ));
    }
    Some(
        Finding::new(Code::CudaNoBuild, Severity::Incompatible, msg)
            .fact("cuda", spec)
            .fact("builds", list.join(" ")),
    )
}

/// What the database cannot know, as findings of the whole answer: `torch-release-unknown`
/// when the torch pins match no release it has but admit one newer than its newest (the
/// release is not judged), and `db-may-be-stale` when, on top of a torch or a driver newer
/// than any it knows, the database is older than [`crate::db::STALE_AFTER_DAYS`].
pub(crate) fn currency_findings(ix: &Index<'_>, q: &Query) -> Vec<Finding> {
    let date = ix.cat.date();
    let date_text = date.map_or_else(|| "undated".to_string(), |d| d.to_string());
    let mut out = Vec::new();
    let mut newer: Vec<String> = Vec::new();
    let pins_text = || {
        q.torch
            .iter()
            .map(|p| format!("{} ({})", p.specifiers, p.origin))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(newest) = ix.cat.torch().last().filter(|_| !q.torch.is_empty()) {
        if admits_newer_torch(q, &newest.version) {
            newer.push(format!(
                "torch {} admits releases newer than its newest, {}",
                pins_text(),
                newest.version
            ));
            let known = ix
                .cat
                .torch()
                .iter()
                .any(|r| q.torch.iter().all(|p| p.specifiers.contains(&r.version)));
            if !known {
                out.push(
                    Finding::new(
                        Code::TorchReleaseUnknown,
                        Severity::Warning,
                        format!(
                            "compat-db knows no torch release matching {}: its newest torch is {} (database dated {date_text}), so the release asked for is not judged, neither compatible nor incompatible. If it has been released, `gpuenv db refresh` proposes its records from PyPI, and `--db DIR` answers from an updated copy of the database",
                            pins_text(),
                            newest.version
                        ),
                    )
                    .fact("asked", pins_text())
                    .fact("newest_known", &newest.version)
                    .fact("db_date", &date_text),
                );
            }
        }
    }
    if let (Some(d), Some(newest)) = (&q.driver, ix.cat.drivers().last()) {
        if d.branch() > newest.branch {
            newer.push(format!(
                "driver {d} is of branch R{}, newer than its newest, R{}",
                d.branch(),
                newest.branch
            ));
        }
    }
    if let (Some(d), Some(today)) = (date, q.today) {
        if crate::db::is_stale(Some(d), Some(today)) && !newer.is_empty() {
            let age = today.days() - d.days();
            out.push(
                Finding::new(
                    Code::DbMayBeStale,
                    Severity::Warning,
                    format!(
                        "compat-db is dated {d}, {age} days before today ({today}), and the question goes past what it knows: {}. Releases since then may change this answer. Update it: `gpuenv db refresh` proposes new torch records from PyPI, and `--db DIR` answers from an updated copy of the database",
                        newer.join("; ")
                    ),
                )
                .fact("db_date", d)
                .fact("today", today)
                .fact("age_days", age)
                .fact("newer", newer.join("; ")),
            );
        }
    }
    out
}

/// Whether the torch pins admit a release newer than `newest`: the next patch, minor or
/// major release, or a version a pin names.
fn admits_newer_torch(q: &Query, newest: &Version) -> bool {
    let r = newest.release();
    let part = |i: usize| r.get(i).copied().unwrap_or(0);
    let mut candidates = vec![
        Version::new([part(0), part(1), part(2) + 1]),
        Version::new([part(0), part(1) + 1, 0]),
        Version::new([part(0) + 1, 0, 0]),
    ];
    for p in &q.torch {
        candidates.extend(p.specifiers.iter().map(|s| s.version().clone()));
    }
    candidates
        .into_iter()
        .any(|c| crate::model::public(&c) > *newest && q.torch.iter().all(|p| p.specifiers.contains(&c)))
}
