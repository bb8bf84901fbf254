//! The rules, applied to every candidate stack, and the search that enumerates them.
//!
//! Pruning: the rules that do not depend on Python (driver, GPU, glibc, extensions) are
//! evaluated once per build and shared by its Pythons.

use super::graph::{Edge, Graph, Node};
use super::index::{CudaLine, Index};
use crate::project::marker_applies;
use std::sync::Arc;

use super::{CudaAsk, Finding, Findings, Needs, Query, Rank, Severity, Stack, Status};
use crate::db::{BranchType, Gpu, Segment, TorchRelease, TorchVariant};
use crate::model::{ArchSuffix, ComputeCapability, CudaVersion, DriverVersion, PythonTag, Variant, Version};

trait FindingExt {
    fn fact(self, k: &'static str, v: impl ToString) -> Self;
    fn source(self, url: Option<&str>) -> Self;
    fn unverified(self, yes: bool) -> Self;
}

impl FindingExt for Finding {
    fn fact(mut self, k: &'static str, v: impl ToString) -> Self {
        self.facts.insert(k.into(), v.to_string());
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

fn first_source(sources: &[crate::db::Source]) -> Option<&str> {
    sources.first().map(|s| s.url.as_str())
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

/// The query's GPU models, each once (eight H100s are judged once).
fn distinct_gpus(q: &Query) -> impl Iterator<Item = &Gpu> {
    q.gpus
        .iter()
        .enumerate()
        .filter(|(i, a)| !q.gpus[..*i].iter().any(|b| b.gpu.id == a.gpu.id))
        .map(|(_, a)| &a.gpu)
}

/// How a build reaches a GPU's architecture.
enum Kernels {
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

fn arch_range(list: &[ComputeCapability]) -> String {
    match (list.iter().min(), list.iter().max()) {
        (Some(a), Some(b)) if a != b => format!("{}..{}", a.sm(), b.sm()),
        (Some(a), _) => a.sm(),
        _ => "none".to_string(),
    }
}

fn gpu_label(gpu: &Gpu) -> String {
    format!("{} ({})", gpu.name, gpu.compute_capability.sm())
}

/// The facts of one build that every Python of it shares.
struct BuildEval {
    findings: Vec<Finding>,
    needs: Needs,
}

fn build_name(rel: &TorchRelease, v: &TorchVariant) -> String {
    format!("{}+{}", rel.version, v.tag)
}

/// Evaluates the Python-independent rules for one build.
fn eval_build(
    ix: &Index<'_>,
    q: &Query,
    rel: &TorchRelease,
    v: &TorchVariant,
    dcuda: Option<&str>,
    mut graph: Option<&mut Graph>,
) -> BuildEval {
    let name = build_name(rel, v);
    let mut f: Vec<Finding> = Vec::new();
    let manylinux = &rel.manylinux;
    let glibc_floor = rel.glibc_floor();
    let mut needs = Needs {
        sass: v.sass.iter().map(|c| c.sm()).collect(),
        ptx: v.ptx.iter().map(|c| c.compute()).collect(),
        glibc: glibc_floor.to_string(),
        ..Needs::default()
    };
    let rel_source = first_source(&rel.sources);
    let arch_unverified = v.unverified.iter().any(|u| u == "sass" || u == "ptx");

    // glibc: the manylinux tag is a floor, and pip refuses wheels above the host's glibc;
    // where the wheels' libraries need more than their tag says (`manylinux1` wheels that
    // need GLIBC_2.17), pip installs them and `import torch` fails.
    if let Some((host, origin)) = &q.glibc {
        if &glibc_floor > host {
            let message = if manylinux.glibc() > *host {
                format!(
                    "torch {} wheels are {} and need glibc >= {}; the host ({origin}) has {host}",
                    rel.version, manylinux, glibc_floor
                )
            } else {
                format!(
                    "torch {} wheels are tagged {} (glibc {}), so pip installs them, but their libraries need glibc >= {glibc_floor} and `import torch` fails; the host ({origin}) has {host}",
                    rel.version,
                    manylinux,
                    manylinux.glibc()
                )
            };
            let mut found = Finding::new("glibc-too-old", Severity::Incompatible, message)
                .fact("glibc", host)
                .fact("needs_glibc", &glibc_floor)
                .fact("manylinux", manylinux)
                .source(glibc_source(rel).or(rel_source));
            if let (Some(_), Some(from)) = (&rel.glibc, rel.glibc_from) {
                found = found.fact("needs_glibc_from", from.as_str());
            }
            f.push(found);
        }
    }

    if v.tag == Variant::Cpu {
        if !q.gpus.is_empty() {
            f.push(Finding::new(
                "cpu-build",
                Severity::Warning,
                format!("torch {name} is a CPU-only build: it installs and runs, but never on the GPU"),
            ));
        }
        return BuildEval { findings: f, needs };
    }

    if let Some(why) = &q.no_cuda_device {
        f.push(
            Finding::new(
                "no-cuda-device",
                Severity::Incompatible,
                format!("torch {name} is a CUDA build, and no GPU is usable here: {why}. A CPU build (--cuda cpu) runs"),
            )
            .fact("machine", why),
        );
        return BuildEval { findings: f, needs };
    }
    let Some(cuda) = v.cuda.clone().or_else(|| v.tag.cuda()) else {
        return BuildEval { findings: f, needs };
    };
    let line = ix.line(&cuda);
    if let Some(g) = graph.as_deref_mut() {
        g.edge(
            Node::Build(name.clone()),
            Node::Cuda(cuda.to_string()),
            Edge::new(
                "built with",
                Status::Compatible,
                v.sources
                    .first()
                    .map(|s| s.url.clone())
                    .or(rel_source.map(str::to_string)),
            ),
        );
        if let Some(d) = &v.cudnn {
            g.edge(
                Node::Build(name.clone()),
                Node::Cudnn(d.to_string()),
                Edge::new("bundles", Status::Compatible, rel_source.map(str::to_string)),
            );
        }
    }
    let Some(line) = line else {
        // A record of the line exists but the index left it out: its facts are pending.
        // Only this rare branch looks at the records again, off the usual path.
        let pending: Vec<&crate::db::CudaRelease> = ix
            .cat
            .cuda()
            .iter()
            .filter(|c| c.version.major_minor() == cuda.major_minor())
            .collect();
        if let Some(first) = pending.first() {
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
            f.push(
                Finding::new(
                    "cuda-facts-pending",
                    Severity::Conditional,
                    format!(
                        "CUDA {cuda} of torch {name} is not judged: its toolkit record ({}) still has {} pending, so no driver is known to run it",
                        files.join(", "),
                        keys.join(", ")
                    ),
                )
                .fact("cuda", &cuda)
                .fact("pending", keys.join(","))
                .source(first_source(&first.sources)),
            );
            return BuildEval { findings: f, needs };
        }
        f.push(
            Finding::new(
                "cuda-unknown",
                Severity::Conditional,
                format!("CUDA {cuda} of torch {name} has no toolkit record: its driver minimum is unknown"),
            )
            .fact("cuda", &cuda),
        );
        return BuildEval { findings: f, needs };
    };
    let cuda_source = first_source(&line.newest.sources);
    needs.driver_native = Some(line.native.to_string());
    needs.driver_minor_compat = line.floor.as_ref().map(|d| d.to_string());
    needs.forward_compat_branches = line.fc_branches.clone();

    // GPUs: kernels in the wheel, and whether the driver drives the architecture.
    let mut needs_ptx_jit = false;
    for gpu in distinct_gpus(q) {
        let cc = gpu.compute_capability;
        let gpu_source = first_source(&gpu.sources);
        let (kernel_finding, edge_status, edge_label) = match kernels_for(v, cc) {
            Kernels::Sass(s) => (
                Finding::new(
                    "gpu-sass",
                    Severity::Info,
                    if s.plain() == cc.plain() {
                        format!("torch {name} ships SASS for {}, the {}", s.sm(), gpu.name)
                    } else {
                        format!(
                            "torch {name} ships SASS for {}, which runs on the {}",
                            s.sm(),
                            gpu_label(gpu)
                        )
                    },
                )
                .fact("gpu_arch", cc.sm())
                .fact("sass", s.sm()),
                Status::Compatible,
                format!("SASS {}", s.sm()),
            ),
            Kernels::Ptx(p) => {
                needs_ptx_jit = true;
                (
                    Finding::new(
                        "gpu-ptx-jit",
                        Severity::Conditional,
                        format!(
                            "torch {name} has no SASS for the {}: the driver JIT-compiles its {} PTX at first use (a slow first start, and kernels tuned for an older GPU)",
                            gpu_label(gpu),
                            p.compute()
                        ),
                    )
                    .fact("gpu_arch", cc.sm())
                    .fact("ptx", p.compute()),
                    Status::Conditional,
                    format!("PTX {}", p.compute()),
                )
            }
            Kernels::Unknown => (
                Finding::new(
                    "gpu-arch-list-unknown",
                    Severity::Conditional,
                    format!(
                        "the arch list of torch {name} is not known, so kernels for the {} are unconfirmed",
                        gpu_label(gpu)
                    ),
                )
                .fact("gpu_arch", cc.sm()),
                Status::Conditional,
                "arch list unknown".to_string(),
            ),
            Kernels::None => (
                Finding::new(
                    "gpu-no-kernels",
                    Severity::Incompatible,
                    format!(
                        "torch {name} has no kernels for the {}: it ships SASS for {} and {}",
                        gpu_label(gpu),
                        arch_range(&v.sass),
                        if v.ptx.is_empty() {
                            "no PTX".to_string()
                        } else {
                            format!("PTX only for {}", arch_range(&v.ptx))
                        }
                    ),
                )
                .fact("gpu_arch", cc.sm())
                .fact(
                    "sass",
                    v.sass.iter().map(|c| c.sm()).collect::<Vec<_>>().join(" "),
                )
                .fact(
                    "ptx",
                    v.ptx.iter().map(|c| c.compute()).collect::<Vec<_>>().join(" "),
                ),
                Status::Incompatible,
                "no kernels".to_string(),
            ),
        };
        let src = v.sources.first().map(|s| s.url.as_str()).or(rel_source);
        f.push(kernel_finding.source(src).unverified(arch_unverified));
        if let Some(g) = graph.as_deref_mut() {
            g.edge(
                Node::Build(name.clone()),
                Node::Gpu(gpu.name.clone()),
                Edge::new(&edge_label, edge_status, src.map(str::to_string)),
            );
        }
        if gpu.host_arch.as_deref().is_some_and(|a| a != "x86_64") {
            f.push(Finding::new(
                "gpu-host-aarch64",
                Severity::Warning,
                format!(
                    "the {} comes with an {} host: install the {} wheels; the arch lists here are those of the x86_64 wheels",
                    gpu.name,
                    gpu.host_arch.as_deref().unwrap_or_default(),
                    gpu.host_arch.as_deref().unwrap_or_default()
                ),
            ).source(gpu_source));
        }
        match &q.driver {
            Some(d) => {
                if let Some((branch, exact)) = ix.branch_of(d) {
                    if !exact {
                        f.push(Finding::new(
                            "driver-branch-unknown",
                            Severity::Warning,
                            format!(
                                "driver branch R{} has no record; R{}'s GPU support was assumed",
                                d.branch(),
                                branch.branch
                            ),
                        ));
                    }
                    let drives = branch.architectures.contains(&gpu.architecture);
                    if let Some(g) = graph.as_deref_mut() {
                        g.edge(
                            Node::Driver(format!("R{}", d.branch())),
                            Node::Gpu(gpu.name.clone()),
                            Edge::new(
                                if drives { "drives" } else { "does not drive" },
                                if drives {
                                    Status::Compatible
                                } else {
                                    Status::Incompatible
                                },
                                first_source(&branch.sources).map(str::to_string),
                            ),
                        );
                    }
                    if !drives {
                        let first = ix.first_branch(gpu.architecture);
                        let need = match first {
                            Some(b) if b.branch > d.branch() => {
                                format!("{} GPUs need R{} or newer", gpu.architecture.title(), b.branch)
                            }
                            _ => format!(
                                "{} GPUs are driven by older branches only",
                                gpu.architecture.title()
                            ),
                        };
                        f.push(
                            Finding::new(
                                "driver-unsupported-gpu",
                                Severity::Incompatible,
                                format!(
                                    "driver {d} (branch R{}) does not support {} GPUs: CUDA sees no {} at all; {need}",
                                    d.branch(),
                                    gpu.architecture.title(),
                                    gpu.name
                                ),
                            )
                            .fact("driver", d)
                            .fact("architecture", gpu.architecture)
                            .source(first_source(&branch.sources))
                            .unverified(branch.unverified.iter().any(|u| u == "architectures")),
                        );
                    }
                }
            }
            None => {
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
    }

    // A branch past its end of life still runs, but gets no fixes, and NVIDIA drops it as a
    // forward-compatibility host.
    if let (Some(d), Some(today)) = (&q.driver, &q.today) {
        if let Some((branch, true)) = ix.branch_of(d) {
            if let Some(eol) = branch.end_of_life.as_ref().filter(|e| *e <= today) {
                f.push(
                    Finding::new(
                        "driver-end-of-life",
                        Severity::Warning,
                        format!(
                            "driver branch R{} reached its end of life in {eol}: no more security or bug fixes; ask for a supported branch",
                            branch.branch
                        ),
                    )
                    .fact("end_of_life", eol)
                    .source(first_source(&branch.sources))
                    .unverified(branch.unverified.iter().any(|u| u == "end_of_life")),
                );
            }
        }
    }

    // The driver against the CUDA of the build.
    match &q.driver {
        None => {
            let mut msg = format!(
                "no driver given: torch {name} needs driver >= {} for CUDA {}",
                needs.driver_native.as_deref().unwrap_or("?"),
                line.version
            );
            if let Some(floor) = &line.floor {
                msg.push_str(&format!(", or >= {floor} through minor-version compatibility"));
            }
            f.push(
                Finding::new("needs-driver", Severity::Info, msg)
                    .fact("driver_native", needs.driver_native.clone().unwrap_or_default())
                    .fact(
                        "driver_minor_compat",
                        needs.driver_minor_compat.clone().unwrap_or_default(),
                    )
                    .source(cuda_source),
            );
        }
        Some(d) => f.extend(driver_rules(
            ix,
            q,
            &name,
            d,
            dcuda.unwrap_or("unknown"),
            line,
            needs_ptx_jit,
            graph,
        )),
    }

    // Extensions: nvcc's major must equal torch's CUDA major, and nvcc must target the GPU.
    if q.extensions || q.nvcc.is_some() {
        f.extend(nvcc_rules(ix, q, &name, &cuda));
    }
    BuildEval { findings: f, needs }
}

/// How a driver runs a CUDA release line: the decision of domain.md's four outcomes.
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

#[allow(clippy::too_many_arguments)]
fn driver_rules(
    ix: &Index<'_>,
    q: &Query,
    name: &str,
    d: &DriverVersion,
    dcuda: &str,
    line: &CudaLine<'_>,
    needs_ptx_jit: bool,
    graph: Option<&mut Graph>,
) -> Vec<Finding> {
    let cuda = &line.version;
    let src = first_source(&line.newest.sources);
    let edge = |g: Option<&mut Graph>, label: &str, st: Status| {
        if let Some(g) = g {
            g.edge(
                Node::Cuda(cuda.to_string()),
                Node::Driver(format!("R{}", d.branch())),
                Edge::new(label, st, src.map(str::to_string)),
            );
        }
    };
    let base = |code, sev, msg: String| {
        Finding::new(code, sev, msg)
            .fact("driver", d)
            .fact("driver_cuda", dcuda)
            .fact("cuda", cuda)
            .fact("native_min", &line.native)
            .fact(
                "family_floor",
                line.floor.as_ref().map_or("none".to_string(), |f| f.to_string()),
            )
            .source(src)
    };
    let eligible = q.gpus.iter().all(|a| a.gpu.forward_compat);
    let (f, label, status) = match driver_outcome(d, line, needs_ptx_jit, ix.branch_of(d), eligible) {
        DriverOutcome::Native => (
            base(
                "driver-native",
                Severity::Info,
                format!("driver {d} meets CUDA {cuda}'s minimum {} (native)", line.native),
            )
            .unverified(line.unverified_native),
            format!("native >= {}", line.native),
            Status::Compatible,
        ),
        DriverOutcome::MinorCompat => (
            base(
                "driver-minor-version-compat",
                Severity::Conditional,
                format!(
                    "driver {d} (CUDA {dcuda}) is below CUDA {cuda}'s minimum {} but at or above the {}.x floor {}: it runs through minor-version compatibility, without JIT of newer PTX, and APIs newer than CUDA {dcuda} return errors",
                    line.native,
                    cuda.major(),
                    line.floor
                        .as_ref()
                        .expect("minor-version compatibility has a floor")
                ),
            ),
            "minor-version compatibility".to_string(),
            Status::Conditional,
        ),
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
            (
                base(
                    "forward-compat-gpu-not-eligible",
                    Severity::Incompatible,
                    format!(
                        "driver {d} is too old for CUDA {cuda}; the cuda-compat package would bridge it on R{}, but the {} is not eligible for forward compatibility ({why}): CUDA fails with error 804",
                        branch.branch, g.name
                    ),
                )
                .source(first_source(&branch.sources)),
                "forward compat: GPU not eligible".to_string(),
                Status::Incompatible,
            )
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
            (
                base(
                    "driver-forward-compat",
                    Severity::Conditional,
                    format!(
                        "driver {d} (CUDA {dcuda}) is too old for CUDA {cuda}, but R{} is a supported host for cuda-compat-{}-{}: it runs with that package in the image{caveat}; a mismatch fails with error 803.{nfb}",
                        branch.branch,
                        cuda.major(),
                        cuda.minor()
                    ),
                )
                .source(first_source(&branch.sources)),
                "forward compatibility".to_string(),
                Status::Conditional,
            )
        }
        DriverOutcome::PtxJitNeedsNewer => (
            base(
                "ptx-jit-needs-newer-driver",
                Severity::Incompatible,
                format!(
                    "the GPU needs the build's PTX JIT-compiled, but driver {d} (CUDA {dcuda}) reaches CUDA {cuda} only through minor-version compatibility, which cannot JIT PTX from a newer toolkit; needs >= {}",
                    line.native
                ),
            ),
            "minor-version compat, no PTX JIT".to_string(),
            Status::Incompatible,
        ),
        DriverOutcome::TooOld => {
            let floor_text = match &line.floor {
                Some(floor) => format!(
                    ", nor the {}.x floor {} for minor-version compatibility",
                    cuda.major(),
                    floor
                ),
                None => String::new(),
            };
            (
                base(
                    "driver-too-old",
                    Severity::Incompatible,
                    format!(
                        "driver {d} (CUDA {dcuda}) is too old for torch {name}: CUDA {cuda} needs >= {} natively{floor_text}, and R{} is not a forward-compatibility host for CUDA {cuda}",
                        line.native,
                        d.branch()
                    ),
                ),
                format!("needs >= {}", line.native),
                Status::Incompatible,
            )
        }
    };
    edge(graph, &label, status);
    vec![f]
}

/// What nvcc of a toolkit can build for a GPU.
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

fn nvcc_rules(ix: &Index<'_>, q: &Query, name: &str, cuda: &CudaVersion) -> Vec<Finding> {
    let mut out = Vec::new();
    let nvcc = q.nvcc.clone().unwrap_or_else(|| cuda.clone());
    if nvcc.major() != cuda.major() {
        out.push(
            Finding::new(
                "nvcc-major-mismatch",
                Severity::Incompatible,
                format!("nvcc {nvcc} cannot build extensions for torch {name}: its CUDA major must be torch's ({})", cuda.major()),
            )
            .fact("nvcc", &nvcc)
            .fact("cuda", cuda),
        );
        return out;
    }
    let exact: Vec<String> = q
        .extensions_from
        .iter()
        .filter(|e| e.assumed && e.nvcc_match == crate::db::NvccMatch::MajorMinor)
        .map(|e| format!("{} ({})", e.package, e.origin))
        .collect();
    if nvcc.minor() != cuda.minor() && !exact.is_empty() {
        out.push(
            Finding::new(
                "extension-nvcc-not-exact",
                Severity::Incompatible,
                format!(
                    "nvcc {nvcc} is not torch {name}'s CUDA {cuda}, and {} refuses any other CUDA version than torch's",
                    exact.join(", ")
                ),
            )
            .fact("nvcc", &nvcc)
            .fact("cuda", cuda),
        );
        return out;
    }
    if nvcc.minor() != cuda.minor() {
        out.push(
            Finding::new(
                "nvcc-minor-mismatch",
                Severity::Warning,
                format!("nvcc {nvcc} differs from torch {name}'s CUDA {cuda} in the minor version: torch warns, and extensions usually work"),
            )
            .fact("nvcc", &nvcc)
            .fact("cuda", cuda),
        );
    }
    let Some(line) = ix.line(&nvcc) else {
        out.push(Finding::new(
            "nvcc-unavailable",
            Severity::Incompatible,
            format!("no CUDA {nvcc} toolkit is known to build extensions with"),
        ));
        return out;
    };
    let toolkit = line.newest;
    if q.nvcc.is_none() {
        out.push(
            Finding::new(
                "extensions-nvcc",
                Severity::Info,
                format!(
                    "build extensions with nvcc from CUDA {} (a `devel` image: nvidia/cuda:{}-devel-<os>)",
                    toolkit.version, toolkit.version
                ),
            )
            .fact("nvcc", &toolkit.version)
            .source(first_source(&toolkit.sources)),
        );
    }
    for gpu in distinct_gpus(q) {
        match nvcc_targets(toolkit, gpu.compute_capability) {
            NvccTarget::Sass => {}
            NvccTarget::PtxOnly(p) => out.push(
                Finding::new(
                    "nvcc-ptx-only",
                    Severity::Conditional,
                    format!(
                        "nvcc {} cannot compile SASS for the {}: build extensions with PTX for {} (TORCH_CUDA_ARCH_LIST=\"{}+PTX\") and let the driver JIT it",
                        toolkit.version,
                        gpu_label(gpu),
                        p.compute(),
                        p
                    ),
                )
                .source(first_source(&toolkit.sources)),
            ),
            NvccTarget::None => out.push(
                Finding::new(
                    "nvcc-no-gpu-arch",
                    Severity::Incompatible,
                    format!(
                        "nvcc {} cannot compile for the {}: its oldest target is {}",
                        toolkit.version,
                        gpu_label(gpu),
                        arch_range(&toolkit.sass)
                    ),
                )
                .source(first_source(&toolkit.sources)),
            ),
        }
    }
    out
}

fn install_line(rel: &TorchRelease, v: &TorchVariant, python: &str) -> String {
    let mut pkgs = vec![format!("torch=={}", rel.version)];
    if let Some(tv) = &rel.torchvision {
        pkgs.push(format!("torchvision=={tv}"));
    }
    if let Some(ta) = &rel.torchaudio {
        pkgs.push(format!("torchaudio=={ta}"));
    }
    let index = if v.tag == rel.pypi_default {
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

/// The verdict of one build for a query, without findings: the same decisions as
/// [`eval_build`], for the full matrix where millions of verdicts are asked for.
fn fast_status(ix: &Index<'_>, q: &Query, ctx: &DriverCtx<'_>, b: &BuildEntry<'_>) -> Status {
    let v = b.v;
    let mut worst = Status::Compatible;
    if let Some((host, _)) = &q.glibc {
        if b.rel.glibc_floor() > *host {
            return Status::Incompatible;
        }
    }
    if v.tag == Variant::Cpu {
        return worst;
    }
    if q.no_cuda_device.is_some() {
        return Status::Incompatible;
    }
    let Some(line) = v.cuda.as_ref().and_then(|c| ix.line(c)) else {
        return Status::Conditional;
    };
    let mut needs_ptx_jit = false;
    for ask in &q.gpus {
        let cc = ask.gpu.compute_capability;
        match kernels_for(v, cc) {
            Kernels::Sass(_) => {}
            Kernels::Ptx(_) => {
                needs_ptx_jit = true;
                worst = worst.max(Status::Conditional);
            }
            Kernels::Unknown => worst = worst.max(Status::Conditional),
            Kernels::None => return Status::Incompatible,
        }
        if let Some((branch, _)) = ctx.branch {
            if !branch.architectures.contains(&ask.gpu.architecture) {
                return Status::Incompatible;
            }
        }
    }
    if let Some(d) = &q.driver {
        let eligible = q.gpus.iter().all(|a| a.gpu.forward_compat);
        worst = worst.max(
            match driver_outcome(d, line, needs_ptx_jit, ctx.branch, eligible) {
                DriverOutcome::Native => Status::Compatible,
                DriverOutcome::MinorCompat | DriverOutcome::ForwardCompat(_) => Status::Conditional,
                _ => Status::Incompatible,
            },
        );
    }
    if q.extensions || q.nvcc.is_some() {
        let cuda = line.version.clone();
        let nvcc = q.nvcc.clone().unwrap_or_else(|| cuda.clone());
        if nvcc.major() != cuda.major() {
            return Status::Incompatible;
        }
        let exact = q
            .extensions_from
            .iter()
            .any(|e| e.assumed && e.nvcc_match == crate::db::NvccMatch::MajorMinor);
        if exact && nvcc.minor() != cuda.minor() {
            return Status::Incompatible;
        }
        let Some(tl) = ix.line(&nvcc) else {
            return Status::Incompatible;
        };
        for ask in &q.gpus {
            match nvcc_targets(tl.newest, ask.gpu.compute_capability) {
                NvccTarget::Sass => {}
                NvccTarget::PtxOnly(_) => worst = worst.max(Status::Conditional),
                NvccTarget::None => return Status::Incompatible,
            }
        }
    }
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
        let status = if pythons == 0 {
            Status::Incompatible
        } else {
            fast_status(ix, q, &ctx, b)
        };
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
    for b in ix.builds() {
        let (rel, v) = (b.rel, b.v);
        let Some(mask) = allowed(q, b) else { continue };
        let name = build_name(rel, v);
        let eval = eval_build(ix, q, rel, v, dcuda.as_deref(), graph.as_deref_mut());
        let mut shared = eval.findings;
        shared.sort_by_key(|f| std::cmp::Reverse(f.severity));
        let shared: Arc<[Finding]> = shared.into();
        let needs = Arc::new(eval.needs);
        let torch: Arc<str> = rel.version.to_string().into();
        let cuda: Option<Arc<str>> = v.cuda.as_ref().map(|c| c.to_string().into());
        let cudnn: Option<Arc<str>> = v.cudnn.as_ref().map(|c| c.to_string().into());
        let nccl: Option<Arc<str>> = v.nccl.as_ref().map(|c| c.to_string().into());
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
            let asked: Vec<String> = q.python.iter().map(|(s, o)| format!("{s} ({o})")).collect();
            let tag_list: Vec<String> = b.tags.iter().map(|t| t.tag.to_string()).collect();
            let own = vec![
                Finding::new(
                    "python-no-wheel",
                    Severity::Incompatible,
                    format!(
                        "torch {name} ships no wheel for Python {}: its wheels are {} (Requires-Python {} does not decide; the tags do)",
                        if asked.is_empty() { "as pinned".to_string() } else { asked.join(", ") },
                        tag_list.join(" "),
                        rel.requires_python
                    ),
                )
                .fact("wheel_tags", tag_list.join(" "))
                .source(first_source(&rel.sources)),
            ];
            let python = q.python.first().map_or("-".to_string(), |(s, _)| s.to_string());
            if let Some(g) = graph.as_deref_mut() {
                g.edge(
                    Node::Build(name.clone()),
                    Node::Python(python.clone()),
                    Edge::new("no wheel", Status::Incompatible, None),
                );
            }
            stacks.push(mk(python, own, (0, 0, 0), String::new()));
            continue;
        }
        for (i, t) in b.tags.iter().enumerate() {
            if i >= 64 || mask & (1 << i) == 0 {
                continue;
            }
            let mut own = vec![
                Finding::new(
                    "python-wheel",
                    Severity::Info,
                    format!("torch {name} has a {} wheel", t.tag),
                )
                .fact("python", &t.py),
            ];
            if let (Some(today), Some(p)) = (
                &q.today,
                ix.cat
                    .python()
                    .iter()
                    .find(|p| p.version.release() == [u64::from(t.tag.major), u64::from(t.tag.minor)]),
            ) {
                if p.end_of_life <= *today {
                    own.push(
                        Finding::new(
                            "python-end-of-life",
                            Severity::Warning,
                            format!("Python {} reached its end of life on {}", t.py, p.end_of_life),
                        )
                        .fact("end_of_life", p.end_of_life)
                        .source(first_source(&p.sources)),
                    );
                }
            }
            if let Some(g) = graph.as_deref_mut() {
                g.edge(
                    Node::Build(name.clone()),
                    Node::Python(t.py.clone()),
                    Edge::new(
                        &format!("{} wheel", t.tag),
                        Status::Compatible,
                        first_source(&rel.sources).map(str::to_string),
                    ),
                );
            }
            let install = install_line(rel, v, &t.py);
            let class = python_class(ix, q, b, t);
            stacks.push(mk(t.py.clone(), own, (class, t.tag.major, t.tag.minor), install));
        }
    }
    // No build matching: an empty list, which `resolve` answers with why and what exists.
    stacks.sort_by(|a, b| a.rank.cmp(&b.rank));
    stacks
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
    let mut out =
        vec![Finding::new("no-matching-build", Severity::Incompatible, msg).fact("asked", parts.join("; "))];

    if let Some((CudaAsk::Spec(spec), origin)) = &q.cuda {
        let mut existing: Vec<CudaVersion> = pinned
            .iter()
            .flat_map(|r| r.variants.iter().filter_map(|v| v.tag.cuda()))
            .collect();
        existing.sort();
        existing.dedup();
        let in_spec = |c: &CudaVersion| c.to_string().parse::<Version>().is_ok_and(|v| spec.contains(&v));
        if !pinned.is_empty() && !existing.iter().any(in_spec) {
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
            out.push(
                Finding::new("cuda-no-build", Severity::Incompatible, msg)
                    .fact("cuda", spec)
                    .fact("builds", list.join(" ")),
            );
        }
    }
    out
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
                        "torch-release-unknown",
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
                    "db-may-be-stale",
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
