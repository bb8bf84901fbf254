//! Which torch a project's requirements on torch-pinning packages (vLLM, SGLang, xformers...)
//! imply, from compat-db's `framework` records.
//!
//! Owns: matching requirements to framework records by their PEP 503 name, reading the
//! release a requirement pins (`vllm==0.6.3.post1`), and turning that release's torch
//! requirement into a torch [`Pin`] the search applies like the project's own, named after
//! the requirement that implies it. Must not: read files, or judge a stack (the pins it makes
//! are judged by `rules` like any other).
//!
//! The direction of doubt: a release the database has not read, or a requirement that pins
//! no single release, is said (`framework-release-unknown`), never passed over: pip installs
//! the torch that release pins whatever gpuenv knows of it.

use serde::{Deserialize, Serialize};

use super::{Finding, Pin, Severity, codes::Code};
use crate::db::Framework;
use crate::model::{Operator, Variant, Version, VersionSpecifiers, local_variant};
use crate::project::Requirement;

/// What a requirement on a framework implies for torch.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FrameworkReq {
    /// The framework (`vllm`), as its record names it.
    pub framework: String,
    /// The requirement as read (`vllm==0.6.3.post1`).
    pub requirement: String,
    /// Where it was written (`requirements.txt:1`, `--require`).
    pub origin: String,
    /// The torch requirements the release makes (empty: none, or unknown).
    pub torch: Vec<VersionSpecifiers>,
    /// The CUDA build its wheels are for, where they name one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<Variant>,
    /// The metadata file the pin was read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Whether the release is known to the database (read, with or without a torch pin).
    pub known: bool,
    /// The finding's sentence.
    pub why: String,
    /// The environment marker of the requirement.
    #[serde(skip)]
    pub marker: Option<pep508_rs::MarkerTree>,
    /// Every release of the framework compat-db has read, with the torch requirements it
    /// makes with the same extras, newest first: where suggestions look for another release.
    #[serde(skip)]
    pub releases: Vec<(Version, Vec<VersionSpecifiers>)>,
}

impl FrameworkReq {
    /// The origin of the torch pins it makes (see [`pins`]).
    pub fn pin_origin(&self) -> String {
        format!("{} at {}", self.requirement, self.origin)
    }
}

/// The exact version an `==` (or `===`) specifier pins, without wildcards.
fn pinned(r: &Requirement) -> Option<Version> {
    r.specifiers.iter().find_map(|s| {
        let exact = matches!(s.operator(), Operator::Equal | Operator::ExactEqual);
        (exact && !s.to_string().ends_with(".*")).then(|| s.version().clone())
    })
}

fn written(r: &Requirement) -> String {
    let extras = if r.extras.is_empty() {
        String::new()
    } else {
        format!("[{}]", r.extras.join(","))
    };
    format!("{}{extras}{}", r.name, r.specifiers)
}

fn specs_text(specs: &[VersionSpecifiers]) -> String {
    specs
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()
        .join(" and ")
}

/// The requirements among `reqs` that name a framework record, each with what it implies.
pub fn implied(frameworks: &[Framework], reqs: &[Requirement]) -> Vec<FrameworkReq> {
    let mut out = Vec::new();
    for r in reqs {
        let name = crate::model::pep508::normalize_name(&r.name);
        let Some(fw) = frameworks.iter().find(|f| f.name == name) else {
            continue;
        };
        let requirement = written(r);
        let mut req = FrameworkReq {
            framework: fw.name.clone(),
            requirement: requirement.clone(),
            origin: r.origin.clone(),
            torch: Vec::new(),
            cuda: None,
            source: None,
            known: false,
            why: String::new(),
            marker: r.marker.clone(),
            releases: fw
                .releases
                .iter()
                .rev()
                .map(|x| (x.version.clone(), x.torch_for(&r.extras)))
                .collect(),
        };
        let Some(version) = pinned(r) else {
            let newest = fw
                .releases
                .last()
                .map_or("-".to_string(), |x| x.version.to_string());
            req.why = format!(
                "{requirement} ({}) pins no single release of {}: the torch it needs depends on the release pip picks, so no torch pin of {} is applied. Pin it (`{}==VERSION`; the newest compat-db has read is {newest}) to have its torch pin decide",
                r.origin, fw.name, fw.name, fw.name
            );
            out.push(req);
            continue;
        };
        let public = crate::model::public(&version);
        match fw.releases.iter().find(|x| x.version == public) {
            Some(rel) => {
                req.known = true;
                req.torch = rel.torch_for(&r.extras);
                req.cuda = rel.cuda.or_else(|| local_variant(&version));
                req.source = Some(rel.metadata.clone());
                req.why = if req.torch.is_empty() {
                    format!(
                        "{requirement} ({}) requires no particular torch: its PyPI metadata pins none{}",
                        r.origin,
                        if rel.torch_extras.is_empty() {
                            String::new()
                        } else {
                            format!(
                                " without an extra (extras that pin one: {})",
                                rel.torch_extras.keys().cloned().collect::<Vec<_>>().join(", ")
                            )
                        }
                    )
                } else {
                    format!(
                        "{requirement} ({}) pins torch {}: {} {} installs that torch, so it decides the torch release{}",
                        r.origin,
                        specs_text(&req.torch),
                        fw.name,
                        rel.version,
                        req.cuda
                            .map(|v| format!(" (and its wheels are built for {v})"))
                            .unwrap_or_default()
                    )
                };
            }
            None => {
                let why = if fw.unread.contains(&public) {
                    "PyPI did not serve its wheel metadata when the database was made".to_string()
                } else {
                    let range = match (fw.releases.first(), fw.releases.last()) {
                        (Some(a), Some(b)) => format!(
                            "compat-db has read {} releases of {}, {} to {}",
                            fw.releases.len(),
                            fw.name,
                            a.version,
                            b.version
                        ),
                        _ => format!("compat-db has read no release of {}", fw.name),
                    };
                    format!("{range}; `gpuenv db refresh` proposes newer ones from PyPI")
                };
                req.why = format!(
                    "{requirement} ({}): the torch that {} {} pins is unknown ({why}), so it is not checked; pip installs that torch, which may differ from the one shown",
                    r.origin, fw.name, public
                );
            }
        }
        out.push(req);
    }
    out
}

/// The torch pins the frameworks imply, named after the requirement that implies each: a
/// project's own constraint, which suggestions do not relax.
pub fn pins(reqs: &[FrameworkReq]) -> Vec<Pin> {
    let mut out = Vec::new();
    for r in reqs {
        for specs in &r.torch {
            out.push(Pin {
                specifiers: specs.clone(),
                variant: r.cuda,
                marker: r.marker.clone(),
                origin: r.pin_origin(),
            });
        }
    }
    out
}

/// The findings about the question as a whole: which framework pins torch, and which
/// framework's pin is not known.
pub fn findings(reqs: &[FrameworkReq]) -> Vec<Finding> {
    reqs.iter()
        .map(|r| {
            let (code, severity) = if r.known {
                (Code::FrameworkPinsTorch, Severity::Info)
            } else {
                (Code::FrameworkReleaseUnknown, Severity::Warning)
            };
            let mut f = Finding::new(code, severity, r.why.clone());
            f.facts.insert("requirement".into(), r.requirement.clone());
            if !r.torch.is_empty() {
                f.facts.insert("torch".into(), specs_text(&r.torch));
            }
            f.source = r.source.clone();
            f
        })
        .collect()
}
