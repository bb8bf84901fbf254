//! Finding records by the names people type: canonical names, aliases, versions, tags.
//!
//! GPU names compare case- and punctuation-insensitively, ignoring the brand words that
//! `nvidia-smi` prefixes ("NVIDIA", "Tesla", "GeForce"): `h100`, `H100-SXM5-80GB` and
//! `NVIDIA H100 80GB HBM3` all reach the H100 SXM. Versions compare as versions: `12.4`
//! finds CUDA 12.4.0, `2.4.1+cu121` finds torch 2.4.1, `535.104.05` finds branch R535.

use serde::Serialize;

use super::records::*;
use super::{Db, Kind};
use crate::model::{CudaVersion, CudnnVersion, DriverVersion, parse_version, public};

/// Brand words that add nothing to a GPU's identity.
const BRAND_WORDS: [&str; 3] = ["nvidia", "tesla", "geforce"];

/// Lowercase letters and digits only, without leading brand words: the form names compare in.
pub fn normalize(name: &str) -> String {
    let lower = name.to_lowercase();
    let mut words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    while words.len() > 1 && BRAND_WORDS.contains(&words[0]) {
        words.remove(0);
    }
    words.concat()
}

/// A record found by [`Db::find`].
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(untagged)]
pub enum Found<'a> {
    /// A GPU.
    Gpu(&'a Gpu),
    /// A CUDA toolkit release.
    Cuda(&'a CudaRelease),
    /// A cuDNN release.
    Cudnn(&'a CudnnRelease),
    /// A torch release.
    Torch(&'a TorchRelease),
    /// A driver branch.
    Driver(&'a DriverBranch),
    /// A Python release line.
    Python(&'a PythonRelease),
    /// An image.
    Image(&'a Image),
    /// A Python package that compiles CUDA code when installed.
    Package(&'a Package),
}

impl Found<'_> {
    /// The kind of record.
    pub fn kind(&self) -> Kind {
        match self {
            Found::Gpu(_) => Kind::Gpu,
            Found::Cuda(_) => Kind::Cuda,
            Found::Cudnn(_) => Kind::Cudnn,
            Found::Torch(_) => Kind::Torch,
            Found::Driver(_) => Kind::Driver,
            Found::Python(_) => Kind::Python,
            Found::Image(_) => Kind::Image,
            Found::Package(_) => Kind::Package,
        }
    }
}

/// No record, or more than one, answers to a name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct LookupError {
    /// The kind searched.
    pub kind: Kind,
    /// The name as given.
    pub name: String,
    /// The closest names (for an unknown name) or the candidates (for an ambiguous one).
    pub suggestions: Vec<String>,
    /// Several records matched.
    pub ambiguous: bool,
}

impl LookupError {
    fn render(&self) -> String {
        let mut s = if self.ambiguous {
            format!("`{}` names more than one {} record", self.name, self.kind)
        } else {
            format!("no {} record named `{}`", self.kind, self.name)
        };
        if !self.suggestions.is_empty() {
            let list: Vec<String> = self.suggestions.iter().map(|n| format!("`{n}`")).collect();
            s.push_str(if self.ambiguous {
                "; one of: "
            } else {
                "; did you mean "
            });
            s.push_str(&list.join(", "));
            if !self.ambiguous {
                s.push('?');
            }
        }
        s
    }
}

/// Up to three names closest to `wanted`, best first.
fn closest<'a>(wanted: &str, candidates: impl Iterator<Item = (String, &'a str)>) -> Vec<String> {
    let w = normalize(wanted);
    let mut scored: Vec<(f64, &str)> = Vec::new();
    for (key, display) in candidates {
        let mut score = strsim::jaro_winkler(&w, &normalize(&key));
        // A name that contains what was typed (or the reverse) is a likely meaning.
        if !w.is_empty() && (normalize(&key).contains(&w) || w.contains(&normalize(&key))) {
            score = score.max(0.9);
        }
        if let Some(entry) = scored.iter_mut().find(|(_, d)| *d == display) {
            entry.0 = entry.0.max(score);
        } else {
            scored.push((score, display));
        }
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    scored
        .into_iter()
        .filter(|(s, _)| *s >= 0.75)
        .take(3)
        .map(|(_, d)| d.to_string())
        .collect()
}

fn strip_word<'a>(s: &'a str, words: &[&str]) -> &'a str {
    let t = s.trim();
    for w in words {
        if t.len() > w.len() && t[..w.len()].eq_ignore_ascii_case(w) {
            return t[w.len()..].trim_start_matches([' ', '-', '_']);
        }
    }
    t
}

impl Db {
    /// Finds the record of `kind` that answers to `name`.
    pub fn find(&self, kind: Kind, name: &str) -> Result<Found<'_>, LookupError> {
        let err = |suggestions: Vec<String>, ambiguous: bool| LookupError {
            kind,
            name: name.to_string(),
            suggestions,
            ambiguous,
        };
        match kind {
            Kind::Gpu => self.gpu(name).map(Found::Gpu),
            Kind::Cuda => {
                let text = strip_word(name, &["cuda", "v"]);
                if let Ok(v) = text.parse::<CudaVersion>() {
                    if let Some(r) = self.cuda.iter().find(|r| r.version == v) {
                        return Ok(Found::Cuda(r));
                    }
                }
                Err(err(
                    closest(
                        text,
                        self.cuda
                            .iter()
                            .map(|r| (r.version.to_string(), r.version.as_str())),
                    ),
                    false,
                ))
            }
            Kind::Cudnn => {
                let text = strip_word(name, &["cudnn", "v"]);
                if let Ok(v) = text.parse::<CudnnVersion>() {
                    if let Some(r) = self.cudnn.iter().find(|r| r.version == v) {
                        return Ok(Found::Cudnn(r));
                    }
                    // `9.1` means the 9.1 release, when there is exactly one.
                    let prefix: Vec<&CudnnRelease> = self
                        .cudnn
                        .iter()
                        .filter(|r| r.version.parts().starts_with(v.parts()))
                        .collect();
                    match prefix.as_slice() {
                        [one] => return Ok(Found::Cudnn(one)),
                        [] => {}
                        many => return Err(err(many.iter().map(|r| r.version.to_string()).collect(), true)),
                    }
                }
                Err(err(
                    closest(
                        text,
                        self.cudnn
                            .iter()
                            .map(|r| (r.version.to_string(), r.version.as_str())),
                    ),
                    false,
                ))
            }
            Kind::Torch => {
                let text = strip_word(name, &["torch", "pytorch", "v"]);
                if let Ok(v) = parse_version(text) {
                    let v = public(&v);
                    if let Some(r) = self.torch.iter().find(|r| r.version == v) {
                        return Ok(Found::Torch(r));
                    }
                }
                Err(err(
                    closest(text, self.torch.iter().map(|r| (r.id.clone(), r.id.as_str()))),
                    false,
                ))
            }
            Kind::Python => {
                let text = strip_word(name, &["python", "py", "cpython"]);
                if let Ok(v) = parse_version(text) {
                    let rel = v.release();
                    if let Some(r) = self
                        .python
                        .iter()
                        .find(|r| rel.len() >= 2 && r.version.release() == &rel[..2])
                    {
                        return Ok(Found::Python(r));
                    }
                }
                Err(err(
                    closest(text, self.python.iter().map(|r| (r.id.clone(), r.id.as_str()))),
                    false,
                ))
            }
            Kind::Driver => {
                let text = strip_word(name, &["r", "driver"]);
                let branch = text
                    .parse::<u32>()
                    .ok()
                    .or_else(|| text.parse::<DriverVersion>().ok().map(|v| v.branch()));
                if let Some(b) = branch {
                    if let Some(r) = self.drivers.iter().find(|r| r.branch == b) {
                        return Ok(Found::Driver(r));
                    }
                }
                Err(err(
                    closest(name, self.drivers.iter().map(|r| (r.id.clone(), r.id.as_str()))),
                    false,
                ))
            }
            Kind::Image => self.image(name).map(Found::Image),
            Kind::Package => self.package(name).map(Found::Package).ok_or_else(|| {
                err(
                    closest(
                        name,
                        self.packages.iter().map(|r| (r.name.clone(), r.name.as_str())),
                    ),
                    false,
                )
            }),
        }
    }

    /// The package record for a project name, in any spelling PEP 503 equates
    /// (`flash_attn`, `Flash-Attn`).
    pub fn package(&self, name: &str) -> Option<&Package> {
        let n = crate::model::pep508::normalize_name(name.trim());
        self.packages.iter().find(|r| r.name == n)
    }

    /// Finds a GPU by canonical name or alias.
    pub fn gpu(&self, name: &str) -> Result<&Gpu, LookupError> {
        let n = normalize(name);
        if let Some(g) = self
            .gpus
            .iter()
            .find(|g| normalize(&g.name) == n || g.aliases.iter().any(|a| normalize(a) == n) || g.id == name)
        {
            return Ok(g);
        }
        let candidates = self.gpus.iter().flat_map(|g| {
            std::iter::once((g.name.clone(), g.name.as_str()))
                .chain(g.aliases.iter().map(move |a| (a.clone(), g.name.as_str())))
        });
        Err(LookupError {
            kind: Kind::Gpu,
            name: name.to_string(),
            suggestions: closest(name, candidates),
            ambiguous: false,
        })
    }

    /// Finds an image by id, `repository:tag` or tag; for `nvidia/cuda`, any tag of a family.
    pub fn image(&self, name: &str) -> Result<&Image, LookupError> {
        let wanted = name.trim().trim_start_matches("docker.io/");
        let n = normalize(wanted);
        for im in &self.images {
            let mut names = vec![im.id.clone()];
            if let Some(tag) = &im.tag {
                names.push(format!("{}:{tag}", im.repository));
                names.push(tag.clone());
            }
            if im.family == ImageFamily::NvidiaCuda {
                if let Some(c) = &im.cuda {
                    names.push(format!("{}:{c}", im.repository));
                    if let Some(rest) = wanted
                        .strip_prefix("nvidia/cuda:")
                        .and_then(|t| t.strip_prefix(&format!("{c}-")))
                    {
                        if nvidia_cuda_tag_matches(im, rest) {
                            return Ok(im);
                        }
                    }
                }
            }
            if names.iter().any(|x| normalize(x) == n) {
                return Ok(im);
            }
        }
        let candidates = self.images.iter().map(|im| {
            let display = match &im.tag {
                Some(tag) => format!("{}:{tag}", im.repository),
                None => format!(
                    "{}:{}",
                    im.repository,
                    im.cuda.as_ref().map_or("", |c| c.as_str())
                ),
            };
            (display.clone(), im.id.as_str())
        });
        Err(LookupError {
            kind: Kind::Image,
            name: name.to_string(),
            suggestions: closest(name, candidates),
            ambiguous: false,
        })
    }
}

/// Whether `rest` (what follows `<cuda>-` in an `nvidia/cuda` tag) is `[cudnn-]flavor-os`
/// for one of the family's flavors and operating systems.
fn nvidia_cuda_tag_matches(im: &Image, rest: &str) -> bool {
    let rest = match &im.cudnn_tag {
        Some(c) => rest.strip_prefix(&format!("{c}-")).unwrap_or(rest),
        None => rest,
    };
    im.flavors.iter().any(|f| {
        let fl = serde_json::to_value(f)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        rest.strip_prefix(&format!("{fl}-"))
            .is_some_and(|os| im.os.iter().any(|o| o == os))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalization() {
        assert_eq!(normalize("NVIDIA H100 80GB HBM3"), "h10080gbhbm3");
        assert_eq!(normalize("H100-SXM5-80GB"), "h100sxm580gb");
        assert_eq!(normalize("Tesla V100-SXM2-16GB"), "v100sxm216gb");
        assert_eq!(normalize("NVIDIA GeForce RTX 4090"), "rtx4090");
        assert_eq!(normalize("nvidia"), "nvidia");
    }

    #[test]
    fn message() {
        let e = LookupError {
            kind: Kind::Gpu,
            name: "H1000".into(),
            suggestions: vec!["H100 SXM".into(), "H100 PCIe".into()],
            ambiguous: false,
        };
        assert_eq!(
            e.to_string(),
            "no gpu record named `H1000`; did you mean `H100 SXM`, `H100 PCIe`?"
        );
    }
}
