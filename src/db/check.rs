//! Builds the database from its files and checks it: layout, per-record rules, and the
//! references and ranges across records. Every problem is collected, none stops the rest.

use std::collections::HashMap;

use serde::de::DeserializeOwned;

use super::parse::{Doc, line_of, parse_doc, read_record, value_span};
use super::problem::{KeyPath, Problem, ProblemKind};
use super::records::*;
use super::{Db, Kind, SourceFile, normalize};
use crate::model::pep508::normalize_name;
use crate::model::{
    Architecture, ComputeCapability, CudaVersion, HostArch, PartialDate, PythonTag, Variant, public,
};

struct FileCtx<'a> {
    path: &'a str,
    text: &'a str,
    doc: Option<Doc<'a>>,
}

struct Checker<'a> {
    files: Vec<FileCtx<'a>>,
    problems: Vec<Problem>,
    /// Today, to refuse `checked` dates after it; `None` skips that check.
    today: Option<PartialDate>,
}

impl Checker<'_> {
    fn report(&mut self, file: usize, key: KeyPath, kind: ProblemKind, message: impl Into<String>) {
        let f = &self.files[file];
        let line = f
            .doc
            .as_ref()
            .and_then(|d| value_span(d, &key))
            .map(|s| line_of(f.text, s.start));
        self.problems.push(Problem {
            file: f.path.to_string(),
            line,
            key,
            kind,
            message: message.into(),
        });
    }

    fn sources(&mut self, file: usize, at: &KeyPath, sources: &[Source], required: bool) {
        self.sources_of(file, at, sources, required, false);
    }

    /// [`Checker::sources`]; with `images`, a source may also be an image pinned by the
    /// digest of its manifest (`docker://nvcr.io/nvidia/pytorch@sha256:...`): what
    /// `gpuenv verify --propose` cites for facts it read from the image itself, the most
    /// primary source of what an image holds, and one no web page can stand in for.
    fn sources_of(&mut self, file: usize, at: &KeyPath, sources: &[Source], required: bool, images: bool) {
        if required && sources.is_empty() {
            self.report(
                file,
                at.join("sources"),
                ProblemKind::MissingSources,
                "a record needs at least one source",
            );
        }
        for (i, s) in sources.iter().enumerate() {
            let web = s.url.starts_with("https://") || s.url.starts_with("http://");
            if web || (images && pinned_image(&s.url)) {
                continue;
            }
            let message = if images {
                format!(
                    "source `{}` is neither an http(s) address nor an image pinned by digest (`docker://REGISTRY/REPOSITORY@sha256:<64 hex digits>`)",
                    s.url
                )
            } else {
                format!("source `{}` is not an http(s) address", s.url)
            };
            self.report(
                file,
                at.join("sources").index(i).join("url"),
                ProblemKind::MissingSources,
                message,
            );
        }
    }

    /// `checked`: required, a full date, not after today.
    fn checked(&mut self, file: usize, checked: Option<PartialDate>) {
        match checked {
            None => self.report(
                file,
                KeyPath::key("checked"),
                ProblemKind::MissingKey,
                "required key `checked` is missing: the date (`YYYY-MM-DD`) the record's facts were last checked against their sources",
            ),
            Some(d) if !d.is_full() => self.report(
                file,
                KeyPath::key("checked"),
                ProblemKind::BadValue,
                format!("`checked` is the day the facts were checked, `YYYY-MM-DD`, not `{d}`"),
            ),
            Some(d) => {
                if let Some(today) = self.today.filter(|t| d > *t) {
                    self.report(
                        file,
                        KeyPath::key("checked"),
                        ProblemKind::BadValue,
                        format!("`checked` {d} is after today ({today})"),
                    );
                }
            }
        }
    }

    /// `pending`: each entry a key of `pendable`, listed once, and without a value (a
    /// value given and called pending at once would leave readers guessing which holds).
    /// `given` says, per pendable key, whether the record has a value for it.
    fn pending(&mut self, file: usize, pending: &[String], pendable: &[&str], given: &[(&str, bool)]) {
        for (i, key) in pending.iter().enumerate() {
            let at = KeyPath::key("pending").index(i);
            if !pendable.contains(&key.as_str()) {
                self.report(
                    file,
                    at,
                    ProblemKind::BadValue,
                    format!(
                        "`pending` names `{key}`, which is not a fact that may be pending here (one of: {})",
                        pendable.join(", ")
                    ),
                );
            } else if pending[..i].contains(key) {
                self.report(
                    file,
                    at,
                    ProblemKind::BadValue,
                    format!("`{key}` is listed twice in `pending`"),
                );
            } else if given.iter().any(|(k, has)| k == key && *has) {
                self.report(
                    file,
                    KeyPath::key(key),
                    ProblemKind::Inconsistent,
                    format!("`{key}` has a value but is listed in `pending`: remove one of the two"),
                );
            }
        }
    }

    fn stem(&mut self, file: usize, expected: &str) {
        let path = self.files[file].path;
        let stem = path.rsplit('/').next().unwrap_or(path).trim_end_matches(".toml");
        if stem != expected {
            self.report(
                file,
                KeyPath::default(),
                ProblemKind::Layout,
                format!("file name must be `{expected}.toml` for this record, not `{stem}.toml`"),
            );
        }
    }
}

/// `H100 SXM` -> `h100-sxm`: the file stem of a record named by free text.
pub(crate) fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_string()
}

fn stem_of(path: &str) -> String {
    path.rsplit('/')
        .next()
        .unwrap_or(path)
        .trim_end_matches(".toml")
        .to_string()
}

/// Reads and checks every file; returns what could be read and every problem.
/// `today`, when given, refuses `checked` dates after it.
pub(crate) fn build(files: &[SourceFile], today: Option<PartialDate>) -> (Db, Vec<Problem>) {
    let mut ck = Checker {
        files: Vec::with_capacity(files.len()),
        problems: Vec::new(),
        today,
    };
    let mut records = Records::default();
    for f in files {
        let idx = ck.files.len();
        let text = f.text.as_deref().unwrap_or("");
        ck.files.push(FileCtx {
            path: &f.path,
            text,
            doc: None,
        });
        let kind = match kind_of(&f.path) {
            Ok(k) => k,
            Err(why) => {
                ck.report(idx, KeyPath::default(), ProblemKind::Layout, why);
                continue;
            }
        };
        if f.text.is_none() {
            ck.report(idx, KeyPath::default(), ProblemKind::Syntax, "not UTF-8 text");
            continue;
        }
        let Some(doc) = parse_doc(&f.path, text, &mut ck.problems) else {
            continue;
        };
        records.read(&mut ck, idx, kind, stem_of(&f.path), &doc);
        ck.files[idx].doc = Some(doc);
    }
    records.check(&mut ck);
    let mut problems = ck.problems;
    problems.sort_by(|a, b| (&a.file, a.line, &a.key).cmp(&(&b.file, b.line, &b.key)));
    problems.dedup();
    (records.into_db(), problems)
}

/// The kind of record a file's path says it holds (`<kind>/<id>.toml`), or why it says none.
fn kind_of(path: &str) -> Result<Kind, String> {
    match path.split('/').collect::<Vec<_>>().as_slice() {
        [dir, _name] => dir
            .parse::<Kind>()
            .map_err(|e| format!("{e} (directory of record files)")),
        _ => Err("record files live at `<kind>/<id>.toml`".into()),
    }
}

/// A record that takes its id from its file's stem.
trait Identified: DeserializeOwned {
    fn set_id(&mut self, id: String);
}

macro_rules! identified {
    ($($t:ty),*) => {
        $(impl Identified for $t {
            fn set_id(&mut self, id: String) {
                self.id = id;
            }
        })*
    };
}
identified!(
    PythonRelease,
    TorchRelease,
    CudaRelease,
    CudnnRelease,
    DriverBranch,
    Gpu,
    Image,
    Package,
    Framework,
    Model,
    Xid,
    Efficiency,
    ForeignGpu
);

/// The records read so far, each with the index of its file.
#[derive(Default)]
struct Records {
    python: Vec<(usize, PythonRelease)>,
    torch: Vec<(usize, TorchRelease)>,
    cuda: Vec<(usize, CudaRelease)>,
    cudnn: Vec<(usize, CudnnRelease)>,
    drivers: Vec<(usize, DriverBranch)>,
    gpus: Vec<(usize, Gpu)>,
    images: Vec<(usize, Image)>,
    packages: Vec<(usize, Package)>,
    frameworks: Vec<(usize, Framework)>,
    models: Vec<(usize, Model)>,
    xids: Vec<(usize, Xid)>,
    efficiencies: Vec<(usize, Efficiency)>,
    foreign_gpus: Vec<(usize, ForeignGpu)>,
}

impl Records {
    /// Reads one file's record of `kind` (its problems go to the checker).
    fn read(&mut self, ck: &mut Checker<'_>, idx: usize, kind: Kind, id: String, doc: &Doc<'_>) {
        fn into<T: Identified>(
            ck: &mut Checker<'_>,
            idx: usize,
            id: String,
            doc: &Doc<'_>,
            out: &mut Vec<(usize, T)>,
        ) {
            let (path, text) = (ck.files[idx].path, ck.files[idx].text);
            if let Some(mut r) = read_record::<T>(path, text, doc, &mut ck.problems) {
                r.set_id(id);
                out.push((idx, r));
            }
        }
        match kind {
            Kind::Python => into(ck, idx, id, doc, &mut self.python),
            Kind::Torch => into(ck, idx, id, doc, &mut self.torch),
            Kind::Cuda => into(ck, idx, id, doc, &mut self.cuda),
            Kind::Cudnn => into(ck, idx, id, doc, &mut self.cudnn),
            Kind::Driver => into(ck, idx, id, doc, &mut self.drivers),
            Kind::Gpu => into(ck, idx, id, doc, &mut self.gpus),
            Kind::Image => into(ck, idx, id, doc, &mut self.images),
            Kind::Package => into(ck, idx, id, doc, &mut self.packages),
            Kind::Framework => into(ck, idx, id, doc, &mut self.frameworks),
            Kind::Model => into(ck, idx, id, doc, &mut self.models),
            Kind::Xid => into(ck, idx, id, doc, &mut self.xids),
            Kind::Efficiency => into(ck, idx, id, doc, &mut self.efficiencies),
            Kind::ForeignGpu => into(ck, idx, id, doc, &mut self.foreign_gpus),
        }
    }

    /// Every check of each kind, and of the references between kinds.
    fn check(&self, ck: &mut Checker<'_>) {
        check_python(ck, &self.python);
        check_cuda(ck, &self.cuda);
        check_cudnn(ck, &self.cudnn);
        check_drivers(ck, &self.drivers, &self.cuda);
        check_gpus(ck, &self.gpus, &self.drivers);
        check_gpu_names_resolve(ck, &self.gpus);
        check_torch(ck, self);
        check_images(ck, self);
        check_packages(ck, &self.packages);
        check_frameworks(ck, &self.frameworks);
        check_models(ck, &self.models);
        check_xids(ck, &self.xids);
        check_efficiencies(ck, &self.efficiencies);
        check_foreign_gpus(ck, &self.foreign_gpus, &self.gpus);
    }

    fn into_db(self) -> Db {
        fn strip<T>(v: Vec<(usize, T)>) -> Vec<T> {
            v.into_iter().map(|(_, r)| r).collect()
        }
        let mut db = Db {
            python: strip(self.python),
            torch: strip(self.torch),
            cuda: strip(self.cuda),
            cudnn: strip(self.cudnn),
            drivers: strip(self.drivers),
            gpus: strip(self.gpus),
            images: strip(self.images),
            packages: strip(self.packages),
            frameworks: strip(self.frameworks),
            models: strip(self.models),
            xids: strip(self.xids),
            efficiencies: strip(self.efficiencies),
            foreign_gpus: strip(self.foreign_gpus),
        };
        db.sort();
        db
    }
}

/// Reports the second and later records with the same identity.
fn duplicates<T, K: Eq + std::hash::Hash + std::fmt::Display>(
    ck: &mut Checker<'_>,
    records: &[(usize, T)],
    key: impl Fn(&T) -> K,
    field: &str,
) {
    let mut seen: HashMap<K, usize> = HashMap::new();
    for (idx, r) in records {
        let k = key(r);
        if let Some(first) = seen.get(&k) {
            let other = ck.files[*first].path.to_string();
            ck.report(
                *idx,
                KeyPath::key(field),
                ProblemKind::DuplicateId,
                format!("`{k}` is also the record in `{other}`"),
            );
        } else {
            seen.insert(k, *idx);
        }
    }
}

fn check_python(ck: &mut Checker<'_>, records: &[(usize, PythonRelease)]) {
    for (idx, r) in records {
        let idx = *idx;
        ck.sources(idx, &KeyPath::default(), &r.sources, true);
        ck.checked(idx, r.checked);
        if r.version.release().len() != 2 || r.version.is_pre() || r.version.is_local() {
            ck.report(
                idx,
                KeyPath::key("version"),
                ProblemKind::BadValue,
                "a Python release line is `major.minor` (`3.12`)",
            );
        }
        ck.stem(idx, &r.version.to_string());
        if r.end_of_life <= r.released {
            ck.report(
                idx,
                KeyPath::key("end_of_life"),
                ProblemKind::Inconsistent,
                "end of life must come after the release",
            );
        }
    }
    duplicates(ck, records, |r| r.version.clone(), "version");
}

fn check_cuda(ck: &mut Checker<'_>, records: &[(usize, CudaRelease)]) {
    let mut family: HashMap<u32, (usize, &CudaRelease)> = HashMap::new();
    for (idx, r) in records {
        let idx = *idx;
        ck.sources(idx, &KeyPath::default(), &r.sources, true);
        ck.checked(idx, r.checked);
        ck.stem(idx, r.version.as_str());
        if r.version.parts().len() != 3 {
            ck.report(
                idx,
                KeyPath::key("version"),
                ProblemKind::BadValue,
                "a toolkit release is `major.minor.patch` (`12.4.0`)",
            );
        }
        ck.pending(
            idx,
            &r.pending,
            CudaRelease::PENDABLE,
            &[
                ("min_driver_linux", r.min_driver_linux.is_some()),
                ("min_driver_windows", r.min_driver_windows.is_some()),
                ("family_min_driver", r.family_min_driver.is_some()),
                ("family_min_driver_windows", r.family_min_driver_windows.is_some()),
                ("sass", !r.sass.is_empty()),
                ("deprecated", !r.deprecated.is_empty()),
            ],
        );
        if r.min_driver_linux.is_none() && !r.is_pending("min_driver_linux") {
            ck.report(
                idx,
                KeyPath::key("min_driver_linux"),
                ProblemKind::MissingKey,
                "required key `min_driver_linux` is missing (list it in `pending` while no source gives it)",
            );
        }
        if r.sass.is_empty() && !r.is_pending("sass") {
            ck.report(
                idx,
                KeyPath::key("sass"),
                ProblemKind::BadValue,
                "nvcc compiles for at least one architecture (list `sass` in `pending` while no source gives it)",
            );
        }
        for (i, d) in r.deprecated.iter().enumerate() {
            if !r.sass.contains(d) {
                ck.report(
                    idx,
                    KeyPath::key("deprecated").index(i),
                    ProblemKind::Inconsistent,
                    format!("{d} is deprecated but not in `sass`"),
                );
            }
        }
        // A pending floor is not a second value of the family's floor.
        if r.is_pending("family_min_driver") {
            continue;
        }
        match family.get(&r.version.major()) {
            Some((first_idx, first)) if first.family_min_driver != r.family_min_driver => {
                let other = ck.files[*first_idx].path.to_string();
                let show = |v: &Option<crate::model::DriverVersion>| {
                    v.as_ref().map_or("none".to_string(), |d| d.to_string())
                };
                ck.report(
                    idx,
                    KeyPath::key("family_min_driver"),
                    ProblemKind::Inconsistent,
                    format!(
                        "CUDA {}.x family floor is {} here but {} in `{other}`",
                        r.version.major(),
                        show(&r.family_min_driver),
                        show(&first.family_min_driver)
                    ),
                );
            }
            Some(_) => {}
            None => {
                family.insert(r.version.major(), (idx, r));
            }
        }
    }
    // A newer toolkit never needs an older driver: a row out of order is a typo.
    let mut sorted: Vec<&(usize, CudaRelease)> = records.iter().collect();
    sorted.sort_by(|a, b| a.1.version.cmp(&b.1.version));
    // Records whose minimum is pending have none to compare.
    sorted.retain(|(_, r)| r.min_driver_linux.is_some());
    for pair in sorted.windows(2) {
        let (prev, next) = (&pair[0].1, &pair[1]);
        if let (Some(p), Some(n)) = (&prev.min_driver_linux, &next.1.min_driver_linux) {
            if n < p {
                ck.report(
                    next.0,
                    KeyPath::key("min_driver_linux"),
                    ProblemKind::OverlappingRange,
                    format!(
                        "CUDA {} needs {n} but the older CUDA {} needs {p}: minimum drivers must not decrease",
                        next.1.version, prev.version
                    ),
                );
            }
        }
    }
    duplicates(ck, records, |r| r.version.clone(), "version");
}

fn check_cudnn(ck: &mut Checker<'_>, records: &[(usize, CudnnRelease)]) {
    for (idx, r) in records {
        ck.sources(*idx, &KeyPath::default(), &r.sources, true);
        ck.checked(*idx, r.checked);
        ck.stem(*idx, r.version.as_str());
        ck.pending(
            *idx,
            &r.pending,
            CudnnRelease::PENDABLE,
            &[("cuda_majors", !r.cuda_majors.is_empty())],
        );
        if r.cuda_majors.is_empty() && !r.pending.iter().any(|k| k == "cuda_majors") {
            ck.report(
                *idx,
                KeyPath::key("cuda_majors"),
                ProblemKind::BadValue,
                "list the CUDA majors it is built for (or `cuda_majors` in `pending` while no source gives them)",
            );
        }
    }
    duplicates(ck, records, |r| r.version.clone(), "version");
}

fn has_cuda_minor(cuda: &[(usize, CudaRelease)], v: &CudaVersion) -> bool {
    cuda.iter()
        .any(|(_, c)| c.version.major_minor() == v.major_minor())
}

fn check_drivers(ck: &mut Checker<'_>, records: &[(usize, DriverBranch)], cuda: &[(usize, CudaRelease)]) {
    for (idx, r) in records {
        let idx = *idx;
        ck.sources(idx, &KeyPath::default(), &r.sources, true);
        ck.checked(idx, r.checked);
        ck.stem(idx, &format!("r{}", r.branch));
        for (field, v) in [
            ("first_version", &r.first_version),
            ("latest_version", &r.latest_version),
        ] {
            if let Some(v) = v {
                if v.branch() != r.branch {
                    ck.report(
                        idx,
                        KeyPath::key(field),
                        ProblemKind::Inconsistent,
                        format!("{v} is not a release of branch R{}", r.branch),
                    );
                }
            }
        }
        if let (Some(a), Some(b)) = (&r.first_version, &r.latest_version) {
            if a > b {
                ck.report(
                    idx,
                    KeyPath::key("latest_version"),
                    ProblemKind::Inconsistent,
                    format!("{b} is older than the first release {a}"),
                );
            }
        }
        if let (Some(a), Some(b)) = (&r.released, &r.end_of_life) {
            if b <= a {
                ck.report(
                    idx,
                    KeyPath::key("end_of_life"),
                    ProblemKind::Inconsistent,
                    "end of life must come after the release",
                );
            }
        }
        if let Some(by) = r.end_of_life_by {
            end_of_life_by(ck, idx, r, by);
        }
        if r.architectures.is_empty() {
            ck.report(
                idx,
                KeyPath::key("architectures"),
                ProblemKind::BadValue,
                "list the architectures the branch drives",
            );
        }
        for (i, v) in r.forward_compat.iter().enumerate() {
            if !has_cuda_minor(cuda, v) {
                ck.report(
                    idx,
                    KeyPath::key("forward_compat").index(i),
                    ProblemKind::DanglingReference,
                    format!("no CUDA {} toolkit record", v),
                );
            }
        }
    }
    // Release ranges of different branches must not overlap.
    let mut ranges: Vec<(usize, &DriverBranch)> = records
        .iter()
        .filter(|(_, r)| r.first_version.is_some() && r.latest_version.is_some())
        .map(|(i, r)| (*i, r))
        .collect();
    ranges.sort_by(|a, b| a.1.first_version.cmp(&b.1.first_version));
    for pair in ranges.windows(2) {
        let (a, b) = (pair[0].1, pair[1]);
        if b.1.first_version <= a.latest_version {
            ck.report(
                b.0,
                KeyPath::key("first_version"),
                ProblemKind::OverlappingRange,
                format!(
                    "R{} releases start at {} but R{} runs to {}",
                    b.1.branch,
                    b.1.first_version.as_ref().expect("filtered"),
                    a.branch,
                    a.latest_version.as_ref().expect("filtered")
                ),
            );
        }
    }
    duplicates(ck, records, |r| r.branch, "branch");
}

/// `end_of_life_by`: the day a list of the supported branches was read without this one. A
/// full date, not after today (a reading cannot be in the future), after the release, no
/// earlier than an exact `end_of_life` (the branch cannot be past an end of life that has
/// not come), with a source whose note names the key (the list read), and not on a branch
/// that the forward-compatibility table lists as a host (the list that says the others are
/// past their end of life).
fn end_of_life_by(ck: &mut Checker<'_>, idx: usize, r: &DriverBranch, by: PartialDate) {
    let key = || KeyPath::key(crate::db::END_OF_LIFE_BY);
    if !by.is_full() {
        ck.report(
            idx,
            key(),
            ProblemKind::BadValue,
            format!("`end_of_life_by` is the day the list of supported branches was read, `YYYY-MM-DD`, not `{by}`"),
        );
    } else if let Some(today) = ck.today.filter(|t| by > *t) {
        ck.report(
            idx,
            key(),
            ProblemKind::BadValue,
            format!("`end_of_life_by` {by} is after today ({today})"),
        );
    }
    if r.released.is_some_and(|a| by <= a) {
        ck.report(
            idx,
            key(),
            ProblemKind::Inconsistent,
            "the branch cannot be past its end of life before its release",
        );
    }
    if let Some(eol) = r.end_of_life.filter(|e| *e > by) {
        ck.report(
            idx,
            key(),
            ProblemKind::Inconsistent,
            format!("the branch cannot be past its end of life on {by} when `end_of_life` is {eol}"),
        );
    }
    if !r.forward_compat.is_empty() {
        ck.report(
            idx,
            key(),
            ProblemKind::Inconsistent,
            "a branch the forward-compatibility table lists as a host (`forward_compat`) is not past its end of life by that table",
        );
    }
    if !r.sources.iter().any(|s| {
        s.note
            .as_deref()
            .is_some_and(|n| n.contains(crate::db::END_OF_LIFE_BY))
    }) {
        ck.report(
            idx,
            KeyPath::key("sources"),
            ProblemKind::MissingSources,
            "name the list of supported branches that `end_of_life_by` was read from: a source whose note says `end_of_life_by`",
        );
    }
}

/// How far two figures a datasheet prints in a fixed ratio may stray from it before the
/// linter asks why: datasheets round (L40S: BF16 362.05 dense, 733 with sparsity, 1.2% off
/// twice), a slip of a sparse figure for a dense one is 100% off.
const RATIO_TOLERANCE: f64 = 0.03;

/// The compute figures of a GPU record: each positive; each sparse figure twice its dense
/// one; and, across precisions, the ratios every Tensor Core generation keeps (FP16 = BF16,
/// TF32 = BF16 / 2, FP8 = 2 x BF16). The cross-precision ratios are what catches a curator's
/// usual slip, a datasheet's "1,979 TFLOPS*" (with sparsity) written as dense: the figure
/// is then twice what its neighbours imply. A record whose notes name the key says why it
/// departs from a ratio (a GPU cut down in one precision only), and is not reported.
fn check_compute(ck: &mut Checker<'_>, idx: usize, g: &Gpu) {
    let figures = [
        ("bf16_tflops", g.bf16_tflops),
        ("fp16_tflops", g.fp16_tflops),
        ("tf32_tflops", g.tf32_tflops),
        ("fp8_tflops", g.fp8_tflops),
        ("int8_tops", g.int8_tops),
        ("bf16_sparse_tflops", g.bf16_sparse_tflops),
        ("fp16_sparse_tflops", g.fp16_sparse_tflops),
        ("tf32_sparse_tflops", g.tf32_sparse_tflops),
        ("fp8_sparse_tflops", g.fp8_sparse_tflops),
        ("int8_sparse_tops", g.int8_sparse_tops),
    ];
    let mut bad = false;
    for (key, value) in figures {
        if value.is_some_and(|v| !(v.is_finite() && v > 0.0)) {
            bad = true;
            let unit = if key.starts_with("int8") { "TOPS" } else { "TFLOPS" };
            ck.report(
                idx,
                KeyPath::key(key),
                ProblemKind::BadValue,
                format!("`{key}` must be a positive number of {unit}"),
            );
        }
    }
    if bad {
        return;
    }
    let explained = |key: &str| g.notes.as_deref().is_some_and(|n| n.contains(key));
    // (checked key, its figure, the reference key, its figure, expected checked / reference, why)
    let ratios = [
        (
            "bf16_sparse_tflops",
            g.bf16_sparse_tflops,
            "bf16_tflops",
            g.bf16_tflops,
            2.0,
            "a 2:4-sparse figure is twice the dense one",
        ),
        (
            "fp16_sparse_tflops",
            g.fp16_sparse_tflops,
            "fp16_tflops",
            g.fp16_tflops,
            2.0,
            "a 2:4-sparse figure is twice the dense one",
        ),
        (
            "tf32_sparse_tflops",
            g.tf32_sparse_tflops,
            "tf32_tflops",
            g.tf32_tflops,
            2.0,
            "a 2:4-sparse figure is twice the dense one",
        ),
        (
            "fp8_sparse_tflops",
            g.fp8_sparse_tflops,
            "fp8_tflops",
            g.fp8_tflops,
            2.0,
            "a 2:4-sparse figure is twice the dense one",
        ),
        (
            "int8_sparse_tops",
            g.int8_sparse_tops,
            "int8_tops",
            g.int8_tops,
            2.0,
            "a 2:4-sparse figure is twice the dense one",
        ),
        (
            "fp16_tflops",
            g.fp16_tflops,
            "bf16_tflops",
            g.bf16_tflops,
            1.0,
            "Tensor Cores run FP16 and BF16 at one rate",
        ),
        (
            "tf32_tflops",
            g.tf32_tflops,
            "bf16_tflops",
            g.bf16_tflops,
            0.5,
            "Tensor Cores run TF32 at half the BF16 rate",
        ),
        (
            "fp8_tflops",
            g.fp8_tflops,
            "bf16_tflops",
            g.bf16_tflops,
            2.0,
            "Tensor Cores run FP8 at twice the BF16 rate",
        ),
    ];
    for (key, value, reference, base, expected, why) in ratios {
        let (Some(v), Some(b)) = (value, base) else {
            continue;
        };
        let ratio = v / b;
        if (ratio / expected - 1.0).abs() <= RATIO_TOLERANCE || explained(key) {
            continue;
        }
        // A dense figure at twice what its neighbour implies is most likely a sparse one.
        let hint = if (ratio / expected / 2.0 - 1.0).abs() <= RATIO_TOLERANCE {
            format!(
                ": `{key}` looks like a \"with sparsity\" figure (halve it, or keep it in the `_sparse` key)"
            )
        } else if (ratio / expected * 2.0 - 1.0).abs() <= RATIO_TOLERANCE {
            format!(
                ": `{reference}` looks like a \"with sparsity\" figure (halve it, or keep it in the `_sparse` key)"
            )
        } else {
            String::new()
        };
        ck.report(
            idx,
            KeyPath::key(key),
            ProblemKind::Inconsistent,
            format!(
                "`{key}` {v} is {ratio:.2} x `{reference}` {b}, where {why} ({expected} x){hint}; \
                 or the notes name `{key}` and say why"
            ),
        );
    }
}

fn check_gpus(ck: &mut Checker<'_>, records: &[(usize, Gpu)], drivers: &[(usize, DriverBranch)]) {
    let mut names: HashMap<String, (usize, String)> = HashMap::new();
    for (idx, g) in records {
        let idx = *idx;
        ck.sources(idx, &KeyPath::default(), &g.sources, true);
        ck.checked(idx, g.checked);
        ck.stem(idx, &slug(&g.name));
        if Architecture::of(g.compute_capability) != Some(g.architecture) {
            ck.report(
                idx,
                KeyPath::key("architecture"),
                ProblemKind::Inconsistent,
                format!(
                    "compute capability {} is not {}",
                    g.compute_capability, g.architecture
                ),
            );
        }
        if !(g.memory_gib.is_finite() && g.memory_gib > 0.0) {
            ck.report(
                idx,
                KeyPath::key("memory_gib"),
                ProblemKind::BadValue,
                "memory must be a positive number of GiB",
            );
        }
        check_compute(ck, idx, g);
        if let Some(mib) = g.usable_memory_mib {
            // What the driver reports is the memory as sold (GeForce boards often report
            // exactly that) or a little less, never more; under 85% it is another variant's
            // figure or a MIG slice's, not this GPU's.
            let sold = g.memory_gib * 1024.0;
            let mib = f64::from(mib);
            if !(mib <= sold && mib > sold * 0.85) {
                ck.report(
                    idx,
                    KeyPath::key("usable_memory_mib"),
                    ProblemKind::Inconsistent,
                    format!(
                        "{mib} MiB reported is not between 85% and 100% of the {} GiB sold",
                        g.memory_gib
                    ),
                );
            }
        }
        if g.nvlink == Nvlink::None && g.nvlink_gbs.is_some() {
            ck.report(
                idx,
                KeyPath::key("nvlink_gbs"),
                ProblemKind::Inconsistent,
                "an NVLink bandwidth on a GPU whose `nvlink` is `none`",
            );
        }
        if g.nvlink_gbs == Some(0) {
            ck.report(
                idx,
                KeyPath::key("nvlink_gbs"),
                ProblemKind::BadValue,
                "`nvlink_gbs` must be a positive number of GB/s (leave it out where unknown)",
            );
        }
        if is_sxm(g.form_factor) && g.nvlink == Nvlink::None {
            ck.report(
                idx,
                KeyPath::key("nvlink"),
                ProblemKind::Inconsistent,
                "an SXM module without NVLink: SXM baseboards join their GPUs by NVLink",
            );
        }
        if let Some(why) = &g.modified {
            if why.trim().is_empty() {
                ck.report(
                    idx,
                    KeyPath::key("modified"),
                    ProblemKind::BadValue,
                    "`modified` is empty: say what was changed, by whom, and what it risks",
                );
            }
            // Such a record answers only to a name that writes its memory size: its own name
            // must write it, or nothing could reach it.
            if super::lookup::written_memory(&g.name).is_empty() {
                ck.report(
                    idx,
                    KeyPath::key("name"),
                    ProblemKind::Inconsistent,
                    "a modified board's name must write its memory size (`RTX 4090 48GB`): only a name with the size \
                     reaches it",
                );
            }
        }
        if g.forward_compat && g.segment == Segment::Consumer {
            ck.report(
                idx,
                KeyPath::key("forward_compat"),
                ProblemKind::Inconsistent,
                "GeForce GPUs are never eligible for CUDA forward compatibility",
            );
        }
        if !drivers.is_empty()
            && !drivers
                .iter()
                .any(|(_, d)| d.architectures.contains(&g.architecture))
        {
            ck.report(
                idx,
                KeyPath::key("architecture"),
                ProblemKind::DanglingReference,
                format!("no driver branch record drives {}", g.architecture),
            );
        }
        let all = std::iter::once((KeyPath::key("name"), &g.name)).chain(
            g.aliases
                .iter()
                .enumerate()
                .map(|(i, a)| (KeyPath::key("aliases").index(i), a)),
        );
        for (key, name) in all {
            let n = normalize(name);
            if n.is_empty() {
                ck.report(idx, key, ProblemKind::BadValue, "a name needs letters or digits");
                continue;
            }
            match names.get(&n) {
                Some((other, other_name)) if *other != idx => {
                    let other_path = ck.files[*other].path.to_string();
                    ck.report(
                        idx,
                        key,
                        ProblemKind::DuplicateAlias,
                        format!("`{name}` also names `{other_name}` in `{other_path}`"),
                    );
                }
                Some(_) => {
                    ck.report(
                        idx,
                        key,
                        ProblemKind::DuplicateAlias,
                        format!("`{name}` is listed twice"),
                    );
                }
                None => {
                    names.insert(n, (idx, g.name.clone()));
                }
            }
        }
    }
}

/// SXM modules of any generation (a superchip is not one: its form says nothing of
/// GPU-to-GPU links).
fn is_sxm(f: FormFactor) -> bool {
    matches!(
        f,
        FormFactor::Sxm
            | FormFactor::Sxm2
            | FormFactor::Sxm3
            | FormFactor::Sxm4
            | FormFactor::Sxm5
            | FormFactor::Sxm6
    )
}

/// Every name and alias must find its own record when looked up as users look names up
/// (by tokens, see `lookup`): a name that another record answers to first would make the
/// record unreachable under that name.
fn check_gpu_names_resolve(ck: &mut Checker<'_>, records: &[(usize, Gpu)]) {
    let gpus: Vec<Gpu> = records
        .iter()
        .map(|(idx, g)| Gpu {
            id: idx.to_string(),
            ..g.clone()
        })
        .collect();
    for (idx, g) in records {
        let all = std::iter::once((KeyPath::key("name"), &g.name)).chain(
            g.aliases
                .iter()
                .enumerate()
                .map(|(i, a)| (KeyPath::key("aliases").index(i), a)),
        );
        for (key, name) in all {
            let Some(m) = super::lookup::match_gpu(&gpus, name) else {
                continue; // an empty name is reported above
            };
            // The same spelling under two records is reported once, as a duplicate above.
            let spelled_there = std::iter::once(&m.chosen.name)
                .chain(&m.chosen.aliases)
                .any(|n| normalize(n) == normalize(name));
            if m.chosen.id != idx.to_string() && !spelled_there {
                let other = m.chosen.id.parse::<usize>().unwrap_or(*idx);
                let other_path = ck.files[other].path.to_string();
                ck.report(
                    *idx,
                    key,
                    ProblemKind::DuplicateAlias,
                    format!(
                        "`{name}` finds `{}` in `{other_path}` instead: its words name that GPU too",
                        m.chosen.name
                    ),
                );
            }
        }
    }
}

fn python_exists(python: &[(usize, PythonRelease)], tag: &PythonTag) -> bool {
    python
        .iter()
        .any(|(_, p)| p.version.release() == [u64::from(tag.major), u64::from(tag.minor)])
}

fn check_torch(ck: &mut Checker<'_>, recs: &Records) {
    let (records, python) = (&recs.torch, &recs.python);
    for (idx, t) in records {
        let idx = *idx;
        ck.sources(idx, &KeyPath::default(), &t.sources, true);
        ck.checked(idx, t.checked);
        ck.stem(idx, &t.version.to_string());
        if t.version.is_local() {
            ck.report(
                idx,
                KeyPath::key("version"),
                ProblemKind::BadValue,
                "a release has no local segment; builds are `variants`",
            );
        }
        check_torch_glibc(ck, idx, t);
        for (i, tag) in t.python.iter().enumerate() {
            if !python_exists(python, tag) {
                ck.report(
                    idx,
                    KeyPath::key("python").index(i),
                    ProblemKind::DanglingReference,
                    format!("no Python {} record", tag.version()),
                );
            }
        }
        if t.variants.is_empty() {
            ck.report(
                idx,
                KeyPath::key("variants"),
                ProblemKind::MissingKey,
                "a release has at least one build",
            );
        }
        if t.variant(t.pypi_default).is_none() {
            ck.report(
                idx,
                KeyPath::key("pypi_default"),
                ProblemKind::DanglingReference,
                format!("`{}` is not one of the variants", t.pypi_default),
            );
        }
        check_torch_platforms(ck, idx, t);
        let mut tags: Vec<Variant> = Vec::new();
        for (i, v) in t.variants.iter().enumerate() {
            check_torch_variant(ck, idx, i, v, &mut tags, recs);
        }
    }
    duplicates(ck, records, |r| r.version.clone(), "version");
}

/// An architecture list: each named once.
fn check_arch_list(ck: &mut Checker<'_>, idx: usize, at: &KeyPath, list: &[HostArch]) {
    for (i, a) in list.iter().enumerate() {
        if list[..i].contains(a) {
            ck.report(
                idx,
                at.index(i),
                ProblemKind::DuplicateId,
                format!("`{a}` is listed twice"),
            );
        }
    }
}

/// Where a release's CUDA wheels exist: PyPI's default build (on x86_64 always: no torch
/// release lacks it), each CUDA build's index, and the tag of PyPI's aarch64 wheels.
fn check_torch_platforms(ck: &mut Checker<'_>, idx: usize, t: &TorchRelease) {
    let at = KeyPath::key("pypi_platforms");
    if t.pypi_platforms.is_empty() {
        ck.report(
            idx,
            at.clone(),
            ProblemKind::MissingKey,
            "say on which architectures PyPI's wheel is the default build: `pypi_platforms = [\"x86_64\"]`, with `\"aarch64\"` where PyPI's aarch64 wheel is a CUDA build too",
        );
    } else if !t.pypi_platforms.contains(&HostArch::X86_64) {
        ck.report(
            idx,
            at.clone(),
            ProblemKind::BadValue,
            "PyPI's Linux x86_64 wheel is the default build of every torch release: list `x86_64`",
        );
    }
    check_arch_list(ck, idx, &at, &t.pypi_platforms);
    if let Some(m) = &t.manylinux_aarch64 {
        if !m.as_str().ends_with("_aarch64") {
            ck.report(
                idx,
                KeyPath::key("manylinux_aarch64"),
                ProblemKind::BadValue,
                format!("`{m}` is not an aarch64 platform tag (`manylinux_2_28_aarch64`)"),
            );
        }
    }
    if t.pypi_platforms.contains(&HostArch::Aarch64) && t.manylinux_aarch64.is_none() {
        ck.report(
            idx,
            KeyPath::key("manylinux_aarch64"),
            ProblemKind::MissingKey,
            "PyPI has aarch64 wheels of this release: give their platform tag",
        );
    }
}

/// A torch release's glibc floor: said where it comes from, and not below its wheels' tag.
fn check_torch_glibc(ck: &mut Checker<'_>, idx: usize, t: &TorchRelease) {
    match (&t.glibc, &t.glibc_from) {
        (Some(g), Some(_)) => {
            let tag = t.manylinux.glibc();
            if *g < tag {
                ck.report(
                    idx,
                    KeyPath::key("glibc"),
                    ProblemKind::Inconsistent,
                    format!(
                        "glibc {g} is below what the `{}` tag already needs ({tag}): pip refuses the wheels there",
                        t.manylinux
                    ),
                );
            }
        }
        (Some(_), None) => ck.report(
            idx,
            KeyPath::key("glibc"),
            ProblemKind::MissingKey,
            "say where the glibc floor comes from: `glibc_from = \"wheel-symbols\"` or `\"release-notes\"`",
        ),
        (None, Some(_)) => ck.report(
            idx,
            KeyPath::key("glibc_from"),
            ProblemKind::Inconsistent,
            "`glibc_from` without a `glibc`",
        ),
        (None, None) => {}
    }
}

/// One build of a torch release: listed once, its index, its Pythons, and what a CPU or a
/// CUDA build may say.
fn check_torch_variant(
    ck: &mut Checker<'_>,
    idx: usize,
    i: usize,
    v: &TorchVariant,
    tags: &mut Vec<Variant>,
    recs: &Records,
) {
    let (cuda, cudnn, python) = (&recs.cuda, &recs.cudnn, &recs.python);
    let at = KeyPath::key("variants").index(i);
    ck.sources(idx, &at, &v.sources, false);
    if tags.contains(&v.tag) {
        ck.report(
            idx,
            at.join("tag"),
            ProblemKind::DuplicateId,
            format!("variant `{}` is listed twice", v.tag),
        );
    }
    tags.push(v.tag);
    if !v.index_url.starts_with("https://") {
        ck.report(
            idx,
            at.join("index_url"),
            ProblemKind::BadValue,
            "the index is an https:// address",
        );
    }
    for (j, tag) in v.python.iter().flatten().enumerate() {
        if !python_exists(python, tag) {
            ck.report(
                idx,
                at.join("python").index(j),
                ProblemKind::DanglingReference,
                format!("no Python {} record", tag.version()),
            );
        }
    }
    check_arch_list(ck, idx, &at.join("platforms"), &v.platforms);
    if v.tag.is_cuda() && v.platforms.is_empty() {
        ck.report(
            idx,
            at.join("platforms"),
            ProblemKind::MissingKey,
            format!(
                "say which architectures the `{}` index serves wheels of this build for: `platforms = [\"x86_64\"]`, with `\"aarch64\"` where it has aarch64 (sbsa) CUDA wheels",
                v.tag
            ),
        );
    }
    match v.tag {
        Variant::Cpu => {
            let cuda_only = [
                ("cuda", v.cuda.is_some()),
                ("cudart", v.cudart.is_some()),
                ("cudnn", v.cudnn.is_some()),
                ("nccl", v.nccl.is_some()),
                ("sass", !v.sass.is_empty()),
                ("ptx", !v.ptx.is_empty()),
            ];
            for (field, present) in cuda_only {
                if present {
                    ck.report(
                        idx,
                        at.join(field),
                        ProblemKind::Inconsistent,
                        format!("a `cpu` build has no `{field}`"),
                    );
                }
            }
        }
        Variant::Cuda { .. } => check_cuda_variant(ck, idx, &at, v, cuda, cudnn),
    }
}

fn check_cuda_variant(
    ck: &mut Checker<'_>,
    idx: usize,
    at: &KeyPath,
    v: &TorchVariant,
    cuda: &[(usize, CudaRelease)],
    cudnn: &[(usize, CudnnRelease)],
) {
    let expected = v.tag.cuda().expect("a cuda variant has a CUDA version");
    let Some(c) = &v.cuda else {
        ck.report(
            idx,
            at.join("cuda"),
            ProblemKind::MissingKey,
            format!("a `{}` build names its CUDA version", v.tag),
        );
        return;
    };
    if c.major_minor() != expected.major_minor() {
        ck.report(
            idx,
            at.join("cuda"),
            ProblemKind::Inconsistent,
            format!("`{}` is CUDA {expected}, not {c}", v.tag),
        );
    }
    if let Some(rt) = &v.cudart {
        if rt.major_minor() != c.major_minor() {
            ck.report(
                idx,
                at.join("cudart"),
                ProblemKind::Inconsistent,
                format!("cudart {rt} is not CUDA {c}"),
            );
        } else if names_toolkit_release(rt) && !cuda.iter().any(|(_, r)| &r.version == rt) {
            // A pinned `cuda-toolkit` meta-package (`13.0.3`) names a toolkit release;
            // the runtime component's own numbering (`12.1.105`) names none.
            ck.report(
                idx,
                at.join("cudart"),
                ProblemKind::DanglingReference,
                format!("cudart {rt} names CUDA toolkit release {rt}, which has no `cuda/{rt}.toml` record"),
            );
        }
    }
    let toolkits: Vec<&CudaRelease> = cuda
        .iter()
        .map(|(_, r)| r)
        .filter(|r| r.version.major_minor() == c.major_minor())
        .collect();
    if toolkits.is_empty() {
        ck.report(
            idx,
            at.join("cuda"),
            ProblemKind::DanglingReference,
            format!("no CUDA {c} toolkit record"),
        );
    } else {
        // The wheel's SASS was compiled by that toolkit's nvcc, so each arch must be one of its
        // targets. Toolkits whose arch list is pending cannot tell; a line of only those is
        // not checked (the resolver does not use such a line).
        let toolkits: Vec<&CudaRelease> = toolkits.into_iter().filter(|t| !t.is_pending("sass")).collect();
        let lists = if toolkits.is_empty() {
            Vec::new()
        } else {
            vec![("sass", &v.sass), ("ptx", &v.ptx)]
        };
        for (field, list) in lists {
            for (j, cc) in list.iter().enumerate() {
                let supported = toolkits.iter().any(|t| {
                    t.sass.contains(cc) || t.sass.contains(&ComputeCapability::new(cc.major, cc.minor))
                });
                if !supported {
                    ck.report(
                        idx,
                        at.join(field).index(j),
                        ProblemKind::Inconsistent,
                        format!("{} is not a target of CUDA {c}'s nvcc", cc.sm()),
                    );
                }
            }
        }
    }
    if let Some(d) = &v.cudnn {
        if !cudnn.iter().any(|(_, r)| &r.version == d) {
            ck.report(
                idx,
                at.join("cudnn"),
                ProblemKind::DanglingReference,
                format!("no cuDNN {d} record"),
            );
        }
    }
}

/// Whether a `cudart` value is a toolkit release (`13.0.3`: the `cuda-toolkit`
/// meta-package a CUDA 13 wheel pins) rather than the runtime component's own version
/// (`12.1.105`, `13.0.96`). NVIDIA numbers a toolkit's patch by its update (0 to a
/// handful), a component's by its build (29 and up for every `nvidia-cuda-runtime`
/// release on PyPI), so a patch below 10 is a toolkit release. CUDA 10.2.89, whose
/// toolkit carries a build number, predates both.
fn names_toolkit_release(v: &CudaVersion) -> bool {
    matches!(v.parts(), [major, _, patch] if *major >= 11 && *patch < 10)
}

/// Whether a CUDA reference resolves at the precision it is written in: `12.6` needs a
/// toolkit of that line, `12.6.2` that exact release.
fn cuda_resolves(cuda: &[(usize, CudaRelease)], v: &CudaVersion) -> bool {
    if v.parts().len() >= 3 {
        cuda.iter().any(|(_, r)| &r.version == v)
    } else {
        has_cuda_minor(cuda, v)
    }
}

/// What an image record names: its CUDA, cuDNN, minimum driver, forward-compatibility
/// branches, Python and torch, each of which must have a record.
fn check_image_refs(ck: &mut Checker<'_>, idx: usize, im: &Image, recs: &Records) {
    let (cuda, cudnn, python, torch, drivers) =
        (&recs.cuda, &recs.cudnn, &recs.python, &recs.torch, &recs.drivers);
    if let Some(c) = &im.cuda {
        let found = match im.family {
            ImageFamily::NvidiaCuda => cuda.iter().any(|(_, r)| &r.version == c),
            _ => cuda_resolves(cuda, c),
        };
        if !found {
            ck.report(
                idx,
                KeyPath::key("cuda"),
                ProblemKind::DanglingReference,
                format!("no CUDA {c} toolkit record"),
            );
        }
    }
    if let Some(d) = &im.cudnn {
        if !cudnn.iter().any(|(_, r)| &r.version == d) {
            ck.report(
                idx,
                KeyPath::key("cudnn"),
                ProblemKind::DanglingReference,
                format!("no cuDNN {d} record"),
            );
        }
    }
    if let Some(d) = &im.min_driver {
        if !drivers.is_empty() && !drivers.iter().any(|(_, b)| b.branch == d.branch()) {
            ck.report(
                idx,
                KeyPath::key("min_driver"),
                ProblemKind::DanglingReference,
                format!(
                    "driver {d} is of branch R{}, which has no `driver/r{}.toml` record",
                    d.branch(),
                    d.branch()
                ),
            );
        }
    }
    for (i, d) in im.forward_compat.iter().enumerate() {
        let at = KeyPath::key("forward_compat").index(i);
        if im.family != ImageFamily::Ngc {
            ck.report(
                idx,
                at.clone(),
                ProblemKind::Inconsistent,
                "only an NGC release ships the cuda-compat libraries `forward_compat` is about",
            );
        }
        if !drivers.is_empty() && !drivers.iter().any(|(_, b)| b.branch == d.branch()) {
            ck.report(
                idx,
                at.clone(),
                ProblemKind::DanglingReference,
                format!(
                    "driver {d} is of branch R{}, which has no `driver/r{}.toml` record",
                    d.branch(),
                    d.branch()
                ),
            );
        }
        if im.min_driver.as_ref().is_some_and(|m| d.branch() >= m.branch()) {
            ck.report(
                idx,
                at,
                ProblemKind::Inconsistent,
                format!(
                    "R{} is not older than the branch of min_driver: forward compatibility is for branches the image's CUDA is too new for",
                    d.branch()
                ),
            );
        }
    }
    if let Some(p) = &im.python {
        let xy = &p.release()[..p.release().len().min(2)];
        if !python.iter().any(|(_, r)| r.version.release() == xy) {
            ck.report(
                idx,
                KeyPath::key("python"),
                ProblemKind::DanglingReference,
                format!("no Python {p} record"),
            );
        }
    }
    // NGC ships pre-release builds of torch (2.5.0a0+872d972e41) that are no PyPI release.
    if let (Some(t), ImageFamily::Pytorch) = (&im.torch, im.family) {
        if !torch.iter().any(|(_, r)| r.version == public(t)) {
            ck.report(
                idx,
                KeyPath::key("torch"),
                ProblemKind::DanglingReference,
                format!("no torch {t} record"),
            );
        }
    }
}

/// `docker://REGISTRY/REPOSITORY@sha256:<64 lower-case hex digits>`: an image named by
/// the digest of its manifest, whose registry names a host (a `.`, a `:` port, or
/// `localhost`) so that the reference reads the same wherever it is resolved, and without a
/// tag, which could move.
fn pinned_image(url: &str) -> bool {
    let Some((name, hex)) = url
        .strip_prefix("docker://")
        .and_then(|rest| rest.split_once("@sha256:"))
    else {
        return false;
    };
    let Some((registry, repository)) = name.split_once('/') else {
        return false;
    };
    let host = registry.contains('.') || registry.contains(':') || registry == "localhost";
    let component = |c: &str| {
        !c.is_empty()
            && c.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'))
    };
    host && repository.split('/').all(component)
        && hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn check_images(ck: &mut Checker<'_>, recs: &Records) {
    let records = &recs.images;
    for (idx, im) in records {
        let idx = *idx;
        ck.sources_of(idx, &KeyPath::default(), &im.sources, true, true);
        ck.checked(idx, im.checked);
        let (need_tag, need_torch, need_cuda, repo) = match im.family {
            ImageFamily::NvidiaCuda => (false, false, true, "nvidia/cuda"),
            ImageFamily::Pytorch => (true, true, false, "pytorch/pytorch"),
            ImageFamily::Ngc => (true, true, true, "nvcr.io/nvidia/pytorch"),
        };
        if im.repository != repo {
            ck.report(
                idx,
                KeyPath::key("repository"),
                ProblemKind::Inconsistent,
                format!("a `{}` image lives in `{repo}`", family_name(im.family)),
            );
        }
        if need_tag && im.tag.is_none() {
            ck.report(
                idx,
                KeyPath::key("tag"),
                ProblemKind::MissingKey,
                format!("a `{}` image record names its tag", family_name(im.family)),
            );
        }
        if !need_tag && im.tag.is_some() {
            ck.report(
                idx,
                KeyPath::key("tag"),
                ProblemKind::Inconsistent,
                "an `nvidia/cuda` record is a family of tags: give `flavors` and `os` instead",
            );
        }
        if im.family == ImageFamily::NvidiaCuda && (im.flavors.is_empty() || im.os.is_empty()) {
            ck.report(
                idx,
                KeyPath::key("flavors"),
                ProblemKind::MissingKey,
                "an `nvidia/cuda` family lists its `flavors` and `os`",
            );
        }
        if need_torch && im.torch.is_none() {
            ck.report(
                idx,
                KeyPath::key("torch"),
                ProblemKind::MissingKey,
                "this image's torch version is required",
            );
        }
        if need_cuda && im.cuda.is_none() {
            ck.report(
                idx,
                KeyPath::key("cuda"),
                ProblemKind::MissingKey,
                "this image's CUDA version is required",
            );
        }
        check_image_refs(ck, idx, im, recs);
    }
    duplicates(
        ck,
        records,
        |im| match &im.tag {
            Some(tag) => format!("{}:{tag}", im.repository),
            None => format!(
                "{}:{}",
                im.repository,
                im.cuda.as_ref().map_or("?", |c| c.as_str())
            ),
        },
        "tag",
    );
}

fn family_name(f: ImageFamily) -> &'static str {
    match f {
        ImageFamily::NvidiaCuda => "nvidia-cuda",
        ImageFamily::Pytorch => "pytorch",
        ImageFamily::Ngc => "ngc",
    }
}

/// A package's name: a Python project name, written PEP 503 normalized. Returns that form.
fn check_package_name(ck: &mut Checker<'_>, idx: usize, name: &str) -> String {
    let normalized = normalize_name(name);
    let well_formed = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !well_formed {
        ck.report(
            idx,
            KeyPath::key("name"),
            ProblemKind::BadValue,
            format!(
                "`{}` is not a Python project name: letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit",
                name
            ),
        );
    } else if normalized != name {
        ck.report(
            idx,
            KeyPath::key("name"),
            ProblemKind::BadValue,
            format!("write the name PEP 503 normalized, `{normalized}`: every spelling of it is matched"),
        );
    }
    normalized
}

/// A package's environment variables: well-formed names, each listed once.
fn check_package_env(ck: &mut Checker<'_>, idx: usize, env: &[crate::db::BuildEnv]) {
    let mut names: Vec<&str> = Vec::new();
    for (i, e) in env.iter().enumerate() {
        let at = KeyPath::key("env").index(i);
        let valid = e.name.starts_with(|c: char| c.is_ascii_uppercase() || c == '_')
            && e.name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if !valid {
            ck.report(
                idx,
                at.join("name"),
                ProblemKind::BadValue,
                format!(
                    "`{}` is not an environment variable name: upper-case letters, digits and `_`",
                    e.name
                ),
            );
        }
        if names.contains(&e.name.as_str()) {
            ck.report(
                idx,
                at.join("name"),
                ProblemKind::DuplicateId,
                format!("`{}` is listed twice", e.name),
            );
        }
        names.push(&e.name);
    }
}

/// Framework records: a normalized name, each release once, a metadata address for each
/// (the fact's source), extras named as PEP 685 normalizes them, and no release both read
/// and listed as unread.
fn check_frameworks(ck: &mut Checker<'_>, records: &[(usize, Framework)]) {
    for (idx, r) in records {
        let idx = *idx;
        ck.sources(idx, &KeyPath::default(), &r.sources, true);
        ck.checked(idx, r.checked);
        let normalized = check_package_name(ck, idx, &r.name);
        ck.stem(idx, &normalized);
        for (i, rel) in r.releases.iter().enumerate() {
            let at = KeyPath::key("releases").index(i);
            if r.releases[..i].iter().any(|o| o.version == rel.version) {
                ck.report(
                    idx,
                    at.join("version"),
                    ProblemKind::DuplicateId,
                    format!("release {} is listed twice", rel.version),
                );
            }
            if !rel.metadata.starts_with("https://") {
                ck.report(
                    idx,
                    at.join("metadata"),
                    ProblemKind::MissingSources,
                    format!(
                        "`metadata` is the https:// address of the wheel metadata read, not `{}`",
                        rel.metadata
                    ),
                );
            }
            for extra in rel.torch_extras.keys() {
                if normalize_name(extra) != *extra {
                    ck.report(
                        idx,
                        at.join("torch_extras"),
                        ProblemKind::BadValue,
                        format!(
                            "write the extra `{extra}` normalized, `{}`",
                            normalize_name(extra)
                        ),
                    );
                }
            }
            if r.unread.contains(&rel.version) {
                ck.report(
                    idx,
                    KeyPath::key("unread"),
                    ProblemKind::Inconsistent,
                    format!("release {} is both read (`releases`) and `unread`", rel.version),
                );
            }
        }
    }
}

fn check_packages(ck: &mut Checker<'_>, records: &[(usize, Package)]) {
    for (idx, r) in records {
        let idx = *idx;
        ck.sources(idx, &KeyPath::default(), &r.sources, true);
        ck.checked(idx, r.checked);
        let normalized = check_package_name(ck, idx, &r.name);
        ck.stem(idx, &normalized);
        let needs_prebuilt = matches!(r.compiles, Compiles::UnlessPrebuilt | Compiles::FromSource);
        if needs_prebuilt && r.prebuilt.is_none() {
            ck.report(
                idx,
                KeyPath::key("prebuilt"),
                ProblemKind::MissingKey,
                "say where the prebuilt binaries come from and what they must match",
            );
        }
        if r.compiles == Compiles::Always && r.prebuilt.is_some() {
            ck.report(
                idx,
                KeyPath::key("prebuilt"),
                ProblemKind::Inconsistent,
                "a package that always compiles has no prebuilt binaries",
            );
        }
        let asks = r.env.iter().any(|e| e.role == EnvRole::Build) || !r.build_options.is_empty();
        if r.compiles == Compiles::OnRequest && !asks {
            ck.report(
                idx,
                KeyPath::key("compiles"),
                ProblemKind::Inconsistent,
                "an `on-request` package names what asks for compiling: an `env` of role `build` or `build_options`",
            );
        }
        if r.jit && r.compiles != Compiles::OnRequest {
            ck.report(
                idx,
                KeyPath::key("jit"),
                ProblemKind::Inconsistent,
                "only an `on-request` package leaves compiling to first use",
            );
        }
        for (i, o) in r.build_options.iter().enumerate() {
            if !o.starts_with("--") || o.len() < 3 || o.chars().any(char::is_whitespace) {
                ck.report(
                    idx,
                    KeyPath::key("build_options").index(i),
                    ProblemKind::BadValue,
                    format!("`{o}` is not a build option: `--name`, without spaces"),
                );
            }
        }
        for (i, b) in r.build_requires.iter().enumerate() {
            let n = normalize_name(b);
            let well_formed = !b.is_empty()
                && b.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if !well_formed || n != *b {
                ck.report(
                    idx,
                    KeyPath::key("build_requires").index(i),
                    ProblemKind::BadValue,
                    format!("`{b}` is not a PEP 503 normalized project name"),
                );
            }
        }
        check_package_env(ck, idx, &r.env);
    }
    duplicates(ck, records, |r| normalize_name(&r.name), "name");
}

/// A GPU gpuenv does not serve: sourced, dated, with a vendor and a stack, in the file
/// named by its name's slug, and no name of it also a name of an NVIDIA record (or of
/// another such GPU), which would make that name mean two things.
fn check_foreign_gpus(ck: &mut Checker<'_>, records: &[(usize, ForeignGpu)], gpus: &[(usize, Gpu)]) {
    let nvidia: Vec<Gpu> = gpus.iter().map(|(_, g)| g.clone()).collect();
    let mut names: HashMap<String, usize> = HashMap::new();
    for (idx, f) in records {
        let idx = *idx;
        ck.sources(idx, &KeyPath::default(), &f.sources, true);
        ck.checked(idx, f.checked);
        ck.stem(idx, &slug(&f.name));
        for (key, value) in [("name", &f.name), ("vendor", &f.vendor), ("stack", &f.stack)] {
            if value.trim().is_empty() {
                ck.report(
                    idx,
                    KeyPath::key(key),
                    ProblemKind::BadValue,
                    format!("`{key}` is empty: say what the vendor's page gives"),
                );
            }
        }
        if f.vendor.trim().eq_ignore_ascii_case("nvidia") {
            ck.report(
                idx,
                KeyPath::key("vendor"),
                ProblemKind::Inconsistent,
                "an NVIDIA GPU is a `gpu/` record, not a foreign one",
            );
        }
        let all = std::iter::once((KeyPath::key("name"), &f.name)).chain(
            f.aliases
                .iter()
                .enumerate()
                .map(|(i, a)| (KeyPath::key("aliases").index(i), a)),
        );
        for (key, name) in all {
            if let Some(m) = super::lookup::match_gpu(&nvidia, name) {
                ck.report(
                    idx,
                    key.clone(),
                    ProblemKind::DuplicateAlias,
                    format!("`{name}` also names the NVIDIA `{}`", m.chosen.name),
                );
            }
            let n = normalize(name);
            if n.is_empty() {
                ck.report(idx, key, ProblemKind::BadValue, "a name needs letters or digits");
                continue;
            }
            match names.get(&n) {
                Some(other) if *other != idx => {
                    let other_path = ck.files[*other].path.to_string();
                    ck.report(
                        idx,
                        key,
                        ProblemKind::DuplicateAlias,
                        format!("`{name}` also names a GPU in `{other_path}`"),
                    );
                }
                _ => {
                    names.insert(n, idx);
                }
            }
        }
    }
}

/// An XID record: sourced, dated, with a description and an action, in the file named by
/// its code (so no code has two records).
fn check_xids(ck: &mut Checker<'_>, records: &[(usize, Xid)]) {
    for (idx, x) in records {
        let idx = *idx;
        ck.sources(idx, &KeyPath::default(), &x.sources, true);
        ck.checked(idx, x.checked);
        ck.stem(idx, &x.code.to_string());
        for (key, value) in [
            ("mnemonic", &x.mnemonic),
            ("description", &x.description),
            ("action", &x.action),
        ] {
            if value.trim().is_empty() {
                ck.report(
                    idx,
                    KeyPath::key(key),
                    ProblemKind::BadValue,
                    format!("`{key}` is empty: say what NVIDIA's catalog gives"),
                );
            }
        }
    }
}

/// A model record: its shape is whole and consistent, `params` (and `active_params`) equal
/// the count the shape gives, and every name finds only its own record.
/// An efficiency record: a metric that has a datasheet fact, a sane range, and one record
/// per metric and scope (two that both hold for a GPU would make the verdict depend on file
/// order).
fn check_efficiencies(ck: &mut Checker<'_>, records: &[(usize, Efficiency)]) {
    for (idx, r) in records {
        let idx = *idx;
        ck.sources(idx, &KeyPath::default(), &r.sources, true);
        ck.checked(idx, r.checked);
        if !Efficiency::METRICS.contains(&r.metric.as_str()) {
            ck.report(
                idx,
                KeyPath::key("metric"),
                ProblemKind::BadValue,
                format!(
                    "`{}` is not a bench metric with a datasheet fact; expected one of {}",
                    crate::text::excerpt(&r.metric),
                    Efficiency::METRICS.join(", ")
                ),
            );
        }
        // A share above 2 of a datasheet figure is a unit mistake, not a measurement
        // (NCCL's NVLink SHARP busbw, the highest published, is about 1.07 of a direction).
        let share = |v: f64| v.is_finite() && v > 0.0 && v <= 2.0;
        if !share(r.pass_min) {
            ck.report(
                idx,
                KeyPath::key("pass_min"),
                ProblemKind::BadValue,
                "a share of the datasheet figure above 0 and at most 2 (`0.7`)",
            );
        }
        if !share(r.warn_min) {
            ck.report(
                idx,
                KeyPath::key("warn_min"),
                ProblemKind::BadValue,
                "a share of the datasheet figure above 0 and at most 2 (`0.55`)",
            );
        } else if share(r.pass_min) && r.warn_min >= r.pass_min {
            ck.report(
                idx,
                KeyPath::key("warn_min"),
                ProblemKind::Inconsistent,
                format!("warn_min {} must be below pass_min {}", r.warn_min, r.pass_min),
            );
        }
        if let Some(f) = r.basis_factor {
            if !(f.is_finite() && f > 0.0 && f <= 4.0) {
                ck.report(
                    idx,
                    KeyPath::key("basis_factor"),
                    ProblemKind::BadValue,
                    "a factor above 0 and at most 4 (`0.5`)",
                );
            }
        }
        if r.measured.trim().is_empty() {
            ck.report(
                idx,
                KeyPath::key("measured"),
                ProblemKind::BadValue,
                "name the published measurement the range rests on",
            );
        }
    }
    duplicates(
        ck,
        records,
        |r| {
            let mut arch: Vec<String> = r.architectures.iter().map(|a| format!("{a:?}")).collect();
            arch.sort();
            format!("{} for [{}] nvlink {:?}", r.metric, arch.join(", "), r.nvlink)
        },
        "metric",
    );
}

fn check_models(ck: &mut Checker<'_>, records: &[(usize, Model)]) {
    let mut names: HashMap<String, (usize, String)> = HashMap::new();
    for (idx, m) in records {
        let idx = *idx;
        ck.sources(idx, &KeyPath::default(), &m.sources, true);
        ck.checked(idx, m.checked);
        ck.stem(idx, &slug(&m.name));
        check_model_shape(ck, idx, m);
        let all = std::iter::once((KeyPath::key("name"), &m.name)).chain(
            m.aliases
                .iter()
                .enumerate()
                .map(|(i, a)| (KeyPath::key("aliases").index(i), a)),
        );
        for (key, name) in all {
            let keys = super::lookup::model_keys(name);
            if keys.is_empty() {
                ck.report(idx, key, ProblemKind::BadValue, "a name needs letters or digits");
                continue;
            }
            for k in keys {
                match names.get(&k) {
                    Some((other, other_name)) if *other != idx => {
                        let other_path = ck.files[*other].path.to_string();
                        ck.report(
                            idx,
                            key.clone(),
                            ProblemKind::DuplicateAlias,
                            format!("`{name}` also names `{other_name}` in `{other_path}`"),
                        );
                        break;
                    }
                    Some(_) => {}
                    None => {
                        names.insert(k, (idx, m.name.clone()));
                    }
                }
            }
        }
    }
}

fn check_model_shape(ck: &mut Checker<'_>, idx: usize, m: &Model) {
    if !Model::MODEL_TYPES.contains(&m.model_type.as_str()) {
        ck.report(
            idx,
            KeyPath::key("model_type"),
            ProblemKind::BadValue,
            format!(
                "`{}` is not a model type whose weights gpuenv counts (one of: {})",
                m.model_type,
                Model::MODEL_TYPES.join(", ")
            ),
        );
        return;
    }
    for (key, v) in [
        ("params", Some(m.params)),
        ("active_params", m.active_params),
        ("max_position", m.max_position),
    ] {
        if v == Some(0) {
            ck.report(
                idx,
                KeyPath::key(key),
                ProblemKind::BadValue,
                format!("`{key}` must be at least 1"),
            );
            return;
        }
    }
    // A key the count does not read is a typo or a fact kept nowhere else: either way
    // the count would not see it.
    check_config_keys(ck, idx, &KeyPath::key("config"), &m.config);
    let c = match m.count() {
        Ok(c) => c,
        Err(e) => {
            ck.report(idx, KeyPath::key("config"), ProblemKind::BadValue, e);
            return;
        }
    };
    if c.heads % c.kv_heads != 0 {
        ck.report(
            idx,
            KeyPath::key("config").join("num_key_value_heads"),
            ProblemKind::Inconsistent,
            format!(
                "{} attention heads do not group evenly over {} key/value heads",
                c.heads, c.kv_heads
            ),
        );
    }
    if c.params != m.params {
        ck.report(
            idx,
            KeyPath::key("params"),
            ProblemKind::Inconsistent,
            format!(
                "params {} is not the {} the config gives (a `{}` model's embeddings, {}per-layer attention, MLP{} and norms)",
                m.params,
                c.params,
                c.model_type,
                if c.tied_embeddings { "" } else { "output head, " },
                if c.experts.is_some() { " experts" } else { "" }
            ),
        );
    }
    match (m.active_params, c.experts) {
        (Some(active), Some(e)) => {
            if active != c.active_params {
                ck.report(
                    idx,
                    KeyPath::key("active_params"),
                    ProblemKind::Inconsistent,
                    format!(
                        "active_params {active} is not the {} the config gives with {} of {e} experts",
                        c.active_params,
                        c.experts_per_token.unwrap_or(0),
                    ),
                );
            }
        }
        (None, Some(_)) => ck.report(
            idx,
            KeyPath::key("active_params"),
            ProblemKind::Inconsistent,
            format!(
                "the config is a mixture of experts: `active_params` is required ({})",
                c.active_params
            ),
        ),
        (Some(_), None) => ck.report(
            idx,
            KeyPath::key("active_params"),
            ProblemKind::Inconsistent,
            format!(
                "`active_params` is for a mixture of experts; this `{}` config is dense",
                c.model_type
            ),
        ),
        (None, None) => {}
    }
}

/// Reports the keys of a record's `[config]` (and its nested tables) the count never reads.
fn check_config_keys(
    ck: &mut Checker<'_>,
    idx: usize,
    at: &KeyPath,
    table: &serde_json::Map<String, serde_json::Value>,
) {
    for (key, value) in table {
        if !crate::model::hf_config::READ_KEYS.contains(&key.as_str()) {
            ck.report(
                idx,
                at.join(key),
                ProblemKind::UnknownKey,
                "not a config.json key the parameter count reads",
            );
        } else if let serde_json::Value::Object(inner) = value {
            check_config_keys(ck, idx, &at.join(key), inner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::pinned_image;

    #[test]
    fn an_image_pinned_by_digest_is_a_source() {
        let hex = "0123456789abcdef".repeat(4);
        assert!(pinned_image(&format!(
            "docker://nvcr.io/nvidia/pytorch@sha256:{hex}"
        )));
        assert!(pinned_image(&format!(
            "docker://127.0.0.1:5555/a/pytorch@sha256:{hex}"
        )));
        assert!(pinned_image(&format!("docker://localhost/pytorch@sha256:{hex}")));
        // A tag could move; a short or upper-case digest is no digest; the registry is named.
        for bad in [
            format!("docker://nvcr.io/nvidia/pytorch:25.01-py3@sha256:{hex}"),
            "docker://nvcr.io/nvidia/pytorch:25.01-py3".to_string(),
            format!("docker://nvcr.io/nvidia/pytorch@sha256:{}", &hex[..63]),
            format!("docker://nvcr.io/nvidia/pytorch@sha256:{}", hex.to_uppercase()),
            format!("docker://nvidia/pytorch@sha256:{hex}"),
            format!("nvcr.io/nvidia/pytorch@sha256:{hex}"),
            format!("docker://nvcr.io/@sha256:{hex}"),
        ] {
            assert!(!pinned_image(&bad), "{bad}");
        }
    }
}
