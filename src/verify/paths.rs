//! A local image read path by path through a never-started container, not exported.
//!
//! Owns: the plan of which paths to ask the daemon for (in rounds, each round's answers
//! deciding the next), turning its answers into one synthetic [`Layer`] that
//! [`detect()`] reads like any other, and the rule of when this is not enough and every
//! layer must be read instead. Must not: parse what the files mean (that is `detect`),
//! or talk to the daemon but through `docker::Paths`.
//!
//! Why: `docker save` makes the daemon tar every layer (14 s for a 2 GiB image on the
//! benchmark machine) while a stat or a small file through the container archive API
//! costs a few milliseconds. The standard layouts are known (nvidia/cuda, pytorch/pytorch,
//! NGC, python, conda, venvs), so the paths detection keeps can be asked for by name:
//!
//! 1. stat `/usr/local/cuda`, `/usr/local/cuda-X.Y` (from `CUDA_VERSION`), each candidate
//!    prefix's `bin/python3` and `bin/python` (prefixes: `/usr`, `/usr/local`,
//!    `/opt/conda`, the parent of every `PATH` entry ending in `/bin`, `VIRTUAL_ENV`,
//!    `CONDA_PREFIX`, `CONDA_DIR`), `/usr/local/lib/python3.X` for every minor (an
//!    interpreter no link names), the system cuDNN and NCCL libraries; fetch
//!    `os-release`, the cuDNN and NCCL headers, and each prefix's `conda-meta` (a conda
//!    environment without a versioned link has its `lib/python3.X` probed, a round more);
//! 2. from the links' targets: each toolkit's `version.json`, `nvcc`, `compat/libcuda.so.1`
//!    and `libcudart`; each Python's executable, `lib/python3.X`, its site directories and
//!    torch's `version.py` in them;
//! 3. torch's `dist-info` (named by its version), torchvision's and torchaudio's
//!    `version.py`, the cuda-compat library (scanned for its ELF note);
//! 4. every `dist-info` torch pins exactly (`nvidia-*`, `cuda-*`, triton), the libraries
//!    inside the pinned cuDNN, NCCL and CUDA runtime wheels, and the companions'
//!    `dist-info` (an egg's metadata is asked for only when torch has no `dist-info`).
//!
//! About 60 paths for a CUDA image with torch: 0.75 s on the benchmark machine, whose
//! fuse-overlayfs storage driver mounts the container's root for each request.
//!
//! Whole layers are read instead ([`Outcome::NeedsLayers`]) when what is found says the
//! layout is not the standard one: torch without its `dist-info` where pip puts it, a
//! package torch pins exactly that is not installed at that version (missing, replaced,
//! or shadowed by another install: the very hazards verify looks for, and a missing CUDA
//! wheel needs every layer to find a system copy torch would load instead), an `nvidia-*`
//! package torch requires without one exact version (its `dist-info` has no name to ask
//! for), a fetched directory too large. Markers are evaluated for the image's machine and
//! the site directory's Python. What this read cannot see by design: torch or libraries outside the
//! standard prefixes, and `nvidia-*` wheels torch does not pin; `--full` reads every layer.

use std::collections::{BTreeMap, BTreeSet};

use crate::docker::{DockerError, Engine, Fetched, PathReader, PathStat};
use crate::image::archive::{Image, Layout};
use crate::image::config::ImageConfig;
use crate::image::detect;
use crate::image::digest::sha256;
use crate::image::fs::MergedFs;
use crate::image::layer::{Budget, Compression, Entry, Interest, Layer, Limits, normalize_path, read_layer};
use crate::image::pyfiles;
use crate::image::tar::Kind;
use crate::model::pep508;

use super::{VerifyError, machine};

/// The most bytes one fetched path may bring back (a `conda-meta` directory, a
/// `dist-info` with its `RECORD`); past it, the layers are read instead.
const MAX_FETCH: u64 = 64 << 20;
/// The most bytes of a cuda-compat `libcuda.so` (about 30 MiB in CUDA 12 images).
const MAX_COMPAT_LIB: u64 = 512 << 20;
/// The most Python prefixes looked at.
const MAX_PREFIXES: usize = 16;
/// The Python library directories looked for by name: CPython 3.8 to 3.15, and the
/// free-threaded builds.
const PYTHON_MINORS: &[&str] = &[
    "3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14", "3.15", "3.13t", "3.14t", "3.15t",
];

/// What the read came to.
#[derive(Debug)]
pub enum Outcome {
    /// The image, and how many paths were asked for.
    Read(Box<Image>, usize),
    /// Why every layer must be read instead.
    NeedsLayers(String),
}

/// Why a round stopped: the daemon failed, or the layout calls for the layers.
enum Stop {
    Fail(VerifyError),
    Layers(String),
}

impl From<DockerError> for Stop {
    fn from(e: DockerError) -> Self {
        match e {
            // The image's content, not the daemon, is at fault; its layers, read as they
            // are stored, do not go through what failed.
            DockerError::ImageContent { path, reason, .. } => {
                Stop::Layers(format!("the daemon cannot read {path} in it: {reason}"))
            }
            e => Stop::Fail(VerifyError::Docker(e)),
        }
    }
}

impl From<crate::image::ImageError> for Stop {
    fn from(e: crate::image::ImageError) -> Self {
        Stop::Fail(VerifyError::Image(e))
    }
}

/// Reads the image `name` from the daemon path by path.
pub fn read(engine: &dyn Engine, name: &str) -> Result<Outcome, VerifyError> {
    let doc = engine
        .image_config(name)?
        .ok_or_else(|| VerifyError::Docker(DockerError::NoSuchImage(name.to_string())))?;
    let config = ImageConfig::parse(&doc.config, "the daemon's inspect document")?;
    let paths = engine.open_paths(name)?;
    let mut reader = Reader {
        paths: &*paths,
        entries: Vec::new(),
        captured: BTreeMap::new(),
        budget: Budget::new(Limits::default()),
        requests: 0,
    };
    let result = reader.run(&config);
    let requests = reader.requests;
    let entries = std::mem::take(&mut reader.entries);
    paths.close()?;
    match result {
        Ok(()) => {}
        Err(Stop::Layers(why)) => return Ok(Outcome::NeedsLayers(why)),
        Err(Stop::Fail(e)) => return Err(e),
    }
    let empty = sha256(b"");
    let mut fs = MergedFs::new();
    fs.apply(Layer {
        entries,
        deleted: Vec::new(),
        opaque: Vec::new(),
        compression: Compression::None,
        blob_digest: empty.clone(),
        blob_size: 0,
        diff_id: empty,
    });
    let mut names = doc.names;
    if names.is_empty() {
        names.push(name.to_string());
    }
    Ok(Outcome::Read(
        Box::new(Image {
            config,
            fs,
            layers: Vec::new(),
            manifest_digest: None,
            names,
            layout: Layout::ContainerPaths,
        }),
        requests,
    ))
}

struct Reader<'a> {
    paths: &'a dyn PathReader,
    entries: Vec<Entry>,
    /// Captured contents by normalized path, for the next rounds' decisions.
    captured: BTreeMap<String, std::sync::Arc<[u8]>>,
    budget: Budget,
    requests: usize,
}

/// A path found by `stat`: where it is, and where its links lead.
struct Found {
    path: String,
    stat: PathStat,
}

impl Found {
    /// The path it resolves to, normalized (itself when not a link).
    fn real(&self) -> String {
        if self.stat.is_symlink() {
            normalize_path(self.stat.link_target.as_bytes())
                .ok()
                .flatten()
                .unwrap_or_default()
        } else {
            self.path.clone()
        }
    }
}

fn abs(path: &str) -> String {
    format!("/{}", path.trim_start_matches('/'))
}

fn rel(path: &str) -> String {
    path.trim_start_matches('/').to_string()
}

/// `parent/child`, either possibly empty.
fn join(parent: &str, child: &str) -> String {
    match (parent.is_empty(), child.is_empty()) {
        (true, _) => child.to_string(),
        (_, true) => parent.to_string(),
        _ => format!("{parent}/{child}"),
    }
}

fn parent_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(p, _)| p)
}

/// The Debian multiarch directory of a platform.
fn triple(architecture: Option<&str>) -> &'static str {
    match architecture {
        Some("arm64") => "aarch64-linux-gnu",
        Some("ppc64le") => "powerpc64le-linux-gnu",
        Some("s390x") => "s390x-linux-gnu",
        _ => "x86_64-linux-gnu",
    }
}

/// Where Pythons may live: the standard prefixes and what the environment names.
fn prefixes(config: &ImageConfig) -> Vec<String> {
    let mut out: Vec<String> = ["/usr", "/usr/local", "/opt/conda"].map(String::from).to_vec();
    let mut add = |p: &str| {
        let p = p.trim_end_matches('/');
        // The environment is the image author's: a prefix that climbs (`..`), repeats
        // itself (`.`, `//`) or runs on would be refused by the archive API and end the
        // read, so it is not asked about at all.
        let plain = p.len() <= 1024
            && p.split('/')
                .skip(1)
                .all(|c| !c.is_empty() && c != "." && c != "..");
        if p.starts_with('/')
            && p.len() > 1
            && plain
            && !out.iter().any(|o| o == p)
            && out.len() < MAX_PREFIXES
        {
            out.push(p.to_string());
        }
    };
    for dir in config.env_var("PATH").unwrap_or("").split(':') {
        // `/usr/local/cuda/bin` holds nvcc, not a Python.
        if let Some(parent) = dir.trim_end_matches('/').strip_suffix("/bin") {
            if !parent
                .rsplit('/')
                .next()
                .is_some_and(|d| d == "cuda" || d.starts_with("cuda-"))
            {
                add(parent);
            }
        }
    }
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DIR"] {
        if let Some(v) = config.env_var(var) {
            add(v);
        }
    }
    out
}

/// `3.11` or `3.13t` from `python3.11` / `python3.13t`.
fn python_dir_version(base: &str) -> Option<String> {
    let rest = base.strip_prefix("python3.")?;
    let digits = rest.strip_suffix('t').unwrap_or(rest);
    (!digits.is_empty() && digits.len() <= 3 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| format!("3.{rest}"))
}

impl Reader<'_> {
    // The four rounds of requests, in order: what each round asks depends on what the
    // rounds before it found, through locals shared by all four.
    fn run(&mut self, config: &ImageConfig) -> Result<(), Stop> {
        let arch = config.architecture.as_deref();
        let triple = triple(arch);
        let prefixes = prefixes(config);
        let small = |paths: Vec<String>| -> Vec<(String, u64)> {
            paths.into_iter().map(|p| (p, MAX_FETCH)).collect()
        };

        // Round 1: toolkit roots, interpreters, system libraries, headers, os-release.
        let mut roots = vec!["/usr/local/cuda".to_string()];
        let env_cuda = config.env_var("CUDA_VERSION").and_then(|v| {
            let minor: Vec<&str> = v.split('.').take(2).collect();
            (minor.len() == 2
                && minor
                    .iter()
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())))
            .then(|| minor.join("."))
        });
        if let Some(minor) = &env_cuda {
            roots.push(format!("/usr/local/cuda-{minor}"));
        }
        let pythons: Vec<String> = prefixes
            .iter()
            .flat_map(|p| [format!("{p}/bin/python3"), format!("{p}/bin/python")])
            .collect();
        let sys_libs: Vec<String> = ["libcudnn.so.7", "libcudnn.so.8", "libcudnn.so.9", "libnccl.so.2"]
            .iter()
            .map(|l| format!("/usr/lib/{triple}/{l}"))
            .collect();
        // Interpreters no link names (Ubuntu's python3.11 package beside the system's
        // python3.10) are found by the directory pip installs their packages into, under
        // /usr/local (round 2 then looks under /usr too).
        let lib_dirs = lib_dir_probes(&["usr/local"]);
        let conda_metas: Vec<String> = prefixes
            .iter()
            .filter(|p| !matches!(p.as_str(), "/usr" | "/usr/local"))
            .map(|p| format!("{p}/conda-meta"))
            .collect();
        let mut stats = roots.clone();
        stats.extend(pythons.iter().cloned());
        stats.extend(lib_dirs.iter().cloned());
        stats.extend(sys_libs.iter().cloned());
        let mut gets: Vec<String> = [
            "/etc/os-release",
            "/usr/lib/os-release",
            "/usr/include/cudnn_version.h",
            "/usr/include/cudnn.h",
            "/usr/include/nccl.h",
        ]
        .map(String::from)
        .to_vec();
        gets.extend(
            ["cudnn_version_v8.h", "cudnn_version_v9.h"].map(|h| format!("/usr/include/{triple}/{h}")),
        );
        gets.extend(conda_metas.iter().cloned());
        let (found, got) = self.round(&stats, &small(gets.clone()))?;

        let mut python_dirs: BTreeSet<(String, String)> = BTreeSet::new();
        let mut insert = |prefix: String, version: &str| {
            // Debian's system Python keeps pip's packages under /usr/local.
            if prefix == "usr" || prefix == "usr/local" {
                python_dirs.insert(("usr".into(), version.to_string()));
                python_dirs.insert(("usr/local".into(), version.to_string()));
            } else {
                python_dirs.insert((prefix, version.to_string()));
            }
        };
        let mut versioned = BTreeSet::new();
        let mut unversioned = BTreeSet::new();
        for f in found.iter().filter(|f| pythons.contains(&abs(&f.path))) {
            let prefix = parent_of(parent_of(&f.path)).to_string();
            let real = f.real();
            let Some(version) = python_dir_version(real.rsplit('/').next().unwrap_or("")) else {
                unversioned.insert(prefix);
                continue;
            };
            versioned.insert(prefix.clone());
            // A venv's own site-packages, and those of the interpreter it points at.
            insert(parent_of(parent_of(&real)).to_string(), &version);
            insert(prefix, &version);
        }
        for f in found
            .iter()
            .filter(|f| lib_dirs.contains(&abs(&f.path)) && f.stat.is_dir())
        {
            if let Some(version) = python_dir_version(f.path.rsplit('/').next().unwrap_or("")) {
                insert(parent_of(parent_of(&f.path)).to_string(), &version);
            }
        }
        // A conda environment, or an interpreter that is no link to a versioned name:
        // its library directories say which Python it is (a round more, for such images).
        for (path, there) in gets.iter().zip(&got) {
            if let Some(prefix) = path.strip_suffix("/conda-meta").filter(|_| *there) {
                unversioned.insert(rel(prefix));
            }
        }
        let probe: Vec<&str> = unversioned
            .iter()
            .filter(|p| !versioned.contains(*p) && !matches!(p.as_str(), "usr" | "usr/local"))
            .map(String::as_str)
            .collect();
        if !probe.is_empty() {
            let (found, _) = self.round(&lib_dir_probes(&probe), &[])?;
            for f in found.iter().filter(|f| f.stat.is_dir()) {
                if let Some(version) = python_dir_version(f.path.rsplit('/').next().unwrap_or("")) {
                    insert(parent_of(parent_of(&f.path)).to_string(), &version);
                }
            }
        }

        // Round 2: inside the toolkits and the Pythons; where the libraries' links lead.
        let mut stats = Vec::new();
        let mut gets = Vec::new();
        let mut real_roots = BTreeSet::new();
        for f in found.iter().filter(|f| roots.contains(&abs(&f.path))) {
            let real = f.real();
            if f.stat.is_symlink() {
                gets.push(abs(&f.path)); // the link as written
                stats.push(abs(&real));
            }
            if real.starts_with("usr/local/") {
                real_roots.insert(real);
            }
        }
        for root in &real_roots {
            let root = abs(root);
            gets.extend(["version.json", "version.txt"].map(|f| format!("{root}/{f}")));
            stats.push(format!("{root}/bin/nvcc"));
            stats.push(format!("{root}/compat/libcuda.so.1"));
            // libcudart's soname: `.so.11.0` for CUDA 11, `.so.12` and on after.
            let major = root
                .rsplit_once("cuda-")
                .map(|(_, v)| v.to_string())
                .or_else(|| env_cuda.clone())
                .and_then(|v| v.split('.').next().map(str::to_string));
            let sonames: Vec<String> = match major.as_deref() {
                Some("11") => vec!["11.0".into()],
                Some(m) => vec![m.to_string()],
                None => vec!["11.0".into(), "12".into(), "13".into()],
            };
            stats.extend(sonames.iter().map(|m| format!("{root}/lib64/libcudart.so.{m}")));
        }
        let mut sites = Vec::new();
        for (prefix, version) in &python_dirs {
            let lib = abs(&join(prefix, &format!("lib/python{version}")));
            stats.push(abs(&join(prefix, &format!("bin/python{version}"))));
            stats.push(lib.clone());
            sites.push(format!("{lib}/site-packages"));
            sites.push(format!("{lib}/dist-packages"));
        }
        if python_dirs.iter().any(|(p, _)| p == "usr") {
            sites.push("/usr/lib/python3/dist-packages".into());
        }
        stats.extend(sites.iter().cloned());
        gets.extend(sites.iter().map(|site| format!("{site}/torch/version.py")));
        for f in found
            .iter()
            .filter(|f| sys_libs.contains(&abs(&f.path)) && f.stat.is_symlink())
        {
            stats.push(abs(&f.real()));
        }
        let (found, _) = self.round(&stats, &small(gets))?;

        // Round 3: torch's metadata (named by its version), its companions, cuda-compat.
        let mut gets = Vec::new();
        let mut stats = Vec::new();
        let mut torches = Vec::new();
        for site in sites.iter().map(|s| rel(s)) {
            let Some(version) = self.version_of(&format!("{site}/torch/version.py")) else {
                continue;
            };
            for v in local_and_public(&version) {
                gets.push((abs(&format!("{site}/torch-{v}.dist-info")), MAX_FETCH));
            }
            for companion in ["torchvision", "torchaudio"] {
                gets.push((abs(&format!("{site}/{companion}/version.py")), MAX_FETCH));
            }
            torches.push((site, version));
        }
        for f in &found {
            let real = f.real();
            if f.path.ends_with("/compat/libcuda.so.1") && f.stat.is_symlink() {
                gets.push((abs(&real), MAX_COMPAT_LIB));
            } else if f.path.contains("/lib64/libcudart.so.") && f.stat.is_symlink() {
                stats.push(abs(&real));
            }
        }
        self.round(&stats, &gets)?;

        // Round 4: what torch pins exactly must be there, at that version; the companions'
        // metadata.
        let machine = machine(arch);
        let mut gets = Vec::new();
        let mut stats = Vec::new();
        let mut expected = Vec::new();
        for (site, version) in &torches {
            for companion in ["torchvision", "torchaudio"] {
                if let Some(v) = self.version_of(&format!("{site}/{companion}/version.py")) {
                    for v in local_and_public(&v) {
                        gets.push(abs(&format!("{site}/{companion}-{v}.dist-info")));
                    }
                }
            }
            let metadata = |this: &Self| {
                local_and_public(version).iter().find_map(|v| {
                    this.text(&format!("{site}/torch-{v}.dist-info/METADATA"))
                        .or_else(|| this.text(&format!("{site}/torch-{v}.egg-info/PKG-INFO")))
                        .or_else(|| this.text(&format!("{site}/torch-{v}.egg-info")))
                })
            };
            if metadata(self).is_none() {
                // An egg (`setup.py install`, older conda builds): rare, so asked for
                // only when the dist-info is not there.
                let eggs: Vec<(String, u64)> = local_and_public(version)
                    .iter()
                    .map(|v| (abs(&format!("{site}/torch-{v}.egg-info")), MAX_FETCH))
                    .collect();
                self.round(&[], &eggs)?;
            }
            let Some(text) = metadata(self) else {
                return Err(Stop::Layers(format!(
                    "torch {version} in /{site} has no metadata at /{site}/torch-{version}.dist-info"
                )));
            };
            let pins = pinned(&text, machine, site_python(site).as_deref());
            if let Some((name, spec)) = pins.inexact.first() {
                return Err(Stop::Layers(format!(
                    "torch {version} in /{site} requires {name}{spec}, not one exact version, \
                     so its dist-info cannot be asked for by name"
                )));
            }
            for (name, exact) in pins.exact {
                let dir = format!("{site}/{}-{exact}.dist-info", name.replace('-', "_"));
                expected.push((gets.len(), dir.clone(), name.clone(), exact.clone()));
                gets.push(abs(&dir));
                let major = exact.split('.').next().unwrap_or("");
                let libs: Vec<String> = match name.rsplit_once("-cu").map_or(name.as_str(), |(n, _)| n) {
                    "nvidia-cudnn" => vec![format!("nvidia/cudnn/lib/libcudnn.so.{major}")],
                    "nvidia-nccl" => vec!["nvidia/nccl/lib/libnccl.so.2".into()],
                    "nvidia-cuda-runtime" => vec![
                        format!("nvidia/cuda_runtime/lib/libcudart.so.{major}"),
                        format!("nvidia/cu{major}/lib/libcudart.so.{major}"),
                    ],
                    _ => Vec::new(),
                };
                stats.extend(libs.iter().map(|l| abs(&format!("{site}/{l}"))));
            }
        }
        let (_, got) = self.round(&stats, &small(gets))?;
        for (at, dir, name, exact) in expected {
            if !got[at] {
                return Err(Stop::Layers(format!(
                    "torch pins {name}=={exact}, but /{dir} is not there (another version, or \
                     another install, may shadow it)"
                )));
            }
        }
        Ok(())
    }

    /// A captured file as text.
    fn text(&self, path: &str) -> Option<String> {
        self.captured
            .get(path)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }

    /// `__version__` of a captured `version.py`.
    fn version_of(&self, path: &str) -> Option<String> {
        pyfiles::parse_version_py(&self.text(path)?).version
    }

    /// One round: stats `stats` and fetches `gets` (each within its byte limit) at once,
    /// keeping what detection would keep of each; returns what exists among `stats`, and
    /// whether each of `gets` was there.
    fn round(&mut self, stats: &[String], gets: &[(String, u64)]) -> Result<(Vec<Found>, Vec<bool>), Stop> {
        let stats: Vec<String> = stats
            .iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .cloned()
            .collect();
        self.requests += stats.len() + gets.len();
        let (stated, fetched) = self.paths.ask(&stats, gets)?;
        let mut found = Vec::new();
        for (path, stat) in stats.iter().zip(stated) {
            let Some(stat) = stat else { continue };
            let Some(path) = normalize_path(path.as_bytes())? else {
                continue;
            };
            let kind = if stat.is_symlink() {
                Kind::Symlink
            } else if stat.is_dir() {
                Kind::Dir
            } else {
                Kind::File
            };
            if detect::select(&path, kind) != Interest::Ignore {
                self.entries.push(Entry {
                    path: path.clone(),
                    kind,
                    size: if kind == Kind::File { stat.size } else { 0 },
                    mode: stat.mode & 0o7777,
                    link: (kind == Kind::Symlink).then(|| stat.link_target.clone()),
                    content: None,
                    note: None,
                });
            }
            found.push(Found { path, stat });
        }
        let mut there = Vec::with_capacity(gets.len());
        for ((path, limit), answer) in gets.iter().zip(fetched) {
            let tar = match answer {
                Fetched::Missing => {
                    there.push(false);
                    continue;
                }
                Fetched::TooLarge => {
                    return Err(Stop::Layers(format!("{path} is larger than {limit} bytes")));
                }
                Fetched::Tar(tar) => tar,
            };
            there.push(true);
            // The tar names entries from the path's last component.
            let parent = parent_of(&rel(path)).to_string();
            let select = |p: &str, kind: Kind| detect::select(&join(&parent, p), kind);
            let layer = read_layer(&tar[..], &select, &mut self.budget)?;
            for mut entry in layer.entries {
                entry.path = join(&parent, &entry.path);
                if entry.kind == Kind::HardLink {
                    entry.link = entry.link.map(|l| join(&parent, &l));
                }
                if let Some(content) = &entry.content {
                    self.captured.insert(entry.path.clone(), content.clone());
                }
                self.entries.push(entry);
            }
        }
        Ok((found, there))
    }
}

/// `lib/python3.X` of every probed minor under each prefix (relative prefixes).
fn lib_dir_probes(prefixes: &[&str]) -> Vec<String> {
    prefixes
        .iter()
        .flat_map(|p| {
            PYTHON_MINORS
                .iter()
                .map(move |v| abs(&join(p, &format!("lib/python{v}"))))
        })
        .collect()
}

/// A version and, when it has a local label, the public version: pip names a
/// `dist-info` by the wheel's version, which some builds' `version.py` spells otherwise.
fn local_and_public(version: &str) -> Vec<String> {
    let public = version.split('+').next().unwrap_or(version);
    if public == version {
        vec![version.to_string()]
    } else {
        vec![version.to_string(), public.to_string()]
    }
}

/// The requirements of a torch `METADATA` that a read by paths must find: the
/// `nvidia-*`, `cuda-*` and triton ones whose marker may hold on `machine` with `python`.
struct Pinned {
    /// Those pinned to one version (`==`), as (normalized name, version).
    exact: Vec<(String, String)>,
    /// `nvidia-*` ones pinned otherwise (a range, nothing, a URL), as (name, specifier):
    /// their `dist-info` cannot be asked for by name.
    inexact: Vec<(String, String)>,
}

fn pinned(metadata: &str, machine: &str, python: Option<&str>) -> Pinned {
    let mut out = Pinned {
        exact: Vec::new(),
        inexact: Vec::new(),
    };
    for line in pyfiles::parse_metadata(metadata).requires_dist {
        let Ok(req) = pep508::parse_requirement(&line) else {
            continue;
        };
        let name = crate::model::pep508::normalize_name(req.name.as_ref());
        let tracked = ["nvidia-", "cuda-", "triton", "pytorch-triton"]
            .iter()
            .any(|p| name.starts_with(p));
        let marker = req.marker.try_to_string();
        if !tracked || !pep508::linux_marker_may_hold(marker.as_deref(), machine, python) {
            continue;
        }
        let exact = match &req.version_or_url {
            Some(pep508_rs::VersionOrUrl::VersionSpecifier(specs)) => {
                match specs.iter().collect::<Vec<_>>().as_slice() {
                    [one] if *one.operator() == pep508_rs::pep440_rs::Operator::Equal => {
                        Some(one.version().to_string())
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        match exact {
            Some(version) => out.exact.push((name, version)),
            None if name.starts_with("nvidia-") => {
                let spec = match &req.version_or_url {
                    Some(pep508_rs::VersionOrUrl::VersionSpecifier(specs)) => specs.to_string(),
                    Some(pep508_rs::VersionOrUrl::Url(url)) => format!(" @ {url}"),
                    None => String::new(),
                };
                out.inexact.push((name, spec));
            }
            None => {}
        }
    }
    out
}

/// The Python minor of a site directory (`usr/local/lib/python3.11/site-packages` →
/// `3.11`; free-threaded `python3.13t` → `3.13`); `None` for Debian's `python3`.
fn site_python(site: &str) -> Option<String> {
    let dir = site.rsplit('/').nth(1)?;
    let version = python_dir_version(dir)?;
    Some(version.trim_end_matches('t').to_string())
}

#[cfg(test)]
mod tests {

    mod through_an_engine {
        use super::super::*;
        use crate::docker::fake::{Fake, Node, Tree};

        fn file(text: &str) -> Node {
            Node::File(text.as_bytes().to_vec())
        }

        /// An Ubuntu image with Python 3.11 and torch 2.4.1+cu121 in /usr/local.
        fn image() -> Fake {
            let mut nodes = std::collections::BTreeMap::new();
            for d in [
                "/etc",
                "/usr",
                "/usr/bin",
                "/usr/lib",
                "/usr/lib/python3.11",
                "/usr/local",
                "/usr/local/lib",
                "/usr/local/lib/python3.11",
                "/usr/local/lib/python3.11/dist-packages",
                "/usr/local/lib/python3.11/dist-packages/torch",
                "/usr/local/lib/python3.11/dist-packages/torch-2.4.1+cu121.dist-info",
            ] {
                nodes.insert(d.to_string(), Node::Dir);
            }
            nodes.insert(
                "/etc/os-release".into(),
                file("ID=ubuntu\nVERSION_ID=\"22.04\"\nPRETTY_NAME=\"Ubuntu 22.04.4 LTS\"\n"),
            );
            nodes.insert(
                "/usr/bin/python3".into(),
                Node::Link("/usr/bin/python3.11".into()),
            );
            nodes.insert("/usr/bin/python3.11".into(), file("ELF"));
            nodes.insert(
                "/usr/local/lib/python3.11/dist-packages/torch/version.py".into(),
                file("__version__ = '2.4.1+cu121'\ncuda = '12.1'\ngit_version = 'ee1b6804'\n"),
            );
            nodes.insert(
                "/usr/local/lib/python3.11/dist-packages/torch-2.4.1+cu121.dist-info/METADATA".into(),
                file("Metadata-Version: 2.1\nName: torch\nVersion: 2.4.1+cu121\n"),
            );
            let config = br#"{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]},"rootfs":{"type":"layers","diff_ids":[]}}"#;
            let mut fake = Fake::default();
            fake.trees.insert(
                "app:1".into(),
                Tree {
                    config: config.to_vec(),
                    names: vec!["app:1".into()],
                    nodes,
                },
            );
            fake
        }

        #[test]
        fn an_image_is_read_path_by_path_through_the_engine() {
            let fake = image();
            let Outcome::Read(image, asked) = read(&fake, "app:1").unwrap() else {
                panic!("read by paths")
            };
            assert!(asked > 0);
            let facts = image.facts();
            assert_eq!(facts.os.as_ref().unwrap().id, "ubuntu");
            assert!(
                facts.pythons.iter().any(|p| p.version == "3.11"),
                "{:?}",
                facts.pythons
            );
            let torch = &facts.torch[0];
            assert_eq!(torch.version_str(), Some("2.4.1+cu121"));
            assert_eq!(torch.cuda.as_ref().unwrap().value, "12.1");
            assert_eq!(image.names, ["app:1"]);
            // The container is let go once read.
            assert_eq!(fake.calls.borrow().last().unwrap(), "close app:1");
        }

        #[test]
        fn an_image_the_engine_lacks_is_named() {
            let fake = Fake::default();
            let e = read(&fake, "nothing:here").unwrap_err();
            assert!(
                matches!(e, VerifyError::Docker(DockerError::NoSuchImage(ref n)) if n == "nothing:here"),
                "{e:?}"
            );
        }
    }
    use super::*;

    #[test]
    fn prefixes_come_from_the_environment_too() {
        let config = ImageConfig {
            env: vec![
                "PATH=/opt/venv/bin:/root/.pyenv/versions/3.11.9/bin:/usr/local/nvidia/bin:/usr/local/cuda/bin:/srv/./x/bin:/usr/bin:/bin"
                    .into(),
                "VIRTUAL_ENV=/opt/venv/".into(),
                "CONDA_PREFIX=relative".into(),
                "CONDA_DIR=/opt/../etc".into(),
            ],
            ..ImageConfig::default()
        };
        assert_eq!(
            prefixes(&config),
            [
                "/usr",
                "/usr/local",
                "/opt/conda",
                "/opt/venv",
                "/root/.pyenv/versions/3.11.9",
                "/usr/local/nvidia"
            ]
        );
    }

    #[test]
    fn python_versions_of_directories() {
        assert_eq!(python_dir_version("python3.11").as_deref(), Some("3.11"));
        assert_eq!(python_dir_version("python3.13t").as_deref(), Some("3.13t"));
        assert_eq!(python_dir_version("python3"), None);
        assert_eq!(python_dir_version("python3.x"), None);
        assert_eq!(
            site_python("usr/local/lib/python3.11/site-packages").as_deref(),
            Some("3.11")
        );
        assert_eq!(
            site_python("opt/venv/lib/python3.13t/site-packages").as_deref(),
            Some("3.13")
        );
        assert_eq!(site_python("usr/lib/python3/dist-packages"), None);
    }

    #[test]
    fn what_torch_pins_is_asked_for_by_name_or_read_from_layers() {
        let metadata = "Name: torch\nVersion: 2.9.0\n\
            Requires-Dist: nvidia-cudnn-cu12==9.10.2.21; platform_system == \"Linux\" and platform_machine == \"x86_64\"\n\
            Requires-Dist: nvidia-cublas-cu12==12.8.4.1; platform_machine != \"aarch64\"\n\
            Requires-Dist: triton==3.5.0; platform_system == \"Linux\" and python_version < \"3.14\"\n\
            Requires-Dist: nvidia-nccl-cu12>=2.27; platform_system == \"Linux\" and platform_machine == \"aarch64\"\n\
            Requires-Dist: cuda-bindings<14,>=13.0.3\n\
            Requires-Dist: nvidia-ml-py; extra == \"monitor\"\n\
            Requires-Dist: filelock\n\n";
        let x86 = pinned(metadata, "x86_64", Some("3.12"));
        let names: Vec<&str> = x86.exact.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["nvidia-cudnn-cu12", "nvidia-cublas-cu12", "triton"]);
        assert!(x86.inexact.is_empty(), "{:?}", x86.inexact);
        // On Python 3.14 triton's marker fails; on aarch64 the nccl range applies.
        let names: Vec<String> = pinned(metadata, "x86_64", Some("3.14"))
            .exact
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["nvidia-cudnn-cu12", "nvidia-cublas-cu12"]);
        let arm = pinned(metadata, "aarch64", None);
        assert_eq!(
            arm.exact.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            ["triton"]
        );
        assert_eq!(
            arm.inexact,
            [("nvidia-nccl-cu12".to_string(), ">=2.27".to_string())]
        );
    }

    #[test]
    fn paths_join_and_split() {
        assert_eq!(join("usr/lib", "x"), "usr/lib/x");
        assert_eq!(join("", "etc"), "etc");
        assert_eq!(parent_of("etc/os-release"), "etc");
        assert_eq!(parent_of("etc"), "");
        assert_eq!(abs("usr"), "/usr");
        assert_eq!(rel("/usr/"), "usr/");
    }
}
