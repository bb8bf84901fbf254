//! The resolver: which stacks (torch build x Python) run on what is known of a machine,
//! with findings that explain each verdict, and suggestions when nothing fits.
//!
//! Owns: the compatibility rules of `shared/domain.md` (driver vs CUDA with both
//! thresholds and forward compatibility, driver branch vs GPU architecture, SASS/PTX vs
//! compute capability, wheel tags, glibc floor, nvcc for extensions), the exhaustive
//! pruned search over candidate stacks, ranking, suggestions, and the graph a query used.
//! Must not: probe the host, talk to Docker, read files or print. Host and image facts
//! arrive in a [`Query`]; the database is read through [`Catalog`].
//!
//! Why the search is exhaustive: the space is small (hundreds of builds, a handful of
//! Pythons each), and users want every option with its reasons, not one pick.

pub mod codes;
pub use codes::Code;
pub mod extensions;
pub mod frameworks;
pub mod graph;
mod index;
mod outcome;
pub mod rules;
mod suggest;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::db::{self, CudaRelease, Db, DriverBranch, Gpu, PythonRelease, TorchRelease};
use crate::model::{
    CudaVersion, DriverVersion, GlibcVersion, HostArch, PartialDate, Variant, VersionSpecifiers,
};

pub use crate::project::{Origin, Pin};
pub use index::Index;

/// The records the resolver reads. [`Db`] is the one implementation; the trait keeps the
/// resolver from depending on how records are stored.
pub trait Catalog {
    /// torch releases, oldest first.
    fn torch(&self) -> &[TorchRelease];
    /// CUDA toolkit releases, oldest first.
    fn cuda(&self) -> &[CudaRelease];
    /// Driver branches, oldest first.
    fn drivers(&self) -> &[DriverBranch];
    /// Python release lines, oldest first.
    fn python(&self) -> &[PythonRelease];
    /// The database's date (the newest `checked` of its records), when known.
    fn date(&self) -> Option<PartialDate> {
        None
    }
}

impl Catalog for Db {
    fn torch(&self) -> &[TorchRelease] {
        &self.torch
    }
    fn cuda(&self) -> &[CudaRelease] {
        &self.cuda
    }
    fn drivers(&self) -> &[DriverBranch] {
        &self.drivers
    }
    fn python(&self) -> &[PythonRelease] {
        &self.python
    }
    fn date(&self) -> Option<PartialDate> {
        Db::date(self)
    }
}

/// A GPU of the machine, with how many there are.
#[derive(Debug, Clone)]
pub struct GpuAsk {
    /// The record.
    pub gpu: Gpu,
    /// How many.
    pub count: u32,
}

/// What `--cuda` asks of the build.
#[derive(Debug, Clone)]
pub enum CudaAsk {
    /// `cpu`: a CPU-only build.
    Cpu,
    /// CUDA versions of the build (`12.1` means `==12.1`), compared as major.minor.
    Spec(VersionSpecifiers),
}

/// Everything known of the machine and the project. Facts left out are not constraints:
/// the answer says what each stack needs of them.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// torch requirements (all must hold where their markers apply).
    pub torch: Vec<Pin>,
    /// torchvision requirements.
    pub torchvision: Vec<Pin>,
    /// torchaudio requirements.
    pub torchaudio: Vec<Pin>,
    /// Python versions acceptable (all must hold).
    pub python: Vec<(VersionSpecifiers, Origin)>,
    /// The CUDA of the build.
    pub cuda: Option<(CudaAsk, Origin)>,
    /// Builds named by index URLs or local versions (any of them).
    pub variants: Vec<(Variant, Origin)>,
    /// The GPUs.
    pub gpus: Vec<GpuAsk>,
    /// The driver version.
    pub driver: Option<DriverVersion>,
    /// The host's glibc, and where it came from (`--os ubuntu22.04`).
    pub glibc: Option<(GlibcVersion, Origin)>,
    /// The host's CPU architecture, and where it came from (`--arch`, `uname -m`). When
    /// absent, a GPU that brings its host (GH200: `host_arch`) decides; when neither does,
    /// x86_64 is assumed, as torch's x86_64 wheels are what the records describe first.
    pub arch: Option<(HostArch, Origin)>,
    /// The project compiles CUDA extensions (`--extensions`, or a requirement in
    /// `extensions_from` that is assumed to compile).
    pub extensions: bool,
    /// The project's requirements on packages whose installation compiles CUDA code, each
    /// with whether it makes the project build extensions and why.
    pub extensions_from: Vec<extensions::ExtensionReq>,
    /// The project's requirements on packages that pin torch, with what each implies (the
    /// torch pins they make are in `torch` too).
    pub frameworks: Vec<frameworks::FrameworkReq>,
    /// The nvcc on the host, when known (host checks).
    pub nvcc: Option<CudaVersion>,
    /// Set when it is a *fact* that the machine has no usable NVIDIA GPU or driver (a probed
    /// host with none), saying why as a clause (`the NVIDIA kernel module is not loaded`):
    /// no CUDA build can run there. Not set when
    /// the GPU or driver is merely not given (a pre-order query).
    pub no_cuda_device: Option<String>,
    /// Today, for end-of-life warnings.
    pub today: Option<PartialDate>,
    /// Build the graph of the query (for `gpuenv graph`).
    pub want_graph: bool,
    /// How inputs that were not taken literally were read (`--torch 2.4` as `==2.4.*`),
    /// for the reports to echo.
    pub readings: Vec<crate::model::Reading>,
}

impl Query {
    /// The host's architecture and where it came from: the query's own, else the first GPU
    /// that brings its host (`host_arch`); `None` when nothing says (x86_64 is assumed).
    pub fn host_arch(&self) -> Option<(HostArch, Cow<'_, str>)> {
        if let Some((a, origin)) = &self.arch {
            return Some((*a, Cow::Borrowed(origin.as_str())));
        }
        self.gpus.iter().find_map(|g| {
            let a: HostArch = g.gpu.host_arch.as_deref()?.parse().ok()?;
            Some((a, Cow::Owned(format!("the {} brings its {a} host", g.gpu.name))))
        })
    }
}

/// The verdict of a stack, and of a whole answer (its best stack's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Runs natively.
    Compatible,
    /// Runs under a named rule with a caveat.
    Conditional,
    /// Does not run.
    Incompatible,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Status::Compatible => "compatible",
            Status::Conditional => "conditional",
            Status::Incompatible => "incompatible",
        })
    }
}

/// How much a finding weighs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// A fact that held.
    Info,
    /// Worth knowing; does not change the verdict.
    Warning,
    /// Makes the stack conditional.
    Conditional,
    /// Makes the stack incompatible.
    Incompatible,
}

impl Severity {
    /// The status a finding of this weight makes on its own.
    pub(crate) fn status(self) -> Status {
        match self {
            Severity::Incompatible => Status::Incompatible,
            Severity::Conditional => Status::Conditional,
            Severity::Info | Severity::Warning => Status::Compatible,
        }
    }
}

/// One rule applied to one stack.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Finding {
    /// Stable kebab-case code (see [`codes::CODES`]); read back, a code the list lacks is
    /// an error.
    pub code: Code,
    /// How much it weighs.
    pub severity: Severity,
    /// What was found, in a sentence.
    pub message: String,
    /// The facts compared, by name (`driver`, `needs_glibc`): gpuenv's own names when it
    /// made the finding, any when it read one back.
    pub facts: BTreeMap<Cow<'static, str>, String>,
    /// Where the rule's data comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// A fact it relied on is not verified against a primary source.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unverified: bool,
}

impl Finding {
    /// A finding with no facts, source or mark yet; every finding, the resolver's and
    /// `verify`'s, starts here.
    pub fn new(code: Code, severity: Severity, message: String) -> Finding {
        Finding {
            code,
            severity,
            message,
            facts: BTreeMap::new(),
            source: None,
            unverified: false,
        }
    }
}

/// The findings of a stack: those of its build, shared by the build's Pythons, and its own.
#[derive(Debug, Clone)]
pub struct Findings {
    shared: Arc<[Finding]>,
    own: Vec<Finding>,
}

impl Findings {
    pub(crate) fn new(shared: Arc<[Finding]>, own: Vec<Finding>) -> Findings {
        Findings { shared, own }
    }

    /// Every finding, the weightiest first.
    pub fn iter(&self) -> impl Iterator<Item = &Finding> {
        let mut all: Vec<&Finding> = self.shared.iter().chain(self.own.iter()).collect();
        all.sort_by_key(|f| std::cmp::Reverse(f.severity));
        all.into_iter()
    }

    /// The verdict they make: the weightiest finding decides.
    pub fn status(&self) -> Status {
        self.shared
            .iter()
            .chain(self.own.iter())
            .map(|f| f.severity)
            .max()
            .map_or(Status::Compatible, Severity::status)
    }
}

impl Serialize for Findings {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

/// Read back as the list written: the weightiest first, which [`Findings::iter`] keeps
/// (its sort is stable), so a stack read back writes the same list again.
impl<'de> Deserialize<'de> for Findings {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Findings::new(Arc::from([]), Vec::<Finding>::deserialize(d)?))
    }
}

/// What a stack needs of facts the query did not give.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Needs {
    /// Driver for native CUDA (the toolkit's own minimum, and the GPUs' branch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_native: Option<String>,
    /// Lowest driver through minor-version compatibility.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_minor_compat: Option<String>,
    /// Driver branches on which the build's `cuda-compat` package runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forward_compat_branches: Vec<String>,
    /// Architectures with SASS in the wheel.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sass: Vec<String>,
    /// Architectures with PTX in the wheel.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ptx: Vec<String>,
    /// Lowest glibc.
    pub glibc: String,
}

/// One candidate: a torch build on a Python.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Stack {
    /// The torch release (`2.4.1`): the version of its record in compat-db.
    pub torch: crate::model::Version,
    /// The build (`cu121`, `cpu`).
    pub variant: Variant,
    /// The Python (`3.11`), or what was asked when no wheel fits.
    pub python: String,
    /// CUDA of the build.
    pub cuda: Option<CudaVersion>,
    /// cuDNN it brings.
    pub cudnn: Option<crate::model::CudnnVersion>,
    /// NCCL it brings.
    pub nccl: Option<crate::model::NcclVersion>,
    /// The verdict.
    pub status: Status,
    /// Why.
    pub findings: Findings,
    /// What it needs of facts not given.
    pub needs: Arc<Needs>,
    /// How to install it.
    pub install: String,
    /// Rank keys, not part of the output (a stack read back ranks nowhere).
    #[serde(skip, default = "Rank::read_back")]
    pub(crate) rank: Rank,
}

/// Sort keys: status, fewer failed rules (which orders incompatible stacks by how close
/// they come), newer torch, the variant closest to what was asked, then the Python an
/// experienced engineer would pick (released, not the newest line a build just added),
/// newer first.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Rank {
    pub status: u8,
    pub failures: usize,
    pub torch: std::cmp::Reverse<crate::model::Version>,
    pub variant_distance: u32,
    pub python: (u8, std::cmp::Reverse<(u8, u8)>),
}

impl Rank {
    /// The rank of a stack read back from a document, which keeps no rank: the answer it
    /// came from was ranked already, and its order is the list's.
    fn read_back() -> Rank {
        Rank {
            status: 0,
            failures: 0,
            torch: std::cmp::Reverse(crate::model::Version::new([0])),
            variant_distance: 0,
            python: (0, std::cmp::Reverse((0, 0))),
        }
    }
}

/// What a [`Suggestion`] changes.
pub const SUGGESTION_KINDS: [&str; 6] = ["driver", "torch", "cuda", "python", "os", "framework"];

fn suggestion_kind<'de, D: serde::Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    crate::model::known::one_of(d, "suggestion kind", SUGGESTION_KINDS)
}

/// A change that would make something fit, and what it gives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suggestion {
    /// What to change: one of [`SUGGESTION_KINDS`].
    #[serde(deserialize_with = "suggestion_kind")]
    pub kind: crate::model::known::Word,
    /// The change (`driver >= 570.26`).
    pub change: String,
    /// What it gives (`torch 2.7.0+cu128 runs natively on RTX 5090`).
    pub gives: String,
    /// The verdict the change reaches.
    pub status: Status,
}

/// The answer to a query.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The best stack's verdict.
    pub verdict: Status,
    /// Every evaluated stack, best first.
    pub stacks: Vec<Stack>,
    /// Smallest changes that make something fit (when nothing fits natively).
    pub suggestions: Vec<Suggestion>,
    /// The graph the query used, when asked for.
    pub graph: Option<graph::Graph>,
    /// Findings about the question as a whole: why no build matches what was asked, and
    /// what the database cannot know (a torch newer than any it has, a database old
    /// enough that newer releases may exist).
    pub findings: Vec<Finding>,
    /// The database's date (see [`Catalog::date`]).
    pub db_date: Option<PartialDate>,
}

impl Answer {
    /// The newest torch that runs only under a condition (minor-version or forward
    /// compatibility, PTX JIT), when it is newer than the best stack, which runs natively
    /// on an older CUDA line: both are real choices, and the report shows which is which.
    pub fn newer_conditional(&self) -> Option<&Stack> {
        let best = self.stacks.first().filter(|s| s.status == Status::Compatible)?;
        self.stacks
            .iter()
            .find(|s| s.status == Status::Conditional && s.rank.torch.0 > best.rank.torch.0)
    }

    /// The Pythons the build of a stack has wheels for among the stacks evaluated, as a
    /// range (`3.9-3.13`).
    pub fn python_range(&self, s: &Stack) -> String {
        let mut v: Vec<(u8, u8)> = self
            .stacks
            .iter()
            .filter(|x| x.torch == s.torch && x.variant == s.variant)
            .filter_map(|x| {
                let (a, b) = x.python.split_once('.')?;
                Some((a.parse().ok()?, b.parse().ok()?))
            })
            .collect();
        v.sort();
        v.dedup();
        match v.as_slice() {
            [] => s.python.clone(),
            [one] => format!("{}.{}", one.0, one.1),
            [first, .., last] => format!("{}.{}-{}.{}", first.0, first.1, last.0, last.1),
        }
    }
}

/// An installed torch that cannot be judged (its version or CUDA does not read).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct QueryError(pub String);

/// Verdicts for every build a query allows, without findings: the fast path for
/// matrices of many queries. It reads the statuses of the same rule outcomes whose findings
/// [`resolve`] renders, so it agrees with [`resolve`]'s statuses (a test checks it across the
/// shipped database's matrix).
pub fn verdicts(ix: &Index<'_>, q: &Query) -> Vec<rules::Verdict> {
    rules::verdicts(ix, q)
}

/// Answers a query. A question no build answers is an answer too: incompatible, with
/// findings saying why ([`Answer::findings`]).
pub fn resolve(cat: &dyn Catalog, q: &Query) -> Answer {
    resolve_with(&Index::new(cat), q)
}

/// Answers a query over an index built once (for many queries on one database).
pub fn resolve_with(ix: &Index<'_>, q: &Query) -> Answer {
    let mut graph = q.want_graph.then(graph::Graph::default);
    let stacks = rules::search(ix, q, graph.as_mut());
    let verdict = stacks.first().map_or(Status::Incompatible, |s| s.status);
    // What the database cannot know first: it qualifies everything after it.
    let mut findings = rules::currency_findings(ix, q);
    findings.extend(frameworks::findings(&q.frameworks));
    if stacks.is_empty() {
        findings.extend(rules::no_build_findings(ix, q));
    }
    let suggestions = if verdict == Status::Compatible {
        Vec::new()
    } else if stacks.is_empty() {
        let mut s = suggest::framework_conflicts(ix, q);
        s.extend(suggest::existing_builds(ix, q));
        s
    } else {
        suggest::suggest(ix, q, verdict)
    };
    Answer {
        verdict,
        stacks,
        suggestions,
        graph,
        findings,
        db_date: ix.cat.date(),
    }
}

#[cfg(test)]
mod tests;

/// A torch already installed on a host, as its Python reports it.
#[derive(Debug, Clone, Default)]
pub struct Installed {
    /// `torch.__version__` (`2.4.1+cu121`, `2.4.1`, `2.5.0a0+872d972e41`).
    pub version: String,
    /// `torch.version.cuda`; `None` for a CPU build.
    pub cuda: Option<String>,
    /// `torch.cuda.get_arch_list()`; empty when torch could not initialise CUDA.
    pub arch_list: Vec<String>,
    /// The interpreter's `major.minor`.
    pub python: String,
}

/// The database with the torch releases replaced (the build installed on a host).
struct Overlay<'a> {
    base: &'a dyn Catalog,
    torch: Vec<TorchRelease>,
}

impl Catalog for Overlay<'_> {
    fn torch(&self) -> &[TorchRelease] {
        &self.torch
    }
    fn cuda(&self) -> &[CudaRelease] {
        self.base.cuda()
    }
    fn drivers(&self) -> &[DriverBranch] {
        self.base.drivers()
    }
    fn python(&self) -> &[PythonRelease] {
        self.base.python()
    }
    fn date(&self) -> Option<PartialDate> {
        self.base.date()
    }
}

/// Judges an installed torch against the machine facts of `q` (GPUs, driver, nvcc), with
/// the same rules and finding codes as [`resolve`]. The arch list torch reports is the
/// truth for its kernels; when it is empty (CUDA did not initialise), the database's list
/// for that build is used, and when there is none either, the arch check says so.
pub fn judge_installed(cat: &dyn Catalog, q: &Query, installed: &Installed) -> Result<Stack, QueryError> {
    use crate::model::{ComputeCapability, PythonTag, parse_version, public};
    let version = parse_version(&installed.version).map_err(|e| QueryError(e.to_string()))?;
    let cuda: Option<CudaVersion> = match &installed.cuda {
        Some(c) => Some(
            c.parse()
                .map_err(|e: crate::model::ParseError| QueryError(e.to_string()))?,
        ),
        None => None,
    };
    let tag = match &cuda {
        Some(c) => Variant::for_cuda(c).ok_or_else(|| QueryError(format!("CUDA {c} has no variant tag")))?,
        None => Variant::Cpu,
    };
    let release = public(&version);
    let known = cat.torch().iter().find(|r| r.version == release);
    let mut sass = Vec::new();
    let mut ptx = Vec::new();
    for a in &installed.arch_list {
        if let Ok((cc, is_ptx)) = ComputeCapability::parse_nvcc(a) {
            if is_ptx { ptx.push(cc) } else { sass.push(cc) }
        }
    }
    let db_variant = known.and_then(|r| r.variant(tag));
    if sass.is_empty() && ptx.is_empty() {
        if let Some(v) = db_variant {
            sass = v.sass.clone();
            ptx = v.ptx.clone();
        }
    }
    let python: PythonTag = format!("cp{}", installed.python.replace('.', ""))
        .parse()
        .map_err(|e: crate::model::ParseError| QueryError(format!("Python {}: {e}", installed.python)))?;
    let variant = db::TorchVariant {
        tag,
        cuda: cuda
            .as_ref()
            .map(|c| CudaVersion::from_major_minor(c.major(), c.minor())),
        cudart: None,
        cudnn: db_variant.and_then(|v| v.cudnn.clone()),
        nccl: db_variant.and_then(|v| v.nccl.clone()),
        sass,
        ptx,
        python: None,
        index_url: db_variant.map_or_else(
            || format!("https://download.pytorch.org/whl/{tag}"),
            |v| v.index_url.clone(),
        ),
        // Installed already: which wheels the index serves no longer matters.
        platforms: Vec::new(),
        unverified: Vec::new(),
        notes: None,
        sources: db_variant.map(|v| v.sources.clone()).unwrap_or_default(),
    };
    let rel = TorchRelease {
        id: release.to_string(),
        version: release.clone(),
        released: None,
        requires_python: ">=3".parse().expect("valid specifiers"),
        python: vec![python],
        // Already installed: the platform tag no longer matters.
        manylinux: "manylinux1_x86_64".parse().expect("valid tag"),
        pypi_default: tag,
        pypi_platforms: Vec::new(),
        manylinux_aarch64: None,
        torchvision: known.and_then(|r| r.torchvision.clone()),
        torchaudio: known.and_then(|r| r.torchaudio.clone()),
        triton: None,
        variants: vec![variant],
        checked: None,
        glibc: None,
        glibc_from: None,
        unverified: Vec::new(),
        notes: None,
        sources: known.map(|r| r.sources.clone()).unwrap_or_default(),
    };
    let overlay = Overlay {
        base: cat,
        torch: vec![rel],
    };
    let machine = Query {
        // A CPU build is only offered when asked for; installed, it is what there is.
        cuda: (tag == Variant::Cpu).then(|| (CudaAsk::Cpu, "installed".to_string())),
        gpus: q.gpus.clone(),
        driver: q.driver.clone(),
        nvcc: q.nvcc.clone(),
        no_cuda_device: q.no_cuda_device.clone(),
        extensions: q.extensions,
        extensions_from: q.extensions_from.clone(),
        today: q.today,
        // Installed already: wheel tags and glibc are settled.
        ..Query::default()
    };
    let ix = Index::new(&overlay);
    let answer = resolve_with(&ix, &machine);
    answer
        .stacks
        .into_iter()
        .next()
        .ok_or_else(|| QueryError("no stack".into()))
}
