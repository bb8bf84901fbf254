//! What an image holds, from its config and merged filesystem: OS, Pythons, torch and its
//! pins, the CUDA toolkit, cuDNN, NCCL, `cuda-compat`, and what the config declares.
//!
//! Owns: [`select`], the rule of which paths the layer reader keeps (and which of them it
//! reads), and [`detect`], which turns what was kept into [`ImageFacts`]. Every fact
//! carries where it was read: a path (`/usr/local/cuda-12.4/version.json`), a file name
//! (`file name /usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0`), or a config field (`env
//! NV_CUDNN_VERSION`, `label com.nvidia.cudnn.version`). Must not: judge (whether torch's
//! CUDA fits the libraries, whether a tag lies: that is the verify judgement), or read
//! streams. The text parsers of `formats` (CUDA `version.json`, cuDNN and NCCL
//! headers, `os-release`, library file names) are reused, not restated.
//!
//! What is looked for (paths relative to the image root; `SP` is any `site-packages` or
//! `dist-packages` directory, at any depth):
//! - OS: `etc/os-release`, `usr/lib/os-release`.
//! - Pythons: `**/bin/python3.X`, `**/lib/python3.X/` (with its `os.py`), conda's
//!   `**/conda-meta/python-3.X.Y-*.json` (the exact version is in the name), free-threaded
//!   `python3.13t`.
//! - torch: `SP/torch/version.py` (`__version__`, `cuda`, `git_version`),
//!   `SP/torch-*.dist-info/METADATA` (or an egg's `PKG-INFO`) for the `nvidia-*` and
//!   `cuda-*` pins; torchvision and torchaudio likewise.
//! - pip packages: `SP/<name>-<version>.dist-info` for `nvidia-*`, `cuda-*`, `torch*`,
//!   `triton` and `pytorch-triton`.
//! - CUDA toolkit: `usr/local/cuda*/version.json` / `version.txt`, `bin/nvcc`, and every
//!   `libcudart.so.*` anywhere.
//! - cuDNN: `include/**/cudnn_version*.h` and `cudnn.h`, `libcudnn.so.*` anywhere (system,
//!   toolkit, pip wheel, torch's own `lib/`), pip `nvidia-cudnn-cu*`, env
//!   `NV_CUDNN_VERSION` / `CUDNN_VERSION`, label `com.nvidia.cudnn.version`.
//! - NCCL: `include/nccl.h`, `libnccl.so.*`, pip `nvidia-nccl-cu*`, env `NCCL_VERSION`.
//! - The other libraries of the `nvidia-*` wheels (`libcublas.so.*`, `libnvrtc.so.*`, ...;
//!   see [`super::cudalibs`]) anywhere: kept for the judgement, not listed in the facts.
//! - cuda-compat: `usr/local/cuda*/compat/libcuda.so.<driver version>` and its ELF note
//!   (see [`super::elfnote`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::config::ImageConfig;
use super::elfnote::{self, CompatNote};
use super::fs::MergedFs;
use super::layer::Interest;
use super::pyfiles::{self, Metadata, Pin, VersionPy};
use super::tar::Kind;
use crate::formats::{
    cuda_version_json, cuda_version_txt, cudnn_header, lib_version, nccl_header, os_release,
};
use crate::model::{CudaVersion, CudnnVersion, DriverVersion, NcclVersion};

/// A value and where it was read (`/path`, `file name /path`, `env NAME=value`,
/// `label NAME=value`, `directory name /path`).
pub use crate::model::Sourced;

/// Everything detection found in one image.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ImageFacts {
    /// `os/architecture[/variant]` from the config.
    pub platform: String,
    /// `/etc/os-release`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<OsFacts>,
    /// Every Python found, by prefix.
    pub pythons: Vec<PythonFacts>,
    /// Every torch found, one per site-packages directory.
    pub torch: Vec<TorchFacts>,
    /// The pip packages that matter here (`nvidia-*`, `cuda-*`, `torch*`, triton).
    pub packages: Vec<PipPackage>,
    /// CUDA toolkit directories under `/usr/local`.
    pub cuda_toolkits: Vec<CudaToolkit>,
    /// Every `libcudart.so.*` file.
    pub cudart: Vec<LibraryFile>,
    /// cuDNN, from every source.
    pub cudnn: CudnnFacts,
    /// NCCL, from every source.
    pub nccl: NcclFacts,
    /// `cuda-compat` user-mode drivers.
    pub cuda_compat: Vec<CompatLib>,
    /// What the config's `Env` declares about the stack.
    pub env: EnvFacts,
    /// The config's `Labels`.
    pub labels: BTreeMap<String, String>,
    /// `Entrypoint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<Vec<String>>,
    /// `Cmd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmd: Option<Vec<String>>,
    /// `User` (`None` or empty: root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// The distribution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsFacts {
    /// `ubuntu`.
    pub id: String,
    /// `22.04`.
    pub version_id: String,
    /// `Ubuntu 22.04.4 LTS`.
    pub pretty_name: String,
    /// Where it was read.
    pub source: String,
}

/// One Python installation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PythonFacts {
    /// `3.11`.
    pub version: String,
    /// A free-threaded build (`python3.13t`).
    pub free_threaded: bool,
    /// The exact version where the image says it (conda's package record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact: Option<Sourced<String>>,
    /// The installation prefix (`/usr`, `/opt/conda`).
    pub prefix: String,
    /// Interpreter files (`/opt/conda/bin/python3.11`).
    pub executables: Vec<String>,
    /// Its `site-packages` / `dist-packages` directories.
    pub site_packages: Vec<String>,
    /// The first path that showed it.
    pub source: String,
}

/// One torch installation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TorchFacts {
    /// The `site-packages` directory it is in.
    pub site_packages: String,
    /// The Python minor that directory belongs to (`3.11`), when its path says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<String>,
    /// `__version__` of `torch/version.py`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<Sourced<String>>,
    /// `torch.version.cuda`; `None` with [`TorchFacts::cpu_only`] for a CPU build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<Sourced<String>>,
    /// `version.py` says `cuda = None`.
    pub cpu_only: bool,
    /// `torch.version.git_version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_version: Option<String>,
    /// `torch.version.hip` (ROCm builds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hip: Option<String>,
    /// The version the package metadata (dist-info) carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dist_version: Option<Sourced<String>>,
    /// The `nvidia-*` / `cuda-*` requirements of its metadata.
    pub pins: Vec<Pin>,
    /// Where the pins were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pins_source: Option<String>,
    /// `Requires-Dist` lines about CUDA components that did not parse.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unparsed_pins: Vec<String>,
    /// torchvision next to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torchvision: Option<Sourced<String>>,
    /// torchaudio next to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torchaudio: Option<Sourced<String>>,
}

impl TorchFacts {
    /// A torch whose version and CUDA (`None`: a CPU build) are known from `version.py` or
    /// a record, and nothing else yet: no metadata, pins or companions.
    pub fn declared(
        site_packages: String,
        python: Option<String>,
        version: Sourced<String>,
        cuda: Option<Sourced<String>>,
    ) -> TorchFacts {
        TorchFacts {
            site_packages,
            python,
            version: Some(version),
            cpu_only: cuda.is_none(),
            cuda,
            git_version: None,
            hip: None,
            dist_version: None,
            pins: Vec::new(),
            pins_source: None,
            unparsed_pins: Vec::new(),
            torchvision: None,
            torchaudio: None,
        }
    }

    /// The torch version, from `version.py` or else the metadata.
    pub fn version_str(&self) -> Option<&str> {
        self.version
            .as_ref()
            .or(self.dist_version.as_ref())
            .map(|s| s.value.as_str())
    }

    /// `torch.version.cuda` as a CUDA version.
    pub fn cuda_version(&self) -> Option<CudaVersion> {
        self.cuda.as_ref().and_then(|c| c.value.parse().ok())
    }

    /// The pin on `name` (normalized, e.g. `nvidia-cudnn-cu12`), if any.
    pub fn pin(&self, name: &str) -> Option<&Pin> {
        self.pins.iter().find(|p| p.name == name)
    }
}

/// An installed distribution (a `*.dist-info` or `*.egg-info`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PipPackage {
    /// Normalized name (`nvidia-cudnn-cu12`).
    pub name: String,
    /// Version as the directory name carries it.
    pub version: String,
    /// The `site-packages` directory.
    pub site_packages: String,
    /// The `*.dist-info` directory.
    pub source: String,
}

/// Where a library file sits, which decides who loads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LibOrigin {
    /// The distribution's library directories (`/usr/lib/x86_64-linux-gnu`), apt packages.
    System,
    /// A CUDA toolkit under `/usr/local/cuda*`.
    CudaToolkit,
    /// An `nvidia-*` pip wheel (`site-packages/nvidia/...`).
    PipWheel,
    /// Copied inside torch's own `lib/` directory.
    TorchBundled,
    /// A conda environment.
    Conda,
    /// Anywhere else.
    Other,
}

/// A shared library file and the version its name carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LibraryFile {
    /// The path.
    pub path: String,
    /// What follows `.so.` in its name (`9.1.0`; pip wheels carry only the major, `9`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Where it sits.
    pub origin: LibOrigin,
}

/// A CUDA toolkit directory (`/usr/local/cuda-12.4`, or the `/usr/local/cuda` link).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CudaToolkit {
    /// The directory.
    pub root: String,
    /// Its target when it is a symlink.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_target: Option<String>,
    /// From `version.json` (or `version.txt` before 11.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<Sourced<CudaVersion>>,
    /// `bin/nvcc`, when present (devel images).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvcc: Option<String>,
}

/// cuDNN, each source apart: they disagree in the images that matter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CudnnFacts {
    /// From `cudnn_version.h` / `cudnn.h`.
    pub headers: Vec<Sourced<CudnnVersion>>,
    /// Every `libcudnn.so.*` file (the main library; its `libcudnn_*` parts are not listed).
    pub libraries: Vec<LibraryFile>,
    /// pip `nvidia-cudnn-cu*`.
    pub pip: Vec<Sourced<String>>,
    /// What the config declares (`env NV_CUDNN_VERSION`, `env CUDNN_VERSION`,
    /// `label com.nvidia.cudnn.version`), without the Debian revision (`-1`).
    pub declared: Vec<Sourced<CudnnVersion>>,
}

/// NCCL, each source apart.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NcclFacts {
    /// From `nccl.h`.
    pub headers: Vec<Sourced<NcclVersion>>,
    /// Every `libnccl.so.*` file.
    pub libraries: Vec<LibraryFile>,
    /// pip `nvidia-nccl-cu*`.
    pub pip: Vec<Sourced<String>>,
    /// `env NCCL_VERSION`, without the package revision.
    pub declared: Vec<Sourced<NcclVersion>>,
}

/// A `cuda-compat` user-mode driver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompatLib {
    /// `/usr/local/cuda-12.8/compat/libcuda.so.570.124.06`.
    pub path: String,
    /// The driver version its name carries: the branch is its major (`570`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<DriverVersion>,
    /// Its ELF note, when the library has one: the supported host branches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<CompatNote>,
}

/// What the config's `Env` says about the stack.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvFacts {
    /// `CUDA_VERSION`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_version: Option<Sourced<CudaVersion>>,
    /// Every `NVIDIA_REQUIRE_*`, as written (source: the variable's name).
    pub require: Vec<Sourced<String>>,
    /// `NVIDIA_DISABLE_REQUIRE` as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_require: Option<String>,
    /// `PYTORCH_VERSION` (pytorch/pytorch and NGC images).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pytorch_version: Option<String>,
    /// `NVIDIA_PYTORCH_VERSION`: the NGC release (`24.08`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvidia_pytorch_version: Option<String>,
    /// Every variable as `(name, value)`, in order.
    pub all: Vec<(String, String)>,
}

// ---------------------------------------------------------------------------------------
// Selection: which paths the layer reader keeps.

/// Whether a directory name is a CUDA toolkit root: `cuda`, `cuda-12`, `cuda-12.4`.
fn is_cuda_root(name: &str) -> bool {
    name == "cuda"
        || name
            .strip_prefix("cuda-")
            .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
}

/// `3.11` and whether free-threaded, from `python3.11` / `python3.13t`.
fn python_minor(name: &str) -> Option<(String, bool)> {
    let rest = name.strip_prefix("python3.")?;
    let (digits, free) = match rest.strip_suffix('t') {
        Some(d) => (d, true),
        None => (rest, false),
    };
    (!digits.is_empty() && digits.len() <= 3 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| (format!("3.{digits}"), free))
}

fn is_site_dir(name: &str) -> bool {
    name == "site-packages" || name == "dist-packages"
}

/// The distributions whose `*.dist-info` is worth keeping.
fn relevant_dist(dir: &str) -> bool {
    let lower = dir.to_ascii_lowercase();
    [
        "nvidia",
        "cuda",
        "torch",
        "triton",
        "pytorch_triton",
        "pytorch-triton",
    ]
    .iter()
    .any(|p| lower.starts_with(p))
}

/// Shared libraries detection lists, wherever they are, and the other libraries of the
/// `nvidia-*` wheels (kept, not listed: the verify judgement looks for stand-ins of a
/// missing wheel among them).
fn is_cuda_library(base: &str) -> bool {
    ((base.starts_with("libcudart.so") || base.starts_with("libcudnn") || base.starts_with("libnccl.so"))
        && base.contains(".so"))
        || super::cudalibs::is_wheel_library(base)
}

/// The layer reader's selector for detection: see the module docs for the list.
pub fn select(path: &str, kind: Kind) -> Interest {
    let comps: Vec<&str> = path.split('/').collect();
    let n = comps.len();
    let base = comps[n - 1];
    if path == "etc/os-release" || path == "usr/lib/os-release" {
        return Interest::Capture;
    }
    if n >= 3 && comps[0] == "usr" && comps[1] == "local" && is_cuda_root(comps[2]) {
        match &comps[3..] {
            [] => return Interest::Record,
            ["version.json"] | ["version.txt"] => return Interest::Capture,
            ["bin", "nvcc"] => return Interest::Record,
            ["compat", f] if f.starts_with("libcuda.so") => {
                let versioned = lib_version(f, "libcuda.so").is_some_and(|v| v.contains('.'));
                return if versioned && kind == Kind::File {
                    Interest::ScanCompatNote
                } else {
                    Interest::Record
                };
            }
            _ => {}
        }
    }
    if n >= 2 && (comps[n - 2] == "include" || (n >= 3 && comps[n - 3] == "include")) {
        let header = base == "cudnn.h"
            || base == "nccl.h"
            || (base.starts_with("cudnn_version") && base.ends_with(".h"));
        if header {
            return Interest::Capture;
        }
    }
    if is_cuda_library(base) {
        return Interest::Record;
    }
    if n >= 2 && comps[n - 2] == "bin" && python_minor(base).is_some() {
        return Interest::Record;
    }
    if n >= 2 && comps[n - 2] == "conda-meta" && base.starts_with("python-3") && base.ends_with(".json") {
        return Interest::Record;
    }
    // lib/python3.X[/os.py | /site-packages/...], and Debian's lib/python3/dist-packages.
    for i in 1..n {
        if comps[i - 1] != "lib" {
            continue;
        }
        let versioned = python_minor(comps[i]).is_some();
        if !versioned && comps[i] != "python3" {
            continue;
        }
        let rest = &comps[i + 1..];
        return match rest {
            [] if versioned => Interest::Record,
            ["os.py"] if versioned => Interest::Record,
            [site, tail @ ..] if is_site_dir(site) => select_in_site(tail),
            _ => Interest::Ignore,
        };
    }
    Interest::Ignore
}

/// Inside a site-packages directory: `tail` is the path below it.
fn select_in_site(tail: &[&str]) -> Interest {
    match tail {
        [] => Interest::Record,
        [d] if (d.ends_with(".dist-info") || d.ends_with(".egg-info")) && relevant_dist(d) => {
            // An egg-info may be a single file holding the metadata.
            if d.starts_with("torch-") && d.ends_with(".egg-info") {
                Interest::Capture
            } else {
                Interest::Record
            }
        }
        [d, "METADATA"] if d.ends_with(".dist-info") && relevant_dist(d) => {
            if d.starts_with("torch-") {
                Interest::Capture
            } else {
                Interest::Record
            }
        }
        [d, "PKG-INFO"] if d.starts_with("torch-") && d.ends_with(".egg-info") => Interest::Capture,
        ["torch" | "torchvision" | "torchaudio"] => Interest::Record,
        ["torch" | "torchvision" | "torchaudio", "version.py"] => Interest::Capture,
        _ => Interest::Ignore,
    }
}

// ---------------------------------------------------------------------------------------
// Detection.

fn shown(path: &str) -> String {
    format!("/{path}")
}

/// Everything detection can tell from `config` and the merged `fs`.
pub fn detect(config: &ImageConfig, fs: &MergedFs) -> ImageFacts {
    let paths: Vec<&str> = fs.paths().collect();
    let sites = site_dirs(&paths);
    let packages = pip_packages(fs, &sites);
    let env = env_facts(config);
    ImageFacts {
        platform: config.platform(),
        os: os_facts(fs),
        pythons: pythons(&paths, &sites),
        torch: sites.iter().filter_map(|s| torch_in(fs, s)).collect(),
        cuda_toolkits: toolkits(fs, &paths),
        cudart: libraries(fs, &paths, "libcudart.so"),
        cudnn: cudnn_facts(fs, &paths, &packages, config),
        nccl: nccl_facts(fs, &paths, &packages, config),
        cuda_compat: compat_libs(fs, &paths),
        packages,
        env,
        labels: config.labels.clone(),
        entrypoint: config.entrypoint.clone(),
        cmd: config.cmd.clone(),
        user: config.user.clone(),
    }
}

fn os_facts(fs: &MergedFs) -> Option<OsFacts> {
    ["etc/os-release", "usr/lib/os-release"].iter().find_map(|p| {
        let text = String::from_utf8_lossy(fs.read(p)?);
        let os = os_release(&text);
        (!os.id.is_empty()).then(|| OsFacts {
            id: os.id,
            version_id: os.version_id,
            pretty_name: os.pretty_name,
            source: shown(p),
        })
    })
}

/// Every site-packages/dist-packages directory some kept path lies in.
fn site_dirs(paths: &[&str]) -> Vec<String> {
    let mut out = BTreeSet::new();
    for p in paths {
        let comps: Vec<&str> = p.split('/').collect();
        if let Some(j) = comps.iter().position(|c| is_site_dir(c)) {
            if j > 0 {
                out.insert(comps[..=j].join("/"));
            }
        }
    }
    out.into_iter().collect()
}

/// The Python minor a site directory belongs to: `.../lib/python3.11/site-packages`.
fn site_python(site: &str) -> Option<String> {
    let comps: Vec<&str> = site.split('/').collect();
    let n = comps.len();
    (n >= 2)
        .then(|| python_minor(comps[n - 2]).map(|(v, _)| v))
        .flatten()
}

// One pass over the kept paths reading every way a Python shows itself (interpreter,
// library directory, conda record); split, each way would walk the paths again.
fn pythons(paths: &[&str], sites: &[String]) -> Vec<PythonFacts> {
    let mut found: BTreeMap<(String, String), PythonFacts> = BTreeMap::new();
    fn entry(
        found: &mut BTreeMap<(String, String), PythonFacts>,
        prefix: &str,
        version: &str,
        free: bool,
        source: &str,
    ) -> (String, String) {
        let key = (prefix.to_string(), version.to_string());
        found.entry(key.clone()).or_insert_with(|| PythonFacts {
            version: version.to_string(),
            free_threaded: free,
            exact: None,
            prefix: shown(prefix),
            executables: Vec::new(),
            site_packages: Vec::new(),
            source: shown(source),
        });
        key
    }
    let mut exact: Vec<(String, String, String)> = Vec::new();
    for p in paths {
        let comps: Vec<&str> = p.split('/').collect();
        let n = comps.len();
        let base = comps[n - 1];
        if n >= 2 && comps[n - 2] == "bin" {
            if let Some((v, free)) = python_minor(base) {
                let prefix = comps[..n - 2].join("/");
                let key = entry(&mut found, &prefix, &v, free, p);
                if let Some(py) = found.get_mut(&key) {
                    py.executables.push(shown(p));
                }
                continue;
            }
        }
        if n >= 2 && comps[n - 2] == "conda-meta" {
            // python-3.11.9-hb806964_0_cpython.json
            if let Some(v) = base.strip_prefix("python-").and_then(|r| r.split('-').next()) {
                exact.push((comps[..n - 2].join("/"), v.to_string(), shown(p)));
            }
            continue;
        }
        for i in 1..n {
            if comps[i - 1] == "lib" {
                if let Some((v, free)) = python_minor(comps[i]) {
                    let prefix = comps[..i - 1].join("/");
                    entry(&mut found, &prefix, &v, free, &comps[..=i].join("/"));
                    break;
                }
            }
        }
    }
    for (prefix, version, source) in exact {
        let minor: String = version.split('.').take(2).collect::<Vec<_>>().join(".");
        let key = (prefix.clone(), minor.clone());
        if !found.contains_key(&key) {
            entry(&mut found, &prefix, &minor, false, source.trim_start_matches('/'));
        }
        if let Some(py) = found.get_mut(&key) {
            py.exact = Some(Sourced::new(version, format!("file name {source}")));
        }
    }
    // Debian puts packages of the system Python under /usr/local/lib/python3.X too.
    let locals: Vec<(String, String)> = found
        .keys()
        .filter(|(p, v)| p == "usr/local" && found.contains_key(&("usr".to_string(), v.clone())))
        .cloned()
        .collect();
    for key in locals {
        if let Some(local) = found.remove(&key) {
            if let Some(sys) = found.get_mut(&("usr".to_string(), key.1.clone())) {
                sys.executables.extend(local.executables);
            }
        }
    }
    for site in sites {
        let comps: Vec<&str> = site.split('/').collect();
        let n = comps.len();
        if n < 3 {
            continue;
        }
        let prefix = comps[..n - 3].join("/");
        let dir = comps[n - 2];
        let targets: Vec<(String, String)> = match python_minor(dir) {
            Some((v, _)) => {
                let own = (prefix.clone(), v.clone());
                if found.contains_key(&own) {
                    vec![own]
                } else if prefix == "usr/local" {
                    vec![("usr".to_string(), v)]
                } else {
                    vec![own]
                }
            }
            // /usr/lib/python3/dist-packages serves every Python of /usr.
            None if dir == "python3" => found.keys().filter(|(p, _)| *p == prefix).cloned().collect(),
            None => Vec::new(),
        };
        for key in targets {
            if let Some(py) = found.get_mut(&key) {
                py.site_packages.push(shown(site));
            }
        }
    }
    found.into_values().collect()
}

fn pip_packages(fs: &MergedFs, sites: &[String]) -> Vec<PipPackage> {
    let mut out: Vec<PipPackage> = Vec::new();
    let mut seen = BTreeSet::new();
    for site in sites {
        let prefix = format!("{site}/");
        for p in fs
            .glob(&format!("{site}/*"))
            .into_iter()
            .chain(fs.glob(&format!("{site}/*/METADATA")))
        {
            let dir = p[prefix.len()..].split('/').next().unwrap_or("");
            if !relevant_dist(dir) || !seen.insert(format!("{site}/{dir}")) {
                continue;
            }
            if let Some((name, version)) = pyfiles::dist_name(dir) {
                out.push(PipPackage {
                    name,
                    version,
                    site_packages: shown(site),
                    source: shown(&format!("{site}/{dir}")),
                });
            }
        }
    }
    out
}

fn read_text(fs: &MergedFs, path: &str) -> Option<String> {
    fs.read(path).map(|b| String::from_utf8_lossy(b).into_owned())
}

fn torch_in(fs: &MergedFs, site: &str) -> Option<TorchFacts> {
    let vpath = format!("{site}/torch/version.py");
    let version_py: Option<VersionPy> = read_text(fs, &vpath).map(|t| pyfiles::parse_version_py(&t));
    // The metadata: a wheel's METADATA, or an egg's PKG-INFO (a file or a directory).
    let meta_path = fs
        .glob(&format!("{site}/torch-*.dist-info/METADATA"))
        .into_iter()
        .chain(fs.glob(&format!("{site}/torch-*.egg-info/PKG-INFO")))
        .chain(
            fs.glob(&format!("{site}/torch-*.egg-info"))
                .into_iter()
                .filter(|p| fs.get(p).is_some_and(|n| n.entry.kind == Kind::File)),
        )
        .next()
        .map(str::to_string);
    let meta: Option<Metadata> = meta_path
        .as_deref()
        .and_then(|p| read_text(fs, p))
        .map(|t| pyfiles::parse_metadata(&t));
    let dist_dir = fs
        .glob(&format!("{site}/torch-*.dist-info"))
        .into_iter()
        .chain(fs.glob(&format!("{site}/torch-*.egg-info")))
        .next()
        .map(str::to_string);
    let has_dir = fs.get(&format!("{site}/torch")).is_some();
    if version_py.is_none() && meta.is_none() && dist_dir.is_none() && !has_dir {
        return None;
    }
    let dist_version = match (&meta, &meta_path, &dist_dir) {
        (Some(Metadata { version: Some(v), .. }), Some(p), _) => Some(Sourced::new(v.clone(), shown(p))),
        (_, _, Some(d)) => pyfiles::dist_name(d.rsplit('/').next().unwrap_or(d))
            .map(|(_, v)| Sourced::new(v, format!("directory name {}", shown(d)))),
        _ => None,
    };
    let (pins, unparsed) = meta.as_ref().map(pyfiles::cuda_pins).unwrap_or_default();
    let vp = version_py.unwrap_or_default();
    let companion = |name: &str| -> Option<Sourced<String>> {
        let path = format!("{site}/{name}/version.py");
        if let Some(v) = read_text(fs, &path).and_then(|t| pyfiles::parse_version_py(&t).version) {
            return Some(Sourced::new(v, shown(&path)));
        }
        let dir = fs
            .glob(&format!("{site}/{name}-*.dist-info"))
            .into_iter()
            .next()?;
        pyfiles::dist_name(dir.rsplit('/').next().unwrap_or(dir))
            .map(|(_, v)| Sourced::new(v, format!("directory name {}", shown(dir))))
    };
    Some(TorchFacts {
        site_packages: shown(site),
        python: site_python(site),
        version: vp.version.map(|v| Sourced::new(v, shown(&vpath))),
        cpu_only: vp.cuda_assigned && vp.cuda.is_none() && vp.hip.is_none() && vp.xpu.is_none(),
        cuda: vp.cuda.map(|v| Sourced::new(v, shown(&vpath))),
        git_version: vp.git_version,
        hip: vp.hip,
        dist_version,
        pins_source: meta_path.as_deref().filter(|_| !pins.is_empty()).map(shown),
        pins,
        unparsed_pins: unparsed,
        torchvision: companion("torchvision"),
        torchaudio: companion("torchaudio"),
    })
}

fn toolkits(fs: &MergedFs, paths: &[&str]) -> Vec<CudaToolkit> {
    let roots: BTreeSet<String> = paths
        .iter()
        .filter_map(|p| {
            let comps: Vec<&str> = p.splitn(4, '/').collect();
            (comps.len() >= 3 && comps[0] == "usr" && comps[1] == "local" && is_cuda_root(comps[2]))
                .then(|| comps[..3].join("/"))
        })
        .collect();
    roots
        .into_iter()
        .map(|root| {
            let link_target = fs
                .get(&root)
                .filter(|n| n.entry.kind == Kind::Symlink)
                .and_then(|n| n.entry.link.clone());
            let json = format!("{root}/version.json");
            let txt = format!("{root}/version.txt");
            let version = read_text(fs, &json)
                .and_then(|t| cuda_version_json(&t))
                .map(|v| Sourced::new(v, shown(&json)))
                .or_else(|| {
                    read_text(fs, &txt)
                        .and_then(|t| cuda_version_txt(&t))
                        .map(|v| Sourced::new(v, shown(&txt)))
                });
            let nvcc_path = format!("{root}/bin/nvcc");
            let nvcc = fs.exists(&nvcc_path).then(|| shown(&nvcc_path));
            CudaToolkit {
                root: shown(&root),
                link_target,
                version,
                nvcc,
            }
        })
        .collect()
}

fn origin(path: &str) -> LibOrigin {
    let in_site = path.contains("/site-packages/") || path.contains("/dist-packages/");
    if in_site && (path.contains("-packages/torch/lib/")) {
        LibOrigin::TorchBundled
    } else if in_site && path.contains("-packages/nvidia/") {
        LibOrigin::PipWheel
    } else if path.starts_with("usr/local/cuda") {
        LibOrigin::CudaToolkit
    } else if path.contains("conda/") {
        LibOrigin::Conda
    } else if ["usr/lib/", "usr/lib64/", "lib/", "lib64/"]
        .iter()
        .any(|p| path.starts_with(p))
    {
        LibOrigin::System
    } else {
        LibOrigin::Other
    }
}

/// Every kept regular file named `<stem>.<numbers>` (or exactly `<stem>`).
fn libraries(fs: &MergedFs, paths: &[&str], stem: &str) -> Vec<LibraryFile> {
    paths
        .iter()
        .filter(|p| {
            let base = p.rsplit('/').next().unwrap_or(p);
            let named = base == stem || lib_version(base, stem).is_some();
            named
                && fs
                    .get(p)
                    .is_some_and(|n| n.entry.kind != Kind::Symlink && n.entry.kind != Kind::Dir)
        })
        .map(|p| LibraryFile {
            path: shown(p),
            version: lib_version(p, stem),
            origin: origin(p),
        })
        .collect()
}

/// `9.1.0.70` out of `9.1.0.70-1` or `libcudnn8=8.9.0.131-1+cuda12.1`-style values.
fn strip_revision(value: &str) -> &str {
    let v = value.trim();
    let end = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    v[..end].trim_end_matches('.')
}

fn declared<T: std::str::FromStr>(config: &ImageConfig, envs: &[&str], labels: &[&str]) -> Vec<Sourced<T>> {
    let mut out = Vec::new();
    for name in envs {
        if let Some(v) = config.env_var(name) {
            if let Ok(parsed) = strip_revision(v).parse() {
                out.push(Sourced::new(parsed, format!("env {name}={v}")));
            }
        }
    }
    for name in labels {
        if let Some(v) = config.labels.get(*name) {
            if let Ok(parsed) = strip_revision(v).parse() {
                out.push(Sourced::new(parsed, format!("label {name}={v}")));
            }
        }
    }
    out
}

fn pip_of(packages: &[PipPackage], prefix: &str) -> Vec<Sourced<String>> {
    packages
        .iter()
        .filter(|p| p.name.starts_with(prefix))
        .map(|p| Sourced::new(p.version.clone(), p.source.clone()))
        .collect()
}

fn headers<T>(
    fs: &MergedFs,
    paths: &[&str],
    names: &dyn Fn(&str) -> bool,
    parse: fn(&str) -> Option<T>,
) -> Vec<Sourced<T>> {
    paths
        .iter()
        .filter(|p| names(p.rsplit('/').next().unwrap_or(p)))
        .filter_map(|p| {
            let text = read_text(fs, p)?;
            parse(&text).map(|v| Sourced::new(v, shown(p)))
        })
        .collect()
}

fn cudnn_facts(fs: &MergedFs, paths: &[&str], packages: &[PipPackage], config: &ImageConfig) -> CudnnFacts {
    CudnnFacts {
        headers: headers(
            fs,
            paths,
            &|b| b == "cudnn.h" || (b.starts_with("cudnn_version") && b.ends_with(".h")),
            cudnn_header,
        ),
        libraries: libraries(fs, paths, "libcudnn.so"),
        pip: pip_of(packages, "nvidia-cudnn-"),
        declared: declared(
            config,
            &["NV_CUDNN_VERSION", "CUDNN_VERSION"],
            &["com.nvidia.cudnn.version"],
        ),
    }
}

fn nccl_facts(fs: &MergedFs, paths: &[&str], packages: &[PipPackage], config: &ImageConfig) -> NcclFacts {
    NcclFacts {
        headers: headers(fs, paths, &|b| b == "nccl.h", nccl_header),
        libraries: libraries(fs, paths, "libnccl.so"),
        pip: pip_of(packages, "nvidia-nccl-"),
        declared: declared(config, &["NCCL_VERSION"], &[]),
    }
}

fn compat_libs(fs: &MergedFs, paths: &[&str]) -> Vec<CompatLib> {
    paths
        .iter()
        .filter(|p| {
            let comps: Vec<&str> = p.split('/').collect();
            comps.len() == 5
                && comps[0] == "usr"
                && comps[1] == "local"
                && is_cuda_root(comps[2])
                && comps[3] == "compat"
                && lib_version(comps[4], "libcuda.so").is_some_and(|v| v.contains('.'))
        })
        .filter_map(|p| {
            let node = fs.get(p)?;
            if node.entry.kind == Kind::Symlink {
                return None;
            }
            Some(CompatLib {
                path: shown(p),
                driver: lib_version(p, "libcuda.so").and_then(|v| v.parse().ok()),
                note: node.entry.note.as_deref().and_then(elfnote::parse_note),
            })
        })
        .collect()
}

fn env_facts(config: &ImageConfig) -> EnvFacts {
    let all = config.env_pairs();
    let get = |name: &str| config.env_var(name).map(str::to_string);
    let mut require: Vec<Sourced<String>> = Vec::new();
    for (k, v) in &all {
        if k.starts_with("NVIDIA_REQUIRE_") {
            // A later definition of the same variable replaces the earlier one.
            require.retain(|s| s.source != format!("env {k}"));
            require.push(Sourced::new(v.clone(), format!("env {k}")));
        }
    }
    EnvFacts {
        // NGC writes four parts (`12.8.0.038`): the first three are the toolkit version.
        cuda_version: config.env_var("CUDA_VERSION").and_then(|v| {
            let three: Vec<&str> = strip_revision(v).split('.').take(3).collect();
            three
                .join(".")
                .parse()
                .ok()
                .map(|c| Sourced::new(c, format!("env CUDA_VERSION={v}")))
        }),
        require,
        disable_require: get("NVIDIA_DISABLE_REQUIRE"),
        pytorch_version: get("PYTORCH_VERSION"),
        nvidia_pytorch_version: get("NVIDIA_PYTORCH_VERSION"),
        all,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection() {
        use Interest::*;
        let cases = [
            ("etc/os-release", Kind::File, Capture),
            ("usr/local/cuda-12.4", Kind::Dir, Record),
            ("usr/local/cuda", Kind::Symlink, Record),
            ("usr/local/cuda-12.4/version.json", Kind::File, Capture),
            ("usr/local/cuda-12.4/bin/nvcc", Kind::File, Record),
            (
                "usr/local/cuda-12.8/compat/libcuda.so.570.124.06",
                Kind::File,
                ScanCompatNote,
            ),
            ("usr/local/cuda-12.8/compat/libcuda.so.1", Kind::Symlink, Record),
            ("usr/include/cudnn_version.h", Kind::File, Capture),
            (
                "usr/include/x86_64-linux-gnu/cudnn_version_v9.h",
                Kind::File,
                Capture,
            ),
            ("usr/include/stdio.h", Kind::File, Ignore),
            ("usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0", Kind::File, Record),
            ("usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5", Kind::File, Record),
            ("usr/lib/x86_64-linux-gnu/libc.so.6", Kind::File, Ignore),
            ("opt/conda/bin/python3.11", Kind::File, Record),
            (
                "opt/conda/conda-meta/python-3.11.9-hb806964_0_cpython.json",
                Kind::File,
                Record,
            ),
            ("usr/lib/python3.10", Kind::Dir, Record),
            ("usr/lib/python3.10/os.py", Kind::File, Record),
            ("usr/lib/python3.10/json/__init__.py", Kind::File, Ignore),
            (
                "opt/conda/lib/python3.11/site-packages/torch/version.py",
                Kind::File,
                Capture,
            ),
            (
                "opt/conda/lib/python3.11/site-packages/torch/nn/functional.py",
                Kind::File,
                Ignore,
            ),
            (
                "opt/conda/lib/python3.11/site-packages/torch-2.4.0.dist-info/METADATA",
                Kind::File,
                Capture,
            ),
            (
                "opt/conda/lib/python3.11/site-packages/torch-2.4.0.dist-info/RECORD",
                Kind::File,
                Ignore,
            ),
            (
                "opt/conda/lib/python3.11/site-packages/nvidia_cudnn_cu12-9.1.0.70.dist-info",
                Kind::Dir,
                Record,
            ),
            (
                "opt/conda/lib/python3.11/site-packages/numpy-2.0.dist-info",
                Kind::Dir,
                Ignore,
            ),
            (
                "usr/lib/python3/dist-packages/torch/version.py",
                Kind::File,
                Capture,
            ),
            (
                "opt/conda/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
                Kind::File,
                Record,
            ),
            (
                "opt/conda/lib/python3.11/site-packages/nvidia/cudnn/include/cudnn_version.h",
                Kind::File,
                Capture,
            ),
        ];
        for (path, kind, want) in cases {
            assert_eq!(select(path, kind), want, "{path}");
        }
    }

    #[test]
    fn revisions_and_minors() {
        assert_eq!(strip_revision("9.1.0.70-1"), "9.1.0.70");
        assert_eq!(strip_revision("2.21.5-1"), "2.21.5");
        assert_eq!(strip_revision("8.9.0.131"), "8.9.0.131");
        assert_eq!(python_minor("python3.13t"), Some(("3.13".into(), true)));
        assert_eq!(python_minor("python3.11-config"), None);
        assert_eq!(python_minor("python3"), None);
        assert!(is_cuda_root("cuda-12.4") && is_cuda_root("cuda") && !is_cuda_root("cuda-samples"));
    }
}
