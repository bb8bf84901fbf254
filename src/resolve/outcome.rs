//! What a rule decided for one build, as data ([`Outcome`]), and the three views derived
//! from it: the status it makes ([`Outcome::status`]), the finding a report shows (code,
//! sentence, facts, source: [`Outcome::finding`]) and the edge of the graph it draws
//! ([`Outcome::edge`]).
//!
//! The rules ([`super::rules`]) decide and nothing else; this module decides nothing. The
//! fast verdict path reads only [`Outcome::status`], so it never renders a sentence, and it
//! cannot disagree with the findings: both come from the same outcome.

use std::borrow::Cow;

use super::graph::{Edge, Node};
use super::index::{CudaLine, Index};
use super::rules::{DriverOutcome, Kernels, NvccTarget, TagEntry, WheelSource, first_cuda_wheel};
use super::{Code, Finding, Needs, Origin, Query, Severity, Status};
use crate::db::{
    BranchType, CudaRelease, DriverBranch, Gpu, PythonRelease, Segment, TorchRelease, TorchVariant,
};
use crate::model::{
    ComputeCapability, CudaVersion, CudnnVersion, DriverVersion, GlibcVersion, HostArch, Manylinux,
    PartialDate,
};

pub(super) trait FindingExt {
    fn fact(self, k: &'static str, v: impl ToString) -> Self;
    fn source(self, url: Option<&str>) -> Self;
    fn unverified(self, yes: bool) -> Self;
}

impl FindingExt for Finding {
    fn fact(mut self, k: &'static str, v: impl ToString) -> Self {
        self.facts.insert(Cow::Borrowed(k), v.to_string());
        self
    }
    fn source(mut self, url: Option<&str>) -> Self {
        self.source = url.map(str::to_string);
        self
    }
    fn unverified(mut self, yes: bool) -> Self {
        self.unverified = yes;
        self
    }
}

pub(super) fn first_source(sources: &[crate::db::Source]) -> Option<&str> {
    sources.first().map(|s| s.url.as_str())
}

/// The source a branch's `end_of_life_by` was read from: the one whose note names the key
/// (the linter requires one), else the first.
fn end_of_life_by_source(sources: &[crate::db::Source]) -> Option<&str> {
    sources
        .iter()
        .find(|s| {
            s.note
                .as_deref()
                .is_some_and(|n| n.contains(crate::db::END_OF_LIFE_BY))
        })
        .map(|s| s.url.as_str())
        .or_else(|| first_source(sources))
}

/// The source of a release's recorded glibc floor: the wheel it was read from (a
/// `files.pythonhosted.org` address) or, for release notes, the first source; `None` when
/// the floor is the tag's.
fn glibc_source(rel: &TorchRelease) -> Option<&str> {
    let tag = rel.manylinux.glibc();
    rel.glibc.as_ref().filter(|g| **g > tag)?;
    match rel.glibc_from? {
        crate::db::GlibcBasis::WheelSymbols => rel
            .sources
            .iter()
            .find(|s| s.url.ends_with(".whl"))
            .map(|s| s.url.as_str()),
        crate::db::GlibcBasis::ReleaseNotes => rel
            .sources
            .iter()
            .find(|s| s.url.contains("RELEASE.md"))
            .map(|s| s.url.as_str()),
    }
}

pub(super) fn arch_range(list: &[ComputeCapability]) -> String {
    match (list.iter().min(), list.iter().max()) {
        (Some(a), Some(b)) if a != b => format!("{}..{}", a.sm(), b.sm()),
        (Some(a), _) => a.sm(),
        _ => "none".to_string(),
    }
}

fn gpu_label(gpu: &Gpu) -> String {
    format!("{} ({})", gpu.name, gpu.compute_capability.sm())
}

/// One rule's decision for one build (or one of its Pythons), with the facts it compared.
/// The variants are listed in the order the rules run, which is the order of the findings
/// of equal weight and of the graph's edges.
#[derive(Debug, Clone)]
pub(crate) enum Outcome<'x> {
    /// glibc: the wheels need more than the host has (their tag, or their libraries).
    GlibcTooOld {
        host: &'x GlibcVersion,
        origin: &'x Origin,
        floor: GlibcVersion,
        /// The platform tag of the wheels judged (the host architecture's).
        manylinux: &'x Manylinux,
    },
    /// A CPU-only build asked of a machine with GPUs.
    CpuBuild,
    /// A CUDA build with no CUDA wheel for the host's (non-x86_64) architecture.
    NoArchWheel { arch: HostArch, unverified: bool },
    /// A CUDA build with a CUDA wheel for the host's (non-x86_64) architecture.
    ArchWheel {
        arch: HostArch,
        source: WheelSource,
        unverified: bool,
    },
    /// A CUDA build where it is a fact that no GPU is usable.
    NoCudaDevice { why: &'x str },
    /// The CUDA the build was built with (an edge only).
    BuiltWith { cuda: Cow<'x, CudaVersion> },
    /// The cuDNN the build bundles (an edge only).
    Bundles { cudnn: &'x CudnnVersion },
    /// The build's CUDA has toolkit records, all with pending facts.
    CudaPending {
        cuda: Cow<'x, CudaVersion>,
        first: &'x CudaRelease,
    },
    /// The build's CUDA has no toolkit record.
    CudaUnknown { cuda: Cow<'x, CudaVersion> },
    /// The kernels of the wheel for a GPU's compute capability (SASS, PTX, none, unknown).
    Kernels { gpu: &'x Gpu, kernels: Kernels },
    /// A GPU that comes with a host that is not x86_64.
    GpuHostArch { gpu: &'x Gpu, arch: &'x str },
    /// The driver's branch has no record; an older one's GPU support is assumed.
    DriverBranchAssumed {
        driver: &'x DriverVersion,
        branch: &'x DriverBranch,
    },
    /// Whether the driver's branch drives a GPU's architecture.
    DriverDrives {
        driver: &'x DriverVersion,
        branch: &'x DriverBranch,
        gpu: &'x Gpu,
        drives: bool,
    },
    /// The driver's branch is past its end of life.
    DriverEndOfLife {
        branch: &'x DriverBranch,
        /// The end of life, or the day by which the branch was past it.
        eol: &'x PartialDate,
        /// `eol` is the branch's `end_of_life`; false: its `end_of_life_by`.
        exact: bool,
    },
    /// No driver given: what the build needs of one.
    NeedsDriver { line: &'x CudaLine<'x> },
    /// The driver against the CUDA line of the build (native, minor-version or forward
    /// compatibility, GPU eligibility, PTX JIT, too old).
    Driver {
        driver: &'x DriverVersion,
        line: &'x CudaLine<'x>,
        outcome: DriverOutcome<'x>,
    },
    /// nvcc's CUDA major is not torch's.
    NvccMajorMismatch {
        nvcc: Cow<'x, CudaVersion>,
        cuda: Cow<'x, CudaVersion>,
    },
    /// nvcc's minor differs, and an extension refuses any CUDA but torch's.
    NvccNotExact {
        nvcc: Cow<'x, CudaVersion>,
        cuda: Cow<'x, CudaVersion>,
    },
    /// nvcc's minor differs: torch warns.
    NvccMinorMismatch {
        nvcc: Cow<'x, CudaVersion>,
        cuda: Cow<'x, CudaVersion>,
    },
    /// No toolkit of nvcc's CUDA is known.
    NvccUnavailable { nvcc: Cow<'x, CudaVersion> },
    /// Which toolkit to build extensions with (no nvcc given).
    ExtensionsNvcc { toolkit: &'x CudaRelease },
    /// What nvcc can compile for a GPU.
    NvccGpu {
        toolkit: &'x CudaRelease,
        gpu: &'x Gpu,
        target: NvccTarget,
    },
    /// None of the build's wheels is for a Python the query allows.
    PythonNoWheel { tags: &'x [TagEntry] },
    /// The build has a wheel for this Python.
    PythonWheel { tag: &'x TagEntry },
    /// This Python is past its end of life.
    PythonEndOfLife {
        tag: &'x TagEntry,
        release: &'x PythonRelease,
    },
}

/// What rendering a finding or an edge needs beyond the outcome: the build, the query, and
/// the strings computed once per build or per query.
pub(crate) struct Render<'r> {
    pub ix: &'r Index<'r>,
    pub q: &'r Query,
    pub rel: &'r TorchRelease,
    pub v: &'r TorchVariant,
    /// `2.4.1+cu121`.
    pub name: &'r str,
    /// The CUDA version the driver reports (`unknown` when none is known).
    pub dcuda: &'r str,
    pub needs: &'r Needs,
}

/// The code and weight of a finding, before its sentence.
#[derive(Clone, Copy)]
struct Head {
    code: Code,
    severity: Severity,
}

impl Head {
    fn says(self, message: String) -> Finding {
        Finding::new(self.code, self.severity, message)
    }
}

impl Outcome<'_> {
    /// The decision: the finding's code and weight, `None` where the outcome makes no
    /// finding (an edge only, or a check that passed silently).
    pub(crate) fn rule(&self) -> Option<(Code, Severity)> {
        use Severity::{Conditional as Cond, Incompatible as Inc, Info, Warning as Warn};
        Some(match self {
            Outcome::GlibcTooOld { .. } => (Code::GlibcTooOld, Inc),
            Outcome::CpuBuild => (Code::CpuBuild, Warn),
            Outcome::NoCudaDevice { .. } => (Code::NoCudaDevice, Inc),
            Outcome::NoArchWheel { .. } => (Code::NoCudaWheelForArch, Inc),
            Outcome::ArchWheel { .. } => (Code::CudaWheelForArch, Info),
            Outcome::BuiltWith { .. } | Outcome::Bundles { .. } => return None,
            Outcome::CudaPending { .. } => (Code::CudaFactsPending, Cond),
            Outcome::CudaUnknown { .. } => (Code::CudaUnknown, Cond),
            Outcome::Kernels { kernels, .. } => match kernels {
                Kernels::Sass(_) => (Code::GpuSass, Info),
                Kernels::Ptx(_) => (Code::GpuPtxJit, Cond),
                Kernels::Unknown => (Code::GpuArchListUnknown, Cond),
                Kernels::None => (Code::GpuNoKernels, Inc),
            },
            Outcome::GpuHostArch { .. } => (Code::GpuHostAarch64, Warn),
            Outcome::DriverBranchAssumed { .. } => (Code::DriverBranchUnknown, Warn),
            Outcome::DriverDrives { drives: true, .. } => return None,
            Outcome::DriverDrives { drives: false, .. } => (Code::DriverUnsupportedGpu, Inc),
            Outcome::DriverEndOfLife { .. } => (Code::DriverEndOfLife, Warn),
            Outcome::NeedsDriver { .. } => (Code::NeedsDriver, Info),
            Outcome::Driver { outcome, .. } => match outcome {
                DriverOutcome::Native => (Code::DriverNative, Info),
                DriverOutcome::MinorCompat => (Code::DriverMinorVersionCompat, Cond),
                DriverOutcome::ForwardCompat(_) => (Code::DriverForwardCompat, Cond),
                DriverOutcome::FcGpuNotEligible(_) => (Code::ForwardCompatGpuNotEligible, Inc),
                DriverOutcome::PtxJitNeedsNewer => (Code::PtxJitNeedsNewerDriver, Inc),
                DriverOutcome::TooOld => (Code::DriverTooOld, Inc),
            },
            Outcome::NvccMajorMismatch { .. } => (Code::NvccMajorMismatch, Inc),
            Outcome::NvccNotExact { .. } => (Code::ExtensionNvccNotExact, Inc),
            Outcome::NvccMinorMismatch { .. } => (Code::NvccMinorMismatch, Warn),
            Outcome::NvccUnavailable { .. } => (Code::NvccUnavailable, Inc),
            Outcome::ExtensionsNvcc { .. } => (Code::ExtensionsNvcc, Info),
            Outcome::NvccGpu { target, .. } => match target {
                NvccTarget::Sass => return None,
                NvccTarget::PtxOnly(_) => (Code::NvccPtxOnly, Cond),
                NvccTarget::None => (Code::NvccNoGpuArch, Inc),
            },
            Outcome::PythonNoWheel { .. } => (Code::PythonNoWheel, Inc),
            Outcome::PythonWheel { .. } => (Code::PythonWheel, Info),
            Outcome::PythonEndOfLife { .. } => (Code::PythonEndOfLife, Warn),
        })
    }

    /// The status the outcome makes (an outcome without a finding holds).
    pub(crate) fn status(&self) -> Status {
        self.rule().map_or(Status::Compatible, |(_, s)| s.status())
    }

    /// The finding, rendered: the same code and weight as [`Outcome::rule`].
    pub(crate) fn finding(&self, r: &Render<'_>) -> Option<Finding> {
        let (code, severity) = self.rule()?;
        let h = Head { code, severity };
        Some(match self {
            Outcome::GlibcTooOld {
                host,
                origin,
                floor,
                manylinux,
            } => glibc(h, r, host, origin, floor, manylinux),
            Outcome::CpuBuild => h.says(format!(
                "torch {} is a CPU-only build: it installs and runs, but never on the GPU",
                r.name
            )),
            Outcome::NoCudaDevice { why } => h
                .says(format!(
                    "torch {} is a CUDA build, and no GPU is usable here: {why}. A CPU build (--cuda cpu) runs",
                    r.name
                ))
                .fact("machine", why),
            Outcome::NoArchWheel { arch, unverified } => no_arch_wheel(h, r, *arch, *unverified),
            Outcome::ArchWheel {
                arch,
                source,
                unverified,
            } => {
                let via = match source {
                    WheelSource::Pypi => "PyPI's own wheel".to_string(),
                    _ => format!("on {}", r.v.index_url),
                };
                let pypi = if *source == WheelSource::Pypi || r.v.tag != r.rel.pypi_default {
                    String::new()
                } else {
                    format!(" (PyPI's {arch} wheel is a CPU-only build: install from the index)")
                };
                h.says(format!("torch {} has a CUDA wheel for {arch}: {via}{pypi}", r.name))
                    .fact("arch", arch)
                    .source(arch_source(r, *source))
                    .unverified(*unverified)
            }
            Outcome::CudaPending { cuda, first } => cuda_pending(h, r, cuda, first),
            Outcome::CudaUnknown { cuda } => h
                .says(format!(
                    "CUDA {cuda} of torch {} has no toolkit record: its driver minimum is unknown",
                    r.name
                ))
                .fact("cuda", cuda),
            Outcome::Kernels { gpu, kernels } => kernels_finding(h, r, gpu, kernels),
            Outcome::GpuHostArch { gpu, arch } => h
                .says(format!(
                    "the {} comes with an {arch} host: install the {arch} wheels; the arch lists here are those of the x86_64 wheels",
                    gpu.name,
                ))
                .source(first_source(&gpu.sources)),
            Outcome::DriverBranchAssumed { driver, branch } => h.says(format!(
                "driver branch R{} has no record; R{}'s GPU support was assumed",
                driver.branch(),
                branch.branch
            )),
            Outcome::DriverDrives {
                driver, branch, gpu, ..
            } => unsupported_gpu(h, r, driver, branch, gpu),
            Outcome::DriverEndOfLife {
                branch,
                eol,
                exact: true,
            } => h
                .says(format!(
                    "driver branch R{} reached its end of life in {eol}: no more security or bug fixes; ask for a supported branch",
                    branch.branch
                ))
                .fact("end_of_life", eol)
                .source(first_source(&branch.sources))
                .unverified(branch.unverified.iter().any(|u| u == "end_of_life")),
            Outcome::DriverEndOfLife {
                branch,
                eol,
                exact: false,
            } => h
                .says(format!(
                    "driver branch R{} is past its end of life: NVIDIA's list of supported branches, as read on {eol}, does not name it (the exact date is not recorded); no more security or bug fixes; ask for a supported branch",
                    branch.branch
                ))
                .fact("end_of_life_by", eol)
                .source(end_of_life_by_source(&branch.sources))
                .unverified(branch.unverified.iter().any(|u| u == "end_of_life_by")),
            Outcome::NeedsDriver { line } => needs_driver(h, r, line),
            Outcome::Driver {
                driver,
                line,
                outcome,
            } => driver_finding(h, r, driver, line, outcome),
            Outcome::NvccMajorMismatch { .. }
            | Outcome::NvccNotExact { .. }
            | Outcome::NvccMinorMismatch { .. }
            | Outcome::NvccUnavailable { .. }
            | Outcome::ExtensionsNvcc { .. }
            | Outcome::NvccGpu { .. } => nvcc_finding(h, r, self),
            Outcome::PythonNoWheel { tags } => python_no_wheel(h, r, tags),
            Outcome::PythonWheel { tag } => h
                .says(format!("torch {} has a {} wheel", r.name, tag.tag))
                .fact("python", &tag.py),
            Outcome::PythonEndOfLife { tag, release } => h
                .says(format!(
                    "Python {} reached its end of life on {}",
                    tag.py, release.end_of_life
                ))
                .fact("end_of_life", release.end_of_life)
                .source(first_source(&release.sources)),
            Outcome::BuiltWith { .. } | Outcome::Bundles { .. } => unreachable!("no finding: `rule` says so"),
        })
    }

    /// The edge of the graph the outcome draws, with the outcome's status.
    pub(crate) fn edge(&self, r: &Render<'_>) -> Option<(Node, Node, Edge)> {
        let rel_source = first_source(&r.rel.sources);
        let build = || Node::Build(r.name.to_string());
        let build_source = || {
            r.v.sources
                .first()
                .map(|s| s.url.as_str())
                .or(rel_source)
                .map(str::to_string)
        };
        let (from, to, label, source) = match self {
            Outcome::BuiltWith { cuda } => (
                build(),
                Node::Cuda(cuda.to_string()),
                "built with".to_string(),
                build_source(),
            ),
            Outcome::Bundles { cudnn } => (
                build(),
                Node::Cudnn(cudnn.to_string()),
                "bundles".to_string(),
                rel_source.map(str::to_string),
            ),
            Outcome::Kernels { gpu, kernels } => (
                build(),
                Node::Gpu(gpu.name.clone()),
                match kernels {
                    Kernels::Sass(s) => format!("SASS {}", s.sm()),
                    Kernels::Ptx(p) => format!("PTX {}", p.compute()),
                    Kernels::Unknown => "arch list unknown".to_string(),
                    Kernels::None => "no kernels".to_string(),
                },
                build_source(),
            ),
            Outcome::DriverDrives {
                driver,
                branch,
                gpu,
                drives,
            } => (
                Node::Driver(format!("R{}", driver.branch())),
                Node::Gpu(gpu.name.clone()),
                if *drives { "drives" } else { "does not drive" }.to_string(),
                first_source(&branch.sources).map(str::to_string),
            ),
            Outcome::Driver {
                driver,
                line,
                outcome,
            } => (
                Node::Cuda(line.version.to_string()),
                Node::Driver(format!("R{}", driver.branch())),
                driver_label(line, outcome),
                first_source(&line.newest.sources).map(str::to_string),
            ),
            Outcome::PythonNoWheel { .. } => (
                build(),
                Node::Python(r.q.python.first().map_or("-".to_string(), |(s, _)| s.to_string())),
                "no wheel".to_string(),
                None,
            ),
            Outcome::PythonWheel { tag } => (
                build(),
                Node::Python(tag.py.clone()),
                format!("{} wheel", tag.tag),
                rel_source.map(str::to_string),
            ),
            _ => return None,
        };
        Some((from, to, Edge::new(&label, self.status(), source)))
    }
}

fn glibc(
    h: Head,
    r: &Render<'_>,
    host: &GlibcVersion,
    origin: &str,
    floor: &GlibcVersion,
    manylinux: &Manylinux,
) -> Finding {
    let rel = r.rel;
    let message = if manylinux.glibc() > *host {
        format!(
            "torch {} wheels are {} and need glibc >= {}; the host ({origin}) has {host}",
            rel.version, manylinux, floor
        )
    } else {
        format!(
            "torch {} wheels are tagged {} (glibc {}), so pip installs them, but their libraries need glibc >= {floor} and `import torch` fails; the host ({origin}) has {host}",
            rel.version,
            manylinux,
            manylinux.glibc()
        )
    };
    let mut found = h
        .says(message)
        .fact("glibc", host)
        .fact("needs_glibc", floor)
        .fact("manylinux", manylinux)
        .source(if *manylinux == rel.manylinux {
            glibc_source(rel).or(first_source(&rel.sources))
        } else {
            first_source(&rel.sources)
        });
    if let (Some(_), Some(from), true) = (&rel.glibc, rel.glibc_from, manylinux.glibc() < *floor) {
        found = found.fact("needs_glibc_from", from.as_str());
    }
    found
}

/// The source of a build's platforms: the PyPI files list for PyPI's wheel, else the
/// build's own note on its platforms, else its first source.
fn arch_source<'r>(r: &'r Render<'_>, source: WheelSource) -> Option<&'r str> {
    let find = |list: &'r [crate::db::Source], key: &str| {
        list.iter()
            .find(|s| s.note.as_deref().is_some_and(|n| n.starts_with(key)))
            .map(|s| s.url.as_str())
    };
    match source {
        WheelSource::Pypi => find(&r.rel.sources, "pypi_platforms").or(first_source(&r.rel.sources)),
        _ => find(&r.v.sources, "platforms").or(first_source(&r.v.sources)),
    }
}

/// A CUDA build without a wheel for the host's architecture, naming what pip installs
/// instead and the first build that has one.
fn no_arch_wheel(h: Head, r: &Render<'_>, arch: HostArch, unverified: bool) -> Finding {
    let pypi = if r.v.tag == r.rel.pypi_default {
        format!("pip install torch=={} installs a CPU-only build", r.rel.version)
    } else {
        format!("{} serves no {arch} wheel of it", r.v.index_url)
    };
    let first = match first_cuda_wheel(r.ix.cat.torch(), arch) {
        Some((rel, v)) => format!(
            "; the first with {arch} CUDA wheels is torch {}+{}",
            rel.version, v.tag
        ),
        None => format!("; no torch release here has {arch} CUDA wheels"),
    };
    h.says(format!(
        "torch {} has no CUDA wheel for {arch}: {pypi}{first}",
        r.name
    ))
    .fact("arch", arch)
    .fact("platforms", {
        let p: Vec<&str> = r.v.platforms.iter().map(|a| a.as_str()).collect();
        p.join(", ")
    })
    .source(arch_source(r, WheelSource::Index).or(arch_source(r, WheelSource::Pypi)))
    .unverified(unverified)
}

/// The pending toolkit records of the build's CUDA: only this rare finding looks at the
/// records again, off the usual path.
fn cuda_pending(h: Head, r: &Render<'_>, cuda: &CudaVersion, first: &CudaRelease) -> Finding {
    let pending: Vec<&CudaRelease> =
        r.ix.cat
            .cuda()
            .iter()
            .filter(|c| c.version.major_minor() == cuda.major_minor())
            .collect();
    let mut keys: Vec<&str> = pending
        .iter()
        .flat_map(|c| c.pending.iter().map(String::as_str))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    let files: Vec<String> = pending
        .iter()
        .map(|c| format!("cuda/{}.toml", c.version))
        .collect();
    h.says(format!(
        "CUDA {cuda} of torch {} is not judged: its toolkit record ({}) still has {} pending, so no driver is known to run it",
        r.name,
        files.join(", "),
        keys.join(", ")
    ))
    .fact("cuda", cuda)
    .fact("pending", keys.join(","))
    .source(first_source(&first.sources))
}

fn kernels_finding(h: Head, r: &Render<'_>, gpu: &Gpu, kernels: &Kernels) -> Finding {
    let (name, v) = (r.name, r.v);
    let cc = gpu.compute_capability;
    let found = match kernels {
        Kernels::Sass(s) => h
            .says(if s.plain() == cc.plain() {
                format!("torch {name} ships SASS for {}, the {}", s.sm(), gpu.name)
            } else {
                format!(
                    "torch {name} ships SASS for {}, which runs on the {}",
                    s.sm(),
                    gpu_label(gpu)
                )
            })
            .fact("gpu_arch", cc.sm())
            .fact("sass", s.sm()),
        Kernels::Ptx(p) => h
            .says(format!(
                "torch {name} has no SASS for the {}: the driver JIT-compiles its {} PTX at first use (a slow first start, and kernels tuned for an older GPU)",
                gpu_label(gpu),
                p.compute()
            ))
            .fact("gpu_arch", cc.sm())
            .fact("ptx", p.compute()),
        Kernels::Unknown => h
            .says(format!(
                "the arch list of torch {name} is not known, so kernels for the {} are unconfirmed",
                gpu_label(gpu)
            ))
            .fact("gpu_arch", cc.sm()),
        Kernels::None => h
            .says(format!(
                "torch {name} has no kernels for the {}: it ships SASS for {} and {}",
                gpu_label(gpu),
                arch_range(&v.sass),
                if v.ptx.is_empty() {
                    "no PTX".to_string()
                } else {
                    format!("PTX only for {}", arch_range(&v.ptx))
                }
            ))
            .fact("gpu_arch", cc.sm())
            .fact(
                "sass",
                v.sass.iter().map(|c| c.sm()).collect::<Vec<_>>().join(" "),
            )
            .fact(
                "ptx",
                v.ptx.iter().map(|c| c.compute()).collect::<Vec<_>>().join(" "),
            ),
    };
    let src = v
        .sources
        .first()
        .map(|s| s.url.as_str())
        .or(first_source(&r.rel.sources));
    let arch_unverified = v.unverified.iter().any(|u| u == "sass" || u == "ptx");
    found.source(src).unverified(arch_unverified)
}

fn unsupported_gpu(h: Head, r: &Render<'_>, d: &DriverVersion, branch: &DriverBranch, gpu: &Gpu) -> Finding {
    let need = match r.ix.first_branch(gpu.architecture) {
        Some(b) if b.branch > d.branch() => {
            format!("{} GPUs need R{} or newer", gpu.architecture.title(), b.branch)
        }
        _ => format!(
            "{} GPUs are driven by older branches only",
            gpu.architecture.title()
        ),
    };
    h.says(format!(
        "driver {d} (branch R{}) does not support {} GPUs: CUDA sees no {} at all; {need}",
        d.branch(),
        gpu.architecture.title(),
        gpu.name
    ))
    .fact("driver", d)
    .fact("architecture", gpu.architecture)
    .source(first_source(&branch.sources))
    .unverified(branch.unverified.iter().any(|u| u == "architectures"))
}

fn needs_driver(h: Head, r: &Render<'_>, line: &CudaLine<'_>) -> Finding {
    let needs = r.needs;
    let mut msg = format!(
        "no driver given: torch {} needs driver >= {} for CUDA {}",
        r.name,
        needs.driver_native.as_deref().unwrap_or("?"),
        line.version
    );
    if let Some(floor) = &line.floor {
        msg.push_str(&format!(", or >= {floor} through minor-version compatibility"));
    }
    h.says(msg)
        .fact("driver_native", needs.driver_native.clone().unwrap_or_default())
        .fact(
            "driver_minor_compat",
            needs.driver_minor_compat.clone().unwrap_or_default(),
        )
        .source(first_source(&line.newest.sources))
}

fn driver_label(line: &CudaLine<'_>, outcome: &DriverOutcome<'_>) -> String {
    match outcome {
        DriverOutcome::Native => format!("native >= {}", line.native),
        DriverOutcome::MinorCompat => "minor-version compatibility".to_string(),
        DriverOutcome::FcGpuNotEligible(_) => "forward compat: GPU not eligible".to_string(),
        DriverOutcome::ForwardCompat(_) => "forward compatibility".to_string(),
        DriverOutcome::PtxJitNeedsNewer => "minor-version compat, no PTX JIT".to_string(),
        DriverOutcome::TooOld => format!("needs >= {}", line.native),
    }
}

fn driver_finding(
    h: Head,
    r: &Render<'_>,
    d: &DriverVersion,
    line: &CudaLine<'_>,
    outcome: &DriverOutcome<'_>,
) -> Finding {
    let (q, name, dcuda) = (r.q, r.name, r.dcuda);
    let cuda = &line.version;
    let base = |msg: String| {
        h.says(msg)
            .fact("driver", d)
            .fact("driver_cuda", dcuda)
            .fact("cuda", cuda)
            .fact("native_min", &line.native)
            .fact(
                "family_floor",
                line.floor.as_ref().map_or("none".to_string(), |f| f.to_string()),
            )
            .source(first_source(&line.newest.sources))
    };
    match outcome {
        DriverOutcome::Native => base(format!(
            "driver {d} meets CUDA {cuda}'s minimum {} (native)",
            line.native
        ))
        .unverified(line.unverified_native),
        DriverOutcome::MinorCompat => base(format!(
            "driver {d} (CUDA {dcuda}) is below CUDA {cuda}'s minimum {} but at or above the {}.x floor {}: it runs through minor-version compatibility, without JIT of newer PTX, and APIs newer than CUDA {dcuda} return errors",
            line.native,
            cuda.major(),
            line.floor
                .as_ref()
                .expect("minor-version compatibility has a floor")
        )),
        DriverOutcome::FcGpuNotEligible(branch) => {
            let g = q
                .gpus
                .iter()
                .map(|a| &a.gpu)
                .find(|g| !g.forward_compat)
                .expect("an ineligible GPU");
            let why = if g.segment == Segment::Consumer {
                "GeForce GPUs never are"
            } else {
                "it is not a data-center GPU"
            };
            base(format!(
                "driver {d} is too old for CUDA {cuda}; the cuda-compat package would bridge it on R{}, but the {} is not eligible for forward compatibility ({why}): CUDA fails with error 804",
                branch.branch, g.name
            ))
            .source(first_source(&branch.sources))
        }
        DriverOutcome::ForwardCompat(branch) => {
            let caveat = if q.gpus.is_empty() {
                " (data-center GPUs only; GeForce fails with error 804)"
            } else {
                ""
            };
            let nfb = if branch.branch_type == BranchType::NewFeature {
                " NVIDIA's table lists this new-feature branch although its rules exclude such branches."
            } else {
                ""
            };
            base(format!(
                "driver {d} (CUDA {dcuda}) is too old for CUDA {cuda}, but R{} is a supported host for cuda-compat-{}-{}: it runs with that package in the image{caveat}; a mismatch fails with error 803.{nfb}",
                branch.branch,
                cuda.major(),
                cuda.minor()
            ))
            .source(first_source(&branch.sources))
        }
        DriverOutcome::PtxJitNeedsNewer => base(format!(
            "the GPU needs the build's PTX JIT-compiled, but driver {d} (CUDA {dcuda}) reaches CUDA {cuda} only through minor-version compatibility, which cannot JIT PTX from a newer toolkit; needs >= {}",
            line.native
        )),
        DriverOutcome::TooOld => {
            let floor_text = match &line.floor {
                Some(floor) => format!(
                    ", nor the {}.x floor {} for minor-version compatibility",
                    cuda.major(),
                    floor
                ),
                None => String::new(),
            };
            base(format!(
                "driver {d} (CUDA {dcuda}) is too old for torch {name}: CUDA {cuda} needs >= {} natively{floor_text}, and R{} is not a forward-compatibility host for CUDA {cuda}",
                line.native,
                d.branch()
            ))
        }
    }
}

fn nvcc_finding(h: Head, r: &Render<'_>, o: &Outcome<'_>) -> Finding {
    let name = r.name;
    match o {
        Outcome::NvccMajorMismatch { nvcc, cuda } => h
            .says(format!(
                "nvcc {nvcc} cannot build extensions for torch {name}: its CUDA major must be torch's ({})",
                cuda.major()
            ))
            .fact("nvcc", nvcc)
            .fact("cuda", cuda),
        Outcome::NvccNotExact { nvcc, cuda } => {
            let exact: Vec<String> = r
                .q
                .extensions_from
                .iter()
                .filter(|e| e.assumed && e.nvcc_match == crate::db::NvccMatch::MajorMinor)
                .map(|e| format!("{} ({})", e.package, e.origin))
                .collect();
            h.says(format!(
                "nvcc {nvcc} is not torch {name}'s CUDA {cuda}, and {} refuses any other CUDA version than torch's",
                exact.join(", ")
            ))
            .fact("nvcc", nvcc)
            .fact("cuda", cuda)
        }
        Outcome::NvccMinorMismatch { nvcc, cuda } => h
            .says(format!(
                "nvcc {nvcc} differs from torch {name}'s CUDA {cuda} in the minor version: torch warns, and extensions usually work"
            ))
            .fact("nvcc", nvcc)
            .fact("cuda", cuda),
        Outcome::NvccUnavailable { nvcc } => h.says(format!(
            "no CUDA {nvcc} toolkit is known to build extensions with"
        )),
        Outcome::ExtensionsNvcc { toolkit } => h
            .says(format!(
                "build extensions with nvcc from CUDA {} (a `devel` image: nvidia/cuda:{}-devel-<os>)",
                toolkit.version, toolkit.version
            ))
            .fact("nvcc", &toolkit.version)
            .source(first_source(&toolkit.sources)),
        Outcome::NvccGpu {
            toolkit,
            gpu,
            target: NvccTarget::PtxOnly(p),
        } => h
            .says(format!(
                "nvcc {} cannot compile SASS for the {}: build extensions with PTX for {} (TORCH_CUDA_ARCH_LIST=\"{}+PTX\") and let the driver JIT it",
                toolkit.version,
                gpu_label(gpu),
                p.compute(),
                p
            ))
            .source(first_source(&toolkit.sources)),
        Outcome::NvccGpu { toolkit, gpu, .. } => h
            .says(format!(
                "nvcc {} cannot compile for the {}: its oldest target is {}",
                toolkit.version,
                gpu_label(gpu),
                arch_range(&toolkit.sass)
            ))
            .source(first_source(&toolkit.sources)),
        _ => unreachable!("an nvcc outcome"),
    }
}

fn python_no_wheel(h: Head, r: &Render<'_>, tags: &[TagEntry]) -> Finding {
    let asked: Vec<String> = r.q.python.iter().map(|(s, o)| format!("{s} ({o})")).collect();
    let tag_list: Vec<String> = tags.iter().map(|t| t.tag.to_string()).collect();
    h.says(format!(
        "torch {} ships no wheel for Python {}: its wheels are {} (Requires-Python {} does not decide; the tags do)",
        r.name,
        if asked.is_empty() {
            "as pinned".to_string()
        } else {
            asked.join(", ")
        },
        tag_list.join(" "),
        r.rel.requires_python
    ))
    .fact("wheel_tags", tag_list.join(" "))
    .source(first_source(&r.rel.sources))
}
