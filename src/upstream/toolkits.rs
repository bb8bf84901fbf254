//! The CUDA toolkits and cuDNN releases of `gpuenv db refresh`: what PyPI says about them,
//! and the records it proposes for those compat-db lacks.
//!
//! Owns: reading NVIDIA's `cuda-toolkit` meta-package (one version per toolkit release,
//! whose metadata pins the release's `nvidia-cuda-nvcc` and `nvidia-cuda-runtime`), the
//! component projects (`nvidia-cuda-runtime`, `nvidia-cuda-nvcc` and their `-cu12`/`-cu11`
//! forms) and `nvidia-cudnn-cu13/12/11`, and turning them into proposed records.
//!
//! PyPI says that a release exists, when it was uploaded and which components it pins. It
//! never says a toolkit's driver minimum, nvcc's arch list or which CUDA majors a cuDNN
//! supports, so a proposal lists those keys in `pending` instead of guessing them; the
//! resolver treats a toolkit with pending facts as unknown until a curator fills them in.

use std::collections::{BTreeMap, BTreeSet};

use super::pypi::{self, SimpleFile, SimpleProject};
use super::refresh::{Proposal, RefreshOptions, RefreshStep, metadata, project_told, record_toml};
use super::{Client, UpstreamError};
use crate::db::{CudaRelease, CudnnRelease, Db, Source};
use crate::model::{CudaVersion, CudnnVersion, DriverVersion, PartialDate, Version};

/// The meta-package whose versions are toolkit releases (`13.0.3.0` is CUDA 13.0.3).
pub const TOOLKIT_PROJECT: &str = "cuda-toolkit";

/// Component projects: their versions (`13.0.88`) name a release line, not a toolkit
/// release, so they only reveal a line no meta-package version covers (CUDA 11.x and early
/// 12.x predate the meta-package on PyPI).
pub const COMPONENT_PROJECTS: &[&str] = &[
    "nvidia-cuda-runtime",
    "nvidia-cuda-runtime-cu12",
    "nvidia-cuda-runtime-cu11",
    "nvidia-cuda-nvcc",
    "nvidia-cuda-nvcc-cu12",
    "nvidia-cuda-nvcc-cu11",
];

/// cuDNN, one project per CUDA major it is built for.
pub const CUDNN_PROJECTS: &[&str] = &["nvidia-cudnn-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn-cu11"];

/// What upstream says about one toolkit release compat-db lacks.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolkitFacts {
    /// The release, `major.minor.patch`.
    pub version: CudaVersion,
    /// The meta-package version as PyPI spells it (`13.0.3.0`); `None` when only component
    /// wheels show the line.
    pub meta_version: Option<String>,
    /// Day of the first upload (of the meta-package, or of the line's first component).
    pub released: Option<PartialDate>,
    /// `nvidia-cuda-nvcc` the meta-package pins.
    pub nvcc: Option<String>,
    /// `nvidia-cuda-runtime` the meta-package pins.
    pub runtime: Option<String>,
    /// The metadata file read.
    pub metadata_url: Option<String>,
    /// For a line seen only in components: `(project, versions)`.
    pub components: Vec<(String, Vec<String>)>,
}

/// What upstream says about one cuDNN release compat-db lacks.
#[derive(Debug, Clone, PartialEq)]
pub struct CudnnFacts {
    /// The release (`9.26.0.51`).
    pub version: CudnnVersion,
    /// Day of its first upload to any of the projects.
    pub released: Option<PartialDate>,
    /// The `nvidia-cudnn-cuXX` projects with wheels of it.
    pub projects: Vec<String>,
}

/// What the CUDA and cuDNN part of a refresh read and proposes.
#[derive(Debug, Clone, Default)]
pub struct ToolkitScan {
    /// Toolkit releases PyPI's meta-package lists (from CUDA 11.0).
    pub toolkit_releases: usize,
    /// cuDNN releases PyPI lists.
    pub cudnn_releases: usize,
    /// cuDNN releases older than compat-db's newest that have no record: not proposed.
    pub cudnn_older_unrecorded: usize,
    /// New toolkit records, oldest first.
    pub proposals: Vec<Proposal>,
}

/// Component releases by CUDA line: `(project, version, first upload day)`.
pub type ComponentLines = BTreeMap<(u32, u32), Vec<(String, String, Option<PartialDate>)>>;

/// Oldest toolkit line considered: what PyPI has below it are placeholders (`0.0.1`).
const FLOOR: (u32, u32) = (11, 0);

/// The toolkit release a meta-package version names: `13.0.2` or `13.0.3.0` is CUDA 13.0.3.
/// Pre-, post- and dev releases and local versions name none, nor does a fourth part other
/// than 0 (no toolkit release is numbered so).
pub fn toolkit_release(v: &Version) -> Option<CudaVersion> {
    if v.any_prerelease() || v.is_post() || v.is_local() || v.epoch() != 0 {
        return None;
    }
    let r = v.release();
    let (x, y, z) = match r {
        [x, y, z] | [x, y, z, 0] => (*x, *y, *z),
        _ => return None,
    };
    if (x, y) < (FLOOR.0 as u64, FLOOR.1 as u64) {
        return None;
    }
    format!("{x}.{y}.{z}").parse().ok()
}

/// A release's wheels by version, with the day of the first upload, skipping yanked files
/// and names that do not parse. Grouping by the parsed version joins `13.0.3` and
/// `13.0.3.0`, which PyPI lists as one release.
fn wheels_by_version(project: &SimpleProject) -> BTreeMap<Version, (Option<PartialDate>, Vec<SimpleFile>)> {
    let mut out: BTreeMap<Version, (Option<PartialDate>, Vec<SimpleFile>)> = BTreeMap::new();
    for f in &project.files {
        if f.is_yanked() {
            continue;
        }
        let Some(w) = pypi::WheelName::parse(&f.filename) else {
            continue;
        };
        let Ok(v) = w.version.parse::<Version>() else {
            continue;
        };
        let day = f
            .upload_time
            .as_deref()
            .and_then(|t| t.get(..10))
            .and_then(|d| d.parse::<PartialDate>().ok());
        let entry = out.entry(v).or_default();
        if let Some(d) = day {
            if entry.0.is_none_or(|r| d < r) {
                entry.0 = Some(d);
            }
        }
        entry.1.push(f.clone());
    }
    out
}

/// The version string a file name spells (`13.0.3.0`), for addresses on pypi.org.
fn spelled(files: &[SimpleFile]) -> Option<String> {
    files
        .iter()
        .find_map(|f| pypi::WheelName::parse(&f.filename).map(|w| w.version))
}

/// Which toolkit releases to propose: each meta-package release without a record, and for
/// a line seen only in component wheels and absent from compat-db, its GA `X.Y.0` (a line's
/// first release is always its GA; an update's number cannot be told from a component's).
pub fn toolkit_candidates(
    known: &[CudaVersion],
    meta: &BTreeMap<CudaVersion, (String, Option<PartialDate>)>,
    components: &ComponentLines,
) -> Vec<ToolkitFacts> {
    let mut out = Vec::new();
    for (v, (spelling, day)) in meta {
        if !known.iter().any(|k| k == v) {
            out.push(ToolkitFacts {
                version: v.clone(),
                meta_version: Some(spelling.clone()),
                released: *day,
                nvcc: None,
                runtime: None,
                metadata_url: None,
                components: Vec::new(),
            });
        }
    }
    for (mm, seen) in components {
        if *mm < FLOOR
            || meta.keys().any(|v| v.major_minor() == *mm)
            || known.iter().any(|k| k.major_minor() == *mm)
        {
            continue;
        }
        let mut by_project: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (project, version, _) in seen {
            by_project
                .entry(project.clone())
                .or_default()
                .push(version.clone());
        }
        let Ok(version) = format!("{}.{}.0", mm.0, mm.1).parse() else {
            continue;
        };
        out.push(ToolkitFacts {
            version,
            meta_version: None,
            released: seen.iter().filter_map(|(_, _, d)| *d).min(),
            nvcc: None,
            runtime: None,
            metadata_url: None,
            components: by_project.into_iter().collect(),
        });
    }
    out.sort_by(|a, b| a.version.cmp(&b.version));
    out
}

/// The version a `Requires-Dist` of the meta-package pins for `name`, extras included (the
/// meta-package puts every component behind an extra): `nvidia-cuda-nvcc==13.0.88.*` gives
/// `13.0.88`.
pub fn component_pin(meta: &pypi::Metadata, name: &str) -> Option<String> {
    use pep508_rs::VersionOrUrl;
    meta.requires_dist.iter().find_map(|line| {
        // Metadata comes from a server: the guarded parser, which never panics.
        let req = crate::model::pep508::parse_requirement(line).ok()?;
        if req.name.as_ref() != name {
            return None;
        }
        let Some(VersionOrUrl::VersionSpecifier(specs)) = &req.version_or_url else {
            return None;
        };
        specs
            .iter()
            .find(|s| {
                matches!(
                    s.operator(),
                    crate::model::Operator::Equal
                        | crate::model::Operator::EqualStar
                        | crate::model::Operator::ExactEqual
                )
            })
            .map(|s| s.version().to_string())
    })
}

/// Reads the toolkit and cuDNN projects and proposes the records compat-db lacks.
pub(super) fn scan(
    client: &Client,
    db: &Db,
    opts: &RefreshOptions,
    progress: &mut dyn FnMut(RefreshStep),
) -> Result<ToolkitScan, UpstreamError> {
    let (page, proj) = project_told(client, opts, TOOLKIT_PROJECT, progress)?;
    let mut meta: BTreeMap<CudaVersion, (String, Option<PartialDate>)> = BTreeMap::new();
    let mut meta_files: BTreeMap<CudaVersion, Vec<SimpleFile>> = BTreeMap::new();
    for (v, (day, files)) in wheels_by_version(&proj) {
        if let Some(t) = toolkit_release(&v) {
            meta.insert(t.clone(), (spelled(&files).unwrap_or_else(|| v.to_string()), day));
            meta_files.insert(t, files);
        }
    }
    let mut components = ComponentLines::new();
    for name in COMPONENT_PROJECTS {
        let (_, p) = project_told(client, opts, name, progress)?;
        for (v, (day, _)) in wheels_by_version(&p) {
            if v.any_prerelease() || v.is_post() || v.is_local() {
                continue;
            }
            // A component's own number (`13.0.88`): only its line is a fact about toolkits.
            if let Ok(c) = v.to_string().parse::<CudaVersion>() {
                components
                    .entry(c.major_minor())
                    .or_default()
                    .push((name.to_string(), v.to_string(), day));
            }
        }
    }
    let known: Vec<CudaVersion> = db.cuda.iter().map(|c| c.version.clone()).collect();
    let mut toolkits = toolkit_candidates(&known, &meta, &components);
    let with_meta = toolkits.iter().filter(|t| t.meta_version.is_some()).count();
    progress(RefreshStep::Stage {
        what: format!("{TOOLKIT_PROJECT}'s wheel metadata"),
        files: Some(with_meta as u64),
    });
    for t in toolkits.iter_mut().filter(|t| t.meta_version.is_some()) {
        let files = meta_files.get(&t.version).map(Vec::as_slice).unwrap_or(&[]);
        if let Some((url, m)) = metadata(client, &page, files, opts.metadata_attempts)? {
            t.nvcc = component_pin(&m, "nvidia-cuda-nvcc");
            t.runtime = component_pin(&m, "nvidia-cuda-runtime");
            t.metadata_url = Some(url);
        }
        progress(RefreshStep::Read);
    }

    // cuDNN: every release of the three projects, with the projects that carry it.
    let mut cudnn: BTreeMap<CudnnVersion, CudnnFacts> = BTreeMap::new();
    for name in CUDNN_PROJECTS {
        let (_, p) = project_told(client, opts, name, progress)?;
        for (v, (day, _)) in wheels_by_version(&p) {
            if v.any_prerelease() || v.is_post() || v.is_local() || v.release().len() != 4 {
                continue;
            }
            let Ok(c) = v.to_string().parse::<CudnnVersion>() else {
                continue;
            };
            let e = cudnn.entry(c.clone()).or_insert_with(|| CudnnFacts {
                version: c,
                released: None,
                projects: Vec::new(),
            });
            if let Some(d) = day {
                if e.released.is_none_or(|r| d < r) {
                    e.released = Some(d);
                }
            }
            e.projects.push(name.to_string());
        }
    }
    // compat-db records older cuDNN releases only where a torch build or an image uses
    // them (and the linter demands those), so only releases newer than its newest are new.
    let newest = db.cudnn.iter().map(|c| &c.version).max();
    let unrecorded: Vec<&CudnnFacts> = cudnn
        .values()
        .filter(|f| !db.cudnn.iter().any(|c| c.version == f.version))
        .collect();
    let (new_cudnn, older): (Vec<&CudnnFacts>, Vec<&CudnnFacts>) = unrecorded
        .into_iter()
        .partition(|f| newest.is_none_or(|n| f.version > *n));

    let mut proposals = Vec::new();
    for t in &toolkits {
        proposals.push(toolkit_proposal(t, db)?);
    }
    for c in new_cudnn {
        proposals.push(cudnn_proposal(c)?);
    }
    Ok(ToolkitScan {
        toolkit_releases: meta.len(),
        cudnn_releases: cudnn.len(),
        cudnn_older_unrecorded: older.len(),
        proposals,
    })
}

/// NVIDIA names a toolkit's GA `X.Y.0` "CUDA X.Y GA" and an update "CUDA X.Y Update N".
fn label(v: &CudaVersion) -> String {
    match v.parts() {
        [x, y, 0] => format!("CUDA {x}.{y} GA"),
        [x, y, n] => format!("CUDA {x}.{y} Update {n}"),
        _ => format!("CUDA {v}"),
    }
}

fn pypi_page(project: &str, version: &str) -> String {
    format!("https://pypi.org/project/{project}/{version}/")
}

/// Where a proposed toolkit's facts come from: the meta-package's page and metadata (its
/// pinned nvcc named in the notes), or, for a line only component wheels show, those
/// wheels (its release then taken to be the GA, and marked).
fn toolkit_sources(t: &ToolkitFacts, notes: &mut Vec<String>, unverified: &mut Vec<String>) -> Vec<Source> {
    let mut sources = Vec::new();
    match &t.meta_version {
        Some(mv) => {
            let pins = match (&t.nvcc, &t.runtime) {
                (None, None) => {
                    "no PEP 658 metadata was served, so its component pins are unread".to_string()
                }
                (nvcc, rt) => format!(
                    "pins nvidia-cuda-nvcc=={}.* and nvidia-cuda-runtime=={}.*",
                    nvcc.as_deref().unwrap_or("?"),
                    rt.as_deref().unwrap_or("?")
                ),
            };
            sources.push(Source {
                url: pypi_page(TOOLKIT_PROJECT, mv),
                note: Some(format!(
                    "NVIDIA's meta-package {mv}{}: {pins}",
                    t.released
                        .map(|d| format!(", first uploaded {d}"))
                        .unwrap_or_default()
                )),
            });
            if let Some(u) = t.metadata_url.as_deref().filter(|u| u.starts_with("https://")) {
                sources.push(Source {
                    url: u.to_string(),
                    note: Some("PEP 658 core metadata of the meta-package".into()),
                });
            }
            if let Some(n) = &t.nvcc {
                notes.push(format!(
                    "Its nvcc is nvidia-cuda-nvcc {n} (the wheel to run for the arch list)."
                ));
            }
        }
        None => {
            unverified.push("released".into());
            notes.push(
                "Only component wheels show this line (no cuda-toolkit version for it), so the release is taken to be its GA, X.Y.0; released is the first component upload."
                    .into(),
            );
            for (project, versions) in &t.components {
                sources.push(Source {
                    url: format!("https://pypi.org/project/{project}/"),
                    note: Some(format!("component wheels of this line: {}", versions.join(", "))),
                });
            }
        }
    }
    sources
}

/// A proposed toolkit record: what PyPI states, the family-wide facts of its major taken
/// from the curated records (the minor-version floor is one value per family), and the
/// rest pending.
fn toolkit_proposal(t: &ToolkitFacts, db: &Db) -> Result<Proposal, UpstreamError> {
    let major = t.version.major();
    let family: Vec<&CudaRelease> = db
        .cuda
        .iter()
        .filter(|c| c.version.major() == major && c.pending.is_empty())
        .collect();
    let newest = family.iter().max_by(|a, b| a.version.cmp(&b.version)).copied();
    let mut pending = vec!["min_driver_linux".to_string()];
    let mut unverified = vec!["label".to_string()];
    let line = format!("{major}.{}", t.version.minor());
    // What `query` does meanwhile depends on whether the line has curated rows.
    let meanwhile = if family
        .iter()
        .any(|c| c.version.major_minor() == t.version.major_minor())
    {
        format!(
            "Until then the resolver leaves this record out and judges CUDA {line} builds by the line's curated records."
        )
    } else {
        format!("Until then `query` does not judge CUDA {line} builds (finding cuda-facts-pending).")
    };
    let mut notes = vec![format!(
        "Proposed by `gpuenv db refresh` from PyPI. PyPI does not publish a toolkit's driver minimum or nvcc's arch list: \
         fill min_driver_linux from NVIDIA's release notes (Table 3, or the driver branch they name) and sass from \
         `nvcc --list-gpu-code` and `ptxas --help` of this release's nvcc, then remove them from `pending`. \
         {meanwhile} The label follows NVIDIA's naming of GA and update releases."
    )];
    // The family floor: one value per major, so the curated records give it.
    let floor = |get: fn(&CudaRelease) -> &Option<DriverVersion>| -> Option<Option<DriverVersion>> {
        let values: BTreeSet<Option<&DriverVersion>> = family.iter().map(|c| get(c).as_ref()).collect();
        match values.into_iter().collect::<Vec<_>>().as_slice() {
            [one] => Some(one.cloned()),
            _ => None,
        }
    };
    let mut family_min_driver = None;
    match floor(|c| &c.family_min_driver) {
        Some(v) if !family.is_empty() => {
            if v.is_some() {
                unverified.push("family_min_driver".into());
                notes.push(format!(
                    "family_min_driver is the CUDA {major}.x family's floor, as every curated {major}.x record has it."
                ));
            }
            family_min_driver = v;
        }
        _ => pending.push("family_min_driver".into()),
    }
    let mut family_min_driver_windows = None;
    match floor(|c| &c.family_min_driver_windows) {
        Some(v) if !family.is_empty() => {
            if v.is_some() {
                unverified.push("family_min_driver_windows".into());
            }
            family_min_driver_windows = v;
        }
        _ => pending.push("family_min_driver_windows".into()),
    }
    // Whether the toolkit bundles a Windows driver is the family's way (13.x no longer does).
    match newest {
        Some(n) if n.min_driver_windows.is_none() => notes.push(format!(
            "min_driver_windows is absent as for CUDA {}, the newest curated {major}.x record (no Windows driver bundled).",
            n.version
        )),
        _ => pending.push("min_driver_windows".into()),
    }
    pending.push("sass".into());
    let sources = toolkit_sources(t, &mut notes, &mut unverified);
    if t.released.is_none() {
        unverified.retain(|k| k != "released");
    }
    let rec = CudaRelease {
        id: t.version.to_string(),
        version: t.version.clone(),
        label: label(&t.version),
        released: t.released,
        min_driver_linux: None,
        min_driver_windows: None,
        family_min_driver,
        family_min_driver_windows,
        sass: Vec::new(),
        deprecated: Vec::new(),
        pending: pending.clone(),
        checked: crate::db::today(),
        unverified,
        notes: Some(notes.join(" ")),
        sources,
    };
    let file = format!("cuda/{}.toml", t.version);
    let header = format!(
        "# New CUDA toolkit proposed by `gpuenv db refresh` from PyPI. What PyPI cannot tell is listed in\n\
         # `pending`, not guessed: `query` treats this toolkit as unknown until a curator fills it in.\n\
         # Review every fact, then move it to compat-db/{file}.\n\n"
    );
    Ok(Proposal {
        text: record_toml(&rec, &file, &header)?,
        file,
        kind: "cuda",
        new: true,
        pending,
        changes: Vec::new(),
    })
}

/// A proposed cuDNN record: its release and upload day, the CUDA majors pending (the
/// `-cuXX` projects with wheels show some of them, NVIDIA's support matrix all).
fn cudnn_proposal(c: &CudnnFacts) -> Result<Proposal, UpstreamError> {
    let majors: Vec<String> = c
        .projects
        .iter()
        .filter_map(|p| p.rsplit("-cu").next())
        .map(str::to_string)
        .collect();
    let rec = CudnnRelease {
        id: c.version.to_string(),
        version: c.version.clone(),
        cuda_majors: Vec::new(),
        pending: vec!["cuda_majors".into()],
        released: c.released,
        checked: crate::db::today(),
        unverified: Vec::new(),
        notes: Some(format!(
            "Proposed by `gpuenv db refresh` from PyPI: wheels in {} (CUDA {} at least). PyPI shows only the builds \
             uploaded there, so cuda_majors is pending: take it from NVIDIA's cuDNN support matrix or redistrib \
             manifest (cuda_variant). released is the first PyPI upload.",
            c.projects.join(", "),
            majors.join(", ")
        )),
        sources: c
            .projects
            .iter()
            .map(|p| Source {
                url: pypi_page(p, c.version.as_str()),
                note: Some("wheels on PyPI".into()),
            })
            .collect(),
    };
    let file = format!("cudnn/{}.toml", c.version);
    let header = format!(
        "# New cuDNN release proposed by `gpuenv db refresh` from PyPI. The CUDA majors it supports are\n\
         # pending, not guessed. Review every fact, then move it to compat-db/{file}.\n\n"
    );
    Ok(Proposal {
        text: record_toml(&rec, &file, &header)?,
        file,
        kind: "cudnn",
        new: true,
        pending: rec.pending,
        changes: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        s.parse().unwrap()
    }

    #[test]
    fn meta_package_versions_name_toolkit_releases() {
        let t = |s: &str| toolkit_release(&v(s)).map(|c| c.to_string());
        assert_eq!(t("13.0.2").as_deref(), Some("13.0.2"));
        assert_eq!(t("13.0.3.0").as_deref(), Some("13.0.3"));
        assert_eq!(t("13.4.0rc1"), None);
        assert_eq!(t("0.0.0a0"), None);
        assert_eq!(t("10.2.89"), None, "below the floor");
        assert_eq!(t("13.3.4.3"), None, "a fourth part other than 0");
        assert_eq!(t("13.0.3.post1"), None);
    }

    #[test]
    fn candidates_are_the_missing_releases_and_the_unrecorded_component_only_lines() {
        let known: Vec<CudaVersion> = ["11.8.0", "13.4.1", "13.4.2"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let mut meta = BTreeMap::new();
        for (k, s) in [("13.4.2", "13.4.2"), ("13.5.0", "13.5.0"), ("13.0.3", "13.0.3.0")] {
            meta.insert(k.parse().unwrap(), (s.to_string(), None));
        }
        let mut comps = BTreeMap::new();
        let c = |p: &str, v: &str| (p.to_string(), v.to_string(), Some("2022-05-11".parse().unwrap()));
        // 11.7: components only, no record: its GA is proposed.
        comps.insert(
            (11, 7),
            vec![
                c("nvidia-cuda-runtime-cu11", "11.7.99"),
                c("nvidia-cuda-nvcc-cu11", "11.7.99"),
            ],
        );
        // 11.8: a record exists (11.8.0); 13.5: the meta-package already speaks for it.
        comps.insert((11, 8), vec![c("nvidia-cuda-runtime-cu11", "11.8.89")]);
        comps.insert((13, 5), vec![c("nvidia-cuda-nvcc", "13.5.37")]);
        let got = toolkit_candidates(&known, &meta, &comps);
        let names: Vec<String> = got.iter().map(|t| t.version.to_string()).collect();
        assert_eq!(names, ["11.7.0", "13.0.3", "13.5.0"]);
        assert_eq!(got[0].meta_version, None);
        assert_eq!(got[0].components.len(), 2);
        assert_eq!(got[1].meta_version.as_deref(), Some("13.0.3.0"));
    }

    #[test]
    fn component_pins_behind_extras_are_read() {
        let m = pypi::parse_metadata(
            "Name: cuda-toolkit\nVersion: 13.0.3.0\n\
             Requires-Dist: nvidia-cuda-nvcc==13.0.88.*; (sys_platform == 'linux' and platform_machine == 'x86_64') and extra == 'all'\n\
             Requires-Dist: nvidia-cuda-runtime==13.0.96.*; sys_platform == 'linux' and extra == 'cudart'\n\
             Requires-Dist: nvidia-cuda-nvcc-cu12 (>=12)\n",
        );
        assert_eq!(component_pin(&m, "nvidia-cuda-nvcc").as_deref(), Some("13.0.88"));
        assert_eq!(
            component_pin(&m, "nvidia-cuda-runtime").as_deref(),
            Some("13.0.96")
        );
        assert_eq!(component_pin(&m, "nvidia-cuda-nvcc-cu12"), None);
    }

    #[test]
    fn labels_follow_nvidias_naming() {
        assert_eq!(label(&"13.6.0".parse().unwrap()), "CUDA 13.6 GA");
        assert_eq!(label(&"13.0.3".parse().unwrap()), "CUDA 13.0 Update 3");
    }
}
