//! What an image claims to hold: from `--expect torch=2.8,cuda=12.8,python=3.11`, or from
//! the well-known tag schemes of its name.
//!
//! Owns: parsing `--expect`, reading claims out of tags that follow the `pytorch/pytorch`,
//! `nvidia/cuda` and NGC (`nvcr.io/nvidia/pytorch:YY.MM-py3`) schemes, the loose version
//! match ("2.8" matches 2.8.1), and setting claims beside what detection found
//! ([`Claims::compare`]). Must not: decide what a mismatch means for the user (the verify
//! judgement), or look anything up: an NGC release is returned as its key (`24.08`) for
//! the caller to find in compat-db.
//!
//! Tag schemes (see `shared/research/facts-torch-images.md` sections 4 to 6):
//! - `pytorch/pytorch:<torch>-cuda<X.Y>-cudnn<N>-<runtime|devel>`, and `<torch>-runtime`
//!   for CPU images.
//! - `nvidia/cuda:<X.Y.Z>-[cudnn<N>-|cudnn-]<base|runtime|devel>-<os><ver>`; from 12.4 the
//!   cuDNN variant is `cudnn` without a major (it ships cuDNN 9).
//! - `nvcr.io/nvidia/pytorch:<YY.MM>-py3[-...]`: an NGC release.
//!
//! The scheme is chosen by the tag's shape and the repository's last path component
//! (`pytorch` for the first and the last, `cuda` for the second), whatever the registry
//! and namespace: mirrors (`docker.m.daocloud.io/pytorch/pytorch`) and vendors
//! (`registry.example.cn/vendor/pytorch`) republish these images under other names. The
//! last component is what keeps a tag that merely looks like a scheme (`trainer:2.8.0-...`,
//! whose version is the trainer's) from being read as one; the shapes are strict enough
//! that `latest`, `v2` or a date are never read as versions.

use serde::{Deserialize, Serialize};

use super::detect::{ImageFacts, Sourced};
use super::reference::RegistryRef;

/// An image flavour in nvidia/cuda and pytorch/pytorch tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Flavor {
    /// CUDA runtime libraries only (nvidia/cuda `base` has just cudart).
    Base,
    /// Runtime libraries.
    Runtime,
    /// Runtime plus the toolkit: `nvcc`, headers.
    Devel,
}

/// A tag scheme claims are read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scheme {
    /// `pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime`.
    Pytorch,
    /// `nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04`.
    NvidiaCuda,
    /// `nvcr.io/nvidia/pytorch:24.08-py3`.
    Ngc,
}

impl Scheme {
    /// Every scheme, in the order a tag is tried against them.
    pub const ALL: [Scheme; 3] = [Scheme::Pytorch, Scheme::NvidiaCuda, Scheme::Ngc];

    /// How reports name it: `pytorch/pytorch`, `nvidia/cuda`, `NGC`.
    pub fn label(self) -> &'static str {
        match self {
            Scheme::Pytorch => "pytorch/pytorch",
            Scheme::NvidiaCuda => "nvidia/cuda",
            Scheme::Ngc => "NGC",
        }
    }

    /// The last path component of the repositories that use it.
    pub fn repository_name(self) -> &'static str {
        match self {
            Scheme::Pytorch | Scheme::Ngc => "pytorch",
            Scheme::NvidiaCuda => "cuda",
        }
    }

    /// A tag of this scheme, for messages.
    pub fn example(self) -> &'static str {
        match self {
            Scheme::Pytorch => "2.8.0-cuda12.8-cudnn9-runtime",
            Scheme::NvidiaCuda => "12.4.1-cudnn-devel-ubuntu22.04",
            Scheme::Ngc => "24.08-py3",
        }
    }

    /// The claims of `tag` when it has this scheme's shape.
    fn read(self, tag: &str) -> Option<Claims> {
        match self {
            Scheme::Pytorch => pytorch_tag(tag),
            Scheme::NvidiaCuda => cuda_tag(tag),
            Scheme::Ngc => ngc_tag(tag),
        }
    }
}

/// What an image claims.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// Where the claims come from: `--expect`, or `tag 2.8.0-cuda12.8-cudnn9-runtime of
    /// pytorch/pytorch (pytorch/pytorch scheme)`.
    pub source: String,
    /// The tag scheme they were read from, when they come from a tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<Scheme>,
    /// torch (`2.8`, `2.4.0`, `2.4.1+cu121`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<String>,
    /// CUDA (`12.8`, `12.4.1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
    /// cuDNN (`9`, `8.9`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cudnn: Option<String>,
    /// Some cuDNN, version unsaid (nvidia/cuda's `cudnn` tags from 12.4).
    pub cudnn_present: bool,
    /// NCCL (`2.21`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl: Option<String>,
    /// Python (`3.11`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<String>,
    /// The distribution as tags write it (`ubuntu22.04`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// base, runtime or devel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flavor: Option<Flavor>,
    /// An NGC release (`24.08`), for the caller to look up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ngc_release: Option<String>,
}

impl Claims {
    /// Whether nothing is claimed.
    pub fn is_empty(&self) -> bool {
        // `source` and `scheme` say where claims come from; they claim nothing themselves.
        self.torch.is_none()
            && self.cuda.is_none()
            && self.cudnn.is_none()
            && !self.cudnn_present
            && self.nccl.is_none()
            && self.python.is_none()
            && self.os.is_none()
            && self.flavor.is_none()
            && self.ngc_release.is_none()
    }
}

/// A bad `--expect` value: names the input and the offending part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid --expect `{input}`: {reason}")]
pub struct ClaimsError {
    /// The whole value as given.
    pub input: String,
    /// What is wrong.
    pub reason: String,
}

/// The keys `--expect` takes.
pub const EXPECT_KEYS: &[&str] = &["torch", "cuda", "cudnn", "nccl", "python", "os"];

/// Whether `s` is 1 to `max` dot-separated numbers.
fn dotted(s: &str, max: usize) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() <= max
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 9 && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Parses `--expect torch=2.8,cuda=12.8,python=3.11,cudnn=9`.
pub fn parse_expect(input: &str) -> Result<Claims, ClaimsError> {
    let fail = |reason: String| ClaimsError {
        input: input.to_string(),
        reason,
    };
    let mut out = Claims {
        source: "--expect".into(),
        ..Default::default()
    };
    if input.trim().is_empty() {
        return Err(fail(
            "it is empty; expected KEY=VERSION pairs such as `torch=2.8,cuda=12.8`".into(),
        ));
    }
    for part in input.split(',') {
        let part = part.trim();
        let Some((key, value)) = part.split_once('=') else {
            return Err(fail(format!("`{part}` is not KEY=VALUE")));
        };
        let (key, value) = (key.trim().to_ascii_lowercase(), value.trim());
        if value.is_empty() {
            return Err(fail(format!("`{key}` has no value")));
        }
        let slot = match key.as_str() {
            "torch" => {
                crate::model::parse_version(value).map_err(|e| fail(e.to_string()))?;
                &mut out.torch
            }
            "cuda" | "cudnn" | "nccl" | "python" => {
                let max = if key == "cudnn" { 4 } else { 3 };
                if !dotted(value, max) {
                    return Err(fail(format!(
                        "`{key}={value}`: expected up to {max} dot-separated numbers (`{}`)",
                        match key.as_str() {
                            "cuda" => "12.8",
                            "cudnn" => "9",
                            "nccl" => "2.21",
                            _ => "3.11",
                        }
                    )));
                }
                match key.as_str() {
                    "cuda" => &mut out.cuda,
                    "cudnn" => &mut out.cudnn,
                    "nccl" => &mut out.nccl,
                    _ => &mut out.python,
                }
            }
            "os" => {
                if !value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
                {
                    return Err(fail(format!(
                        "`os={value}`: expected a name such as `ubuntu22.04`"
                    )));
                }
                &mut out.os
            }
            other => {
                let near = EXPECT_KEYS
                    .iter()
                    .map(|k| (strsim::levenshtein(k, other), k))
                    .min()
                    .filter(|(d, _)| *d <= 2)
                    .map(|(_, k)| format!("; did you mean `{k}`?"))
                    .unwrap_or_default();
                return Err(fail(format!(
                    "unknown key `{other}` (known: {}){near}",
                    EXPECT_KEYS.join(", ")
                )));
            }
        };
        if slot.is_some() {
            return Err(fail(format!("`{key}` is given twice")));
        }
        *slot = Some(value.to_string());
    }
    Ok(out)
}

/// Claims from an image name's tag, when it follows a known scheme; `None` otherwise.
pub fn from_tag(reference: &str) -> Option<Claims> {
    read_tag(reference).ok()
}

/// Claims from an image name's tag, or why it has none (a sentence about the name).
pub fn read_tag(reference: &str) -> Result<Claims, String> {
    let r = RegistryRef::parse(reference).map_err(|e| e.to_string())?;
    read_registry_ref(&r)
}

/// [`from_tag`] over a parsed reference.
pub fn from_registry_ref(r: &RegistryRef) -> Option<Claims> {
    read_registry_ref(r).ok()
}

/// [`read_tag`] over a parsed reference.
pub fn read_registry_ref(r: &RegistryRef) -> Result<Claims, String> {
    let name = r.familiar_name();
    let Some(tag) = r.tag() else {
        return Err(format!("`{name}` is named by its digest, with no tag"));
    };
    let last = r.repository.rsplit('/').next().unwrap_or(&r.repository);
    let shapes: Vec<(Scheme, Claims)> = Scheme::ALL
        .iter()
        .filter_map(|s| s.read(tag).map(|c| (*s, c)))
        .collect();
    if let Some((scheme, claims)) = shapes.iter().find(|(s, _)| s.repository_name() == last) {
        return Ok(Claims {
            source: format!("tag {tag} of {name} ({} scheme)", scheme.label()),
            scheme: Some(*scheme),
            ..claims.clone()
        });
    }
    Err(match shapes.first() {
        Some((scheme, _)) => format!(
            "the tag `{tag}` of `{name}` has the shape of the {} scheme, but the repository is \
             not named `{}`, so its numbers may be another program's versions",
            scheme.label(),
            scheme.repository_name()
        ),
        None => format!(
            "the tag `{tag}` of `{name}` follows none of the known schemes ({})",
            Scheme::ALL
                .iter()
                .map(|s| format!("{} `{}`", s.label(), s.example()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

fn flavor(word: &str) -> Option<Flavor> {
    match word {
        "base" => Some(Flavor::Base),
        "runtime" => Some(Flavor::Runtime),
        "devel" => Some(Flavor::Devel),
        _ => None,
    }
}

/// Whether `s` is `min` to `max` dot-separated numbers whose first has at most
/// `major_digits` digits: versions as tags write them, never a date (`2024.05.01`).
fn version_shape(s: &str, min: usize, max: usize, major_digits: usize) -> bool {
    let parts = s.split('.').count();
    dotted(s, max) && parts >= min && s.split('.').next().is_some_and(|m| m.len() <= major_digits)
}

/// `2.4.0-cuda12.1-cudnn9-runtime`, `2.5.1-runtime`.
fn pytorch_tag(tag: &str) -> Option<Claims> {
    let parts: Vec<&str> = tag.split('-').collect();
    let (torch, rest) = parts.split_first()?;
    let (last, middle) = rest.split_last()?;
    // pytorch/pytorch publishes runtime and devel images, each under a full torch release.
    let flavor = match *last {
        "runtime" => Flavor::Runtime,
        "devel" => Flavor::Devel,
        _ => return None,
    };
    if !version_shape(torch, 3, 3, 1) {
        return None;
    }
    fn part<'t>(p: &'t str, prefix: &str, min: usize, max: usize) -> Option<&'t str> {
        p.strip_prefix(prefix).filter(|v| version_shape(v, min, max, 2))
    }
    let cuda = |p| part(p, "cuda", 2, 3);
    let cudnn = |p| part(p, "cudnn", 1, 4);
    let (cuda, cudnn) = match middle {
        [] => (None, None),
        [c] => (Some(cuda(c)?), None),
        [c, d] => (Some(cuda(c)?), Some(cudnn(d)?)),
        _ => return None,
    };
    Some(Claims {
        torch: Some(torch.to_string()),
        cuda: cuda.map(str::to_string),
        cudnn: cudnn.map(str::to_string),
        flavor: Some(flavor),
        ..Default::default()
    })
}

/// Whether `s` names a distribution as nvidia/cuda tags do: letters, then a version
/// (`ubuntu22.04`, `ubi9`, `rockylinux8`).
fn os_shape(s: &str) -> bool {
    let digits = s.find(|c: char| c.is_ascii_digit()).unwrap_or(s.len());
    let (name, version) = s.split_at(digits);
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase()) && dotted(version, 3)
}

/// `12.4.1-cudnn-devel-ubuntu22.04`, `12.1.1-cudnn8-runtime-ubuntu22.04`, `12.4.1-base-ubuntu22.04`.
fn cuda_tag(tag: &str) -> Option<Claims> {
    let parts: Vec<&str> = tag.split('-').collect();
    let (version, rest) = parts.split_first()?;
    if !version_shape(version, 2, 3, 2) {
        return None;
    }
    let mut c = Claims {
        cuda: Some(version.to_string()),
        ..Default::default()
    };
    let mut i = 0;
    if let Some(v) = rest.first().and_then(|p| p.strip_prefix("cudnn")) {
        if v.is_empty() {
            c.cudnn_present = true;
        } else if version_shape(v, 1, 4, 2) {
            c.cudnn = Some(v.to_string());
        } else {
            return None;
        }
        i = 1;
    }
    c.flavor = Some(flavor(rest.get(i)?)?);
    let os = rest[i + 1..].join("-");
    if !os_shape(&os) {
        return None;
    }
    c.os = Some(os);
    Some(c)
}

/// `24.08-py3`, `25.01-py3-igpu`.
fn ngc_tag(tag: &str) -> Option<Claims> {
    let (release, rest) = tag.split_once('-')?;
    let (yy, mm) = release.split_once('.')?;
    let digits = |s: &str| s.len() == 2 && s.bytes().all(|b| b.is_ascii_digit());
    let month = mm.parse::<u8>().is_ok_and(|m| (1..=12).contains(&m));
    let py3 = rest == "py3" || rest.starts_with("py3-");
    (digits(yy) && digits(mm) && month && py3).then(|| Claims {
        ngc_release: Some(release.to_string()),
        ..Default::default()
    })
}

/// The leading dotted numbers of a version (`2.6.0a0+x` → `[2, 6, 0]`).
fn release_numbers(v: &str) -> Vec<u64> {
    let v = v.trim().trim_start_matches('v');
    let end = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    v[..end].split('.').map_while(|p| p.parse::<u64>().ok()).collect()
}

/// The loose match of a claim against a found version: every number the claim gives must
/// equal the found one's (`2.8` matches `2.8.1+cu128`; `12.8` matches `12.8.93`; `12.8.0`
/// matches `12.8`); a claimed local part (`+cu121`) must be there too.
pub fn version_matches(claimed: &str, found: &str) -> bool {
    let c = release_numbers(claimed);
    let f = release_numbers(found);
    if c.is_empty() || f.is_empty() {
        return false;
    }
    let numbers = c
        .iter()
        .enumerate()
        .all(|(i, n)| f.get(i).copied().unwrap_or(0) == *n);
    let local = match claimed.split_once('+') {
        // NGC's torch appends the container to the commit (`2.6.0a0+ecf3bae40a.nv25.01`)
        // where the release notes print the commit alone: a claimed local version holds
        // when it is the found one's leading segments (PEP 440 separates them by dots).
        Some((_, l)) => found
            .split_once('+')
            .is_some_and(|(_, fl)| fl == l || fl.strip_prefix(l).is_some_and(|rest| rest.starts_with('.'))),
        None => true,
    };
    numbers && local
}

/// What a [`ClaimCheck`] is about.
pub const COMPONENTS: [&str; 7] = ["torch", "cuda", "cudnn", "nccl", "python", "os", "devel"];

fn component<'de, D: serde::Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    crate::model::known::one_of(d, "claim component", COMPONENTS)
}

/// One claim set beside what was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimCheck {
    /// One of [`COMPONENTS`]: `torch`, `cuda`, `cudnn`, `nccl`, `python`, `os`, `devel`.
    #[serde(deserialize_with = "component")]
    pub component: crate::model::known::Word,
    /// Where the claim comes from (the claim set's [`Claims::source`]).
    pub source: String,
    /// What is claimed.
    pub claimed: String,
    /// What was found, with where.
    pub found: Vec<Sourced<String>>,
    /// Whether a found value matches (`None`: nothing found to compare).
    pub matches: Option<bool>,
}

impl Claims {
    /// Each claim beside what detection found. For `cuda`, torch's own CUDA
    /// (`torch.version.cuda`) is what is compared when there is a torch, since that is what a
    /// torch image's tag means; otherwise the toolkit and `CUDA_VERSION`.
    // One comparison per claimed component, side by side so that each is compared and
    // sourced the same way.
    pub fn compare(&self, facts: &ImageFacts) -> Vec<ClaimCheck> {
        let mut out = Vec::new();
        let check = |component: &'static str, claimed: &str, found: Vec<Sourced<String>>| {
            let matches =
                (!found.is_empty()).then(|| found.iter().any(|f| version_matches(claimed, &f.value)));
            ClaimCheck {
                component,
                source: self.source.clone(),
                claimed: claimed.to_string(),
                found,
                matches,
            }
        };
        let s = |value: String, source: &str| Sourced {
            value,
            source: source.to_string(),
        };
        if let Some(t) = &self.torch {
            let found = facts
                .torch
                .iter()
                .filter_map(|t| t.version.clone().or_else(|| t.dist_version.clone()))
                .collect();
            out.push(check("torch", t, found));
        }
        if let Some(c) = &self.cuda {
            let from_torch: Vec<Sourced<String>> =
                facts.torch.iter().filter_map(|t| t.cuda.clone()).collect();
            let found = if from_torch.is_empty() {
                facts
                    .cuda_toolkits
                    .iter()
                    .filter_map(|k| k.version.as_ref().map(|v| s(v.value.to_string(), &v.source)))
                    .chain(
                        facts
                            .env
                            .cuda_version
                            .iter()
                            .map(|v| s(v.value.to_string(), &v.source)),
                    )
                    .collect()
            } else {
                from_torch
            };
            out.push(check("cuda", c, found));
        }
        let cudnn_found = || -> Vec<Sourced<String>> {
            let d = &facts.cudnn;
            d.headers
                .iter()
                .map(|h| s(h.value.to_string(), &h.source))
                .chain(d.libraries.iter().filter_map(|l| {
                    l.version
                        .as_ref()
                        .map(|v| s(v.clone(), &format!("file name {}", l.path)))
                }))
                .chain(d.pip.iter().cloned())
                .chain(d.declared.iter().map(|v| s(v.value.to_string(), &v.source)))
                .collect()
        };
        if let Some(c) = &self.cudnn {
            out.push(check("cudnn", c, cudnn_found()));
        } else if self.cudnn_present {
            let found = cudnn_found();
            out.push(ClaimCheck {
                component: "cudnn",
                source: self.source.clone(),
                claimed: "present".into(),
                matches: Some(!found.is_empty()),
                found,
            });
        }
        if let Some(n) = &self.nccl {
            let d = &facts.nccl;
            let found = d
                .headers
                .iter()
                .map(|h| s(h.value.to_string(), &h.source))
                .chain(d.libraries.iter().filter_map(|l| {
                    l.version
                        .as_ref()
                        .map(|v| s(v.clone(), &format!("file name {}", l.path)))
                }))
                .chain(d.pip.iter().cloned())
                .chain(d.declared.iter().map(|v| s(v.value.to_string(), &v.source)))
                .collect();
            out.push(check("nccl", n, found));
        }
        if let Some(p) = &self.python {
            let found = facts
                .pythons
                .iter()
                .map(|py| {
                    py.exact
                        .clone()
                        .unwrap_or_else(|| s(py.version.clone(), &py.source))
                })
                .collect();
            out.push(check("python", p, found));
        }
        if let Some(o) = &self.os {
            let found: Vec<Sourced<String>> = facts
                .os
                .iter()
                .map(|os| s(format!("{}{}", os.id, os.version_id), &os.source))
                .collect();
            let squash = |x: &str| {
                x.chars()
                    .filter(|c| c.is_ascii_alphanumeric() || *c == '.')
                    .collect::<String>()
                    .to_ascii_lowercase()
            };
            let matches = (!found.is_empty()).then(|| found.iter().any(|f| squash(&f.value) == squash(o)));
            out.push(ClaimCheck {
                component: "os",
                source: self.source.clone(),
                claimed: o.clone(),
                found,
                matches,
            });
        }
        if self.flavor == Some(Flavor::Devel) {
            let found: Vec<Sourced<String>> = facts
                .cuda_toolkits
                .iter()
                .filter_map(|k| k.nvcc.as_ref().map(|n| s("nvcc".into(), n)))
                .collect();
            out.push(ClaimCheck {
                component: "devel",
                source: self.source.clone(),
                claimed: "nvcc".into(),
                matches: Some(!found.is_empty()),
                found,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expect() {
        let c = parse_expect("torch=2.8,cuda=12.8,python=3.11,cudnn=9").unwrap();
        assert_eq!(c.torch.as_deref(), Some("2.8"));
        assert_eq!(c.cuda.as_deref(), Some("12.8"));
        assert_eq!(c.python.as_deref(), Some("3.11"));
        assert_eq!(c.cudnn.as_deref(), Some("9"));
        assert_eq!(c.source, "--expect");
        let c = parse_expect(" torch = 2.4.1+cu121 , os=ubuntu22.04").unwrap();
        assert_eq!(c.torch.as_deref(), Some("2.4.1+cu121"));
        for (bad, needle) in [
            ("", "empty"),
            ("torch", "KEY=VALUE"),
            ("torch=", "no value"),
            ("trch=2.8", "did you mean `torch`"),
            ("gpu=h100", "unknown key `gpu`"),
            ("cuda=12.x", "dot-separated"),
            ("torch=2.8,torch=2.9", "twice"),
            ("torch=two", "PEP 440"),
            ("os=ubuntu 22.04", "ubuntu22.04"),
        ] {
            let e = parse_expect(bad).unwrap_err();
            assert!(e.to_string().contains(needle), "{bad}: {e}");
        }
    }

    #[test]
    fn tag_schemes() {
        let c = from_tag("pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime").unwrap();
        assert_eq!(
            (
                c.torch.as_deref(),
                c.cuda.as_deref(),
                c.cudnn.as_deref(),
                c.flavor
            ),
            (Some("2.4.0"), Some("12.1"), Some("9"), Some(Flavor::Runtime))
        );
        assert_eq!(
            c.source,
            "tag 2.4.0-cuda12.1-cudnn9-runtime of pytorch/pytorch (pytorch/pytorch scheme)"
        );
        assert_eq!(c.scheme, Some(Scheme::Pytorch));
        let c = from_tag("docker.io/pytorch/pytorch:2.5.1-runtime").unwrap();
        assert_eq!((c.torch.as_deref(), c.cuda.as_deref()), (Some("2.5.1"), None));
        let c = from_tag("nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04").unwrap();
        assert_eq!(c.cuda.as_deref(), Some("12.4.1"));
        assert!(c.cudnn_present && c.cudnn.is_none());
        assert_eq!(c.flavor, Some(Flavor::Devel));
        assert_eq!(c.os.as_deref(), Some("ubuntu22.04"));
        let c = from_tag("nvidia/cuda:12.1.1-cudnn8-runtime-ubuntu22.04").unwrap();
        assert_eq!(c.cudnn.as_deref(), Some("8"));
        let c = from_tag("nvidia/cuda:12.4.1-base-ubuntu22.04").unwrap();
        assert_eq!(
            (c.flavor, c.os.as_deref()),
            (Some(Flavor::Base), Some("ubuntu22.04"))
        );
        let c = from_tag("nvcr.io/nvidia/pytorch:24.08-py3").unwrap();
        assert_eq!(c.ngc_release.as_deref(), Some("24.08"));
        assert_eq!(c.source, "tag 24.08-py3 of nvcr.io/nvidia/pytorch (NGC scheme)");
        for none in [
            "pytorch/pytorch:latest",
            "pytorch/pytorch:nightly-devel",
            "nvidia/cuda:latest",
            "nvidia/cuda:12.4.1-devel",
            "nvcr.io/nvidia/pytorch:latest",
            "ubuntu:22.04",
            "pytorch/pytorch@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "Not A Ref",
        ] {
            assert_eq!(from_tag(none), None, "{none}");
        }
    }

    /// Mirrors and vendors republish the images under other hosts and namespaces: the
    /// scheme is found by the tag's shape and the repository's last component.
    #[test]
    fn mirrors_and_vendor_namespaces() {
        for name in [
            "docker.m.daocloud.io/pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime",
            "docker.io/pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime",
            "registry.example.cn/vendor/pytorch:2.8.0-cuda12.8-cudnn9-runtime",
            "localhost:5000/mirror/pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime",
            "hub.example.com:8443/a/b/c/pytorch:2.8.0-cuda12.8-cudnn9-runtime",
        ] {
            let c = read_tag(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(
                (c.torch.as_deref(), c.cuda.as_deref(), c.cudnn.as_deref()),
                (Some("2.8.0"), Some("12.8"), Some("9")),
                "{name}"
            );
            assert_eq!(c.scheme, Some(Scheme::Pytorch));
            assert!(
                c.source.starts_with("tag 2.8.0-cuda12.8-cudnn9-runtime of ")
                    && c.source.ends_with(" (pytorch/pytorch scheme)"),
                "{}",
                c.source
            );
        }
        let c = read_tag("docker.m.daocloud.io/pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime").unwrap();
        assert!(
            c.source.contains("of docker.m.daocloud.io/pytorch/pytorch "),
            "{}",
            c.source
        );
        for name in [
            "docker.m.daocloud.io/nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04",
            "nvcr.io/nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04",
            "registry.example.cn/base/cuda:12.4.1-cudnn-devel-ubuntu22.04",
        ] {
            let c = read_tag(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(c.scheme, Some(Scheme::NvidiaCuda), "{name}");
            assert_eq!((c.cuda.as_deref(), c.cudnn_present), (Some("12.4.1"), true));
        }
        for name in [
            "nvcr.m.daocloud.io/nvidia/pytorch:24.08-py3",
            "registry.example.cn/ngc/pytorch:24.08-py3",
            "docker.m.daocloud.io/nvcr.io/nvidia/pytorch:24.08-py3-igpu",
        ] {
            let c = read_tag(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(c.scheme, Some(Scheme::Ngc), "{name}");
            assert_eq!(c.ngc_release.as_deref(), Some("24.08"));
        }
    }

    /// Tags that only look like versions, or repositories named for something else, give
    /// no claims, and say why.
    #[test]
    fn look_alikes_are_not_read() {
        for (name, why) in [
            (
                "registry.example.cn/vendor/pytorch:latest",
                "follows none of the known schemes",
            ),
            ("registry.example.cn/vendor/pytorch:v2", "follows none"),
            ("registry.example.cn/vendor/pytorch:2", "follows none"),
            ("registry.example.cn/vendor/pytorch:2.8", "follows none"),
            ("registry.example.cn/vendor/pytorch:2.8.0", "follows none"),
            ("registry.example.cn/vendor/pytorch:2024.05.01", "follows none"),
            (
                "registry.example.cn/vendor/pytorch:2024.05.01-runtime",
                "follows none",
            ),
            ("registry.example.cn/vendor/pytorch:20240501", "follows none"),
            (
                "registry.example.cn/vendor/pytorch:2.8.0-cuda12.8-cudnn9-runtime-v2",
                "follows none",
            ),
            (
                "registry.example.cn/vendor/pytorch:2.8.0-cuda12.8-extra-cudnn9-runtime",
                "follows none",
            ),
            ("registry.example.cn/vendor/pytorch:24.13-py3", "follows none"),
            ("registry.example.cn/vendor/pytorch:24.08-py310", "follows none"),
            (
                "registry.example.cn/vendor/cuda:12.4.1-devel-22.04",
                "follows none",
            ),
            (
                "registry.example.cn/vendor/cuda:2024.05.01-base-ubuntu22.04",
                "follows none",
            ),
            (
                "registry.example.cn/vendor/trainer:2.8.0-cuda12.8-cudnn9-runtime",
                "has the shape of the pytorch/pytorch scheme, but the repository is not named `pytorch`",
            ),
            (
                "registry.example.cn/vendor/pytorch-cuda:2.8.0-cuda12.8-cudnn9-runtime",
                "not named `pytorch`",
            ),
            (
                "registry.example.cn/vendor/pytorch:12.4.1-cudnn-devel-ubuntu22.04",
                "has the shape of the nvidia/cuda scheme, but the repository is not named `cuda`",
            ),
            // NGC's other frameworks: the catalog describes only its PyTorch containers.
            (
                "nvcr.io/nvidia/tensorflow:24.08-py3",
                "has the shape of the NGC scheme",
            ),
            (
                "registry.example.cn/vendor/pytorch@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                "named by its digest",
            ),
            ("Not A Ref", "invalid image reference"),
        ] {
            let e = read_tag(name).expect_err(name);
            assert!(e.contains(why), "{name}: {e}");
        }
    }

    #[test]
    fn loose_matching() {
        assert!(version_matches("2.8", "2.8.1+cu128"));
        assert!(version_matches("2.8", "2.8.0"));
        assert!(!version_matches("2.8", "2.4.1+cu124"));
        assert!(version_matches("12.8", "12.8.93"));
        assert!(version_matches("12.8.0", "12.8"));
        assert!(!version_matches("12.8.1", "12.8"));
        assert!(version_matches("2.6", "2.6.0a0+ecf3bae40a.nv25.1"));
        assert!(version_matches("2.4.1+cu121", "2.4.1+cu121"));
        assert!(!version_matches("2.4.1+cu121", "2.4.1"));
        // A record's NGC commit holds against the version with the container appended, and
        // only as whole segments.
        assert!(version_matches(
            "2.6.0a0+ecf3bae40a",
            "2.6.0a0+ecf3bae40a.nv25.01"
        ));
        assert!(!version_matches("2.6.0a0+ecf3bae", "2.6.0a0+ecf3bae40a.nv25.01"));
        assert!(!version_matches(
            "2.6.0a0+ecf3bae40a",
            "2.6.0a0+0000000000.nv25.01"
        ));
        assert!(version_matches("9", "9.1.0.70"));
        assert!(!version_matches("", "9"));
        assert!(!version_matches("9", "x"));
    }
}
