//! `gpuenv verify IMAGE --propose DIR`: what the image was read to hold, turned into a
//! proposed compat-db record for a curator to review.
//!
//! Owns: which record an image is (an NGC release or a `pytorch/pytorch` tag, by the tag
//! of a name it carries); reading each fact of the image record schema from the facts
//! `verify` detected, with the files it came from; comparing each with the record
//! (confirmed, corrected, added, partial, unread); the proposed record (the curated text
//! with only the lines of changed keys rewritten, and a `[[sources]]` entry citing the image
//! by the digest of the manifest read); checking the proposal with the database's own
//! linter; and writing it atomically to a new directory laid out as compat-db is
//! (`DIR/image/ngc-25.01.toml`). Must not: change compat-db/ or the `--db` directory, replace
//! a curated value with no word said (a correction is listed with both values), read the
//! image (facts arrive from [`super::read`]), or print.
//!
//! Why an option of `verify` and not of `db refresh`: reading an image (a registry with
//! its credentials, plain-HTTP rules and deadline, an archive, an OCI layout) is what
//! `verify` already does, with every flag it needs; `db refresh` reads PyPI over HTTP and
//! knows nothing of images. The proposal is made from the very read whose verdict the same
//! run prints, so the curator sees what was judged and what is proposed side by side.
//!
//! A fact counts as read only from the image: its files first (torch's `version.py`, the
//! toolkit's `version.json`, cuDNN and NCCL headers, library file names, the Python
//! interpreter, `os-release`), and the config's declarations (`CUDNN_VERSION`,
//! `NCCL_VERSION`, `CUDA_VERSION`) only to add precision the files agree with, or where no
//! file shows the fact; a declaration the files contradict is not used. Where the image's
//! own files disagree (two torch installations, two cuDNN), nothing is read: a curator
//! decides, not a guess.

use serde::{Deserialize, Serialize};

use super::Origin;
use crate::db::{Db, Image, ImageFamily, Source, SourceFile};
use crate::image::claims::{Scheme, read_tag};
use crate::image::detect::ImageFacts;
use crate::image::reference::RegistryRef;
use crate::model::{PartialDate, Version};

/// What became of one fact of the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The image shows what the record says (at the record's precision): the key leaves
    /// `unverified`.
    Confirmed,
    /// The image shows something else: the proposal carries the image's value, and the
    /// record's is reported beside it.
    Corrected,
    /// The record says nothing of it and the image shows it: the proposal adds it.
    Added,
    /// The image agrees as far as it says, but says less than the record (a header's
    /// `9.7.0` against `9.7.0.66`): the key stays `unverified`.
    Partial,
    /// Not read from the image (not in it, or its files disagree): left as it is.
    Unread,
}

impl Outcome {
    /// How reports name it.
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Confirmed => "confirmed",
            Outcome::Corrected => "corrected",
            Outcome::Added => "added",
            Outcome::Partial => "partial",
            Outcome::Unread => "unread",
        }
    }
}

/// One fact: the record's value, what the image showed and where, and what the proposal
/// does with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FactCheck {
    /// The record's key (`torch`, `cuda`, `cudnn`, `nccl`, `python`, `os`, `require_cuda`,
    /// or a key no image shows, such as `min_driver`).
    pub key: String,
    /// What became of it.
    pub outcome: Outcome,
    /// The record's value, as written (`-` never: absent when the record has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<String>,
    /// What the image showed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<String>,
    /// Where in the image it was read (`/usr/include/nccl.h`, `env CUDNN_VERSION=9.7.0.66`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_from: Vec<String>,
    /// Whether the record lists the key in `unverified`.
    pub was_unverified: bool,
    /// Whether the proposal still lists it there.
    pub unverified: bool,
    /// Whether the proposal's value is the one read (a correction or addition the linter
    /// refused, such as a cuDNN without a `cudnn/` record, is left for the curator).
    pub applied: bool,
    /// Why it was not read, not applied, or what else a curator should know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// A proposed image record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Proposal {
    /// The record's file in compat-db: `image/ngc-25.01.toml`.
    pub file: String,
    /// A record compat-db does not have.
    pub new: bool,
    /// The source the proposal cites: the image pinned by digest, and which files the
    /// facts came from.
    pub source: Source,
    /// Every fact of the record, and every fact read that the record lacks.
    pub facts: Vec<FactCheck>,
    /// The proposed record's `unverified`.
    pub unverified: Vec<String>,
    /// Whether the proposal changes anything (a fact, `unverified`); nothing is written
    /// when it does not.
    pub changed: bool,
    /// The file written (`DIR/image/ngc-25.01.toml`); absent when nothing was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written: Option<String>,
    /// The proposed TOML.
    #[serde(skip)]
    pub text: String,
}

/// Why no proposal can be made or written.
#[derive(Debug, thiserror::Error)]
pub enum ProposeError {
    /// The image or the directory given cannot make a proposal: bad input.
    #[error("{0}")]
    Input(String),
    /// Writing failed, or the proposal does not lint: not the input's fault.
    #[error("{0}")]
    Environment(String),
}

/// Which record an image is: its family, tag and the id a new record would have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// NGC or pytorch/pytorch.
    pub family: ImageFamily,
    /// `25.01-py3`.
    pub tag: String,
    /// `ngc-25.01`, `pytorch-2.8.0-cuda12.8-cudnn9-runtime`.
    pub id: String,
}

/// Which record one of `names` (the image's names, first found first) is, by its tag: an NGC
/// release (`…/pytorch:25.01-py3`) or a `pytorch/pytorch` tag. An `nvidia/cuda` tag is one
/// of a family of tags that a record covers together, so it is refused.
pub fn identify(names: &[String]) -> Result<Identity, String> {
    let mut why = Vec::new();
    for name in names {
        let claims = match read_tag(name) {
            Ok(c) => c,
            Err(e) => {
                why.push(e);
                continue;
            }
        };
        let tag = RegistryRef::parse(name)
            .ok()
            .and_then(|r| r.tag().map(str::to_string));
        let Some(tag) = tag else { continue };
        match (claims.scheme, claims.ngc_release) {
            (Some(Scheme::Ngc), Some(release)) => {
                if tag != format!("{release}-py3") {
                    why.push(format!(
                        "`{name}` is a variant of NGC release {release}; compat-db records the `{release}-py3` image"
                    ));
                    continue;
                }
                return Ok(Identity {
                    family: ImageFamily::Ngc,
                    id: format!("ngc-{release}"),
                    tag,
                });
            }
            (Some(Scheme::Pytorch), _) => {
                return Ok(Identity {
                    family: ImageFamily::Pytorch,
                    id: format!("pytorch-{tag}"),
                    tag,
                });
            }
            (Some(Scheme::NvidiaCuda), _) => why.push(format!(
                "`{name}` is an nvidia/cuda tag, and compat-db records every tag of a CUDA release together: a proposal is for the record of one image (NGC, pytorch/pytorch)"
            )),
            _ => why.push(format!("`{name}` names no NGC release or pytorch/pytorch tag")),
        }
    }
    Err(if names.is_empty() {
        "the image carries no name, so which compat-db record it is cannot be told: read it by a name such as `docker://nvcr.io/nvidia/pytorch:25.01-py3`".into()
    } else {
        format!(
            "no compat-db image record can be told from the image's names: {}",
            why.join("; ")
        )
    })
}

/// The image pinned by the digest of the manifest read: `docker://REGISTRY/REPO@sha256:…`,
/// from the name that `identify` read (a registry read names the registry it asked). `None`
/// when the read gave no manifest digest (a `docker save` archive, a local image read by
/// paths): then there is nothing to cite that others could fetch.
pub fn pinned(origin: &Origin, name: &str) -> Option<String> {
    let digest = origin.digest.as_deref()?;
    let r = RegistryRef::parse(name).ok()?;
    Some(format!("docker://{}/{}@{digest}", r.registry, r.repository))
}

// ---------------------------------------------------------------------------------------
// Reading the facts.

/// A fact read from the image: the value and where it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reading {
    value: String,
    from: Vec<String>,
    /// What else a curator should know (a declaration the files contradict).
    note: Option<String>,
}

impl Reading {
    fn new(value: String, from: Vec<String>) -> Reading {
        Reading {
            value,
            from,
            note: None,
        }
    }
}

/// The keys of the image record schema an image can show, in the order reports list them.
const READABLE: [&str; 7] = ["torch", "cuda", "cudnn", "nccl", "python", "os", "require_cuda"];

/// Why a key of the schema is never read from an image.
fn not_in_image(key: &str) -> &'static str {
    match key {
        "min_driver" => "the driver NVIDIA says the release needs is in its release notes, not in the image",
        "forward_compat" => {
            "the driver branches NVIDIA names for the release's cuda-compat are in its release notes; the image's cuda-compat library is listed by verify, not compared"
        }
        "released" => "a release date is not in the image",
        "flavors" => "which flavors are published is a fact of the tag list, not of one image",
        "cudnn_tag" => "how tags spell the cuDNN variant is not in the image",
        _ => "not a fact gpuenv reads from an image",
    }
}

fn numbers(v: &str) -> Option<Vec<u64>> {
    v.split('.').map(|p| p.parse::<u64>().ok()).collect()
}

/// Whether two dotted versions agree as far as both go (`9.7.0` and `9.7.0.66`).
fn agree(a: &str, b: &str) -> bool {
    match (numbers(a), numbers(b)) {
        (Some(a), Some(b)) => a.iter().zip(&b).all(|(x, y)| x == y),
        _ => a == b,
    }
}

fn parts(v: &str) -> usize {
    v.split('.').count()
}

/// One dotted fact from readings of the files (`files`) and of the config (`declared`),
/// each `(value, where)`: the most precise file reading, made more precise by declarations
/// that agree with it; declarations alone only where no file shows the fact.
fn merge(
    what: &str,
    files: Vec<(String, String)>,
    declared: Vec<(String, String)>,
) -> Result<Reading, String> {
    fn most_precise(what: &str, all: &[(String, String)], kind: &str) -> Result<Option<Reading>, String> {
        let mut best: Option<&(String, String)> = None;
        for r in all {
            if let Some(conflict) = all.iter().find(|o| !agree(&o.0, &r.0)) {
                return Err(format!(
                    "the image's {kind} disagree on {what}: {} ({}) and {} ({})",
                    r.0, r.1, conflict.0, conflict.1
                ));
            }
            if best.is_none_or(|b| parts(&r.0) > parts(&b.0)) {
                best = Some(r);
            }
        }
        Ok(best.map(|b| Reading::new(b.0.clone(), all.iter().map(|r| r.1.clone()).collect())))
    }
    let Some(mut reading) = most_precise(what, &files, "files")? else {
        return most_precise(what, &declared, "declarations")?.ok_or_else(|| {
            format!("no file of the image shows its {what}, nor does its config declare one")
        });
    };
    let (agreeing, contradicting): (Vec<_>, Vec<_>) =
        declared.into_iter().partition(|d| agree(&d.0, &reading.value));
    for d in agreeing {
        if parts(&d.0) > parts(&reading.value) {
            reading.value = d.0.clone();
        }
        reading.from.push(d.1);
    }
    if !contradicting.is_empty() {
        let said: Vec<String> = contradicting
            .iter()
            .map(|d| format!("{} ({})", d.0, d.1))
            .collect();
        reading.note = Some(format!(
            "the config declares {}, which the files contradict: not used",
            said.join(", ")
        ));
    }
    Ok(reading)
}

fn read_torch(f: &ImageFacts) -> Result<Reading, String> {
    let found: Vec<(String, String)> = f
        .torch
        .iter()
        .filter_map(|t| {
            let v = t.version.as_ref().or(t.dist_version.as_ref())?;
            Some((v.value.clone(), v.source.clone()))
        })
        .collect();
    let mut distinct: Vec<&str> = found.iter().map(|(v, _)| v.as_str()).collect();
    distinct.sort_unstable();
    distinct.dedup();
    match distinct.as_slice() {
        [] => Err("no torch installation in the image shows its version".into()),
        [one] => Ok(Reading::new(
            one.to_string(),
            found.iter().map(|(_, s)| s.clone()).collect(),
        )),
        _ => Err(format!(
            "the image holds several torch installations: {}",
            found
                .iter()
                .map(|(v, s)| format!("{v} ({s})"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The Python torch is installed for (the one that runs the image's workloads), else the
/// only Python of the image; shown by its interpreter file where it has one.
fn read_python(f: &ImageFacts) -> Result<Reading, String> {
    let torch_python: Vec<&str> = f.torch.iter().filter_map(|t| t.python.as_deref()).collect();
    let candidates: Vec<_> = match torch_python.as_slice() {
        [one] => f.pythons.iter().filter(|p| p.version == *one).collect(),
        _ => f.pythons.iter().collect(),
    };
    let mut minors: Vec<&str> = candidates.iter().map(|p| p.version.as_str()).collect();
    minors.sort_unstable();
    minors.dedup();
    match minors.as_slice() {
        [] => Err("no Python interpreter or library directory in the image".into()),
        [_] => {
            let exact: Vec<_> = candidates.iter().filter_map(|p| p.exact.as_ref()).collect();
            let value = match exact.as_slice() {
                [e] => e.value.clone(),
                _ => candidates[0].version.clone(),
            };
            let mut from: Vec<String> = candidates
                .iter()
                .map(|p| p.executables.first().cloned().unwrap_or_else(|| p.source.clone()))
                .collect();
            from.extend(exact.iter().map(|e| e.source.clone()));
            Ok(Reading::new(value, from))
        }
        several => Err(format!(
            "the image holds several Pythons ({}) and torch names none of them",
            several.join(", ")
        )),
    }
}

fn read_cuda(f: &ImageFacts) -> Result<Reading, String> {
    let files: Vec<(String, String)> = f
        .cuda_toolkits
        .iter()
        .filter_map(|t| t.version.as_ref())
        .map(|v| (v.value.to_string(), v.source.clone()))
        .collect();
    let declared: Vec<(String, String)> = f
        .env
        .cuda_version
        .iter()
        .map(|v| (v.value.to_string(), v.source.clone()))
        .collect();
    // Several toolkits are several facts, not a disagreement: the one the config names is
    // the image's toolkit.
    let mut versions: Vec<&str> = files.iter().map(|(v, _)| v.as_str()).collect();
    versions.sort_unstable();
    versions.dedup();
    if versions.len() > 1 {
        if let Some((named, _)) = declared.first() {
            let chosen: Vec<(String, String)> =
                files.iter().filter(|(v, _)| agree(v, named)).cloned().collect();
            if !chosen.is_empty() {
                return merge("CUDA toolkit", chosen, declared);
            }
        }
        return Err(format!(
            "the image holds several CUDA toolkits ({}) and its config names none of them",
            versions.join(", ")
        ));
    }
    merge("CUDA toolkit", files, declared)
}

fn read_cudnn(f: &ImageFacts) -> Result<Reading, String> {
    let c = &f.cudnn;
    let files = c
        .headers
        .iter()
        .map(|h| (h.value.to_string(), h.source.clone()))
        .chain(
            c.libraries
                .iter()
                .filter_map(|l| Some((l.version.clone()?, l.path.clone()))),
        )
        .chain(c.pip.iter().map(|p| (p.value.clone(), p.source.clone())))
        .collect();
    let declared = c
        .declared
        .iter()
        .map(|d| (d.value.to_string(), d.source.clone()))
        .collect();
    merge("cuDNN", files, declared)
}

fn read_nccl(f: &ImageFacts) -> Result<Reading, String> {
    let n = &f.nccl;
    let files = n
        .headers
        .iter()
        .map(|h| (h.value.to_string(), h.source.clone()))
        .chain(
            n.libraries
                .iter()
                .filter_map(|l| Some((l.version.clone()?, l.path.clone()))),
        )
        .chain(n.pip.iter().map(|p| (p.value.clone(), p.source.clone())))
        .collect();
    let declared = n
        .declared
        .iter()
        .map(|d| (d.value.to_string(), d.source.clone()))
        .collect();
    merge("NCCL", files, declared)
}

fn read_os(f: &ImageFacts) -> Result<Reading, String> {
    match &f.os {
        Some(os) if !os.version_id.is_empty() => Ok(Reading::new(
            format!("{}{}", os.id, os.version_id),
            vec![os.source.clone()],
        )),
        Some(os) => Err(format!("{} gives no VERSION_ID", os.source)),
        None => Err("the image has no os-release file".into()),
    }
}

fn read_require(f: &ImageFacts) -> Result<Reading, String> {
    f.env
        .require
        .iter()
        .find(|r| r.source == "env NVIDIA_REQUIRE_CUDA")
        .map(|r| Reading::new(r.value.clone(), vec![r.source.clone()]))
        .ok_or_else(|| "the image's config sets no NVIDIA_REQUIRE_CUDA".into())
}

fn read_key(f: &ImageFacts, key: &str) -> Result<Reading, String> {
    match key {
        "torch" => read_torch(f),
        "cuda" => read_cuda(f),
        "cudnn" => read_cudnn(f),
        "nccl" => read_nccl(f),
        "python" => read_python(f),
        "os" => read_os(f),
        "require_cuda" => read_require(f),
        other => Err(not_in_image(other).into()),
    }
}

// ---------------------------------------------------------------------------------------
// Comparing.

/// A dotted record value (`12.8.0`, `9.7.0.66`, `3.12`) against the one read.
pub fn compare_dotted(record: &str, read: &str) -> Outcome {
    if !agree(record, read) {
        Outcome::Corrected
    } else if parts(read) >= parts(record) {
        Outcome::Confirmed
    } else {
        Outcome::Partial
    }
}

/// A torch version: the public versions must be equal (`2.6.0a0` is not `2.6.0`), and the
/// record's local segments a prefix of the image's, since NGC's `__version__` carries the
/// container after the commit (`2.6.0a0+ecf3bae40a.nv25.1`) where records stop at the commit.
pub fn compare_torch(record: &Version, read: &str) -> Outcome {
    let Ok(read) = read.parse::<Version>() else {
        return Outcome::Corrected;
    };
    if record.clone().without_local() != read.clone().without_local() {
        return Outcome::Corrected;
    }
    let local = |v: &Version| v.local().iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let (r, x) = (local(record), local(&read));
    if x.starts_with(&r) {
        Outcome::Confirmed
    } else if r.starts_with(&x) {
        Outcome::Partial
    } else {
        Outcome::Corrected
    }
}

/// The record's value for `key`, as written.
fn record_value(rec: &Image, key: &str) -> Option<String> {
    match key {
        "torch" => rec.torch.as_ref().map(|v| v.to_string()),
        "cuda" => rec.cuda.as_ref().map(|v| v.to_string()),
        "cudnn" => rec.cudnn.as_ref().map(|v| v.to_string()),
        "nccl" => rec.nccl.as_ref().map(|v| v.to_string()),
        "python" => rec.python.as_ref().map(|v| v.to_string()),
        "os" => (!rec.os.is_empty()).then(|| rec.os.join(", ")),
        "require_cuda" => rec.require_cuda.clone(),
        "min_driver" => rec.min_driver.as_ref().map(|v| v.to_string()),
        "forward_compat" => (!rec.forward_compat.is_empty()).then(|| {
            rec.forward_compat
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        }),
        "released" => rec.released.as_ref().map(|v| v.to_string()),
        "flavors" => (!rec.flavors.is_empty()).then(|| format!("{:?}", rec.flavors)),
        "cudnn_tag" => rec.cudnn_tag.clone(),
        _ => None,
    }
}

fn compare(rec: &Image, key: &str, read: &str) -> Outcome {
    match key {
        "torch" => match &rec.torch {
            Some(v) => compare_torch(v, read),
            None => Outcome::Added,
        },
        "os" if rec.os.is_empty() => Outcome::Added,
        "os" if rec.os.len() == 1 && rec.os[0] == read => Outcome::Confirmed,
        "os" => Outcome::Corrected,
        "require_cuda" => match &rec.require_cuda {
            Some(v) if v.trim() == read.trim() => Outcome::Confirmed,
            Some(_) => Outcome::Corrected,
            None => Outcome::Added,
        },
        _ => match record_value(rec, key) {
            Some(v) => compare_dotted(&v, read),
            None => Outcome::Added,
        },
    }
}

/// Sets `key` of `rec` to `value`; an error when the value is not one the key takes.
fn set(rec: &mut Image, key: &str, value: &str) -> Result<(), String> {
    fn parsed<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, String>
    where
        T::Err: std::fmt::Display,
    {
        value
            .parse()
            .map_err(|e: T::Err| format!("`{value}` is not a {key} value compat-db takes: {e}"))
    }
    match key {
        "torch" => rec.torch = Some(parsed(key, value)?),
        "cuda" => rec.cuda = Some(parsed(key, value)?),
        "cudnn" => rec.cudnn = Some(parsed(key, value)?),
        "nccl" => rec.nccl = Some(parsed(key, value)?),
        // Records name the minor line (`3.12`), which is what `python/` records are.
        "python" => {
            rec.python = Some(parsed(
                key,
                &value.split('.').take(2).collect::<Vec<_>>().join("."),
            )?)
        }
        "os" => rec.os = vec![value.to_string()],
        "require_cuda" => rec.require_cuda = Some(value.to_string()),
        other => return Err(format!("`{other}` is not read from images")),
    }
    Ok(())
}

/// Each fact of `rec` (and each fact read that it lacks) against the image.
pub fn compare_facts(rec: &Image, facts: &ImageFacts) -> Vec<FactCheck> {
    let unverified = |k: &str| rec.unverified.iter().any(|u| u == k);
    let mut out = Vec::new();
    for key in READABLE {
        let record = record_value(rec, key);
        let check = match read_key(facts, key) {
            Err(why) => {
                if record.is_none() {
                    continue;
                }
                FactCheck {
                    key: key.into(),
                    outcome: Outcome::Unread,
                    record,
                    read: None,
                    read_from: Vec::new(),
                    was_unverified: unverified(key),
                    unverified: unverified(key),
                    applied: false,
                    why: Some(why),
                }
            }
            Ok(reading) => {
                let outcome = compare(rec, key, &reading.value);
                let more_precise = (outcome == Outcome::Confirmed
                    && record.as_deref().is_some_and(|r| r != reading.value))
                .then(|| format!("the image says more than the record: {}", reading.value));
                let partial = (outcome == Outcome::Partial).then(|| {
                    format!(
                        "the image agrees as far as it says ({}) but does not state all of {}",
                        reading.value,
                        record.as_deref().unwrap_or("-")
                    )
                });
                let why = [reading.note.clone(), more_precise, partial]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>();
                let stays = match outcome {
                    Outcome::Partial | Outcome::Unread => unverified(key),
                    _ => false,
                };
                FactCheck {
                    key: key.into(),
                    outcome,
                    record,
                    read: Some(reading.value),
                    read_from: reading.from,
                    was_unverified: unverified(key),
                    unverified: stays,
                    applied: matches!(outcome, Outcome::Confirmed | Outcome::Corrected | Outcome::Added),
                    why: (!why.is_empty()).then(|| why.join("; ")),
                }
            }
        };
        out.push(check);
    }
    for key in ["min_driver", "forward_compat", "released", "flavors", "cudnn_tag"] {
        if let Some(record) = record_value(rec, key) {
            out.push(FactCheck {
                key: key.into(),
                outcome: Outcome::Unread,
                record: Some(record),
                read: None,
                read_from: Vec::new(),
                was_unverified: unverified(key),
                unverified: unverified(key),
                applied: false,
                why: Some(not_in_image(key).into()),
            });
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// The proposed record.

/// `rec` with every applied fact of `checks` set and `unverified` as the checks leave it.
fn apply(rec: &Image, checks: &mut [FactCheck]) -> Image {
    let mut next = rec.clone();
    for c in checks.iter_mut() {
        if !(c.applied && matches!(c.outcome, Outcome::Corrected | Outcome::Added)) {
            continue;
        }
        let Some(value) = c.read.clone() else { continue };
        if let Err(why) = set(&mut next, &c.key, &value) {
            c.applied = false;
            c.unverified = c.was_unverified;
            c.why = Some(why);
        }
    }
    next.unverified = rec
        .unverified
        .iter()
        .filter(|u| checks.iter().find(|c| &c.key == *u).is_none_or(|c| c.unverified))
        .cloned()
        .collect();
    next
}

/// The source the proposal cites: the image by digest, and per fact the files it came from.
fn cite(url: &str, origin: &Origin, checks: &[FactCheck], today: PartialDate) -> Source {
    let read: Vec<String> = checks
        .iter()
        .filter(|c| c.applied && c.outcome != Outcome::Unread)
        .map(|c| {
            format!(
                "{} {} from {}",
                c.key,
                c.read.as_deref().unwrap_or("?"),
                c.read_from.join(", ")
            )
        })
        .collect();
    let chosen = origin
        .index_digest
        .as_deref()
        .map(|i| format!("; the linux/amd64 manifest of index {i}"))
        .unwrap_or_default();
    let how = match origin.transport {
        "registry" => "from the registry".to_string(),
        other => format!(
            "from a {other} copy (its manifest digest is the registry's only where the copy was made from it)"
        ),
    };
    Source {
        url: url.to_string(),
        note: Some(format!(
            "read by `gpuenv verify` on {today} {how}{chosen}: {}",
            read.join("; ")
        )),
    }
}

/// A record as TOML, the file name being its id.
fn full_text(rec: &Image) -> Result<String, String> {
    let mut value = toml::Value::try_from(rec).map_err(|e| e.to_string())?;
    if let Some(t) = value.as_table_mut() {
        t.remove("id");
    }
    toml::to_string(&value).map_err(|e| e.to_string())
}

/// `key = value` as TOML writes it, on one line.
fn line_of(key: &str, value: toml::Value) -> Option<String> {
    let mut t = toml::Table::new();
    t.insert(key.to_string(), value);
    let s = toml::to_string(&t).ok()?;
    let s = s.trim_end();
    (!s.contains('\n')).then(|| s.to_string())
}

/// The top-level key a line sets, when it sets one.
fn key_of(line: &str) -> Option<&str> {
    let (k, _) = line.split_once('=')?;
    let k = k.trim();
    (!k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'))
    .then_some(k)
}

/// The curated text with the lines of the keys that differ between `old` and `new`
/// rewritten (added before `unverified`/`notes`/`checked`, removed when emptied), and
/// `source` appended: the curator's diff shows only what changed. `None` when the text is
/// laid out otherwise (a value over several lines): the caller writes the record whole.
fn edited_text(original: &str, old: &Image, new: &Image, source: &Source) -> Option<String> {
    let old_t = toml::Value::try_from(old).ok()?;
    let new_t = toml::Value::try_from(new).ok()?;
    let (old_t, new_t) = (old_t.as_table()?, new_t.as_table()?);
    let mut lines: Vec<String> = original.lines().map(str::to_string).collect();
    let top_end = lines
        .iter()
        .position(|l| l.trim_start().starts_with('['))
        .unwrap_or(lines.len());
    let mut top: Vec<String> = lines[..top_end].to_vec();
    let rest: Vec<String> = lines.split_off(top_end);
    let mut keys: Vec<&String> = Vec::new();
    for k in old_t.keys().chain(new_t.keys()) {
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    for key in keys {
        if key == "sources" || key == "id" || old_t.get(key) == new_t.get(key) {
            continue;
        }
        let at = top.iter().position(|l| key_of(l) == Some(key.as_str()));
        if let Some(i) = at {
            // Only a value written on its own line is rewritten in place.
            toml::from_str::<toml::Table>(&top[i]).ok()?;
        }
        match (new_t.get(key), at) {
            (Some(v), Some(i)) => top[i] = line_of(key, v.clone())?,
            (Some(v), None) => {
                let before = top
                    .iter()
                    .position(|l| matches!(key_of(l), Some("unverified" | "notes" | "checked")))
                    .unwrap_or_else(|| {
                        top.iter()
                            .rposition(|l| !l.trim().is_empty())
                            .map_or(0, |i| i + 1)
                    });
                top.insert(before, line_of(key, v.clone())?);
            }
            (None, Some(i)) => {
                top.remove(i);
            }
            (None, None) => {}
        }
    }
    let mut text = top.join("\n");
    if !rest.is_empty() {
        text.push('\n');
        text.push_str(&rest.join("\n"));
    }
    let mut cited = toml::Table::new();
    cited.insert(
        "sources".into(),
        toml::Value::Array(vec![toml::Value::try_from(source).ok()?]),
    );
    text = format!("{}\n\n{}", text.trim_end(), toml::to_string(&cited).ok()?);
    // The edit must say exactly what the typed record says, or it is not used.
    let mut back: Image = toml::from_str(&text).ok()?;
    back.id.clone_from(&new.id);
    let mut want = new.clone();
    want.sources.push(source.clone());
    (serde_json::to_value(&back).ok()? == serde_json::to_value(&want).ok()?).then_some(text)
}

/// The comment the proposal opens with: where it came from and what it changes.
fn header(p: &Proposal, url: &str, today: PartialDate) -> String {
    let mut h = format!(
        "# Proposed by `gpuenv verify --propose` on {today} from what {url} holds.\n\
         # Review it (the `notes` may still call confirmed facts unverified), then copy it to\n\
         # compat-db/{} and run `gpuenv db lint`; gpuenv never changes compat-db itself.\n",
        p.file
    );
    for o in [
        Outcome::Confirmed,
        Outcome::Corrected,
        Outcome::Added,
        Outcome::Partial,
        Outcome::Unread,
    ] {
        for c in p.facts.iter().filter(|c| c.outcome == o) {
            let mut line = format!("#   {} {}", o.word(), c.key);
            match o {
                Outcome::Corrected => line.push_str(&format!(
                    ": compat-db {}, image {}",
                    c.record.as_deref().unwrap_or("-"),
                    c.read.as_deref().unwrap_or("-")
                )),
                Outcome::Confirmed | Outcome::Added | Outcome::Partial => {
                    line.push_str(&format!(": {}", c.read.as_deref().unwrap_or("-")))
                }
                Outcome::Unread => {}
            }
            if !c.applied && matches!(o, Outcome::Corrected | Outcome::Added) {
                line.push_str(" (not applied)");
            }
            if let Some(why) = &c.why {
                line.push_str(&format!(" -- {why}"));
            }
            h.push_str(&line);
            h.push('\n');
        }
    }
    h.push('\n');
    h
}

/// Everything a proposal is made from.
pub struct Inputs<'a> {
    /// The database the image is compared with.
    pub db: &'a Db,
    /// Its record files (the embedded ones, or `--db DIR`'s), to lint the proposal among.
    pub files: &'a [SourceFile],
    /// What the image holds.
    pub facts: &'a ImageFacts,
    /// Where it was read from.
    pub origin: &'a Origin,
    /// Today, the proposal's `checked`.
    pub today: PartialDate,
}

/// The proposal for the image `inputs` describe: its record found by the image's names,
/// each fact compared, the record rewritten, and linted among the database's files. A
/// correction or addition the linter refuses (a value that names no record) is left out
/// and said; anything else the linter refuses is an error.
pub fn propose(inputs: &Inputs<'_>) -> Result<Proposal, ProposeError> {
    let origin = inputs.origin;
    let names = &origin.names;
    let identity = identify(names).map_err(ProposeError::Input)?;
    let name = names
        .iter()
        .find(|n| identify(std::slice::from_ref(n)).is_ok_and(|i| i == identity))
        .cloned()
        .unwrap_or_default();
    let url = pinned(origin, &name).ok_or_else(|| {
        ProposeError::Input(format!(
            "a proposal cites the image by the digest of its manifest, and reading `{}` ({}) gave none: read it from its registry (`docker://{name}`) or an OCI layout",
            origin.reference, origin.transport
        ))
    })?;
    let existing = inputs
        .db
        .images
        .iter()
        .find(|i| i.family == identity.family && i.tag.as_deref() == Some(identity.tag.as_str()));
    let base = match existing {
        Some(rec) => rec.clone(),
        None => new_record(&identity, inputs.today),
    };
    let file = format!("image/{}.toml", base.id);
    let original = inputs
        .files
        .iter()
        .find(|f| f.path == file)
        .and_then(|f| f.text.as_deref().map(str::to_string));
    let mut facts = compare_facts(&base, inputs.facts);
    if existing.is_none() {
        for key in ["torch", "cuda"] {
            if !facts.iter().any(|c| c.key == key && c.outcome == Outcome::Added) {
                return Err(ProposeError::Input(format!(
                    "the image shows no {key} version, which every {} record states: no record can be proposed from it",
                    if identity.family == ImageFamily::Ngc {
                        "NGC"
                    } else {
                        "pytorch/pytorch"
                    }
                )));
            }
        }
    }
    // Lint, leave out what the linter refuses of the read values, and lint again; twice is
    // enough, as leaving a value out brings back the record's own, which linted before.
    for _ in 0..3 {
        let mut next = apply(&base, &mut facts);
        let changed = existing.is_none()
            || next.unverified != base.unverified
            || facts
                .iter()
                .any(|c| c.applied && matches!(c.outcome, Outcome::Corrected | Outcome::Added));
        if changed {
            next.checked = Some(inputs.today);
        }
        let source = cite(&url, origin, &facts, inputs.today);
        let body = match (&original, existing) {
            (Some(text), Some(_)) => edited_text(text, &base, &next, &source),
            _ => None,
        };
        let body = match body {
            Some(b) => b,
            None => {
                let mut whole = next.clone();
                whole.sources.push(source.clone());
                full_text(&whole)
                    .map_err(|e| ProposeError::Environment(format!("cannot write {file}: {e}")))?
            }
        };
        let mut p = Proposal {
            file: file.clone(),
            new: existing.is_none(),
            source,
            facts: facts.clone(),
            unverified: next.unverified.clone(),
            changed,
            written: None,
            text: String::new(),
        };
        p.text = format!("{}{body}", header(&p, &url, inputs.today));
        let problems = lint_among(inputs.files, &file, &p.text, inputs.today);
        if problems.is_empty() {
            return Ok(p);
        }
        let mut refused = false;
        for problem in &problems {
            let key = match problem.key.0.first() {
                Some(crate::db::Seg::Key(k)) => k.as_str(),
                _ => "",
            };
            if let Some(c) = facts.iter_mut().find(|c| {
                c.key == key && c.applied && matches!(c.outcome, Outcome::Corrected | Outcome::Added)
            }) {
                c.applied = false;
                c.unverified = c.was_unverified;
                c.why = Some(format!(
                    "compat-db's linter refuses it: {}; add that first, then apply it",
                    problem.message
                ));
                refused = true;
            }
        }
        if !refused {
            let said: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
            return Err(ProposeError::Environment(format!(
                "the proposed {file} does not pass the database's linter: {}",
                said.join("; ")
            )));
        }
    }
    Err(ProposeError::Environment(format!(
        "the proposed {file} still does not pass the database's linter after leaving out what it refused"
    )))
}

/// A record of what only the image shows: its identity, and notes saying what a curator
/// adds from NVIDIA's pages.
fn new_record(id: &Identity, today: PartialDate) -> Image {
    let (repository, notes) = match id.family {
        ImageFamily::Ngc => (
            "nvcr.io/nvidia/pytorch",
            "Facts read from the image by `gpuenv verify --propose`. min_driver, forward_compat and released are NVIDIA's statements in the release notes, not in the image: add them from there.",
        ),
        _ => (
            "pytorch/pytorch",
            "Facts read from the image by `gpuenv verify --propose`; flavors follow from the tag.",
        ),
    };
    Image {
        checked: Some(today),
        notes: Some(notes.into()),
        ..Image::named(id.id.clone(), id.family, repository, id.tag.clone())
    }
}

/// The linter's problems with `text` as the file `path` among the database's `files`.
fn lint_among(files: &[SourceFile], path: &str, text: &str, today: PartialDate) -> Vec<crate::db::Problem> {
    let mut all: Vec<SourceFile> = files.iter().filter(|f| f.path != path).cloned().collect();
    all.push(SourceFile {
        path: path.to_string(),
        text: Some(std::borrow::Cow::Owned(text.to_string())),
    });
    crate::db::lint_as_of(&all, Some(today))
        .into_iter()
        .filter(|p| p.file == path)
        .collect()
}

/// Writes the proposal into the new (or empty) directory `dir`, as compat-db lays it out,
/// all at once (see [`crate::files::write_new_dir`]); nothing when it changes nothing.
pub fn write(p: &mut Proposal, dir: &std::path::Path) -> Result<(), ProposeError> {
    if !p.changed {
        return Ok(());
    }
    crate::files::write_new_dir(dir, [(p.file.as_str(), p.text.as_bytes())]).map_err(|e| {
        if e.is_bad_input() {
            ProposeError::Input(format!("--propose: {e}"))
        } else {
            ProposeError::Environment(e.to_string())
        }
    })?;
    p.written = Some(crate::files::shown(&dir.join(&p.file)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        s.parse().unwrap()
    }

    #[test]
    fn dotted_facts_compare_at_the_record_precision() {
        assert_eq!(compare_dotted("12.8.0", "12.8.0"), Outcome::Confirmed);
        // A record at line precision is confirmed by a patch release of the line.
        assert_eq!(compare_dotted("12.9", "12.9.1"), Outcome::Confirmed);
        assert_eq!(compare_dotted("3.12", "3.12"), Outcome::Confirmed);
        assert_eq!(compare_dotted("2.25.1", "2.26.3"), Outcome::Corrected);
        assert_eq!(compare_dotted("12.8.0", "12.8.1"), Outcome::Corrected);
        // A header without the build number agrees but does not confirm it.
        assert_eq!(compare_dotted("9.7.0.66", "9.7.0"), Outcome::Partial);
        assert_eq!(compare_dotted("9.7.0.66", "9.7.1"), Outcome::Corrected);
    }

    #[test]
    fn ngc_torch_versions_carry_the_container_after_the_commit() {
        let rec = v("2.6.0a0+ecf3bae40a");
        assert_eq!(
            compare_torch(&rec, "2.6.0a0+ecf3bae40a.nv25.1"),
            Outcome::Confirmed
        );
        assert_eq!(compare_torch(&rec, "2.6.0a0+ecf3bae40a"), Outcome::Confirmed);
        assert_eq!(compare_torch(&rec, "2.6.0a0"), Outcome::Partial);
        assert_eq!(
            compare_torch(&rec, "2.6.0a0+0123456789.nv25.1"),
            Outcome::Corrected
        );
        // A pre-release is not its release.
        assert_eq!(compare_torch(&rec, "2.6.0+ecf3bae40a"), Outcome::Corrected);
        assert_eq!(compare_torch(&v("2.10.0"), "2.10.0+cu126"), Outcome::Confirmed);
        assert_eq!(compare_torch(&v("2.10.0"), "not a version"), Outcome::Corrected);
    }

    #[test]
    fn files_decide_and_declarations_only_add_precision() {
        let f = |v: &str, s: &str| (v.to_string(), s.to_string());
        let r = merge(
            "cuDNN",
            vec![
                f("9.7.0", "/usr/include/cudnn_version.h"),
                f("9.7.0", "libcudnn.so.9.7.0"),
            ],
            vec![f("9.7.0.66", "env CUDNN_VERSION=9.7.0.66")],
        )
        .unwrap();
        assert_eq!(r.value, "9.7.0.66");
        assert_eq!(r.from.len(), 3);
        assert_eq!(r.note, None);
        // A declaration the files contradict is not used, and said.
        let r = merge(
            "NCCL",
            vec![f("2.26.3", "/usr/include/nccl.h")],
            vec![f("2.25.1", "env NCCL_VERSION=2.25.1")],
        )
        .unwrap();
        assert_eq!(r.value, "2.26.3");
        assert!(r.note.unwrap().contains("2.25.1"));
        // Files that disagree read nothing.
        let e = merge(
            "cuDNN",
            vec![
                f("9.7.0", "/a/cudnn_version.h"),
                f("9.8.0", "/b/libcudnn.so.9.8.0"),
            ],
            vec![],
        )
        .unwrap_err();
        assert!(e.contains("disagree") && e.contains("9.8.0"), "{e}");
        // A declaration alone is a reading, from the config.
        let r = merge("NCCL", vec![], vec![f("2.25.1", "env NCCL_VERSION=2.25.1")]).unwrap();
        assert_eq!(r.from, ["env NCCL_VERSION=2.25.1"]);
        assert!(merge("NCCL", vec![], vec![]).is_err());
    }

    #[test]
    fn identity_comes_from_a_name_tag() {
        let id = identify(&["127.0.0.1:5000/nvidia/pytorch:25.01-py3".into()]).unwrap();
        assert_eq!((id.family, id.id.as_str()), (ImageFamily::Ngc, "ngc-25.01"));
        let id = identify(&["pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime".into()]).unwrap();
        assert_eq!(id.family, ImageFamily::Pytorch);
        assert!(identify(&["nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04".into()]).is_err());
        assert!(identify(&["nvcr.io/nvidia/pytorch:25.01-py3-igpu".into()]).is_err());
        assert!(identify(&["busybox:1".into()]).is_err());
        assert!(identify(&[]).is_err());
    }

    fn record(text: &str) -> Image {
        let mut rec: Image = toml::from_str(text).unwrap();
        rec.id = "ngc-25.01".into();
        rec
    }

    const RECORD: &str = r#"# nvcr.io/nvidia/pytorch:25.01-py3
family = "ngc"
repository = "nvcr.io/nvidia/pytorch"
tag = "25.01-py3"
os = ["ubuntu24.04"]
cuda = "12.8.0"
nccl = "2.25.1"
torch = "2.6.0a0+ecf3bae40a"
python = "3.12"
unverified = ["torch", "cuda", "nccl", "python", "min_driver"]
min_driver = "570.26"
checked = "2026-12-01"

[[sources]]
url = "https://docs.nvidia.com/"
"#;

    #[test]
    fn only_changed_lines_are_rewritten() {
        let old = record(RECORD);
        let mut new = old.clone();
        new.nccl = Some("2.26.3".parse().unwrap());
        new.cudnn = Some("9.7.0.66".parse().unwrap());
        new.unverified = vec!["min_driver".into()];
        new.checked = Some("2026-12-05".parse().unwrap());
        let source = Source {
            url: format!("docker://nvcr.io/nvidia/pytorch@sha256:{}", "a".repeat(64)),
            note: Some("read".into()),
        };
        let text = edited_text(RECORD, &old, &new, &source).unwrap();
        assert!(text.starts_with("# nvcr.io/nvidia/pytorch:25.01-py3\n"), "{text}");
        assert!(text.contains("nccl = \"2.26.3\"\n"), "{text}");
        assert!(
            text.contains("cudnn = \"9.7.0.66\"\nunverified = [\"min_driver\"]"),
            "{text}"
        );
        assert!(text.contains("checked = \"2026-12-05\""), "{text}");
        assert!(text.contains("torch = \"2.6.0a0+ecf3bae40a\"\n"), "{text}");
        assert_eq!(text.matches("[[sources]]").count(), 2, "{text}");
        // A value over several lines is not edited in place.
        let spread = RECORD.replace("os = [\"ubuntu24.04\"]", "os = [\n  \"ubuntu24.04\",\n]");
        let mut moved = old.clone();
        moved.os = vec!["ubuntu22.04".into()];
        assert_eq!(edited_text(&spread, &old, &moved, &source), None);
    }

    #[test]
    fn facts_are_compared_and_unverified_follows() {
        use crate::image::detect::{OsFacts, PythonFacts, TorchFacts};
        use crate::model::Sourced;
        let rec = record(RECORD);
        let mut f = ImageFacts::default();
        f.torch.push(TorchFacts::declared(
            "/usr/local/lib/python3.12/dist-packages".into(),
            Some("3.12".into()),
            Sourced::new(
                "2.6.0a0+ecf3bae40a.nv25.1".into(),
                "/usr/local/lib/python3.12/dist-packages/torch/version.py",
            ),
            None,
        ));
        f.pythons.push(PythonFacts {
            version: "3.12".into(),
            free_threaded: false,
            exact: None,
            prefix: "/usr".into(),
            executables: vec!["/usr/bin/python3.12".into()],
            site_packages: Vec::new(),
            source: "/usr/bin/python3.12".into(),
        });
        f.os = Some(OsFacts {
            id: "ubuntu".into(),
            version_id: "24.04".into(),
            pretty_name: String::new(),
            source: "/etc/os-release".into(),
        });
        f.nccl
            .headers
            .push(Sourced::new("2.26.3".parse().unwrap(), "/usr/include/nccl.h"));
        let mut checks = compare_facts(&rec, &f);
        let by = |k: &str| checks.iter().find(|c| c.key == k).unwrap().clone();
        assert_eq!(by("torch").outcome, Outcome::Confirmed);
        assert!(!by("torch").unverified);
        assert_eq!(by("python").read_from, ["/usr/bin/python3.12"]);
        assert_eq!(by("os").outcome, Outcome::Confirmed);
        let nccl = by("nccl");
        assert_eq!(
            (nccl.outcome, nccl.record.as_deref(), nccl.read.as_deref()),
            (Outcome::Corrected, Some("2.25.1"), Some("2.26.3"))
        );
        let cuda = by("cuda");
        assert_eq!((cuda.outcome, cuda.unverified), (Outcome::Unread, true));
        assert_eq!(by("min_driver").outcome, Outcome::Unread);
        assert!(
            !checks.iter().any(|c| c.key == "cudnn"),
            "nothing to say of cuDNN"
        );
        let next = apply(&rec, &mut checks);
        assert_eq!(next.unverified, ["cuda", "min_driver"]);
        assert_eq!(next.nccl.unwrap().to_string(), "2.26.3");
        assert_eq!(
            next.torch, rec.torch,
            "a confirmed value keeps the record's spelling"
        );
    }
}
