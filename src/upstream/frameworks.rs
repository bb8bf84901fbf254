//! The torch pins of packages that pin torch (vLLM, SGLang, xformers, flash-attn,
//! bitsandbytes, DeepSpeed, TensorRT-LLM, Unsloth), read from PyPI for `gpuenv db refresh`.
//!
//! Owns: reading each release's `Requires-Dist: torch...` from its wheel's metadata (the
//! PEP 658 file, or the wheel's own `METADATA` read with range requests where the index
//! serves none; through the refresh's client and PyPI readers, bounded by the same deadline
//! and caps),
//! and proposing `framework/<name>.toml` records with the releases compat-db lacks or
//! states differently. Must not: guess a pin PyPI does not serve (such a release is listed
//! as `unread`), or write into `compat-db/`.
//!
//! Only wheels carry metadata PyPI serves: a release published as a source distribution
//! alone (flash-attn, TensorRT-LLM's PyPI stubs) is `unread`, its pin being computed by its
//! setup.py at install.

use pep508_rs::VersionOrUrl;

use super::pypi::{self, Metadata};
use super::refresh::{Proposal, RefreshOptions, RefreshStep, metadata, project_told, record_toml};
use super::{Client, UpstreamError};
use crate::db::{Db, Framework, FrameworkRelease, Source};
use crate::model::{PartialDate, Variant, VersionSpecifiers, local_variant};

/// The packages read, as PyPI names them.
pub const FRAMEWORK_PROJECTS: [&str; 8] = [
    "vllm",
    "sglang",
    "xformers",
    "flash-attn",
    "bitsandbytes",
    "deepspeed",
    "tensorrt-llm",
    "unsloth",
];

/// The most releases read per package (the newest), which bounds a refresh's requests.
pub const MAX_RELEASES: usize = 200;

/// What the metadata of one release says of torch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TorchRequirement {
    /// The requirement of every install on Linux x86_64.
    pub torch: Option<VersionSpecifiers>,
    /// The requirements only an extra brings, by extra.
    pub extras: std::collections::BTreeMap<String, VersionSpecifiers>,
    /// A local version on the torch pin (`torch==2.4.0+cu121`).
    pub cuda: Option<Variant>,
    /// Several different requirements hold on Linux x86_64 (by Python version): not one pin.
    pub ambiguous: bool,
}

/// The extras an `extra == "x"` marker names.
fn extras_of(marker: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = marker;
    while let Some(i) = rest.find("extra") {
        rest = &rest[i + 5..];
        let after = rest.trim_start();
        let Some(after) = after.strip_prefix("==") else {
            continue;
        };
        let after = after.trim_start();
        let Some(q) = after.chars().next().filter(|c| *c == '"' || *c == '\'') else {
            continue;
        };
        if let Some(end) = after[1..].find(q) {
            out.push(crate::model::pep508::normalize_name(&after[1..1 + end]));
        }
    }
    out
}

/// The torch requirement of a wheel's metadata, for Linux x86_64.
pub fn torch_requirement(meta: &Metadata) -> TorchRequirement {
    let mut out = TorchRequirement::default();
    for line in &meta.requires_dist {
        // Metadata comes from a server: the guarded parser, which never panics.
        let Ok(req) = crate::model::pep508::parse_requirement(line) else {
            continue;
        };
        if req.name.as_ref() != "torch" {
            continue;
        }
        let specs = match &req.version_or_url {
            Some(VersionOrUrl::VersionSpecifier(s)) => s.clone(),
            _ => VersionSpecifiers::empty(),
        };
        let marker = line.split_once(';').map(|(_, m)| m.trim());
        let extras = marker.map(extras_of).unwrap_or_default();
        if !extras.is_empty() {
            for e in extras {
                out.extras.entry(e).or_insert_with(|| specs.clone());
            }
            continue;
        }
        if !crate::model::pep508::linux_marker_may_hold(marker, "x86_64", None) {
            continue;
        }
        if let Some(v) = specs.iter().find_map(|s| local_variant(s.version())) {
            out.cuda = Some(v);
        }
        match &out.torch {
            Some(t) if t.to_string() != specs.to_string() => out.ambiguous = true,
            _ => out.torch = Some(specs),
        }
    }
    if out.ambiguous {
        out.torch = None;
    }
    out
}

/// What PyPI says of one package: the record it makes, and how many releases were read.
pub struct FrameworkScan {
    /// The record upstream makes.
    pub record: Framework,
}

/// Reads the releases of `name` uploaded on or after `since` (at most [`MAX_RELEASES`],
/// the newest).
pub fn scan_one(
    client: &Client,
    opts: &RefreshOptions,
    name: &str,
    since: PartialDate,
    progress: &mut dyn FnMut(RefreshStep),
) -> Result<FrameworkScan, UpstreamError> {
    let (page, proj) = project_told(client, opts, name, progress)?;
    let zero: crate::model::Version = "0".parse().expect("valid version");
    let mut releases: Vec<(crate::model::Version, pypi::ReleaseFiles)> = Vec::new();
    for v in pypi::releases_since(&proj, &zero) {
        let files = pypi::release_files(&proj, &v.to_string());
        let first = first_upload(&proj, &v.to_string());
        if first.is_some_and(|d| d >= since) {
            releases.push((v, files));
        }
    }
    let skip = releases.len().saturating_sub(MAX_RELEASES);
    releases.drain(..skip);
    progress(RefreshStep::Stage {
        what: format!("{name}'s wheel metadata"),
        files: Some(releases.len() as u64),
    });
    let mut read = Vec::new();
    let mut unread = Vec::new();
    for (version, files) in releases {
        let all: Vec<_> = files
            .wheels
            .iter()
            .chain(files.other_wheels.iter())
            .cloned()
            .collect();
        let meta = metadata(client, &page, &all, opts.metadata_attempts)?;
        match meta {
            Some((url, m)) => {
                let t = torch_requirement(&m);
                if t.ambiguous {
                    unread.push(version);
                } else {
                    let wheel_variant = all
                        .iter()
                        .find_map(|f| pypi::WheelName::parse(&f.filename))
                        .and_then(|w| w.version.parse().ok())
                        .and_then(|v| local_variant(&v));
                    read.push(FrameworkRelease {
                        released: first_upload(&proj, &version.to_string()),
                        requires_python: pypi::requires_python(&m),
                        torch: t.torch,
                        torch_extras: t.extras,
                        cuda: t.cuda.or(wheel_variant),
                        metadata: public_url(&url),
                        version,
                    });
                }
            }
            None => unread.push(version),
        }
        progress(RefreshStep::Read);
    }
    let record = Framework {
        id: name.to_string(),
        name: name.to_string(),
        releases: read,
        unread,
        checked: crate::db::today(),
        unverified: Vec::new(),
        notes: Some(format!(
            "Releases of {name} uploaded to PyPI since {since}, each with the torch requirement of a Linux x86_64 or pure-Python wheel's metadata: its PEP 658 file, or, where the index served none, the wheel's own METADATA read with range requests (`metadata` names the file read). `unread`: releases whose metadata could not be read (no such wheel, or a torch pin that differs per Python); their torch pin is unknown."
        )),
        sources: vec![Source {
            url: format!("https://pypi.org/simple/{name}/"),
            note: Some("PyPI JSON simple API (PEP 691): releases, files and upload times; each release's `metadata` names its PEP 658 file".into()),
        }],
    };
    Ok(FrameworkScan { record })
}

/// The day of a release's first upload, over all its files (source distributions too).
fn first_upload(proj: &pypi::SimpleProject, version: &str) -> Option<PartialDate> {
    proj.files
        .iter()
        .filter(|f| file_version(&f.filename).as_deref() == Some(version))
        .filter_map(|f| f.upload_time.as_deref()?.get(..10)?.parse().ok())
        .min()
}

/// The version a wheel or source distribution file name carries.
fn file_version(filename: &str) -> Option<String> {
    if let Some(w) = pypi::WheelName::parse(filename) {
        return Some(w.version);
    }
    let stem = filename
        .strip_suffix(".tar.gz")
        .or_else(|| filename.strip_suffix(".zip"))?;
    stem.rsplit_once('-').map(|(_, v)| v.to_string())
}

/// A recorded (replayed) page's root-relative file address, as PyPI's real one.
fn public_url(url: &str) -> String {
    match url.find("/packages/") {
        Some(i) if !url.starts_with("https://files.pythonhosted.org/") => {
            format!("https://files.pythonhosted.org{}", &url[i..])
        }
        _ => url.to_string(),
    }
}

/// The releases of `upstream` that `curated` lacks or states differently, merged into the
/// curated record; `None` when nothing differs.
fn merged(curated: Option<&Framework>, upstream: &Framework) -> Option<(Framework, Vec<String>)> {
    let Some(c) = curated else {
        let changes = upstream.releases.iter().map(|r| r.version.to_string()).collect();
        return Some((upstream.clone(), changes));
    };
    let mut rec = c.clone();
    let mut changes = Vec::new();
    for r in &upstream.releases {
        match rec.releases.iter_mut().find(|x| x.version == r.version) {
            Some(x) if x.torch == r.torch && x.torch_extras == r.torch_extras && x.cuda == r.cuda => {}
            Some(x) => {
                changes.push(format!(
                    "{} (torch {} -> {})",
                    r.version,
                    show(&x.torch),
                    show(&r.torch)
                ));
                *x = r.clone();
            }
            None => {
                changes.push(r.version.to_string());
                rec.releases.push(r.clone());
            }
        }
    }
    rec.unread
        .retain(|v| !rec.releases.iter().any(|r| r.version == *v));
    for v in &upstream.unread {
        if !rec.releases.iter().any(|r| r.version == *v) && !rec.unread.contains(v) {
            rec.unread.push(v.clone());
        }
    }
    rec.releases.sort_by(|a, b| a.version.cmp(&b.version));
    rec.unread.sort();
    if changes.is_empty() {
        return None;
    }
    rec.checked = upstream.checked;
    Some((rec, changes))
}

fn show(s: &Option<VersionSpecifiers>) -> String {
    s.as_ref().map_or("none".to_string(), |s| s.to_string())
}

/// Proposals for every framework: new records, and known ones with releases added or
/// changed. The second value counts the releases read.
pub(super) fn scan(
    client: &Client,
    db: &Db,
    opts: &RefreshOptions,
    progress: &mut dyn FnMut(RefreshStep),
) -> Result<(Vec<Proposal>, usize), UpstreamError> {
    let mut proposals = Vec::new();
    let mut count = 0;
    for name in &opts.frameworks {
        let found = scan_one(client, opts, name, opts.frameworks_since, progress)?;
        count += found.record.releases.len();
        let curated = db.framework(name);
        if let Some((rec, changes)) = merged(curated, &found.record) {
            let file = format!("framework/{name}.toml");
            let header = format!(
                "# {} proposed by `gpuenv db refresh` from PyPI's wheel metadata.\n# Releases new or changed: {}\n# Review, then move it to compat-db/{file}.\n\n",
                if curated.is_some() {
                    "Changes"
                } else {
                    "New framework record"
                },
                changes.join(", ")
            );
            proposals.push(Proposal {
                text: record_toml(&rec, &file, &header)?,
                file,
                kind: "framework",
                new: curated.is_none(),
                pending: Vec::new(),
                changes: Vec::new(),
            });
        }
    }
    Ok((proposals, count))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torch_requirements_by_marker_and_extra() {
        let m = pypi::parse_metadata(
            "Name: vllm\nVersion: 0.6.5\n\
             Requires-Dist: torch==2.5.1; platform_machine != \"aarch64\"\n\
             Requires-Dist: torchvision==0.20.1\n\
             Requires-Dist: torch==2.6.0; extra == \"Next\"\n",
        );
        let t = torch_requirement(&m);
        assert_eq!(t.torch.unwrap().to_string(), "==2.5.1");
        assert_eq!(t.extras["next"].to_string(), "==2.6.0");
        assert!(!t.ambiguous);
        // Only aarch64: no requirement on x86_64.
        let m =
            pypi::parse_metadata("Name: x\nRequires-Dist: torch==2.5.1; platform_machine == \"aarch64\"\n");
        assert_eq!(torch_requirement(&m).torch, None);
        // Different pins per Python: not one pin.
        let m = pypi::parse_metadata(
            "Name: x\nRequires-Dist: torch==2.5.1; python_version < \"3.12\"\nRequires-Dist: torch==2.6.0; python_version >= \"3.12\"\n",
        );
        let t = torch_requirement(&m);
        assert!(t.ambiguous);
        assert_eq!(t.torch, None);
        let m = pypi::parse_metadata("Name: x\nRequires-Dist: torch==2.4.0+cu121\n");
        assert_eq!(torch_requirement(&m).cuda, Some("cu121".parse().unwrap()));
    }

    #[test]
    fn replayed_addresses_are_written_as_pypis() {
        assert_eq!(
            public_url("http://127.0.0.1:4000/packages/4a/4c/x/vllm.whl.metadata"),
            "https://files.pythonhosted.org/packages/4a/4c/x/vllm.whl.metadata"
        );
        assert_eq!(
            file_version("tensorrt_llm-1.4.0rc1.tar.gz").as_deref(),
            Some("1.4.0rc1")
        );
    }
}
