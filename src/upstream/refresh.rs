//! `gpuenv db refresh`: what PyPI (and the PyTorch index, where reachable) says about torch
//! releases, compared with the curated records, as proposals for review; with the new CUDA
//! toolkits and cuDNN releases that [`super::toolkits`] proposes beside them, the framework
//! records of [`super::frameworks`], the NGC releases of [`super::ngc`] and the driver
//! releases of [`super::drivers`].
//!
//! Curated facts are never overwritten: proposals are written to a directory of their own,
//! all at once (a temporary directory of a random name renamed into place, which refuses a
//! folder filled or swapped in meanwhile), so a failure leaves nothing half-written.

use std::collections::BTreeMap;
use std::path::Path;

use reqwest::Url;
use serde::{Deserialize, Serialize};

use super::pypi::{self, DefaultBuild, SimpleProject};
use super::{Client, Fetched, UpstreamError, lazy_wheel};
use crate::db::{Db, Source, TorchRelease, TorchVariant};
use crate::model::{HostArch, Manylinux, PartialDate, PythonTag, Variant, Version, VersionSpecifiers};

/// Where upstream lives, and what to read.
#[derive(Debug, Clone)]
pub struct RefreshOptions {
    /// PyPI's root (`https://pypi.org/`): the simple API is at `simple/<project>/`.
    pub pypi: Url,
    /// The PyTorch wheel index (`https://download.pytorch.org/whl/`), if it is to be read.
    pub pytorch_index: Option<Url>,
    /// Oldest torch release considered.
    pub floor: Version,
    /// How many wheels to try per release before giving up on its metadata (mirrors do
    /// not always serve PEP 658 files).
    pub metadata_attempts: usize,
    /// Packages that pin torch whose releases are read (`vllm`...).
    pub frameworks: Vec<String>,
    /// Their releases first uploaded on or after this day are read.
    pub frameworks_since: PartialDate,
    /// The registry whose `nvidia/pytorch` tags are NGC's releases (`nvcr.io`), if it is to
    /// be read: `HOST` or `HOST:PORT`, over HTTPS except on loopback (see
    /// [`crate::registry::plain_http`]).
    pub ngc_registry: Option<String>,
    /// Registries besides loopback that may be read over plain HTTP (`HOST[:PORT]`, as
    /// `GPUENV_INSECURE_REGISTRIES` lists them for every registry read of gpuenv's).
    pub insecure_registries: Vec<String>,
    /// NVIDIA's driver index (`https://download.nvidia.com/XFree86/Linux-x86_64/`), if it is
    /// to be read.
    pub driver_index: Option<Url>,
}

impl Default for RefreshOptions {
    fn default() -> Self {
        RefreshOptions {
            pypi: Url::parse("https://pypi.org/").expect("valid URL"),
            pytorch_index: Some(Url::parse("https://download.pytorch.org/whl/").expect("valid URL")),
            floor: "1.12.0".parse().expect("valid version"),
            metadata_attempts: 8,
            frameworks: super::frameworks::FRAMEWORK_PROJECTS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            // Two years before this code was written, and vLLM 0.3 (early 2024) with it.
            frameworks_since: "2024-01-01".parse().expect("valid date"),
            ngc_registry: Some("nvcr.io".to_string()),
            insecure_registries: Vec::new(),
            driver_index: Some(
                Url::parse("https://download.nvidia.com/XFree86/Linux-x86_64/").expect("valid URL"),
            ),
        }
    }
}

/// What upstream says about one torch release.
#[derive(Debug, Clone)]
pub struct TorchFacts {
    /// The release.
    pub version: Version,
    /// Day of the first upload to PyPI.
    pub released: Option<PartialDate>,
    /// `Requires-Python` of the metadata read.
    pub requires_python: Option<VersionSpecifiers>,
    /// CPython tags of the Linux x86_64 wheels.
    pub python: Vec<PythonTag>,
    /// Their manylinux tag.
    pub manylinux: Option<Manylinux>,
    /// The default build's pins, when a wheel's metadata could be read.
    pub default: Option<DefaultBuild>,
    /// The metadata file read.
    pub metadata_url: Option<String>,
    /// torchvision release that pins this torch exactly.
    pub torchvision: Option<Version>,
    /// torchaudio release that pins this torch exactly.
    pub torchaudio: Option<Version>,
    /// Variants on the PyTorch index, when it was reachable.
    pub index_variants: Option<Vec<Variant>>,
    /// The architectures on which PyPI's wheel is the default CUDA build: x86_64, and
    /// aarch64 where the release has Linux aarch64 wheels of a CUDA build's size and the
    /// metadata's CUDA runtime requirement is not limited to x86_64. `None` when no metadata was read, or it pins no
    /// CUDA runtime (a wheel that bundles its libraries says nothing of its aarch64 twin).
    pub pypi_platforms: Option<Vec<HostArch>>,
    /// The manylinux tag of its Linux aarch64 wheels on PyPI.
    pub manylinux_aarch64: Option<Manylinux>,
}

/// One fact where the curated record and upstream differ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// The key (`python`, `variants.cu121.cudnn`).
    pub field: String,
    /// What the database says (`-` when absent).
    pub curated: String,
    /// What upstream says.
    pub upstream: String,
}

/// The comment a proposed change to a record opens with: `title`, each change as curated
/// against upstream, then `after` (a line of its own when not empty) and a blank line.
pub(crate) fn changes_header(title: &str, changes: &[Change], after: &str) -> String {
    let mut header = format!("# {title}\n");
    for c in changes {
        header.push_str(&format!(
            "#   {}: curated {} / upstream {}\n",
            c.field, c.curated, c.upstream
        ));
    }
    if !after.is_empty() {
        header.push_str(&format!("# {after}\n"));
    }
    header.push('\n');
    header
}

/// A proposed record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Proposal {
    /// `torch/2.15.0.toml`, `cuda/13.6.0.toml`, `cudnn/9.30.0.12.toml`,
    /// `image/ngc-26.10.toml`, `driver/r625.toml`.
    pub file: String,
    /// The kind of record: `torch`, `cuda`, `cudnn`, `framework`, `image` (an NGC release)
    /// or `driver` (a driver branch).
    #[serde(deserialize_with = "proposal_kind")]
    pub kind: crate::model::known::Word,
    /// A release the database lacks.
    pub new: bool,
    /// Facts upstream does not state, left for a curator: the keys a `cuda` or `cudnn`
    /// record lists as `pending`; for an NGC release, the keys its draft leaves out (the
    /// image kind has no `pending`, and the draft lints once `torch` and `cuda` are in).
    pub pending: Vec<String>,
    /// For a known release: what differs.
    pub changes: Vec<Change>,
    /// The proposed TOML.
    #[serde(skip)]
    pub text: String,
}

/// The kinds of record a refresh proposes.
const PROPOSAL_KINDS: [&str; 6] = ["torch", "cuda", "cudnn", "framework", "image", "driver"];

fn proposal_kind<'de, D: serde::Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    crate::model::known::one_of(d, "proposal kind", PROPOSAL_KINDS)
}

/// What a refresh found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    /// torch releases read from PyPI.
    pub releases: usize,
    /// CUDA toolkit releases PyPI's `cuda-toolkit` meta-package lists.
    pub cuda_releases: usize,
    /// cuDNN releases the `nvidia-cudnn-cuXX` projects list.
    pub cudnn_releases: usize,
    /// cuDNN releases older than compat-db's newest with no record: not proposed, as
    /// compat-db records older ones only where a build or an image uses them.
    pub cudnn_older_unrecorded: usize,
    /// Releases of packages that pin torch whose metadata was read.
    #[serde(default)]
    pub framework_releases: usize,
    /// Releases whose metadata no mirror served (only their wheel tags were compared).
    pub without_metadata: Vec<String>,
    /// Proposals, new first.
    pub proposals: Vec<Proposal>,
    /// Whether the PyTorch index answered, and if not why.
    pub pytorch_index: String,
    /// Whether the NGC registry's tag list was read (`read`, `not asked`, or why not).
    #[serde(default = "not_asked")]
    pub ngc_registry: String,
    /// NGC PyTorch releases the registry lists (`YY.MM-py3` tags).
    #[serde(default)]
    pub ngc_releases: usize,
    /// Its other tags (`-igpu`, `-py3-igpu`, old `-py2`...), not releases: ignored.
    #[serde(default)]
    pub ngc_tags_ignored: usize,
    /// NGC releases older than compat-db's oldest NGC record without one: not proposed.
    #[serde(default)]
    pub ngc_older_unrecorded: usize,
    /// Whether NVIDIA's driver index was read (`read`, `not asked`, or why not).
    #[serde(default = "not_asked")]
    pub driver_index: String,
    /// Driver releases the index lists (its version folders).
    #[serde(default)]
    pub driver_releases: usize,
    /// The branches they belong to.
    #[serde(default)]
    pub driver_branches: usize,
    /// Links of the index that are not a release folder: ignored.
    #[serde(default)]
    pub driver_entries_ignored: usize,
    /// The release the index's `latest.txt` names, when it was served.
    #[serde(default)]
    pub driver_latest: Option<String>,
    /// Driver branches older than compat-db's oldest branch record without one: not proposed.
    #[serde(default)]
    pub driver_older_unrecorded: usize,
    /// Where the proposals were written.
    pub out: Option<String>,
}

fn not_asked() -> String {
    NOT_ASKED.to_string()
}

/// The status of an optional source the options skip.
const NOT_ASKED: &str = "not asked";

/// What a refresh tells while it reads upstream, for a progress display: each stage as it
/// begins, then each of its files as it is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefreshStep {
    /// A stage begins: what it reads (`the PyPI page of torch`, `torchvision's wheel
    /// metadata`), and how many files when that is known (a release's metadata counts as
    /// one, however many mirrors' files were tried for it).
    Stage {
        /// What it reads.
        what: String,
        /// How many files.
        files: Option<u64>,
    },
    /// One more file of the stage was read.
    Read,
}

const SIMPLE_JSON: &str = "application/vnd.pypi.simple.v1+json";

fn join(base: &Url, rel: &str) -> Result<Url, UpstreamError> {
    base.join(rel).map_err(|e| UpstreamError::Format {
        url: format!("{base}{rel}"),
        reason: format!("not a URL: {e}"),
    })
}

fn project(
    client: &Client,
    opts: &RefreshOptions,
    name: &str,
) -> Result<(Url, SimpleProject), UpstreamError> {
    let url = join(&opts.pypi, &format!("simple/{name}/"))?;
    match client.get(&url, Some(SIMPLE_JSON))? {
        Fetched::Body(text) => Ok((url.clone(), pypi::parse_simple(url.as_str(), &text)?)),
        Fetched::NotFound => Err(UpstreamError::Format {
            url: url.to_string(),
            reason: "no such project (404)".into(),
        }),
    }
}

/// Reads the metadata of a wheel of `files` (ranked by the caller, at most `attempts`
/// tried): the PEP 658 file of one that installs on Linux x86_64; where the index serves
/// none, the metadata inside the first such wheel, read with range requests; and only then
/// the PEP 658 file of a wheel for another platform. The address returned is the file read:
/// the `.metadata` file, or the wheel.
pub(super) fn metadata(
    client: &Client,
    page: &Url,
    files: &[pypi::SimpleFile],
    attempts: usize,
) -> Result<Option<(String, pypi::Metadata)>, UpstreamError> {
    let linux = |f: &&pypi::SimpleFile| {
        pypi::WheelName::parse(&f.filename).is_some_and(|w| w.installs_on_linux_x86_64())
    };
    let (ours, others): (Vec<_>, Vec<_>) = files.iter().take(attempts).partition(linux);
    let served = |f: &pypi::SimpleFile| -> Result<Option<(String, pypi::Metadata)>, UpstreamError> {
        let url = join(page, &format!("{}.metadata", f.url))?;
        Ok(match client.get(&url, None)? {
            Fetched::Body(text) => Some((url.to_string(), pypi::parse_metadata(&text))),
            Fetched::NotFound => None,
        })
    };
    for f in &ours {
        if let Some(found) = served(f)? {
            return Ok(Some(found));
        }
    }
    // One wheel, the first: each costs two or three requests, and the others of a release
    // carry the same requirements but for markers.
    if let Some(first) = ours.first() {
        let wheel = join(page, &first.url)?;
        // A file that is no readable wheel leaves the release unread, as a missing one
        // does; a network failure (the deadline, a cap) ends the refresh.
        let text = match lazy_wheel::read_metadata(client, &wheel) {
            Err(UpstreamError::Format { .. }) => None,
            other => other?,
        };
        if let Some(text) = text {
            // A recording keeps what was read as the PEP 658 file it stands for, so that a
            // replay reads the same requirements without the wheel.
            client.record(&join(page, &format!("{}.metadata", first.url))?, &text)?;
            return Ok(Some((wheel.to_string(), pypi::parse_metadata(&text))));
        }
    }
    // Another platform's wheel is read only as PyPI serves it: its requirements may differ
    // from Linux's (a Windows build's), and a release with none for Linux installs from
    // its source distribution, whose requirements only its build computes.
    for f in &others {
        if let Some(found) = served(f)? {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

/// Companion releases (`torchvision`, `torchaudio`) by the torch release they pin.
fn companions(
    client: &Client,
    opts: &RefreshOptions,
    name: &str,
    floor: &str,
    progress: &mut dyn FnMut(RefreshStep),
) -> Result<BTreeMap<Version, Version>, UpstreamError> {
    let (page, proj) = project_told(client, opts, name, progress)?;
    let floor: Version = floor.parse().expect("valid floor");
    let mut out = BTreeMap::new();
    let releases = pypi::releases_since(&proj, &floor);
    progress(RefreshStep::Stage {
        what: format!("{name}'s wheel metadata"),
        files: Some(releases.len() as u64),
    });
    for v in releases {
        let files = pypi::release_files(&proj, &v.to_string());
        let all: Vec<_> = files
            .wheels
            .iter()
            .chain(files.other_wheels.iter())
            .cloned()
            .collect();
        if let Some((_, meta)) = metadata(client, &page, &all, opts.metadata_attempts.min(4))? {
            if let Some(t) = pypi::torch_pin(&meta) {
                // The newest companion pinning a torch release wins (0.19.1 over 0.19.0).
                out.insert(t, v);
            }
        }
        progress(RefreshStep::Read);
    }
    Ok(out)
}

/// [`project`], told as a stage of one file.
pub(super) fn project_told(
    client: &Client,
    opts: &RefreshOptions,
    name: &str,
    progress: &mut dyn FnMut(RefreshStep),
) -> Result<(Url, SimpleProject), UpstreamError> {
    progress(RefreshStep::Stage {
        what: format!("the PyPI page of {name}"),
        files: Some(1),
    });
    let found = project(client, opts, name)?;
    progress(RefreshStep::Read);
    Ok(found)
}

/// Variants per torch release on the PyTorch index (a PEP 503 HTML page of wheel links).
fn index_variants(client: &Client, index: &Url) -> Result<BTreeMap<Version, Vec<Variant>>, UpstreamError> {
    let url = join(index, "torch/")?;
    let text = match client.get(&url, None)? {
        Fetched::Body(t) => t,
        Fetched::NotFound => {
            return Err(UpstreamError::Format {
                url: url.to_string(),
                reason: "no torch page (404)".into(),
            });
        }
    };
    let mut out: BTreeMap<Version, Vec<Variant>> = BTreeMap::new();
    for chunk in text.split(">torch-").skip(1) {
        let name = format!("torch-{}", chunk.split('<').next().unwrap_or(""));
        let Some(w) = pypi::WheelName::parse(&name) else {
            continue;
        };
        if !w.platform.iter().any(|p| p.contains("x86_64")) {
            continue;
        }
        let Ok(v) = w.version.parse::<Version>() else {
            continue;
        };
        let variant = crate::model::local_variant(&v);
        let public = crate::model::public(&v);
        if let Some(var) = variant {
            let list = out.entry(public).or_default();
            if !list.contains(&var) {
                list.push(var);
            }
        }
    }
    Ok(out)
}

/// [`index_variants`], told as a stage of one file (read only when it answered).
fn index_told(
    client: &Client,
    index: &Url,
    progress: &mut dyn FnMut(RefreshStep),
) -> Result<BTreeMap<Version, Vec<Variant>>, UpstreamError> {
    progress(RefreshStep::Stage {
        what: "the PyTorch wheel index".into(),
        files: Some(1),
    });
    let found = index_variants(client, index)?;
    progress(RefreshStep::Read);
    Ok(found)
}

/// Reads what upstream says about every torch release since `opts.floor`. The second value
/// says whether the PyTorch index answered.
pub fn torch_facts(
    client: &Client,
    opts: &RefreshOptions,
) -> Result<(Vec<TorchFacts>, String), UpstreamError> {
    torch_facts_told(client, opts, &mut |_| {})
}

/// [`torch_facts`], telling `progress` each stage and file as it goes.
pub fn torch_facts_told(
    client: &Client,
    opts: &RefreshOptions,
    progress: &mut dyn FnMut(RefreshStep),
) -> Result<(Vec<TorchFacts>, String), UpstreamError> {
    let (page, proj) = project_told(client, opts, "torch", progress)?;
    let vision = companions(client, opts, "torchvision", "0.13.0", progress)?;
    let audio = companions(client, opts, "torchaudio", "0.12.0", progress)?;
    let (index, index_status) = match &opts.pytorch_index {
        None => (None, NOT_ASKED.to_string()),
        Some(url) => match index_told(client, url, progress) {
            Ok(map) => (Some(map), "read".to_string()),
            // The PyTorch index is optional: PyPI alone answers the default build.
            Err(e) => (
                None,
                format!("unreachable ({e}); only PyPI's default builds were checked"),
            ),
        },
    };
    let mut out = Vec::new();
    // Only releases with a Linux x86_64 wheel: nothing else is one gpuenv could recommend.
    let releases: Vec<(Version, pypi::ReleaseFiles)> = pypi::releases_since(&proj, &opts.floor)
        .into_iter()
        .map(|v| {
            let files = pypi::release_files(&proj, &v.to_string());
            (v, files)
        })
        .filter(|(_, files)| !files.wheels.is_empty())
        .collect();
    progress(RefreshStep::Stage {
        what: "torch's wheel metadata".into(),
        files: Some(releases.len() as u64),
    });
    for (version, files) in releases {
        let all: Vec<_> = files
            .wheels
            .iter()
            .chain(files.other_wheels.iter())
            .cloned()
            .collect();
        let meta = metadata(client, &page, &all, opts.metadata_attempts)?;
        let mut f = TorchFacts {
            requires_python: None,
            default: None,
            metadata_url: None,
            released: files.released,
            python: files.python.clone(),
            manylinux: files.manylinux.clone(),
            torchvision: vision.get(&version).cloned(),
            torchaudio: audio.get(&version).cloned(),
            index_variants: index
                .as_ref()
                .map(|m| m.get(&version).cloned().unwrap_or_default()),
            pypi_platforms: None,
            manylinux_aarch64: files.manylinux_aarch64.clone(),
            version,
        };
        if let Some((url, m)) = meta {
            f.requires_python = pypi::requires_python(&m);
            let b = pypi::default_build(&m);
            f.pypi_platforms = b.cuda_on_aarch64.map(|on_arm| {
                let mut p = vec![HostArch::X86_64];
                if on_arm && f.manylinux_aarch64.is_some() && files.aarch64_cuda_sized == Some(true) {
                    p.push(HostArch::Aarch64);
                }
                p
            });
            f.default = Some(b);
            f.metadata_url = Some(url);
        }
        out.push(f);
        progress(RefreshStep::Read);
    }
    Ok((out, index_status))
}

fn show<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or("-".to_string(), |x| x.to_string())
}

fn list<T: std::fmt::Display>(v: &[T]) -> String {
    v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")
}

/// Where the curated record and upstream disagree. Facts upstream does not state are not
/// compared (a release whose metadata no mirror serves is compared on its tags alone).
pub fn compare_torch(rec: &TorchRelease, f: &TorchFacts) -> Vec<Change> {
    let mut out = Vec::new();
    let mut diff = |field: &str, curated: String, upstream: String| {
        if curated != upstream {
            out.push(Change {
                field: field.to_string(),
                curated,
                upstream,
            });
        }
    };
    let mut curated_tags = rec.python.clone();
    curated_tags.sort();
    diff("python", list(&curated_tags), list(&f.python));
    if let Some(m) = &f.manylinux {
        diff("manylinux", rec.manylinux.to_string(), m.to_string());
    }
    if let Some(rp) = &f.requires_python {
        diff("requires_python", rec.requires_python.to_string(), rp.to_string());
    }
    if let Some(p) = &f.pypi_platforms {
        diff("pypi_platforms", list(&rec.pypi_platforms), list(p));
    }
    if let Some(m) = &f.manylinux_aarch64 {
        diff("manylinux_aarch64", show(&rec.manylinux_aarch64), m.to_string());
    }
    if let Some(v) = &f.torchvision {
        diff("torchvision", show(&rec.torchvision), v.to_string());
    }
    if let Some(v) = &f.torchaudio {
        diff("torchaudio", show(&rec.torchaudio), v.to_string());
    }
    if let Some(b) = &f.default {
        if let Some(tag) = b.variant() {
            diff("pypi_default", rec.pypi_default.to_string(), tag.to_string());
        }
        if let Some(t) = &b.triton {
            diff("triton", show(&rec.triton), t.to_string());
        }
        if let Some(var) = rec.variant(rec.pypi_default) {
            let at = |k: &str| format!("variants.{}.{k}", var.tag);
            if let Some(c) = &b.cuda {
                diff(&at("cuda"), show(&var.cuda), c.to_string());
            }
            if let Some(c) = &b.cudart {
                diff(&at("cudart"), show(&var.cudart), c.to_string());
            }
            if let Some(c) = &b.cudnn {
                diff(&at("cudnn"), show(&var.cudnn), c.to_string());
            }
            if let Some(c) = &b.nccl {
                diff(&at("nccl"), show(&var.nccl), c.to_string());
            }
        }
    }
    if let Some(tags) = &f.index_variants {
        let mut curated: Vec<Variant> = rec.variants.iter().map(|v| v.tag).collect();
        curated.sort();
        let mut upstream = tags.clone();
        upstream.sort();
        if !upstream.is_empty() {
            diff("variants", list(&curated), list(&upstream));
        }
    }
    out
}

fn index_url(tag: Variant) -> String {
    format!("https://download.pytorch.org/whl/{tag}")
}

/// A new record from upstream facts. `previous` is the newest curated release before it,
/// whose default build stands in when no metadata could be read.
fn new_record(f: &TorchFacts, previous: Option<&TorchRelease>) -> TorchRelease {
    let pypi_page = format!("https://pypi.org/project/torch/{}/", f.version);
    let mut sources = vec![Source {
        url: pypi_page,
        note: Some("wheel tags of the Linux x86_64 wheels (PyPI JSON simple API)".into()),
    }];
    if let Some(u) = &f.metadata_url {
        if u.starts_with("https://") {
            sources.push(Source {
                url: u.clone(),
                note: Some("PEP 658 core metadata: Requires-Python and the nvidia-* pins".into()),
            });
        }
    }
    let mut unverified = Vec::new();
    let mut notes = vec!["Proposed by `gpuenv db refresh` from PyPI; review before adding.".to_string()];
    let default_tag = match f.default.as_ref().and_then(DefaultBuild::variant) {
        Some(t) => t,
        None => {
            unverified.push("pypi_default".to_string());
            notes.push(
                "No wheel metadata was served, so the default build is assumed to be the previous release's."
                    .into(),
            );
            previous.map_or(Variant::Cpu, |p| p.pypi_default)
        }
    };
    let requires_python = f
        .requires_python
        .clone()
        .or_else(|| previous.map(|p| p.requires_python.clone()))
        .unwrap_or_else(|| ">=3.10".parse().expect("valid specifiers"));
    if f.requires_python.is_none() {
        unverified.push("requires_python".to_string());
    }
    if f.pypi_platforms.is_none() {
        unverified.push("pypi_platforms".to_string());
        notes.push(
            "No CUDA runtime pin was read, so PyPI's aarch64 wheels are assumed to be CPU-only builds."
                .into(),
        );
    }
    let b = f.default.clone().unwrap_or_default();
    let mut variants = vec![TorchVariant {
        tag: default_tag,
        cuda: default_tag.cuda(),
        cudart: b.cudart.clone(),
        cudnn: b.cudnn.clone(),
        nccl: b.nccl.clone(),
        sass: Vec::new(),
        ptx: Vec::new(),
        python: None,
        index_url: index_url(default_tag),
        // What PyPI shows of the default build; the PyTorch index's own aarch64 wheels are
        // for the curator to read from the release's build matrix.
        platforms: if default_tag.is_cuda() {
            f.pypi_platforms.clone().unwrap_or_else(|| vec![HostArch::X86_64])
        } else {
            Vec::new()
        },
        unverified: if default_tag.is_cuda() {
            vec!["platforms".to_string()]
        } else {
            Vec::new()
        },
        notes: default_tag
            .is_cuda()
            .then(|| "The arch list (sass, ptx) is not published on PyPI: take it from the release's build scripts.".into()),
        sources: Vec::new(),
    }];
    for tag in f.index_variants.iter().flatten() {
        if *tag != default_tag {
            variants.push(TorchVariant {
                tag: *tag,
                cuda: tag.cuda(),
                cudart: None,
                cudnn: None,
                nccl: None,
                sass: Vec::new(),
                ptx: Vec::new(),
                python: None,
                index_url: index_url(*tag),
                platforms: if tag.is_cuda() {
                    vec![HostArch::X86_64]
                } else {
                    Vec::new()
                },
                unverified: if tag.is_cuda() {
                    vec!["platforms".to_string()]
                } else {
                    Vec::new()
                },
                notes: Some(
                    "Listed on the PyTorch index; pins, arch list and aarch64 wheels need curation.".into(),
                ),
                sources: Vec::new(),
            });
        }
    }
    // A `~=` pin gave only its range's lower bound: recorded, and marked as such.
    for field in &b.lower_bounds {
        match *field {
            "triton" => unverified.push("triton".to_string()),
            other => variants[0].unverified.push(other.to_string()),
        }
        notes.push(format!(
            "{field} is pinned by a `~=` range: the version recorded is its lower bound, not the one pip installs."
        ));
    }
    TorchRelease {
        id: f.version.to_string(),
        version: f.version.clone(),
        released: f.released,
        requires_python,
        python: f.python.clone(),
        manylinux: f
            .manylinux
            .clone()
            .unwrap_or_else(|| "manylinux_2_28_x86_64".parse().expect("valid tag")),
        pypi_default: default_tag,
        pypi_platforms: f.pypi_platforms.clone().unwrap_or_else(|| vec![HostArch::X86_64]),
        manylinux_aarch64: f.manylinux_aarch64.clone(),
        torchvision: f.torchvision.clone(),
        torchaudio: f.torchaudio.clone(),
        triton: b.triton,
        variants,
        // What PyPI says was read today; the curator resets it after reviewing the rest.
        checked: crate::db::today(),
        glibc: None,
        glibc_from: None,
        unverified,
        notes: Some(notes.join(" ")),
        sources,
    }
}

/// The curated record with upstream's values for the facts that differ.
fn updated_record(rec: &TorchRelease, f: &TorchFacts) -> TorchRelease {
    let mut r = rec.clone();
    r.python = f.python.clone();
    if let Some(m) = &f.manylinux {
        r.manylinux = m.clone();
    }
    if let Some(rp) = &f.requires_python {
        r.requires_python = rp.clone();
    }
    if let Some(p) = &f.pypi_platforms {
        r.pypi_platforms = p.clone();
    }
    if f.manylinux_aarch64.is_some() {
        r.manylinux_aarch64 = f.manylinux_aarch64.clone();
    }
    if f.torchvision.is_some() {
        r.torchvision = f.torchvision.clone();
    }
    if f.torchaudio.is_some() {
        r.torchaudio = f.torchaudio.clone();
    }
    if let Some(b) = &f.default {
        if let Some(tag) = b.variant() {
            r.pypi_default = tag;
            if r.variant(tag).is_none() {
                r.variants.push(TorchVariant {
                    tag,
                    cuda: tag.cuda(),
                    cudart: None,
                    cudnn: None,
                    nccl: None,
                    sass: Vec::new(),
                    ptx: Vec::new(),
                    python: None,
                    index_url: index_url(tag),
                    platforms: vec![HostArch::X86_64],
                    unverified: vec!["platforms".to_string()],
                    notes: None,
                    sources: Vec::new(),
                });
            }
        }
        if b.triton.is_some() {
            r.triton = b.triton.clone();
            if b.lower_bounds.contains(&"triton") && !r.unverified.iter().any(|k| k == "triton") {
                r.unverified.push("triton".to_string());
            }
        }
        let tag = r.pypi_default;
        if let Some(v) = r.variants.iter_mut().find(|v| v.tag == tag) {
            if b.cuda.is_some() {
                v.cuda = b.cuda.clone();
            }
            if b.cudart.is_some() {
                v.cudart = b.cudart.clone();
            }
            if b.cudnn.is_some() {
                v.cudnn = b.cudnn.clone();
            }
            if b.nccl.is_some() {
                v.nccl = b.nccl.clone();
            }
            for field in b.lower_bounds.iter().filter(|f| **f != "triton") {
                if !v.unverified.iter().any(|k| k == field) {
                    v.unverified.push(field.to_string());
                }
            }
        }
    }
    r
}

/// A record as TOML, under a header saying where it came from. `file` names it in errors.
pub(super) fn record_toml<T: Serialize>(rec: &T, file: &str, header: &str) -> Result<String, UpstreamError> {
    let werr = |e: String| UpstreamError::Write {
        path: file.to_string(),
        reason: e,
    };
    let mut value = toml::Value::try_from(rec).map_err(|e| werr(e.to_string()))?;
    if let Some(t) = value.as_table_mut() {
        t.remove("id"); // the file name is the id
    }
    let body = toml::to_string(&value).map_err(|e| werr(e.to_string()))?;
    Ok(format!("{header}{body}"))
}

fn to_toml(rec: &TorchRelease, header: &str) -> Result<String, UpstreamError> {
    record_toml(rec, &format!("torch/{}.toml", rec.version), header)
}

/// Compares upstream with `db` and writes proposals to `out` (which must not exist, or be
/// an empty directory). Nothing is written when there is nothing to propose.
pub fn refresh(
    client: &Client,
    db: &Db,
    opts: &RefreshOptions,
    out: Option<&Path>,
) -> Result<Summary, UpstreamError> {
    refresh_told(client, db, opts, out, &mut |_| {})
}

/// [`refresh`], telling `progress` each stage and file of upstream as it is read.
pub fn refresh_told(
    client: &Client,
    db: &Db,
    opts: &RefreshOptions,
    out: Option<&Path>,
    progress: &mut dyn FnMut(RefreshStep),
) -> Result<Summary, UpstreamError> {
    if let Some(dir) = out {
        check_out_dir(dir)?;
    }
    let (facts, index_status) = torch_facts_told(client, opts, progress)?;
    let mut proposals = Vec::new();
    let mut without_metadata = Vec::new();
    for f in &facts {
        if f.default.is_none() {
            without_metadata.push(f.version.to_string());
        }
        let file = format!("torch/{}.toml", f.version);
        match db.torch.iter().find(|r| r.version == f.version) {
            None => {
                let previous = db.torch.iter().rev().find(|r| r.version < f.version);
                let rec = new_record(f, previous);
                let header = format!(
                    "# New torch release proposed by `gpuenv db refresh` from PyPI.\n\
                     # Review every fact, add the arch lists and other builds, then move it to compat-db/{file}.\n\n"
                );
                proposals.push(Proposal {
                    file,
                    kind: "torch",
                    new: true,
                    pending: Vec::new(),
                    changes: Vec::new(),
                    text: to_toml(&rec, &header)?,
                });
            }
            Some(rec) => {
                let changes = compare_torch(rec, f);
                if !changes.is_empty() {
                    let header = changes_header(
                        "Changes proposed by `gpuenv db refresh`: upstream disagrees with compat-db on",
                        &changes,
                        "",
                    );
                    proposals.push(Proposal {
                        file,
                        kind: "torch",
                        new: false,
                        pending: Vec::new(),
                        text: to_toml(&updated_record(rec, f), &header)?,
                        changes,
                    });
                }
            }
        }
    }
    let toolkits = super::toolkits::scan(client, db, opts, progress)?;
    proposals.extend(toolkits.proposals);
    let (framework_proposals, framework_releases) = super::frameworks::scan(client, db, opts, progress)?;
    proposals.extend(framework_proposals);
    // NGC's registry and NVIDIA's driver index are optional, as the PyTorch index is: PyPI
    // answers the rest, so a source that fails is reported in the summary, not fatal.
    let (ngc, ngc_status) = match &opts.ngc_registry {
        None => (super::ngc::NgcScan::default(), NOT_ASKED.to_string()),
        Some(host) => {
            match super::ngc::scan(host, &opts.insecure_registries, client.deadline(), db, progress) {
                Ok(scan) => (scan, "read".to_string()),
                Err(e) => (
                    super::ngc::NgcScan::default(),
                    format!("not read ({e}); no NGC release proposed"),
                ),
            }
        }
    };
    proposals.extend(ngc.proposals);
    let (drivers, driver_status) = match &opts.driver_index {
        None => (super::drivers::DriverScan::default(), NOT_ASKED.to_string()),
        Some(url) => match super::drivers::scan(client, url, db, progress) {
            Ok(scan) => (scan, "read".to_string()),
            Err(e) => (
                super::drivers::DriverScan::default(),
                format!("not read ({e}); no driver release proposed"),
            ),
        },
    };
    proposals.extend(drivers.proposals);
    proposals.sort_by(|a, b| b.new.cmp(&a.new).then(a.file.cmp(&b.file)));
    let written = match out {
        Some(dir) if !proposals.is_empty() => {
            write_all(dir, &proposals)?;
            Some(dir.display().to_string())
        }
        _ => None,
    };
    Ok(Summary {
        releases: facts.len(),
        cuda_releases: toolkits.toolkit_releases,
        cudnn_releases: toolkits.cudnn_releases,
        cudnn_older_unrecorded: toolkits.cudnn_older_unrecorded,
        framework_releases,
        without_metadata,
        proposals,
        pytorch_index: index_status,
        ngc_registry: ngc_status,
        ngc_releases: ngc.releases,
        ngc_tags_ignored: ngc.ignored,
        ngc_older_unrecorded: ngc.older_unrecorded,
        driver_index: driver_status,
        driver_releases: drivers.releases,
        driver_branches: drivers.branches,
        driver_entries_ignored: drivers.ignored,
        driver_latest: drivers.latest,
        driver_older_unrecorded: drivers.older_unrecorded,
        out: written,
    })
}

/// The proposals' folder as an error of this command: one that is not new or empty (or
/// is a link) is bad input; a failed write is the environment's.
fn out_dir_error(e: crate::files::WriteError) -> UpstreamError {
    use crate::files::WriteError;
    match e {
        WriteError::Failed { path, source } => UpstreamError::Write {
            path: crate::files::shown(&path),
            reason: source.to_string(),
        },
        WriteError::Refused { path, reason } => UpstreamError::OutDir {
            path: crate::files::shown(&path),
            reason: format!("{reason}: proposals go to a new or empty directory"),
        },
        WriteError::Exists { path } => UpstreamError::OutDir {
            path: crate::files::shown(&path),
            reason: "exists: proposals go to a new or empty directory".into(),
        },
    }
}

fn check_out_dir(dir: &Path) -> Result<(), UpstreamError> {
    crate::files::check_new_dir(dir).map_err(out_dir_error)
}

/// Writes every proposal at once: a temporary folder beside `dir`, renamed into place
/// (see [`crate::files::write_new_dir`]).
fn write_all(dir: &Path, proposals: &[Proposal]) -> Result<(), UpstreamError> {
    crate::files::write_new_dir(
        dir,
        proposals.iter().map(|p| (p.file.as_str(), p.text.as_bytes())),
    )
    .map_err(out_dir_error)
}
