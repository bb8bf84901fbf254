//! Dockerfiles for a resolved stack: pure text generation.
//!
//! Owns: choosing images from compat-db's image catalog (the base of a Dockerfile, and the
//! prebuilt image `pull` takes: [`prebuilt()`]), how Python, torch and the project's
//! requirements are installed and in which order, the user the image runs as, the labels,
//! `NVIDIA_REQUIRE_CUDA`, and the build step that checks the torch installed.
//! Must not: read files, talk to Docker, or print. Paths of project files arrive already
//! made relative to the build context; the caller writes the text where it belongs.
//!
//! The choices, and why:
//! - **Base.** With CUDA extensions, `nvidia/cuda:<x.y.z>-devel-<os>` of the same CUDA
//!   major.minor as the torch build: nvcc's major must equal torch's, and a minor mismatch
//!   warns. Without, `nvidia/cuda:<x.y.z>-base-<os>` of that minor: the wheel brings its own
//!   CUDA libraries (the `nvidia-*` packages), so nothing more is needed, but the base image
//!   carries the NVIDIA runtime's environment and the `cuda-compat` package of that CUDA
//!   minor, which is what lets a data-center GPU on an older LTS driver run it (forward
//!   compatibility). The plain (not `cudnn`) flavors on purpose: a second cuDNN in the image
//!   can be loaded instead of the wheel's pinned one. Newest Ubuntu the catalog publishes
//!   for that CUDA first. A CPU build gets `ubuntu:24.04`.
//! - **Python.** Installed by a pinned `uv` release from its official image
//!   (`uv python install`): an exact CPython line on any base, no PPA, no second interpreter
//!   from the distribution, checksummed downloads. The interpreter lives under `/opt` so the
//!   non-root user can run it, and a virtual environment seeded with pip holds everything.
//! - **Order.** torch first (gigabytes, changes least), then the requirements files alone
//!   (and pyproject.toml's `[project] dependencies`, which uv installs without building the
//!   project), then the rest of the project: editing code rebuilds only the last layers.
//!   Requirements that install from the project tree (`-e .`) wait until it is copied.
//!   torch's pins become a constraints file so no requirement can swap the build.
//! - **Packages that compile at install** (compat-db's `package` records: flash-attn,
//!   deepspeed, ...): the header says which requirement made the base a devel image. Those
//!   whose build imports torch are installed without build isolation (pip's
//!   `--no-build-isolation` for the requirements files, uv's `--no-build-isolation-package`
//!   for pyproject.toml), after a step that installs what their builds import; in an
//!   isolated build environment torch is missing, or is another build than the image's.
//!   One that refuses any nvcc but torch's exact CUDA version gets no base of another minor.
//! - **Checks.** A last step imports torch as the image's user and asserts the version and
//!   CUDA build: a wrong wheel fails the build, not the first training run.

use std::collections::BTreeSet;

use crate::db::{CudaRelease, EnvRole, Flavor, Image, ImageFamily, NvccMatch, TorchRelease};
use crate::model::{ComputeCapability, CudaVersion};
use crate::resolve::Stack;
use crate::resolve::extensions::ExtensionReq;

pub mod prebuilt;
pub use prebuilt::{Prebuilt, prebuilt};

/// The uv release that installs Python. Pinned so that a rebuild gets the same interpreter.
pub const UV_IMAGE: &str = "ghcr.io/astral-sh/uv:0.11.7";
/// The base of CPU-only builds.
pub const CPU_BASE: &str = "ubuntu:24.04";
/// The virtual environment every package goes into.
pub const VENV: &str = "/opt/venv";
/// Where the project is copied, and the working directory.
pub const APP_DIR: &str = "/app";
/// The numeric user (and group) the image runs as. Above the range distributions give
/// their own users (Ubuntu 24.04 images already have uid 1000).
pub const APP_UID: u32 = 10001;
/// Ubuntu releases of `nvidia/cuda` tags, most preferred first.
const PREFERRED_OS: &[&str] = &["ubuntu24.04", "ubuntu22.04", "ubuntu20.04"];
/// Brands the forward-compatibility terms admit: data-center boards. GeForce fails with
/// error 804, so it gets no term.
const FORWARD_COMPAT_BRANDS: &[&str] = &["tesla", "nvidia"];

/// What a Dockerfile is generated from.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The stack chosen (by `query`'s ranking, or pinned by the user).
    pub stack: &'a Stack,
    /// Its torch release (for torchvision, torchaudio and the build's index URL).
    pub release: &'a TorchRelease,
    /// The image catalog.
    pub images: &'a [Image],
    /// CUDA toolkit releases (what nvcc of the devel base can target).
    pub cuda: &'a [CudaRelease],
    /// The project compiles CUDA extensions: a devel base with nvcc and a host compiler.
    pub extensions: bool,
    /// The project's requirements on packages that compile CUDA code at install, with
    /// whether each is assumed to (then `extensions` is set) and why.
    pub extensions_from: &'a [ExtensionReq],
    /// The GPUs of the machine, when given: extensions are compiled for exactly these.
    pub gpus: Vec<ComputeCapability>,
    /// Requirements files relative to the build context (`/`-separated); pip reads the
    /// first, which may include the others.
    pub requirements: Vec<String>,
    /// The project's pyproject.toml relative to the build context, when its
    /// `[project] dependencies` are to be installed.
    pub pyproject: Option<String>,
    /// The optional dependency groups of the pyproject.toml to install (`--extra`), PEP 685
    /// normalized; their requirements are among those the base was chosen for.
    pub pyproject_extras: Vec<String>,
    /// What the requirements install from the project tree itself (`-e .`,
    /// `./libs/pkg`), as written: then they are installed after the project is copied.
    pub requirements_from_project: Vec<String>,
    /// Who wrote it (`gpuenv 0.1.0`), for the header and a label.
    pub generator: String,
}

/// The base image chosen, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Base {
    /// The image reference (`nvidia/cuda:12.4.1-base-ubuntu24.04`).
    pub image: String,
    /// CUDA of the base, if it has one.
    pub cuda: Option<CudaVersion>,
    /// The flavor (`base`, `devel`); `None` for a plain OS image.
    pub flavor: Option<Flavor>,
    /// Its CUDA major.minor equals the torch build's (false: the closest of the same major).
    pub exact: bool,
    /// Why it was chosen, in a sentence (for the header comment and the summary).
    pub why: String,
}

/// A generated Dockerfile and the facts it encodes.
#[derive(Debug, Clone)]
pub struct Dockerfile {
    /// The text.
    pub text: String,
    /// The base image.
    pub base: Base,
    /// Every image the text names in a `FROM` (the uv stage and the base).
    pub from: Vec<String>,
    /// `NVIDIA_REQUIRE_CUDA`, for CUDA builds.
    pub require_cuda: Option<String>,
    /// The pip pins of torch, torchvision and torchaudio.
    pub pins: Vec<String>,
    /// The index they come from.
    pub index_url: String,
    /// The labels, in the order written.
    pub labels: Vec<(String, String)>,
    /// The requirements on packages that compile CUDA code at install, as the request had
    /// them: what made the base a devel image, or why not.
    pub extensions_from: Vec<ExtensionReq>,
}

/// Why no Dockerfile can be written for a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DockerfileError {
    /// The catalog has no base for the stack's CUDA.
    #[error("{0}")]
    NoBase(String),
    /// The torch release has no such build.
    #[error("torch {torch} has no `{variant}` build in the database")]
    NoVariant {
        /// The release.
        torch: String,
        /// The build asked for.
        variant: String,
    },
    /// A project file's path cannot be written into a Dockerfile.
    #[error("`{path}`: {why}")]
    BadPath {
        /// The path.
        path: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

/// Chooses the base image for a stack (see the module docs for the rules).
pub fn choose_base(stack: &Stack, images: &[Image], extensions: bool) -> Result<Base, DockerfileError> {
    let Some(want) = stack.variant.cuda() else {
        return Ok(Base {
            image: CPU_BASE.into(),
            cuda: None,
            flavor: None,
            exact: true,
            why: "a CPU build needs no CUDA in the image; Ubuntu 24.04 LTS is supported until 2029".into(),
        });
    };
    let flavor = if extensions { Flavor::Devel } else { Flavor::Base };
    let (major, minor) = want.major_minor();
    // Records of the same CUDA major that publish the flavor on a preferred Ubuntu.
    let candidates: Vec<(&Image, &CudaVersion, &str)> = images
        .iter()
        .filter(|i| i.family == ImageFamily::NvidiaCuda && i.flavors.contains(&flavor))
        .filter_map(|i| {
            let cuda = i.cuda.as_ref()?;
            let os = PREFERRED_OS.iter().find(|os| i.os.iter().any(|o| o == *os))?;
            (cuda.major() == major).then_some((i, cuda, *os))
        })
        .collect();
    // The closest minor wins (an older one on a tie: its nvcc emits nothing the torch build's
    // runtime cannot load); within a minor, the newest patch release.
    let best = candidates.iter().min_by(|a, b| {
        let da = a.1.minor().abs_diff(minor);
        let db = b.1.minor().abs_diff(minor);
        da.cmp(&db).then(a.1.minor().cmp(&b.1.minor())).then(b.1.cmp(a.1))
    });
    let Some((image, cuda, os)) = best else {
        return Err(DockerfileError::NoBase(format!(
            "the image catalog has no `nvidia/cuda` {} image of CUDA {major}.x on Ubuntu for torch {}+{}{}",
            flavor_name(flavor),
            stack.torch,
            stack.variant,
            if extensions {
                " (extensions need nvcc of the same CUDA major as torch)"
            } else {
                ""
            }
        )));
    };
    let exact = cuda.minor() == minor;
    let tag = format!("{cuda}-{}-{os}", flavor_name(flavor));
    let why = match (extensions, exact) {
        (true, true) => format!(
            "the devel image brings nvcc {major}.{minor}, the CUDA of the torch build, for compiling extensions"
        ),
        (true, false) => format!(
            "the catalog has no devel image of CUDA {major}.{minor}; nvcc {} has the same major as the torch build (a minor mismatch only warns)",
            cuda
        ),
        (false, true) => format!(
            "the torch wheel brings its own CUDA libraries; the base image adds the NVIDIA runtime's environment and cuda-compat {major}.{minor} for forward compatibility"
        ),
        (false, false) => format!(
            "the torch wheel brings its own CUDA libraries; the catalog has no base image of CUDA {major}.{minor}, so the closest of the same major ({cuda}) gives the NVIDIA runtime's environment"
        ),
    };
    Ok(Base {
        image: format!("{}:{tag}", image.repository),
        cuda: Some((*cuda).clone()),
        flavor: Some(flavor),
        exact,
        why,
    })
}

fn flavor_name(f: Flavor) -> &'static str {
    match f {
        Flavor::Base => "base",
        Flavor::Runtime => "runtime",
        Flavor::Devel => "devel",
    }
}

/// `NVIDIA_REQUIRE_CUDA` for a stack: what its torch build needs of the host.
///
/// `cuda>=X.Y` is the driver's CUDA version for native use: minor-version compatibility
/// would start the image on an older driver of the same major, but without PTX JIT, which
/// torch needs on GPUs newer than its SASS list, so it is not admitted. When the base
/// carries `cuda-compat` of the torch build's minor (`with_forward_compat`), one term per
/// driver branch that hosts it admits data-center boards through forward compatibility,
/// as NVIDIA's own images do. `arch>=` is the oldest GPU the wheel has kernels for. Space
/// separates alternatives, comma joins conditions.
pub fn require_cuda(stack: &Stack, with_forward_compat: bool) -> Option<String> {
    let cuda = stack.variant.cuda()?;
    let arch = min_arch(stack)
        .map(|cc| format!(",arch>={cc}"))
        .unwrap_or_default();
    let mut terms = vec![format!("cuda>={}.{}{arch}", cuda.major(), cuda.minor())];
    if with_forward_compat {
        for branch in &stack.needs.forward_compat_branches {
            let Some(n) = branch.trim_start_matches(['R', 'r']).parse::<u32>().ok() else {
                continue;
            };
            for brand in FORWARD_COMPAT_BRANDS {
                terms.push(format!("brand={brand},driver>={n},driver<{}{arch}", n + 1));
            }
        }
    }
    Some(terms.join(" "))
}

/// The oldest compute capability the wheel runs on (SASS or PTX).
fn min_arch(stack: &Stack) -> Option<ComputeCapability> {
    stack
        .needs
        .sass
        .iter()
        .chain(stack.needs.ptx.iter())
        .filter_map(|s| ComputeCapability::parse_nvcc(s).ok())
        .map(|(cc, _)| cc.plain())
        .min()
}

/// `TORCH_CUDA_ARCH_LIST` for extension builds: the machine's GPUs when known, otherwise
/// every architecture both the wheel and nvcc support, with PTX of the newest so that
/// newer GPUs can JIT-compile the extension. No GPU is visible while an image builds, so
/// without it torch would guess.
fn arch_list(req: &Request<'_>, base: &Base) -> Option<String> {
    let mut set: BTreeSet<ComputeCapability> = req.gpus.iter().map(|c| c.plain()).collect();
    let from_gpus = !set.is_empty();
    if !from_gpus {
        let nvcc: Option<&CudaRelease> = base
            .cuda
            .as_ref()
            .and_then(|v| req.cuda.iter().find(|c| c.version == *v))
            // An arch list not yet known filters nothing.
            .filter(|c| !c.is_pending("sass"));
        set = req
            .stack
            .needs
            .sass
            .iter()
            .filter_map(|s| ComputeCapability::parse_nvcc(s).ok())
            .map(|(cc, _)| cc.plain())
            .filter(|cc| nvcc.is_none_or(|n| n.sass.iter().any(|s| s.plain() == *cc)))
            .collect();
    }
    let last = *set.iter().next_back()?;
    let items: Vec<String> = set
        .iter()
        .map(|cc| {
            if *cc == last && !from_gpus {
                format!("{cc}+PTX")
            } else {
                cc.to_string()
            }
        })
        .collect();
    Some(items.join(";"))
}

/// Checks a context-relative path can be written into `COPY` and `pip -r` unquoted.
fn check_path(path: &str) -> Result<(), DockerfileError> {
    let bad = |why| {
        Err(DockerfileError::BadPath {
            path: path.to_string(),
            why,
        })
    };
    if path.is_empty() {
        return bad("an empty path");
    }
    if path.starts_with('/') {
        return bad("must be relative to the build context");
    }
    if path.split('/').any(|seg| seg == ".." || seg.is_empty()) {
        return bad("must lie inside the build context, without `..` or empty segments");
    }
    if path
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || "\"'`$\\*?[]{}#;&|<>()!~".contains(c))
    {
        return bad("contains a character a Dockerfile or shell would interpret; rename the file");
    }
    Ok(())
}

/// A label value in double quotes.
fn quoted(value: &str) -> String {
    let mut s = String::with_capacity(value.len() + 2);
    s.push('"');
    for c in value.chars() {
        match c {
            '"' | '\\' | '$' => {
                s.push('\\');
                s.push(c);
            }
            '\n' | '\r' => s.push(' '),
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

/// Wraps prose into `# ` comment lines of at most 88 columns.
fn comment(out: &mut String, text: &str) {
    let mut line = String::from("#");
    for word in text.split_whitespace() {
        if line.len() + 1 + word.len() > 88 && line.len() > 1 {
            out.push_str(&line);
            out.push('\n');
            line = String::from("#");
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
}

/// The Python `-c` program of the check step.
pub fn torch_check(torch: &str, cuda: Option<&CudaVersion>) -> String {
    let cuda_assert = match cuda {
        Some(c) => format!(
            "assert c == '{}.{}', 'expected a CUDA {}.{} build'",
            c.major(),
            c.minor(),
            c.major(),
            c.minor()
        ),
        None => "assert c is None, 'expected a CPU build'".to_string(),
    };
    format!(
        "import torch; v, c = torch.__version__, torch.version.cuda; print('torch', v, 'CUDA', c); \
         assert v.split('+')[0] == '{torch}', 'expected torch {torch}'; {cuda_assert}"
    )
}

/// Writes the Dockerfile for a request: its sections in the order the file has them.
pub fn generate(req: &Request<'_>) -> Result<Dockerfile, DockerfileError> {
    let p = plan(req)?;
    let mut t = String::new();
    header(&mut t, &p);
    from(&mut t, &p);
    nvidia_require(&mut t, &p);
    app_user(&mut t);
    compilers(&mut t, &p);
    python_env(&mut t, &p);
    torch_install(&mut t, &p);
    project_install(&mut t, &p);
    check_step(&mut t, &p);
    let labels = labels(&p);
    write_labels(&mut t, &labels);
    let Plan {
        req,
        base,
        require,
        pins,
        index_url,
        ..
    } = p;
    Ok(Dockerfile {
        text: t,
        from: vec![UV_IMAGE.to_string(), base.image.clone()],
        base,
        require_cuda: require,
        pins,
        index_url,
        labels,
        extensions_from: req.extensions_from.to_vec(),
    })
}

/// What every section reads: the request, and what was chosen for it before a line is
/// written (so that a request no Dockerfile can serve fails before any text exists).
struct Plan<'a> {
    req: &'a Request<'a>,
    stack: &'a Stack,
    base: Base,
    /// The requirements assumed to compile CUDA code at install.
    compiling: Vec<&'a ExtensionReq>,
    require: Option<String>,
    torch_full: String,
    pins: Vec<String>,
    index_url: String,
    python: &'a String,
    cuda_label: Option<CudaVersion>,
}

impl<'a> Plan<'a> {
    /// A version with the build's local label (`2.5.1+cu124`).
    fn local(&self, v: &dyn std::fmt::Display) -> String {
        format!("{v}+{}", self.stack.variant)
    }

    /// The compiling requirements whose build imports torch: installed without build
    /// isolation, after what their builds import.
    fn unisolated(&self) -> Vec<&&'a ExtensionReq> {
        self.compiling.iter().filter(|e| e.needs_torch_at_build).collect()
    }
}

/// Checks the request and chooses the base, the pins and the index.
fn plan<'a>(req: &'a Request<'a>) -> Result<Plan<'a>, DockerfileError> {
    let stack = req.stack;
    let variant = req
        .release
        .variant(stack.variant)
        .ok_or_else(|| DockerfileError::NoVariant {
            torch: stack.torch.to_string(),
            variant: stack.variant.to_string(),
        })?;
    for p in req.requirements.iter().chain(&req.pyproject) {
        check_path(p)?;
    }
    let base = choose_base(stack, req.images, req.extensions)?;
    let compiling: Vec<&ExtensionReq> = req.extensions_from.iter().filter(|e| e.assumed).collect();
    if let Some(e) = compiling
        .iter()
        .find(|e| e.nvcc_match == NvccMatch::MajorMinor && !base.exact)
    {
        let cuda = stack.variant.cuda().map(|c| c.to_string()).unwrap_or_default();
        return Err(DockerfileError::NoBase(format!(
            "{} ({}) refuses any nvcc but torch's CUDA {cuda}, and the image catalog has no devel image of CUDA {cuda} for torch {}+{}",
            e.package, e.origin, stack.torch, stack.variant
        )));
    }
    let require = require_cuda(stack, base.exact && base.flavor.is_some());
    let local = |v: &dyn std::fmt::Display| format!("{v}+{}", stack.variant);
    let torch_full = local(&stack.torch);
    let mut pins = vec![format!("torch=={torch_full}")];
    if let Some(tv) = &req.release.torchvision {
        pins.push(format!("torchvision=={}", local(tv)));
    }
    if let Some(ta) = &req.release.torchaudio {
        pins.push(format!("torchaudio=={}", local(ta)));
    }
    let index_url = variant.index_url.clone();
    let python = &stack.python;
    let cuda_label = stack.variant.cuda();
    Ok(Plan {
        req,
        stack,
        base,
        compiling,
        require,
        torch_full,
        pins,
        index_url,
        python,
        cuda_label,
    })
}

/// Appends a line.
fn line(t: &mut String, s: &str) {
    t.push_str(s);
    t.push('\n');
}

/// The header comment: what the file is for, its base and the extensions that chose it.
fn header(t: &mut String, p: &Plan<'_>) {
    let (req, base, python, torch_full, cuda_label) =
        (p.req, &p.base, p.python, &p.torch_full, &p.cuda_label);
    let mut w = |s: &str| line(t, s);
    let header = format!(
        "Dockerfile for torch {torch_full} on Python {python}{}, written by {}. Regenerate it \
         rather than edit it: the steps below depend on each other.",
        cuda_label
            .as_ref()
            .map(|c| format!(" (CUDA {}.{})", c.major(), c.minor()))
            .unwrap_or_default(),
        req.generator
    );
    let mut head = String::new();
    comment(&mut head, &header);
    comment(&mut head, &format!("Base: {}: {}.", base.image, base.why));
    for e in req.extensions_from {
        comment(&mut head, &format!("Extensions: {}.", e.why));
    }
    w(head.trim_end());
    w("");
}

/// The uv stage and the base.
fn from(t: &mut String, p: &Plan<'_>) {
    let base = &p.base;
    let mut w = |s: &str| line(t, s);
    let mut c = String::new();
    comment(
        &mut c,
        "uv installs the interpreter: an exact CPython line on any base, from a pinned release, \
         with checksummed downloads and no second Python from the distribution.",
    );
    w(c.trim_end());
    w(&format!("FROM {UV_IMAGE} AS uv"));
    w("");
    w(&format!("FROM {}", base.image));
    w("");
}

/// `NVIDIA_REQUIRE_CUDA` and the runtime's environment, for CUDA builds.
fn nvidia_require(t: &mut String, p: &Plan<'_>) {
    let require = &p.require;
    let mut w = |s: &str| line(t, s);
    if let Some(r) = &require {
        let mut c = String::new();
        comment(
            &mut c,
            "The NVIDIA runtime refuses a host whose driver cannot run this torch build. \
             NVIDIA_REQUIRE_CUDA states what the build needs, not the base image's own \
             requirement: CUDA of the build natively (minor-version compatibility lacks the \
             PTX JIT torch relies on for GPUs newer than its kernels), or, on data-center \
             boards, a driver branch that hosts the image's cuda-compat (forward \
             compatibility); and a GPU the wheel has kernels for. Space separates \
             alternatives, comma joins conditions. NVIDIA_DISABLE_REQUIRE=1 at run time \
             overrides it knowingly.",
        );
        w(c.trim_end());
        w("ENV NVIDIA_VISIBLE_DEVICES=all \\");
        w("    NVIDIA_DRIVER_CAPABILITIES=compute,utility \\");
        w(&format!("    NVIDIA_REQUIRE_CUDA={}", quoted(r)));
        w("");
    }
}

/// The image's user and the project folder it owns; uv copied in.
fn app_user(t: &mut String) {
    let mut w = |s: &str| line(t, s);
    let mut c = String::new();
    comment(
        &mut c,
        "A fixed numeric user: what it writes to bind mounts has a predictable owner, and \
         runAsNonRoot policies can check it. It owns the project folder, so that it can write \
         checkpoints and logs there; what is installed stays root's, read-only to it.",
    );
    w(c.trim_end());
    w(&format!(
        "RUN useradd --create-home --no-log-init --uid {APP_UID} --user-group app \\"
    ));
    w(&format!(" && mkdir -p {APP_DIR} \\"));
    w(&format!(" && chown {APP_UID}:{APP_UID} {APP_DIR}"));
    w("");
    w("COPY --from=uv /uv /uvx /usr/local/bin/");
}

/// The host compiler and ninja, when extensions are compiled.
fn compilers(t: &mut String, p: &Plan<'_>) {
    let req = p.req;
    let mut w = |s: &str| line(t, s);
    if req.extensions {
        w("");
        let mut c = String::new();
        comment(
            &mut c,
            "Extensions: nvcc needs a host compiler, and ninja lets torch build them in \
             parallel. Versions are left to the base's release: its security updates \
             should apply (hence DL3008 is ignored).",
        );
        w(c.trim_end());
        w("# hadolint ignore=DL3008");
        w("RUN apt-get update \\");
        w(" && apt-get install -y --no-install-recommends g++ ninja-build \\");
        w(" && rm -rf /var/lib/apt/lists/*");
    }
}

/// The interpreter and the virtual environment, and the architectures extensions are
/// compiled for.
fn python_env(t: &mut String, p: &Plan<'_>) {
    let (req, stack, base, python, compiling) = (p.req, p.stack, &p.base, p.python, &p.compiling);
    let mut w = |s: &str| line(t, s);
    w("");
    let mut c = String::new();
    comment(
        &mut c,
        "The interpreter under /opt, not root's home, so that the non-root user can run it; \
         only uv's own Pythons, never one the base might carry.",
    );
    w(c.trim_end());
    w("ENV UV_PYTHON_INSTALL_DIR=/opt/python \\");
    w("    UV_PYTHON_PREFERENCE=only-managed \\");
    w("    UV_NO_CACHE=1");
    w(&format!("RUN uv python install {python} \\"));
    w(&format!(" && uv venv --seed --python {python} {VENV}"));
    w(&format!("ENV VIRTUAL_ENV={VENV} \\"));
    w(&format!("    PATH={VENV}/bin:$PATH \\"));
    w("    PYTHONUNBUFFERED=1 \\");
    w("    PIP_DISABLE_PIP_VERSION_CHECK=1");
    if req.extensions && stack.variant.is_cuda() {
        if let Some(list) = arch_list(req, base) {
            let mut c = String::new();
            let mut text = "No GPU is visible while an image builds: name the architectures \
                            extensions are compiled for."
                .to_string();
            for e in compiling {
                let own: Vec<&str> = e
                    .env
                    .iter()
                    .filter(|v| v.role == EnvRole::Arch && v.name != "TORCH_CUDA_ARCH_LIST")
                    .map(|v| v.name.as_str())
                    .collect();
                if !own.is_empty() {
                    text.push_str(&format!(
                        " {} chooses its own with {} and ignores this list.",
                        e.package,
                        own.join(", ")
                    ));
                }
            }
            comment(&mut c, &text);
            w(c.trim_end());
            w(&format!("ENV TORCH_CUDA_ARCH_LIST={}", quoted(&list)));
        }
    }
}

/// torch, pinned, in its own layer; then what unisolated builds import.
fn torch_install(t: &mut String, p: &Plan<'_>) {
    let (stack, pins, index_url) = (p.stack, &p.pins, &p.index_url);
    let mut w = |s: &str| line(t, s);
    w("");
    let mut c = String::new();
    comment(
        &mut c,
        &format!(
            "torch first, in a layer of its own: it is the largest and changes least. {index_url} \
             serves exactly this build ({}) and the nvidia-* libraries it pins. The pins become \
             a constraints file, so that no requirement installed later swaps the build.",
            stack.variant
        ),
    );
    w(c.trim_end());
    w(&format!(
        "RUN python -m pip install --no-cache-dir --index-url {index_url} \\"
    ));
    w(&format!("        {} \\", pins.join(" ")));
    w(&format!(
        " && printf '%s\\n' {} > {VENV}/constraints-torch.txt",
        pins.join(" ")
    ));
    let unisolated = p.unisolated();
    if !unisolated.is_empty() {
        let mut tools: BTreeSet<&str> = ["setuptools", "wheel"].into_iter().collect();
        for e in &unisolated {
            tools.extend(e.build_requires.iter().map(String::as_str));
        }
        let names: Vec<String> = unisolated
            .iter()
            .map(|e| format!("{} ({})", e.package, e.origin))
            .collect();
        w("");
        let mut c = String::new();
        comment(
            &mut c,
            &format!(
                "{names} {build} against the torch installed above: {its} torch, which an \
                 isolated build environment lacks (or holds another build of), so {they} \
                 installed without build isolation, and what {its} besides torch comes first.",
                names = names.join(" and "),
                build = if names.len() == 1 { "builds" } else { "build" },
                its = if names.len() == 1 {
                    "its build imports"
                } else {
                    "their builds import"
                },
                they = if names.len() == 1 { "it is" } else { "they are" },
            ),
        );
        comment(
            &mut c,
            "Build tools unpinned, at their newest releases (hence DL3013 is ignored).",
        );
        w(c.trim_end());
        w("# hadolint ignore=DL3013");
        w(&format!(
            "RUN python -m pip install --no-cache-dir {}",
            tools.into_iter().collect::<Vec<_>>().join(" ")
        ));
    }
}

/// The requirements and pyproject.toml's dependencies, and the project itself, in the
/// order that keeps editing code from reinstalling them.
fn project_install(t: &mut String, p: &Plan<'_>) {
    let req = p.req;
    let mut w = |s: &str| line(t, s);
    let unisolated = p.unisolated();
    let pip_unisolated = if unisolated.iter().any(|e| !e.pyproject) {
        " --no-build-isolation"
    } else {
        ""
    };
    let mut uv_unisolated: Vec<&str> = Vec::new();
    for e in unisolated.iter().filter(|e| e.pyproject) {
        if !uv_unisolated.contains(&e.package.as_str()) {
            uv_unisolated.push(&e.package);
        }
    }
    w("");
    w(&format!("WORKDIR {APP_DIR}"));
    let install_requirements = req.requirements.first().map(|main| {
        format!(
            "RUN python -m pip install --no-cache-dir{pip_unisolated} -r {main} -c {VENV}/constraints-torch.txt"
        )
    });
    if let (Some(install), true) = (&install_requirements, req.requirements_from_project.is_empty()) {
        let mut c = String::new();
        comment(
            &mut c,
            "The requirements before the rest of the project: editing code does not \
             reinstall them.",
        );
        w(c.trim_end());
        // One COPY per directory keeps each file at its path (COPY flattens sources into
        // the destination directory).
        let mut dirs: Vec<(String, Vec<&str>)> = Vec::new();
        for p in &req.requirements {
            let dir = p.rsplit_once('/').map_or("", |(d, _)| d).to_string();
            match dirs.iter_mut().find(|(d, _)| *d == dir) {
                Some((_, files)) => {
                    if !files.contains(&p.as_str()) {
                        files.push(p)
                    }
                }
                None => dirs.push((dir, vec![p])),
            }
        }
        for (dir, files) in &dirs {
            let dest = if dir.is_empty() {
                "./".to_string()
            } else {
                format!("{dir}/")
            };
            w(&format!("COPY {} {dest}", files.join(" ")));
        }
        w(install);
    }
    if let Some(pyproject) = &req.pyproject {
        let mut c = String::new();
        comment(
            &mut c,
            "The dependencies pyproject.toml lists, before the rest of the project too: uv \
             reads `[project] dependencies` without building the project, and torch's pins hold.",
        );
        if !req.pyproject_extras.is_empty() {
            comment(
                &mut c,
                &format!(
                    "With its optional dependency groups {} (--extra).",
                    req.pyproject_extras.join(", ")
                ),
            );
        }
        w(c.trim_end());
        let dest = match pyproject.rsplit_once('/') {
            Some((dir, _)) => format!("{dir}/"),
            None => "./".to_string(),
        };
        w(&format!("COPY {pyproject} {dest}"));
        let unisolated: String = uv_unisolated
            .iter()
            .map(|p| format!(" --no-build-isolation-package {p}"))
            .collect();
        let extras: String = req
            .pyproject_extras
            .iter()
            .map(|e| format!(" --extra {e}"))
            .collect();
        w(&format!(
            "RUN uv pip install{unisolated} -r {pyproject}{extras} -c {VENV}/constraints-torch.txt"
        ));
    }
    w(&format!("COPY --chown={APP_UID}:{APP_UID} . ."));
    if let (Some(install), false) = (&install_requirements, req.requirements_from_project.is_empty()) {
        let mut c = String::new();
        comment(
            &mut c,
            &format!(
                "The requirements install from the project itself ({}), so they come after it \
                 is copied: pip needs those files in place. Editing code reinstalls them.",
                req.requirements_from_project
                    .iter()
                    .map(|p| format!("`{p}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        w(c.trim_end());
        w(install);
    }
}

/// The image's user, and the step that fails the build on a wrong torch.
fn check_step(t: &mut String, p: &Plan<'_>) {
    let (stack, cuda_label) = (p.stack, &p.cuda_label);
    let mut w = |s: &str| line(t, s);
    w(&format!("USER {APP_UID}:{APP_UID}"));
    w("");
    let mut c = String::new();
    comment(
        &mut c,
        "Fail the build, not the first training run, when the torch installed is not the \
         build this file was written for. Run as the image's user: it must be able to import it.",
    );
    w(c.trim_end());
    let check = torch_check(&stack.torch.to_string(), cuda_label.as_ref());
    w(&format!("RUN python -c \"{check}\""));
    w("");
}

/// The labels, in the order written.
fn labels(p: &Plan<'_>) -> Vec<(String, String)> {
    let (req, stack, base, python, torch_full, cuda_label, compiling) = (
        p.req,
        p.stack,
        &p.base,
        p.python,
        &p.torch_full,
        &p.cuda_label,
        &p.compiling,
    );
    let local = |v: &dyn std::fmt::Display| p.local(v);
    let mut labels: Vec<(String, String)> = vec![
        (
            "org.opencontainers.image.title".into(),
            format!("torch {torch_full} on Python {python}"),
        ),
        (
            "org.opencontainers.image.description".into(),
            format!(
                "torch {torch_full}, torchvision and torchaudio on Python {python}{}{}; generated by {}",
                cuda_label
                    .as_ref()
                    .map(|c| format!(", CUDA {}.{}", c.major(), c.minor()))
                    .unwrap_or_default(),
                if req.extensions {
                    ", with nvcc for extensions"
                } else {
                    ""
                },
                req.generator
            ),
        ),
        (
            "org.opencontainers.image.base.name".into(),
            qualified(&base.image),
        ),
        ("io.gpuenv.torch".into(), torch_full.clone()),
        ("io.gpuenv.variant".into(), stack.variant.to_string()),
    ];
    if let Some(tv) = &req.release.torchvision {
        labels.push(("io.gpuenv.torchvision".into(), local(tv)));
    }
    if let Some(ta) = &req.release.torchaudio {
        labels.push(("io.gpuenv.torchaudio".into(), local(ta)));
    }
    labels.push(("io.gpuenv.python".into(), python.clone()));
    if let Some(c) = &cuda_label {
        labels.push(("io.gpuenv.cuda".into(), format!("{}.{}", c.major(), c.minor())));
    }
    if let Some(c) = &stack.cudnn {
        labels.push(("io.gpuenv.cudnn".into(), c.to_string()));
    }
    if let Some(n) = &stack.nccl {
        labels.push(("io.gpuenv.nccl".into(), n.to_string()));
    }
    labels.push(("io.gpuenv.extensions".into(), req.extensions.to_string()));
    if !compiling.is_empty() {
        let mut names: Vec<&str> = compiling.iter().map(|e| e.package.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        labels.push(("io.gpuenv.extensions-from".into(), names.join(",")));
    }
    labels.push(("io.gpuenv.generator".into(), req.generator.clone()));
    labels
}

/// The `LABEL` instruction and the command.
fn write_labels(t: &mut String, labels: &[(String, String)]) {
    let mut w = |s: &str| line(t, s);
    let width = labels.len();
    for (i, (k, v)) in labels.iter().enumerate() {
        let lead = if i == 0 { "LABEL " } else { "      " };
        let tail = if i + 1 == width { "" } else { " \\" };
        w(&format!("{lead}{k}={}{tail}", quoted(v)));
    }
    w("");
    w("CMD [\"python\"]");
}

/// An image name with its registry made explicit (`docker.io/nvidia/cuda:...`), as the
/// OCI `base.name` annotation wants.
fn qualified(image: &str) -> String {
    let first = image.split('/').next().unwrap_or(image);
    let has_registry =
        image.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    if has_registry {
        image.to_string()
    } else if image.contains('/') {
        format!("docker.io/{image}")
    } else {
        format!("docker.io/library/{image}")
    }
}

#[cfg(test)]
mod tests;
