//! The rules, applied to every candidate stack, and the search that enumerates them.
//!
//! Pruning: the rules that do not depend on Python (driver, GPU, glibc, extensions) are
//! evaluated once per build and shared by its Pythons.

use std::collections::BTreeMap;

use super::graph::{Edge, Graph, Node};
use super::input::marker_applies;
use super::{Catalog, CudaAsk, Finding, Needs, Query, QueryError, Rank, Severity, Stack, Status};
use crate::db::{BranchType, CudaRelease, DriverBranch, Gpu, Segment, TorchRelease, TorchVariant};
use crate::model::{ArchSuffix, ComputeCapability, CudaVersion, DriverVersion, PythonTag, Variant, Version};

/// A finding under construction.
fn finding(code: &'static str, severity: Severity, message: String) -> Finding {
    debug_assert!(super::codes::is_known(code), "unregistered finding code {code}");
    Finding {
        code,
        severity,
        message,
        facts: BTreeMap::new(),
        source: None,
        unverified: false,
    }
}

trait FindingExt {
    fn fact(self, k: &'static str, v: impl ToString) -> Self;
    fn source(self, url: Option<&str>) -> Self;
    fn unverified(self, yes: bool) -> Self;
}

impl FindingExt for Finding {
    fn fact(mut self, k: &'static str, v: impl ToString) -> Self {
        self.facts.insert(k, v.to_string());
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

/// The CUDA thresholds of one minor release line, from the toolkit records.
pub(crate) struct CudaLine<'a> {
    pub version: CudaVersion,
    /// Native minimum: the lowest of the line's rows (its GA); updates do not raise the bar
    /// for applications built against the line.
    pub native: DriverVersion,
    /// The family's minor-version compatibility floor, where the line has one.
    pub floor: Option<DriverVersion>,
    /// The newest toolkit of the line (for nvcc).
    pub newest: &'a CudaRelease,
    pub unverified_native: bool,
}

pub(crate) fn cuda_line<'a>(cat: &'a dyn Catalog, v: &CudaVersion) -> Option<CudaLine<'a>> {
    let rows: Vec<&CudaRelease> = cat
        .cuda()
        .iter()
        .filter(|c| c.version.major_minor() == v.major_minor())
        .collect();
    let ga = rows
        .iter()
        .min_by(|a, b| a.min_driver_linux.cmp(&b.min_driver_linux))?;
    let newest = rows.iter().max_by(|a, b| a.version.cmp(&b.version))?;
    let (major, minor) = v.major_minor();
    // Minor-version compatibility exists from CUDA 11.1 on.
    let mvc = major > 11 || (major == 11 && minor >= 1);
    Some(CudaLine {
        version: CudaVersion::from_major_minor(major, minor),
        native: ga.min_driver_linux.clone(),
        floor: if mvc { ga.family_min_driver.clone() } else { None },
        newest,
        unverified_native: ga.unverified.iter().any(|u| u == "min_driver_linux"),
    })
}

/// The CUDA version a driver reports (`cuDriverGetVersion`): the newest line whose native
/// minimum it meets.
pub(crate) fn driver_cuda(cat: &dyn Catalog, d: &DriverVersion) -> Option<CudaVersion> {
    let mut best: Option<CudaVersion> = None;
    for c in cat.cuda() {
        let line = CudaVersion::from_major_minor(c.version.major(), c.version.minor());
        if &c.min_driver_linux <= d && best.as_ref().is_none_or(|b| line > *b) {
            // Only GA rows count: an update's higher minimum does not lower the line.
            if let Some(l) = cuda_line(cat, &line) {
                if &l.native <= d {
                    best = Some(line);
                }
            }
        }
    }
    best
}

/// The branch record of a driver, or the nearest older one (flagged as assumed).
pub(crate) fn branch_of<'a>(cat: &'a dyn Catalog, d: &DriverVersion) -> Option<(&'a DriverBranch, bool)> {
    let b = d.branch();
    if let Some(exact) = cat.drivers().iter().find(|r| r.branch == b) {
        return Some((exact, true));
    }
    cat.drivers()
        .iter()
        .filter(|r| r.branch < b)
        .max_by_key(|r| r.branch)
        .map(|r| (r, false))
}

/// The first driver branch that drives a GPU's architecture, with its first release.
fn first_branch_for<'a>(cat: &'a dyn Catalog, gpu: &Gpu) -> Option<&'a DriverBranch> {
    cat.drivers()
        .iter()
        .filter(|r| r.architectures.contains(&gpu.architecture))
        .min_by_key(|r| r.branch)
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
    cat: &dyn Catalog,
    q: &Query,
    rel: &TorchRelease,
    v: &TorchVariant,
    mut graph: Option<&mut Graph>,
) -> BuildEval {
    let name = build_name(rel, v);
    let mut f: Vec<Finding> = Vec::new();
    let manylinux = &rel.manylinux;
    let mut needs = Needs {
        sass: v.sass.iter().map(|c| c.sm()).collect(),
        ptx: v.ptx.iter().map(|c| c.compute()).collect(),
        glibc: manylinux.glibc().to_string(),
        ..Needs::default()
    };
    let rel_source = first_source(&rel.sources);
    let arch_unverified = v.unverified.iter().any(|u| u == "sass" || u == "ptx");

    // glibc: the manylinux tag is a floor, and pip refuses wheels above the host's glibc.
    if let Some((host, origin)) = &q.glibc {
        if &manylinux.glibc() > host {
            f.push(
                finding(
                    "glibc-too-old",
                    Severity::Incompatible,
                    format!(
                        "torch {} wheels are {} and need glibc >= {}; the host ({origin}) has {host}",
                        rel.version,
                        manylinux,
                        manylinux.glibc()
                    ),
                )
                .fact("glibc", host)
                .fact("needs_glibc", manylinux.glibc())
                .fact("manylinux", manylinux)
                .source(rel_source),
            );
        }
    }

    if v.tag == Variant::Cpu {
        if !q.gpus.is_empty() {
            f.push(finding(
                "cpu-build",
                Severity::Warning,
                format!("torch {name} is a CPU-only build: it installs and runs, but never on the GPU"),
            ));
        }
        return BuildEval { findings: f, needs };
    }

    let cuda = v
        .cuda
        .clone()
        .or_else(|| v.tag.cuda())
        .expect("a CUDA variant has a CUDA version");
    let line = cuda_line(cat, &cuda);
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
        f.push(
            finding(
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
    needs.forward_compat_branches = cat
        .drivers()
        .iter()
        .filter(|d| {
            d.forward_compat
                .iter()
                .any(|c| c.major_minor() == cuda.major_minor())
        })
        .map(|d| format!("R{}", d.branch))
        .collect();

    // GPUs: kernels in the wheel, and whether the driver drives the architecture.
    let mut needs_ptx_jit = false;
    let mut seen: Vec<&str> = Vec::new();
    for ask in &q.gpus {
        let gpu = &ask.gpu;
        if seen.contains(&gpu.id.as_str()) {
            continue;
        }
        seen.push(&gpu.id);
        let cc = gpu.compute_capability;
        let gpu_source = first_source(&gpu.sources);
        let (kernel_finding, edge_status, edge_label) = match kernels_for(v, cc) {
            Kernels::Sass(s) => (
                finding(
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
                    finding(
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
                finding(
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
                finding(
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
            f.push(finding(
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
                if let Some((branch, exact)) = branch_of(cat, d) {
                    if !exact {
                        f.push(finding(
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
                        let first = first_branch_for(cat, gpu);
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
                            finding(
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
                if let Some(b) = first_branch_for(cat, gpu) {
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
                finding("needs-driver", Severity::Info, msg)
                    .fact("driver_native", needs.driver_native.clone().unwrap_or_default())
                    .fact(
                        "driver_minor_compat",
                        needs.driver_minor_compat.clone().unwrap_or_default(),
                    )
                    .source(cuda_source),
            );
        }
        Some(d) => f.extend(driver_rules(cat, q, &name, d, &line, needs_ptx_jit, graph)),
    }

    // Extensions: nvcc's major must equal torch's CUDA major, and nvcc must target the GPU.
    if q.extensions || q.nvcc.is_some() {
        f.extend(nvcc_rules(cat, q, &name, &cuda));
    }
    BuildEval { findings: f, needs }
}

fn driver_rules(
    cat: &dyn Catalog,
    q: &Query,
    name: &str,
    d: &DriverVersion,
    line: &CudaLine<'_>,
    needs_ptx_jit: bool,
    graph: Option<&mut Graph>,
) -> Vec<Finding> {
    let cuda = &line.version;
    let src = first_source(&line.newest.sources);
    let dcuda = driver_cuda(cat, d).map_or("unknown".to_string(), |c| c.to_string());
    let mut out = Vec::new();
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
        finding(code, sev, msg)
            .fact("driver", d)
            .fact("driver_cuda", &dcuda)
            .fact("cuda", cuda)
            .fact("native_min", &line.native)
            .fact(
                "family_floor",
                line.floor.as_ref().map_or("none".to_string(), |f| f.to_string()),
            )
            .source(src)
    };
    if d >= &line.native {
        out.push(
            base(
                "driver-native",
                Severity::Info,
                format!("driver {d} meets CUDA {cuda}'s minimum {} (native)", line.native),
            )
            .unverified(line.unverified_native),
        );
        edge(graph, &format!("native >= {}", line.native), Status::Compatible);
        return out;
    }
    let mvc = line.floor.as_ref().is_some_and(|floor| d >= floor);
    if mvc && !needs_ptx_jit {
        out.push(base(
            "driver-minor-version-compat",
            Severity::Conditional,
            format!(
                "driver {d} (CUDA {dcuda}) is below CUDA {cuda}'s minimum {} but at or above the {}.x floor {}: it runs through minor-version compatibility, without JIT of newer PTX, and APIs newer than CUDA {dcuda} return errors",
                line.native,
                cuda.major(),
                line.floor.as_ref().expect("mvc has a floor")
            ),
        ));
        edge(graph, "minor-version compatibility", Status::Conditional);
        return out;
    }
    // Forward compatibility: the image's cuda-compat package on an eligible host branch and GPU.
    let fc_branch = branch_of(cat, d).filter(|(b, exact)| {
        *exact
            && b.forward_compat
                .iter()
                .any(|c| c.major_minor() == cuda.major_minor())
    });
    if let Some((branch, _)) = fc_branch {
        let fc_src = first_source(&branch.sources);
        let ineligible: Vec<&Gpu> = q
            .gpus
            .iter()
            .map(|a| &a.gpu)
            .filter(|g| !g.forward_compat)
            .collect();
        if let Some(g) = ineligible.first() {
            let why = if g.segment == Segment::Consumer {
                "GeForce GPUs never are"
            } else {
                "it is not a data-center GPU"
            };
            out.push(
                base(
                    "forward-compat-gpu-not-eligible",
                    Severity::Incompatible,
                    format!(
                        "driver {d} is too old for CUDA {cuda}; the cuda-compat package would bridge it on R{}, but the {} is not eligible for forward compatibility ({why}): CUDA fails with error 804",
                        branch.branch,
                        g.name
                    ),
                )
                .source(fc_src),
            );
            edge(graph, "forward compat: GPU not eligible", Status::Incompatible);
            return out;
        }
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
        out.push(
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
            .source(fc_src),
        );
        edge(graph, "forward compatibility", Status::Conditional);
        return out;
    }
    if mvc && needs_ptx_jit {
        out.push(base(
            "ptx-jit-needs-newer-driver",
            Severity::Incompatible,
            format!(
                "the GPU needs the build's PTX JIT-compiled, but driver {d} (CUDA {dcuda}) reaches CUDA {cuda} only through minor-version compatibility, which cannot JIT PTX from a newer toolkit; needs >= {}",
                line.native
            ),
        ));
        edge(graph, "minor-version compat, no PTX JIT", Status::Incompatible);
        return out;
    }
    let floor_text = match &line.floor {
        Some(floor) => format!(
            ", nor the {}.x floor {} for minor-version compatibility",
            cuda.major(),
            floor
        ),
        None => String::new(),
    };
    out.push(base(
        "driver-too-old",
        Severity::Incompatible,
        format!(
            "driver {d} (CUDA {dcuda}) is too old for torch {name}: CUDA {cuda} needs >= {} natively{floor_text}, and R{} is not a forward-compatibility host for CUDA {cuda}",
            line.native,
            d.branch()
        ),
    ));
    edge(graph, &format!("needs >= {}", line.native), Status::Incompatible);
    out
}

fn nvcc_rules(cat: &dyn Catalog, q: &Query, name: &str, cuda: &CudaVersion) -> Vec<Finding> {
    let mut out = Vec::new();
    let nvcc = q.nvcc.clone().unwrap_or_else(|| cuda.clone());
    if nvcc.major() != cuda.major() {
        out.push(
            finding(
                "nvcc-major-mismatch",
                Severity::Incompatible,
                format!("nvcc {nvcc} cannot build extensions for torch {name}: its CUDA major must be torch's ({})", cuda.major()),
            )
            .fact("nvcc", &nvcc)
            .fact("cuda", cuda),
        );
        return out;
    }
    if nvcc.minor() != cuda.minor() {
        out.push(
            finding(
                "nvcc-minor-mismatch",
                Severity::Warning,
                format!("nvcc {nvcc} differs from torch {name}'s CUDA {cuda} in the minor version: torch warns, and extensions usually work"),
            )
            .fact("nvcc", &nvcc)
            .fact("cuda", cuda),
        );
    }
    let Some(line) = cuda_line(cat, &nvcc) else {
        out.push(finding(
            "nvcc-unavailable",
            Severity::Incompatible,
            format!("no CUDA {nvcc} toolkit is known to build extensions with"),
        ));
        return out;
    };
    let toolkit = line.newest;
    if q.nvcc.is_none() {
        out.push(
            finding(
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
    let mut seen: Vec<&str> = Vec::new();
    for ask in &q.gpus {
        let gpu = &ask.gpu;
        if seen.contains(&gpu.id.as_str()) {
            continue;
        }
        seen.push(&gpu.id);
        let cc = gpu.compute_capability;
        let sass = toolkit
            .sass
            .iter()
            .any(|s| s.suffix == ArchSuffix::None && s.major == cc.major && s.minor <= cc.minor);
        if sass {
            continue;
        }
        let older = toolkit
            .sass
            .iter()
            .filter(|s| s.suffix == ArchSuffix::None && (s.major, s.minor) < (cc.major, cc.minor))
            .max();
        match older {
            Some(p) => out.push(
                finding(
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
            None => out.push(
                finding(
                    "nvcc-no-gpu-arch",
                    Severity::Incompatible,
                    format!("nvcc {} cannot compile for the {}: its oldest target is {}", toolkit.version, gpu_label(gpu), arch_range(&toolkit.sass)),
                )
                .source(first_source(&toolkit.sources)),
            ),
        }
    }
    out
}

fn status_of(findings: &[Finding]) -> Status {
    match findings.iter().map(|f| f.severity).max() {
        Some(Severity::Incompatible) => Status::Incompatible,
        Some(Severity::Conditional) => Status::Conditional,
        _ => Status::Compatible,
    }
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

fn python_version(tag: &PythonTag) -> Version {
    tag.version().parse().expect("a CPython tag is a version")
}

/// The version a build installs as, for matching pins with local segments.
fn build_version(rel: &TorchRelease, v: &TorchVariant) -> Version {
    format!("{}+{}", rel.version, v.tag)
        .parse()
        .expect("a release with a local tag is a version")
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

/// Enumerates and evaluates every candidate stack, best first.
pub(crate) fn search(
    cat: &dyn Catalog,
    q: &Query,
    mut graph: Option<&mut Graph>,
) -> Result<Vec<Stack>, QueryError> {
    let mut stacks = Vec::new();
    let mut builds_matching_pins = 0usize;
    for rel in cat.torch().iter().rev() {
        let companions_ok = |pins: &[super::Pin], v: &Option<Version>, py: &str| {
            pins.iter()
                .filter(|p| marker_applies(p.marker.as_ref(), py))
                .all(|p| v.as_ref().is_some_and(|cv| p.specifiers.contains(cv)))
        };
        for v in &rel.variants {
            if !variant_wanted(q, v) {
                continue;
            }
            let bv = build_version(rel, v);
            // Pins without markers decide the build; marked ones are checked per Python.
            let unmarked_ok = q
                .torch
                .iter()
                .filter(|p| p.marker.is_none())
                .all(|p| p.specifiers.contains(&bv) || p.specifiers.contains(&rel.version));
            if !unmarked_ok {
                continue;
            }
            let tags: Vec<PythonTag> = v
                .python
                .clone()
                .unwrap_or_else(|| rel.python.clone())
                .into_iter()
                .filter(|t| !t.free_threaded)
                .collect();
            let candidates: Vec<&PythonTag> = tags
                .iter()
                .filter(|t| {
                    let py = t.version();
                    let pv = python_version(t);
                    q.python.iter().all(|(s, _)| s.contains(&pv))
                        && (pins_hold(&q.torch, &bv, &py) || pins_hold(&q.torch, &rel.version, &py))
                        && companions_ok(&q.torchvision, &rel.torchvision, &py)
                        && companions_ok(&q.torchaudio, &rel.torchaudio, &py)
                })
                .collect();
            let companions_any = tags.iter().any(|t| {
                let py = t.version();
                companions_ok(&q.torchvision, &rel.torchvision, &py)
                    && companions_ok(&q.torchaudio, &rel.torchaudio, &py)
            });
            if !companions_any {
                continue;
            }
            builds_matching_pins += 1;
            let name = build_name(rel, v);
            let eval = eval_build(cat, q, rel, v, graph.as_deref_mut());
            let rank_base = |status: Status, failures: usize, py: (u8, u8)| Rank {
                status: status as u8,
                failures,
                torch: std::cmp::Reverse(rel.version.clone()),
                variant_distance: variant_distance(q, rel, v),
                python: std::cmp::Reverse(py),
            };
            let mk = |python: String, mut findings: Vec<Finding>, py: (u8, u8), install: String| {
                let status = status_of(&findings);
                let failures = findings
                    .iter()
                    .filter(|f| f.severity == Severity::Incompatible)
                    .count();
                findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
                Stack {
                    torch: rel.version.to_string(),
                    variant: v.tag,
                    python,
                    cuda: v.cuda.as_ref().map(|c| c.to_string()),
                    cudnn: v.cudnn.as_ref().map(|c| c.to_string()),
                    nccl: v.nccl.as_ref().map(|c| c.to_string()),
                    status,
                    findings,
                    needs: eval.needs.clone(),
                    install,
                    rank: rank_base(status, failures, py),
                }
            };
            if candidates.is_empty() {
                let asked: Vec<String> = q.python.iter().map(|(s, o)| format!("{s} ({o})")).collect();
                let tag_list: Vec<String> = tags.iter().map(|t| t.to_string()).collect();
                let mut findings = eval.findings.clone();
                findings.push(
                    finding(
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
                );
                let python = q.python.first().map_or("-".to_string(), |(s, _)| s.to_string());
                if let Some(g) = graph.as_deref_mut() {
                    g.edge(
                        Node::Build(name.clone()),
                        Node::Python(python.clone()),
                        Edge::new("no wheel", Status::Incompatible, None),
                    );
                }
                stacks.push(mk(python, findings, (0, 0), String::new()));
                continue;
            }
            for t in candidates {
                let py = t.version();
                let mut findings = eval.findings.clone();
                findings.push(
                    finding(
                        "python-wheel",
                        Severity::Info,
                        format!("torch {name} has a {t} wheel"),
                    )
                    .fact("python", &py),
                );
                if let (Some(today), Some(p)) = (
                    &q.today,
                    cat.python()
                        .iter()
                        .find(|p| p.version.release() == [u64::from(t.major), u64::from(t.minor)]),
                ) {
                    if p.end_of_life <= *today {
                        findings.push(
                            finding(
                                "python-end-of-life",
                                Severity::Warning,
                                format!("Python {py} reached its end of life on {}", p.end_of_life),
                            )
                            .fact("end_of_life", p.end_of_life)
                            .source(first_source(&p.sources)),
                        );
                    }
                }
                if let Some(g) = graph.as_deref_mut() {
                    g.edge(
                        Node::Build(name.clone()),
                        Node::Python(py.clone()),
                        Edge::new(
                            &format!("{t} wheel"),
                            Status::Compatible,
                            first_source(&rel.sources).map(str::to_string),
                        ),
                    );
                }
                let install = install_line(rel, v, &py);
                stacks.push(mk(py, findings, (t.major, t.minor), install));
            }
        }
    }
    if builds_matching_pins == 0 {
        return Err(QueryError(no_build_message(cat, q)));
    }
    stacks.sort_by(|a, b| a.rank.cmp(&b.rank));
    Ok(stacks)
}

/// Why no build matches the pins: names each pin and what exists.
fn no_build_message(cat: &dyn Catalog, q: &Query) -> String {
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
    // Which builds the torch pins alone allow, to show what to change.
    let allowed: Vec<String> = cat
        .torch()
        .iter()
        .rev()
        .filter(|r| q.torch.iter().all(|p| p.specifiers.contains(&r.version)))
        .take(3)
        .map(|r| {
            let tags: Vec<String> = r.variants.iter().map(|v| v.tag.to_string()).collect();
            format!("{} ({})", r.version, tags.join(", "))
        })
        .collect();
    let mut msg = format!("no torch build satisfies all of: {}", parts.join("; "));
    if !allowed.is_empty() && !q.torch.is_empty() {
        msg.push_str(&format!(
            ". Builds matching the torch pins: {}",
            allowed.join("; ")
        ));
    }
    msg
}
