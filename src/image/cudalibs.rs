//! The shared libraries of the `nvidia-*` wheels torch pins, and the copies of them the
//! dynamic loader would find instead when a wheel is not installed.
//!
//! Owns: the table of which libraries (by soname) each wheel installs, and the search for
//! stand-in copies among the files detection kept. Must not: judge (whether a missing
//! wheel fails the image is the verify judgement's), or read streams.
//!
//! Where a stand-in is looked for, and why there: torch's own libraries reach the wheels'
//! libraries through their RPATH (`$ORIGIN/../../nvidia/<name>/lib`, and `nvidia/cu13/lib`
//! for the CUDA 13 wheels), so files left in those directories without the wheel's
//! metadata still load, as do copies bundled in `torch/lib`. When the RPATH finds nothing
//! the loader goes on to `LD_LIBRARY_PATH` (the image's `Env`), then ld.so's cache and
//! default directories: the distribution's library directories (`/lib`, `/usr/lib`, their
//! `64` and multiarch `<triple>` forms, `/usr/local/lib`), and the CUDA toolkit's library
//! directory, which NVIDIA's packages register with ldconfig (`/usr/local/cuda*/lib64`,
//! `/usr/local/cuda*/targets/<arch>/lib`). A copy anywhere else is not loaded.

use serde::{Deserialize, Serialize};

use super::fs::MergedFs;
use super::tar::Kind;

/// How a wheel's version gives a library's soname version.
#[derive(Clone, Copy)]
enum Soname {
    /// The wheel version's major: `nvidia-cudnn-cu12==9.1.0.70` installs `libcudnn.so.9`.
    Major,
    /// A soname version of its own (`libnvToolsExt.so.1` in nvtx 12.x).
    Fixed(&'static str),
}

/// Each wheel (its name without the `-cuXX` suffix) and the libraries it installs.
const WHEELS: &[(&str, &[(&str, Soname)])] = &[
    ("nvidia-cuda-runtime", &[("libcudart", Soname::Major)]),
    ("nvidia-cuda-nvrtc", &[("libnvrtc", Soname::Major)]),
    ("nvidia-cuda-cupti", &[("libcupti", Soname::Major)]),
    ("nvidia-cudnn", &[("libcudnn", Soname::Major)]),
    (
        "nvidia-cublas",
        &[("libcublas", Soname::Major), ("libcublasLt", Soname::Major)],
    ),
    ("nvidia-cufft", &[("libcufft", Soname::Major)]),
    ("nvidia-curand", &[("libcurand", Soname::Major)]),
    ("nvidia-cusolver", &[("libcusolver", Soname::Major)]),
    ("nvidia-cusparse", &[("libcusparse", Soname::Major)]),
    ("nvidia-cusparselt", &[("libcusparseLt", Soname::Major)]),
    ("nvidia-nccl", &[("libnccl", Soname::Major)]),
    ("nvidia-nvtx", &[("libnvToolsExt", Soname::Fixed("1"))]),
    ("nvidia-nvjitlink", &[("libnvJitLink", Soname::Major)]),
    ("nvidia-cufile", &[("libcufile", Soname::Fixed("0"))]),
    ("nvidia-nvshmem", &[("libnvshmem_host", Soname::Major)]),
];

/// The file-name stems of every library in the table, for the layer reader's selector.
pub fn is_wheel_library(base: &str) -> bool {
    base.contains(".so")
        && WHEELS
            .iter()
            .flat_map(|(_, libs)| libs.iter())
            .any(|(stem, _)| base.starts_with(&format!("{stem}.so")))
}

/// The wheel's name without its CUDA suffix: `nvidia-cudnn-cu12` → `nvidia-cudnn`.
fn base_name(name: &str) -> &str {
    match name.rsplit_once("-cu") {
        Some((base, major)) if !major.is_empty() && major.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => name,
    }
}

/// The major of the lowest version a specifier allows (`==9.1.0.70` → 9, `>=13.0.3,<14`
/// → 13); `None` when it sets no lower bound.
fn lower_major(specifier: &str) -> Option<String> {
    specifier.split(',').find_map(|part| {
        let part = part.trim();
        let version = ["===", "==", "~=", ">="]
            .iter()
            .find_map(|op| part.strip_prefix(op))?
            .trim();
        let major = version.split('.').next()?;
        (!major.is_empty() && major.bytes().all(|b| b.is_ascii_digit())).then(|| major.to_string())
    })
}

/// The sonames a wheel installs, from its normalized name and the specifier it is pinned
/// with: `nvidia-cudnn-cu12`, `==9.1.0.70` → `libcudnn.so.9`. `None` for a wheel the table
/// does not know, or a specifier without a lower bound where the soname needs it.
pub fn wheel_sonames(name: &str, specifier: &str) -> Option<Vec<String>> {
    let (_, libs) = WHEELS.iter().find(|(base, _)| *base == base_name(name))?;
    libs.iter()
        .map(|(stem, rule)| {
            let version = match rule {
                Soname::Major => lower_major(specifier)?,
                Soname::Fixed(v) => v.to_string(),
            };
            Some(format!("{stem}.so.{version}"))
        })
        .collect()
}

/// Where a stand-in copy lies, which says why the loader finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Place {
    /// In the wheel's own directory, without the wheel's metadata.
    WheelDirectory,
    /// Bundled in `torch/lib`.
    TorchLib,
    /// A directory `LD_LIBRARY_PATH` names.
    LdLibraryPath,
    /// A library directory of the distribution.
    System,
    /// The CUDA toolkit's library directory.
    CudaToolkit,
}

impl Place {
    /// How a report says it.
    pub fn describe(self) -> &'static str {
        match self {
            Place::WheelDirectory => "the wheel's directory, without its metadata",
            Place::TorchLib => "torch's own lib directory",
            Place::LdLibraryPath => "a directory of LD_LIBRARY_PATH",
            Place::System => "a system library directory",
            Place::CudaToolkit => "the CUDA toolkit's library directory",
        }
    }
}

/// A copy of a library the loader would find.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StandIn {
    /// The file (`/usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0`).
    pub path: String,
    /// Why the loader finds it there.
    pub place: Place,
}

/// Whether a directory (relative to the root) is one the loader searches by default.
fn system_dir(dir: &str) -> Option<Place> {
    let comps: Vec<&str> = dir.split('/').collect();
    let multiarch = |c: &str| c.ends_with("-linux-gnu") || c.ends_with("-linux-gnueabihf");
    match comps.as_slice() {
        ["lib" | "lib64"] | ["usr", "lib" | "lib64"] | ["usr", "local", "lib" | "lib64"] => {
            Some(Place::System)
        }
        ["lib", t] | ["usr", "lib", t] | ["usr", "local", "lib", t] if multiarch(t) => Some(Place::System),
        ["usr", "local", root, "lib64"] | ["usr", "local", root, "targets", _, "lib"]
            if root == &"cuda" || root.starts_with("cuda-") =>
        {
            Some(Place::CudaToolkit)
        }
        _ => None,
    }
}

/// Copies of `soname` (`libcudnn.so.9`) the loader would find for the torch in `site`
/// (shown form, `/opt/conda/lib/python3.11/site-packages`), among the files `fs` kept:
/// regular files named `soname` or `soname.<more>`, in the places the module docs list.
/// `ld_library_path` is the image's `LD_LIBRARY_PATH`.
pub fn stand_ins(fs: &MergedFs, soname: &str, site: &str, ld_library_path: Option<&str>) -> Vec<StandIn> {
    let site = site.trim_start_matches('/').trim_end_matches('/');
    let ld_dirs: Vec<String> = ld_library_path
        .unwrap_or("")
        .split(':')
        .map(|d| d.trim().trim_matches('/').to_string())
        .filter(|d| !d.is_empty())
        .collect();
    let mut out = Vec::new();
    for path in fs.paths() {
        let Some((dir, base)) = path.rsplit_once('/') else {
            continue;
        };
        let named = base == soname || base.strip_prefix(soname).is_some_and(|r| r.starts_with('.'));
        let file = fs
            .get(path)
            .is_some_and(|n| matches!(n.entry.kind, Kind::File | Kind::HardLink));
        if !named || !file {
            continue;
        }
        let in_wheel = dir
            .strip_prefix(site)
            .and_then(|d| d.strip_prefix("/nvidia/"))
            .is_some_and(|d| d == "lib" || d.ends_with("/lib"));
        let place = if in_wheel {
            Some(Place::WheelDirectory)
        } else if dir == format!("{site}/torch/lib") {
            Some(Place::TorchLib)
        } else if ld_dirs.iter().any(|d| d == dir) {
            Some(Place::LdLibraryPath)
        } else {
            system_dir(dir)
        };
        if let Some(place) = place {
            out.push(StandIn {
                path: format!("/{path}"),
                place,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sonames_of_the_wheels_torch_pins() {
        let s = |n: &str, spec: &str| wheel_sonames(n, spec).map(|v| v.join(" "));
        assert_eq!(
            s("nvidia-cudnn-cu12", "==9.1.0.70").as_deref(),
            Some("libcudnn.so.9")
        );
        assert_eq!(
            s("nvidia-cublas-cu12", "==12.4.5.8").as_deref(),
            Some("libcublas.so.12 libcublasLt.so.12")
        );
        assert_eq!(
            s("nvidia-cufft-cu12", "==11.2.1.3").as_deref(),
            Some("libcufft.so.11")
        );
        assert_eq!(
            s("nvidia-curand-cu12", "==10.3.5.147").as_deref(),
            Some("libcurand.so.10")
        );
        assert_eq!(s("nvidia-nccl-cu12", "==2.21.5").as_deref(), Some("libnccl.so.2"));
        assert_eq!(
            s("nvidia-nvtx-cu12", "==12.4.127").as_deref(),
            Some("libnvToolsExt.so.1")
        );
        assert_eq!(
            s("nvidia-cusparselt-cu12", "==0.6.2").as_deref(),
            Some("libcusparseLt.so.0")
        );
        assert_eq!(
            s("nvidia-cuda-runtime-cu11", "==11.8.89").as_deref(),
            Some("libcudart.so.11")
        );
        // CUDA 13's wheels carry no suffix; ranges give their lower bound.
        assert_eq!(
            s("nvidia-cublas", ">=13.0.0.19,<14").as_deref(),
            Some("libcublas.so.13 libcublasLt.so.13")
        );
        assert_eq!(s("nvidia-cudnn-cu13", "<10"), None);
        assert_eq!(s("nvidia-unknown-cu12", "==1.0"), None);
        assert_eq!(s("nvidia-nvtx-cu12", "").as_deref(), Some("libnvToolsExt.so.1"));
        assert!(is_wheel_library("libcublasLt.so.12.4.5.8"));
        assert!(is_wheel_library("libnvToolsExt.so.1"));
        assert!(!is_wheel_library("libc.so.6"));
        assert!(!is_wheel_library("libcublas.a"));
    }

    #[test]
    fn loader_directories() {
        for (dir, place) in [
            ("usr/lib/x86_64-linux-gnu", Some(Place::System)),
            ("lib/aarch64-linux-gnu", Some(Place::System)),
            ("usr/lib64", Some(Place::System)),
            ("usr/local/lib", Some(Place::System)),
            ("usr/local/cuda-12.4/lib64", Some(Place::CudaToolkit)),
            (
                "usr/local/cuda/targets/x86_64-linux/lib",
                Some(Place::CudaToolkit),
            ),
            ("usr/local/cuda-12.4/lib64/stubs", None),
            ("opt/cudnn/lib", None),
            ("usr/lib/x86_64-linux-gnu/extra", None),
        ] {
            assert_eq!(system_dir(dir), place, "{dir}");
        }
    }
}
