//! Pure readers of what PyPI publishes: the JSON simple API (PEP 691), wheel file names
//! (PEP 427 tags), and the pins of wheel core metadata (PEP 658: `Requires-Python`,
//! `Requires-Dist`; the header block is read by [`crate::model::metadata`]).
//!
//! What they give about a torch release: the CPython tags and manylinux tag of its Linux
//! x86_64 wheels, when it was uploaded, and, from the `nvidia-*` pins of the default
//! wheel, which CUDA, cuDNN and NCCL PyPI's `pip install torch` brings.

use pep508_rs::VersionOrUrl;
use serde::Deserialize;

use crate::model::{
    CudaVersion, CudnnVersion, Manylinux, NcclVersion, Operator, PartialDate, PythonTag, Variant, Version,
    VersionSpecifiers,
};

use super::UpstreamError;
pub use crate::model::metadata::{Metadata, parse_metadata};

/// A project page of the JSON simple API.
#[derive(Debug, Clone, Deserialize)]
pub struct SimpleProject {
    /// Project name.
    pub name: String,
    /// Every version (API 1.1).
    #[serde(default)]
    pub versions: Vec<String>,
    /// Every file.
    pub files: Vec<SimpleFile>,
}

/// One file of a project page.
#[derive(Debug, Clone, Deserialize)]
pub struct SimpleFile {
    /// `torch-2.4.1-cp311-cp311-manylinux1_x86_64.whl`.
    pub filename: String,
    /// Where to download it; may be relative to the page.
    pub url: String,
    /// Upload time, RFC 3339 (API 1.1).
    #[serde(default, rename = "upload-time")]
    pub upload_time: Option<String>,
    /// `false`, `true`, or the reason as a string.
    #[serde(default)]
    pub yanked: serde_json::Value,
    /// Its size in bytes (API 1.1).
    #[serde(default)]
    pub size: Option<u64>,
}

impl SimpleFile {
    /// Whether the file was yanked.
    pub fn is_yanked(&self) -> bool {
        match &self.yanked {
            serde_json::Value::Bool(b) => *b,
            serde_json::Value::String(_) => true,
            _ => false,
        }
    }
}

/// Parses a JSON simple API page.
pub fn parse_simple(url: &str, text: &str) -> Result<SimpleProject, UpstreamError> {
    serde_json::from_str(text).map_err(|e| UpstreamError::Format {
        url: url.to_string(),
        reason: format!("not a PEP 691 project page: {e}"),
    })
}

/// A wheel file name, split into its PEP 427 parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WheelName {
    /// Distribution name as in the file name.
    pub name: String,
    /// Version, including any local segment (`2.4.1+cu121`).
    pub version: String,
    /// Python tags (`cp311`, `py3`).
    pub python: Vec<String>,
    /// ABI tags (`cp311`, `cp37m`, `cp313t`, `none`, `abi3`).
    pub abi: Vec<String>,
    /// Platform tags (`manylinux1_x86_64`, `win_amd64`).
    pub platform: Vec<String>,
}

impl WheelName {
    /// Parses `name-version(-build)?-python-abi-platform.whl`; `None` for anything else.
    pub fn parse(filename: &str) -> Option<WheelName> {
        let stem = filename.strip_suffix(".whl")?;
        let parts: Vec<&str> = stem.split('-').collect();
        let (name, version, tags) = match parts.as_slice() {
            [n, v, py, abi, plat] => (n, v, [py, abi, plat]),
            [n, v, _build, py, abi, plat] => (n, v, [py, abi, plat]),
            _ => return None,
        };
        let split = |s: &str| s.split('.').map(str::to_string).collect::<Vec<_>>();
        Some(WheelName {
            name: (*name).to_string(),
            version: (*version).to_string(),
            python: split(tags[0]),
            abi: split(tags[1]),
            platform: split(tags[2]),
        })
    }

    /// Whether the wheel installs on Linux x86_64 (any manylinux flavour).
    pub fn is_linux_x86_64(&self) -> bool {
        self.platform
            .iter()
            .any(|p| p.starts_with("manylinux") && p.ends_with("_x86_64"))
    }

    /// Whether pip installs it on Linux x86_64: a manylinux x86_64 wheel or a pure one
    /// (`py3-none-any`), whose requirements are the ones that host gets.
    pub fn installs_on_linux_x86_64(&self) -> bool {
        self.is_linux_x86_64() || self.platform.iter().all(|p| p == "any")
    }

    /// The CPython tag this wheel is built for, with its ABI flag (`cp37m`, `cp313t`).
    pub fn cpython(&self) -> Option<PythonTag> {
        self.abi.iter().find_map(|a| a.parse::<PythonTag>().ok())
    }

    /// Its manylinux aarch64 platform tag, when it is a Linux aarch64 wheel.
    pub fn manylinux_aarch64(&self) -> Option<Manylinux> {
        self.platform
            .iter()
            .filter(|p| p.starts_with("manylinux") && p.ends_with("_aarch64"))
            .find_map(|p| p.parse().ok())
    }

    /// Its manylinux x86_64 platform tag.
    pub fn manylinux(&self) -> Option<Manylinux> {
        self.platform
            .iter()
            .filter(|p| p.starts_with("manylinux") && p.ends_with("_x86_64"))
            .find_map(|p| p.parse().ok())
    }
}

/// A `Requires-Dist` that is not behind an extra, with a version it pins: exactly (`==`,
/// `===`), or from below (`~=3.8.0` is `>=3.8.0,<3.9`: a range, of which only the lower
/// bound is known).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    /// Normalized package name (`nvidia-cudnn-cu12`).
    pub name: String,
    /// The pinned version, or the lower bound of a `~=` range.
    pub version: String,
    /// Whether `version` is the one installed (`==`, `===`); `false` for a `~=` range,
    /// whose newest release in the range is what pip installs.
    pub exact: bool,
    /// Its marker limits it to `platform_machine == "x86_64"`.
    pub x86_64_only: bool,
}

/// The pins of the unconditional (non-extra) requirements: exact ones, and the lower
/// bounds of `~=` ranges (marked not exact).
pub fn pins(meta: &Metadata) -> Vec<Pin> {
    let mut out = Vec::new();
    for line in &meta.requires_dist {
        if line.contains("extra ==") {
            continue;
        }
        // Metadata comes from a server: the guarded parser, which never panics.
        let Ok(req) = crate::model::pep508::parse_requirement(line) else {
            continue;
        };
        let Some(VersionOrUrl::VersionSpecifier(specs)) = &req.version_or_url else {
            continue;
        };
        let exact = specs
            .iter()
            .find(|s| matches!(s.operator(), Operator::Equal | Operator::ExactEqual));
        let pin = match exact {
            Some(spec) => Some((spec, true)),
            None => specs
                .iter()
                .find(|s| *s.operator() == Operator::TildeEqual)
                .map(|spec| (spec, false)),
        };
        if let Some((spec, exact)) = pin {
            // The marker as written: `platform_machine == "x86_64"` (either quote).
            let marker: String = line
                .split_once(';')
                .map(|(_, m)| m)
                .unwrap_or("")
                .replace('\'', "\"");
            out.push(Pin {
                name: req.name.to_string(),
                version: spec.version().to_string(),
                exact,
                x86_64_only: marker.contains("platform_machine == \"x86_64\""),
            });
        }
    }
    out
}

/// What PyPI says about the default build of a torch release.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DefaultBuild {
    /// The CUDA of the build, from the runtime pin; `None` when nothing is pinned (the
    /// wheel bundles its libraries, as 1.12 did).
    pub cuda: Option<CudaVersion>,
    /// The pinned cudart, when pinned exactly (CUDA 12 and earlier).
    pub cudart: Option<CudaVersion>,
    /// The pinned cuDNN.
    pub cudnn: Option<CudnnVersion>,
    /// The pinned NCCL.
    pub nccl: Option<NcclVersion>,
    /// The pinned Triton.
    pub triton: Option<Version>,
    /// The fields above (`triton`, `cudnn`, ...) read from a `~=` range rather than an
    /// exact pin: each holds the range's lower bound, not the version pip installs.
    pub lower_bounds: Vec<&'static str>,
    /// Whether the CUDA runtime requirement holds on aarch64 too: `Some(false)` when its
    /// marker limits it to `platform_machine == "x86_64"` (torch up to 2.10, whose aarch64
    /// wheels on PyPI are CPU-only builds), `None` when there is no such requirement.
    pub cuda_on_aarch64: Option<bool>,
}

impl DefaultBuild {
    /// The variant tag the CUDA pin implies.
    pub fn variant(&self) -> Option<Variant> {
        self.cuda.as_ref().and_then(Variant::for_cuda)
    }
}

/// Reads the default build from a torch wheel's pins: `nvidia-cuda-runtime-cuXX` (or, from
/// CUDA 13, the `cuda-toolkit` meta-package), `nvidia-cudnn-cuXX`, `nvidia-nccl-cuXX`, `triton`.
pub fn default_build(meta: &Metadata) -> DefaultBuild {
    let mut b = DefaultBuild::default();
    for pin in pins(meta) {
        let n = pin.name.as_str();
        if n.starts_with("nvidia-cuda-runtime-cu") || n == "cuda-toolkit" {
            b.cuda_on_aarch64 = Some(!pin.x86_64_only);
        }
        let field = if n.starts_with("nvidia-cuda-runtime-cu") {
            let Ok(v) = pin.version.parse::<CudaVersion>() else {
                continue;
            };
            b.cuda = Some(CudaVersion::from_major_minor(v.major(), v.minor()));
            b.cudart = Some(v);
            "cudart"
        } else if n == "cuda-toolkit" {
            let Ok(v) = pin.version.parse::<CudaVersion>() else {
                continue;
            };
            b.cuda = Some(CudaVersion::from_major_minor(v.major(), v.minor()));
            "cuda"
        } else if n.starts_with("nvidia-cudnn-cu") {
            b.cudnn = pin.version.parse().ok();
            "cudnn"
        } else if n.starts_with("nvidia-nccl-cu") {
            b.nccl = pin.version.parse().ok();
            "nccl"
        } else if n == "triton" {
            b.triton = pin.version.parse().ok();
            "triton"
        } else {
            continue;
        };
        if !pin.exact && !b.lower_bounds.contains(&field) {
            b.lower_bounds.push(field);
        }
    }
    b
}

/// The torch release a companion (torchvision, torchaudio) wheel pins exactly, if it does
/// (`torch~=2.4.0` is a range, not a pairing).
pub fn torch_pin(meta: &Metadata) -> Option<Version> {
    pins(meta)
        .into_iter()
        .find(|p| p.name == "torch" && p.exact)
        .and_then(|p| p.version.parse().ok())
}

/// What the Linux x86_64 wheels of one release say.
#[derive(Debug, Clone, Default)]
pub struct ReleaseFiles {
    /// CPython tags, sorted.
    pub python: Vec<PythonTag>,
    /// The manylinux tag most wheels carry.
    pub manylinux: Option<Manylinux>,
    /// Day of the first upload.
    pub released: Option<PartialDate>,
    /// The Linux x86_64 wheels, preferred first, for reading metadata.
    pub wheels: Vec<SimpleFile>,
    /// Other wheels of the release, for metadata when no Linux one has any.
    pub other_wheels: Vec<SimpleFile>,
    /// The manylinux tag of its Linux aarch64 wheels, when it has any.
    pub manylinux_aarch64: Option<Manylinux>,
    /// Whether its Linux aarch64 wheels are as big as CUDA builds: the largest at least half
    /// the size of the largest x86_64 one. CPU-only aarch64 wheels were a tenth of the CUDA
    /// x86_64 ones (56-146 MB against 620-916 MB, 1.12.0 to 2.10.0); the CUDA aarch64 ones
    /// of 2.11.0 and later are four fifths (420 MB and more). A wheel's metadata alone does
    /// not tell: 1.13's pins carry no machine marker, yet its aarch64 wheels are CPU-only.
    /// `None` when the page gives no sizes.
    pub aarch64_cuda_sized: Option<bool>,
}

/// Collects the files of `version` (a public version such as `2.4.1`).
pub fn release_files(project: &SimpleProject, version: &str) -> ReleaseFiles {
    let mut out = ReleaseFiles::default();
    let mut manylinux: Vec<(Manylinux, usize)> = Vec::new();
    let prefix = format!("{}-{version}-", project.name.replace('-', "_"));
    for f in &project.files {
        if !f.filename.starts_with(&prefix)
            && !f.filename.starts_with(&format!("{}-{version}-", project.name))
        {
            continue;
        }
        let Some(w) = WheelName::parse(&f.filename) else {
            continue;
        };
        if w.version != version || f.is_yanked() {
            continue;
        }
        if let Some(day) = f
            .upload_time
            .as_deref()
            .and_then(|t| t.get(..10))
            .and_then(|d| d.parse().ok())
        {
            if out.released.is_none_or(|r| day < r) {
                out.released = Some(day);
            }
        }
        if !w.is_linux_x86_64() {
            if out.manylinux_aarch64.is_none() {
                out.manylinux_aarch64 = w.manylinux_aarch64();
            }
            out.other_wheels.push(f.clone());
            continue;
        }
        if let Some(tag) = w.cpython() {
            if !out.python.contains(&tag) {
                out.python.push(tag);
            }
        }
        if let Some(m) = w.manylinux() {
            match manylinux.iter_mut().find(|(x, _)| *x == m) {
                Some((_, n)) => *n += 1,
                None => manylinux.push((m, 1)),
            }
        }
        out.wheels.push(f.clone());
    }
    let largest = |fs: &[SimpleFile], arm: bool| {
        fs.iter()
            .filter(|f| {
                WheelName::parse(&f.filename).is_some_and(|w| {
                    if arm {
                        w.manylinux_aarch64().is_some()
                    } else {
                        w.is_linux_x86_64()
                    }
                })
            })
            .filter_map(|f| f.size)
            .max()
    };
    if let (Some(arm), Some(x86)) = (largest(&out.other_wheels, true), largest(&out.wheels, false)) {
        out.aarch64_cuda_sized = Some(arm * 2 >= x86);
    }
    out.python.sort();
    manylinux.sort_by_key(|b| std::cmp::Reverse(b.1));
    out.manylinux = manylinux.into_iter().next().map(|(m, _)| m);
    // cp311/cp312 wheels are the ones most often mirrored with metadata; try them first.
    let rank = |f: &SimpleFile| {
        let tag = WheelName::parse(&f.filename).and_then(|w| w.cpython());
        match tag.map(|t| (t.minor, t.free_threaded)) {
            Some((11, false)) => 0,
            Some((12, false)) => 1,
            Some((10, false)) => 2,
            _ => 3,
        }
    };
    out.wheels.sort_by_key(rank);
    out
}

/// Public release versions (`X.Y.Z`, no pre-releases) at or above `floor`, oldest first.
pub fn releases_since(project: &SimpleProject, floor: &Version) -> Vec<Version> {
    let mut out: Vec<Version> = project
        .versions
        .iter()
        .filter_map(|v| v.parse::<Version>().ok())
        .filter(|v| !v.any_prerelease() && !v.is_local() && v >= floor)
        .collect();
    if out.is_empty() {
        // API 1.0 pages have no `versions`: read them from the file names.
        for f in &project.files {
            if let Some(v) = WheelName::parse(&f.filename).and_then(|w| w.version.parse::<Version>().ok()) {
                if !v.any_prerelease() && !v.is_local() && v >= *floor && !out.contains(&v) {
                    out.push(v);
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// `Requires-Python` as specifiers.
pub fn requires_python(meta: &Metadata) -> Option<VersionSpecifiers> {
    meta.requires_python.as_deref().and_then(|s| s.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    const META: &str = "Metadata-Version: 2.1\nName: torch\nVersion: 2.4.1\nRequires-Python: >=3.8.0\n\
Requires-Dist: filelock\n\
Requires-Dist: nvidia-cuda-runtime-cu12 (==12.1.105) ; platform_system == \"Linux\" and platform_machine == \"x86_64\"\n\
Requires-Dist: nvidia-cudnn-cu12 (==9.1.0.70) ; platform_system == \"Linux\" and platform_machine == \"x86_64\"\n\
Requires-Dist: nvidia-nccl-cu12 (==2.20.5) ; platform_system == \"Linux\" and platform_machine == \"x86_64\"\n\
Requires-Dist: triton (==3.0.0) ; platform_system == \"Linux\" and platform_machine == \"x86_64\" and python_version < \"3.13\"\n\
Requires-Dist: optree (>=0.11.0) ; extra == 'optree'\n\nRequires-Dist: not-a-header-in-the-body\n";

    #[test]
    fn default_build_from_pins() {
        let m = parse_metadata(META);
        assert_eq!(m.version.as_deref(), Some("2.4.1"));
        assert_eq!(m.requires_dist.len(), 6);
        let b = default_build(&m);
        assert_eq!(b.variant(), Some("cu121".parse().unwrap()));
        assert_eq!(b.cudart.unwrap().to_string(), "12.1.105");
        assert_eq!(b.cudnn.unwrap().to_string(), "9.1.0.70");
        assert_eq!(b.nccl.unwrap().to_string(), "2.20.5");
        assert_eq!(b.triton.unwrap().to_string(), "3.0.0");
    }

    /// `~=3.8.0` is the range `>=3.8.0,<3.9`: its lower bound is recorded, marked as
    /// one, and a companion's `torch~=` is no pairing (it was read as an exact pin).
    #[test]
    fn a_compatible_release_pin_is_a_range_not_an_exact_pin() {
        let m = parse_metadata(
            "Name: torch\nVersion: 2.14.0\n\
             Requires-Dist: nvidia-cudnn-cu13==9.24.0.43; platform_system == \"Linux\"\n\
             Requires-Dist: triton~=3.8.0; platform_system == \"Linux\" and python_version < \"3.15\"\n",
        );
        let p = pins(&m);
        assert_eq!(
            p.iter()
                .map(|p| (p.name.as_str(), p.version.as_str(), p.exact))
                .collect::<Vec<_>>(),
            [
                ("nvidia-cudnn-cu13", "9.24.0.43", true),
                ("triton", "3.8.0", false)
            ]
        );
        let b = default_build(&m);
        assert_eq!(b.triton.unwrap().to_string(), "3.8.0");
        assert_eq!(b.lower_bounds, ["triton"]);
        assert_eq!(
            default_build(&parse_metadata(META)).lower_bounds,
            Vec::<&str>::new()
        );
        let companion = |req: &str| parse_metadata(&format!("Name: torchvision\nRequires-Dist: {req}\n"));
        assert_eq!(torch_pin(&companion("torch~=2.4.0")), None);
        assert_eq!(
            torch_pin(&companion("torch==2.4.0")).unwrap().to_string(),
            "2.4.0"
        );
    }

    #[test]
    fn cuda13_meta_package() {
        let m = parse_metadata(
            "Name: torch\nVersion: 2.11.0\nRequires-Dist: cuda-toolkit[cublas,cudart]==13.0.2; platform_system == \"Linux\"\n",
        );
        let b = default_build(&m);
        assert_eq!(b.variant(), Some("cu130".parse().unwrap()));
        assert_eq!(b.cudart, None);
    }

    #[test]
    fn wheel_names() {
        let w = WheelName::parse("torch-2.10.0-3-cp313-cp313t-manylinux_2_28_x86_64.whl").unwrap();
        assert_eq!(w.version, "2.10.0");
        assert_eq!(w.cpython().unwrap().to_string(), "cp313t");
        assert_eq!(w.manylinux().unwrap().as_str(), "manylinux_2_28_x86_64");
        let w = WheelName::parse("torch-1.12.0-cp37-cp37m-manylinux1_x86_64.whl").unwrap();
        assert_eq!(w.cpython().unwrap().to_string(), "cp37m");
        let w = WheelName::parse("torch-2.4.1-cp311-none-macosx_11_0_arm64.whl").unwrap();
        assert!(!w.is_linux_x86_64());
        assert!(WheelName::parse("torch-2.4.1.tar.gz").is_none());
        assert!(WheelName::parse("x-1-py3.whl").is_none());
    }
}
