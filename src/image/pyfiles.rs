//! Parsers for the Python files detection reads: `torch/version.py`, a wheel's
//! `METADATA` (or an egg's `PKG-INFO`), and `*.dist-info` / `*.egg-info` names.
//!
//! Owns: turning those texts into values without executing anything; the `METADATA`
//! header block itself is read by [`crate::model::metadata`] (shared with the PyPI
//! refresh) and re-exported here. Must not: read files or judge versions. Every function takes any text and never panics (fuzzed:
//! `fuzz/fuzz_targets/metadata.rs`, `version_py.rs`).

use serde::{Deserialize, Serialize};

/// What `torch/version.py` (also torchvision's and torchaudio's) assigns.
///
/// ```python
/// __version__ = '2.4.0+cu121'
/// debug = False
/// cuda: Optional[str] = '12.1'
/// git_version = 'e4ee3be4063b7c430974252fdf7db42273388d86'
/// hip: Optional[str] = None
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionPy {
    /// `__version__`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// `cuda`: the CUDA torch was built with (`torch.version.cuda`); `None` for CPU and
    /// ROCm builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
    /// Whether `cuda` was assigned at all (`cuda = None` is a CPU build; no line is an
    /// unknown file).
    pub cuda_assigned: bool,
    /// `git_version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_version: Option<String>,
    /// `hip`: the ROCm version of a ROCm build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hip: Option<String>,
    /// `xpu`: the oneAPI version of an XPU build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xpu: Option<String>,
}

/// Parses a generated `version.py`: top-level `name = 'value'` and
/// `name: Optional[str] = 'value'` lines; anything else is ignored.
pub fn parse_version_py(text: &str) -> VersionPy {
    let mut out = VersionPy::default();
    for line in text.lines() {
        // Only top-level assignments: generated files have no indentation.
        if line.starts_with([' ', '\t', '#']) {
            continue;
        }
        let Some((left, right)) = line.split_once('=') else {
            continue;
        };
        // `==` would be a comparison, not an assignment.
        if right.starts_with('=') {
            continue;
        }
        let name = left.split(':').next().unwrap_or("").trim();
        let Some(value) = python_literal(right.trim()) else {
            continue;
        };
        match name {
            "__version__" => out.version = value,
            "cuda" => {
                out.cuda = value;
                out.cuda_assigned = true;
            }
            "git_version" => out.git_version = value,
            "hip" => out.hip = value,
            "xpu" => out.xpu = value,
            _ => {}
        }
    }
    out
}

/// A string literal (`'x'`, `"x"`) or `None`; `Some(None)` for `None`, `None` for
/// anything else.
fn python_literal(text: &str) -> Option<Option<String>> {
    // A trailing comment after the value.
    let text = text.trim();
    if text == "None" || text.starts_with("None ") || text.starts_with("None#") {
        return Some(None);
    }
    let quote = text.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let rest = &text[1..];
    let end = rest.find(quote)?;
    let value = &rest[..end];
    // Generated files never escape; a backslash means something else wrote this.
    if value.contains('\\') {
        return None;
    }
    Some(Some(value.to_string()))
}

pub use crate::model::metadata::{Metadata, parse_metadata};
use crate::model::pep508::normalize_name;

/// One requirement on a CUDA component (`nvidia-cudnn-cu12==9.1.0.70`), as a wheel
/// declares it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pin {
    /// The normalized name (`nvidia-cudnn-cu12`, `cuda-toolkit`).
    pub name: String,
    /// The version specifiers (`==9.1.0.70`, `>=13.0.3,<14`), empty when none.
    pub specifier: String,
    /// The exact version when the specifier is a single `==` (`9.1.0.70`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact: Option<String>,
    /// Extras (`cuda-toolkit[cublas,cudart]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extras: Vec<String>,
    /// The environment marker (`platform_system == "Linux" and platform_machine == "x86_64"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marker: Option<String>,
}

/// Whether a requirement names a CUDA component: `nvidia-*` wheels, and the
/// `cuda-toolkit` / `cuda-bindings` packages the CUDA 13 wheels depend on.
fn is_cuda_component(name: &str) -> bool {
    name.starts_with("nvidia-") || name.starts_with("cuda-")
}

/// The CUDA-component pins among `Requires-Dist`, parsed with PEP 508. Lines that do not
/// parse are returned apart, as written.
pub fn cuda_pins(meta: &Metadata) -> (Vec<Pin>, Vec<String>) {
    let mut pins = Vec::new();
    let mut unparsed = Vec::new();
    for line in &meta.requires_dist {
        let req = match crate::model::pep508::parse_requirement(line) {
            Ok(r) => r,
            Err(_) => {
                // A quick look at the name, so a bad line about another package is not noise.
                let name = normalize_name(
                    line.split([' ', ';', '=', '<', '>', '[', '(', '!', '~'])
                        .next()
                        .unwrap_or(""),
                );
                if is_cuda_component(&name) {
                    unparsed.push(line.clone());
                }
                continue;
            }
        };
        let name = req.name.to_string();
        if !is_cuda_component(&name) {
            continue;
        }
        let (specifier, exact) = match &req.version_or_url {
            Some(pep508_rs::VersionOrUrl::VersionSpecifier(specs)) => {
                let exact = match specs.iter().collect::<Vec<_>>().as_slice() {
                    [one] if *one.operator() == pep508_rs::pep440_rs::Operator::Equal => {
                        Some(one.version().to_string())
                    }
                    _ => None,
                };
                (specs.to_string(), exact)
            }
            Some(pep508_rs::VersionOrUrl::Url(url)) => (format!("@ {url}"), None),
            None => (String::new(), None),
        };
        pins.push(Pin {
            name,
            specifier,
            exact,
            extras: req.extras.iter().map(|e| e.to_string()).collect(),
            marker: req.marker.try_to_string(),
        });
    }
    (pins, unparsed)
}

/// `(normalized name, version)` from a `*.dist-info` directory name
/// (`nvidia_cudnn_cu12-9.1.0.70.dist-info`) or a `*.egg-info` one
/// (`torch-2.6.0a0+ecf3bae40a.nv25.1-py3.12.egg-info`).
pub fn dist_name(dir: &str) -> Option<(String, String)> {
    if let Some(stem) = dir.strip_suffix(".dist-info") {
        // Wheel escaping turns `-` in names into `_`, so the first `-` ends the name.
        let (name, version) = stem.split_once('-')?;
        if name.is_empty() || version.is_empty() {
            return None;
        }
        return Some((normalize_name(name), version.to_string()));
    }
    let stem = dir.strip_suffix(".egg-info")?;
    let mut parts = stem.split('-');
    let name = parts.next().filter(|n| !n.is_empty())?;
    let version = parts.next().filter(|v| !v.is_empty())?;
    Some((normalize_name(name), version.replace('_', "-")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torch_version_py() {
        let v = parse_version_py(
            "from typing import Optional\n__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip']\n__version__ = '2.4.0+cu121'\ndebug = False\ncuda: Optional[str] = '12.1'\ngit_version = 'e4ee3be4063b7c430974252fdf7db42273388d86'\nhip: Optional[str] = None\n",
        );
        assert_eq!(v.version.as_deref(), Some("2.4.0+cu121"));
        assert_eq!(v.cuda.as_deref(), Some("12.1"));
        assert!(v.cuda_assigned);
        assert_eq!(v.hip, None);
        assert_eq!(
            v.git_version.as_deref(),
            Some("e4ee3be4063b7c430974252fdf7db42273388d86")
        );

        let cpu = parse_version_py("__version__ = \"2.5.1+cpu\"\ncuda = None  # cpu\n");
        assert_eq!(cpu.cuda, None);
        assert!(cpu.cuda_assigned);
        let unknown = parse_version_py("x = 1\n  __version__ = '9'\nif a == 'b': pass\n");
        assert_eq!(unknown, VersionPy::default());
        assert_eq!(parse_version_py("__version__ = '2\\'"), VersionPy::default());
    }

    #[test]
    fn metadata_and_pins() {
        let text = "Metadata-Version: 2.1\nName: torch\nVersion: 2.4.1\nRequires-Python: >=3.8.0\nRequires-Dist: filelock\nRequires-Dist: nvidia-cudnn-cu12 ==9.1.0.70 ; platform_system == \"Linux\" and platform_machine == \"x86_64\"\nRequires-Dist: nvidia-nccl-cu12==2.20.5; platform_system == \"Linux\"\nRequires-Dist: cuda-toolkit[cublas,cudart]==13.0.2; platform_system == \"Linux\"\nRequires-Dist: cuda-bindings<14,>=13.0.3\nRequires-Dist: nvidia-bad ==\nRequires-Dist: opt-einsum >=3.3 ; extra == 'opt-einsum'\n\nRequires-Dist: nvidia-in-description==1\n";
        let meta = parse_metadata(text);
        assert_eq!(meta.name.as_deref(), Some("torch"));
        assert_eq!(meta.version.as_deref(), Some("2.4.1"));
        assert_eq!(meta.requires_dist.len(), 7);
        let (pins, bad) = cuda_pins(&meta);
        assert_eq!(bad, vec!["nvidia-bad =="]);
        let names: Vec<_> = pins.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "nvidia-cudnn-cu12",
                "nvidia-nccl-cu12",
                "cuda-toolkit",
                "cuda-bindings"
            ]
        );
        assert_eq!(pins[0].exact.as_deref(), Some("9.1.0.70"));
        assert!(pins[0].marker.as_deref().unwrap().contains("x86_64"));
        assert_eq!(pins[2].extras, ["cublas", "cudart"]);
        assert_eq!(pins[3].exact, None);
        assert!(pins[3].specifier.contains("<14"));
    }

    #[test]
    fn dist_names() {
        assert_eq!(
            dist_name("nvidia_cudnn_cu12-9.1.0.70.dist-info"),
            Some(("nvidia-cudnn-cu12".into(), "9.1.0.70".into()))
        );
        assert_eq!(
            dist_name("torch-2.6.0a0+ecf3bae40a.nv25.1-py3.12.egg-info"),
            Some(("torch".into(), "2.6.0a0+ecf3bae40a.nv25.1".into()))
        );
        assert_eq!(dist_name("torch.dist-info"), None);
        assert_eq!(dist_name("-1.dist-info"), None);
        assert_eq!(dist_name("README.txt"), None);
        assert_eq!(normalize_name("Nvidia__Cudnn.Cu12"), "nvidia-cudnn-cu12");
    }

    #[test]
    fn lines_that_crash_pep508_rs_are_unparsed() {
        // Found by `cargo fuzz run metadata`: pep508_rs 0.9.2 panics on these (see model::pep508).
        for line in [
            "nvidia-cudnn-)cu13==9.19.0.56",
            "nvidia-cudnn-cu12[cublas_]==1",
            "nvidia-x[a, b.]",
            "nvidia-x._ ==1",
            "nvidia-nccl-cu12 ==2.20.5 ; platform_system == \"Linux\"\u{fffd} and platform_machine == \"x86_64\"",
        ] {
            let meta = Metadata {
                requires_dist: vec![line.to_string()],
                ..Default::default()
            };
            let (pins, unparsed) = cuda_pins(&meta);
            assert!(pins.is_empty());
            assert_eq!(unparsed, [line]);
        }
        let meta = Metadata {
            requires_dist: vec!["nvidia-cudnn-cu12[a,b] ==9 ; python_version > '3.8'".into()],
            ..Default::default()
        };
        assert_eq!(cuda_pins(&meta).0.len(), 1);
    }
}
