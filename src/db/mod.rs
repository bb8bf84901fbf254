//! The compat database: records of Python, torch, CUDA, cuDNN, drivers, GPUs, images, the
//! packages that compile CUDA code when installed, and the shapes of well-known models.
//!
//! Owns: reading `compat-db/` (compiled into the binary, or `--db DIR`), checking it
//! (strict, typed, every problem with file, line and key), and finding records by name.
//! Must not: decide compatibility (that is `resolve`), print (that is `report`), or reach
//! the network.
//!
//! Loading and linting are one pipeline: [`lint`] returns every problem, [`Db::load`]
//! refuses a database with any.

mod check;
mod lookup;
mod parse;
mod problem;
pub mod records;

use std::borrow::Cow;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::model::PartialDate;

pub use lookup::{Found, GpuMatch, GpuTextError, LookupError, match_gpu, model_key, normalize};
pub use problem::{KeyPath, Problem, ProblemKind, Seg};
pub use records::*;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded_db.rs"));
}

/// The kinds of record, one directory each under `compat-db/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// `python/3.12.toml`
    Python,
    /// `torch/2.4.1.toml`
    Torch,
    /// `cuda/12.4.0.toml`
    Cuda,
    /// `cudnn/9.1.0.70.toml`
    Cudnn,
    /// `driver/r535.toml`
    Driver,
    /// `gpu/h100-sxm.toml`
    Gpu,
    /// `image/ngc-24.08.toml`
    Image,
    /// `package/flash-attn.toml`
    Package,
    /// `framework/vllm.toml`: a package that pins torch.
    Framework,
    /// `model/llama-2-70b.toml`
    Model,
    /// `xid/79.toml`
    Xid,
    /// `efficiency/matmul-bf16.toml`: how much of a datasheet figure a measurement reaches.
    Efficiency,
    /// `foreign-gpu/amd-instinct-mi300x.toml`: a GPU gpuenv does not serve, named to refuse it.
    #[serde(rename = "foreign-gpu")]
    ForeignGpu,
}

impl Kind {
    /// Every kind, in the order reports list them.
    pub const ALL: [Kind; 13] = [
        Kind::Gpu,
        Kind::Driver,
        Kind::Cuda,
        Kind::Cudnn,
        Kind::Python,
        Kind::Torch,
        Kind::Image,
        Kind::Package,
        Kind::Framework,
        Kind::Model,
        Kind::Xid,
        Kind::Efficiency,
        Kind::ForeignGpu,
    ];

    /// The directory name, which is also the name on the command line.
    pub fn dir(&self) -> &'static str {
        match self {
            Kind::Python => "python",
            Kind::Torch => "torch",
            Kind::Cuda => "cuda",
            Kind::Cudnn => "cudnn",
            Kind::Driver => "driver",
            Kind::Gpu => "gpu",
            Kind::Image => "image",
            Kind::Package => "package",
            Kind::Framework => "framework",
            Kind::Model => "model",
            Kind::Xid => "xid",
            Kind::Efficiency => "efficiency",
            Kind::ForeignGpu => "foreign-gpu",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.dir())
    }
}

impl FromStr for Kind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Kind::ALL.into_iter().find(|k| k.dir() == s).ok_or_else(|| {
            let names: Vec<&str> = Kind::ALL.iter().map(|k| k.dir()).collect();
            format!("unknown kind `{s}`: expected one of {}", names.join(", "))
        })
    }
}

/// One record file: its path relative to the database root and its text.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// `cuda/12.4.0.toml`.
    pub path: String,
    /// The TOML text; `None` when the file could not be read as UTF-8.
    pub text: Option<Cow<'static, str>>,
}

/// The record files compiled into the binary.
pub fn embedded_files() -> Vec<SourceFile> {
    embedded::FILES
        .iter()
        .map(|(path, text)| SourceFile {
            path: (*path).to_string(),
            text: Some(Cow::Borrowed(*text)),
        })
        .collect()
}

/// Why a database could not be used.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// `--db DIR` names something that is not a readable directory of records.
    #[error("cannot read database directory `{}`: {reason}", crate::files::shown(.path))]
    Dir {
        /// The directory as given.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// `--db DIR` holds no record file at all: a typo'd or wrong folder, not an empty
    /// database to answer from.
    #[error(
        "`{}` holds no records: a database directory has one `<kind>/<id>.toml` file per record (as in compat-db/)",
        crate::files::shown(.path)
    )]
    Empty {
        /// The directory as given.
        path: PathBuf,
    },
    /// A record file of `--db DIR` was refused before it was parsed: not a regular file,
    /// too large, unreadable.
    #[error(transparent)]
    File(crate::files::ReadError),
    /// The records have problems; the first few are listed.
    #[error("{}", invalid_message(.0))]
    Invalid(Vec<Problem>),
}

impl DbError {
    /// Whether the input is at fault (exit 2) rather than the machine (exit 3).
    pub fn is_bad_input(&self) -> bool {
        match self {
            DbError::File(e) => e.is_bad_input(),
            _ => true,
        }
    }
}

fn invalid_message(problems: &[Problem]) -> String {
    invalid_lines(problems).join("\n")
}

fn invalid_lines(problems: &[Problem]) -> Vec<String> {
    let mut lines = vec![format!(
        "the database has {} problem{} (run `gpuenv db lint` for all of them):",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    )];
    lines.extend(problems.iter().take(5).map(|p| format!("  {p}")));
    lines
}

impl DbError {
    /// The message as lines when it is several by design (a broken database: a line per
    /// problem shown); `None` for a one-line message.
    pub fn lines(&self) -> Option<Vec<String>> {
        match self {
            DbError::Invalid(problems) => Some(invalid_lines(problems)),
            DbError::Dir { .. } | DbError::Empty { .. } | DbError::File(_) => None,
        }
    }
}

/// Reads every record file of a database directory. Files outside `<kind>/` directories,
/// other than documentation and the templates, are reported by the linter as layout
/// problems.
///
/// Bounded whatever the directory holds (see [`crate::files::limits`]): each record is a
/// regular file of at most `DB_RECORD` bytes (a FIFO or a device named `*.toml` is refused
/// without being read), at most `DB_RECORDS` of them and `DB_TOTAL` bytes in all, found
/// among at most `DB_ENTRIES` entries; links to folders are not followed. A directory with
/// no record file is refused ([`DbError::Empty`]).
pub fn read_dir(root: &Path) -> Result<Vec<SourceFile>, DbError> {
    let dir_err = |reason: String| DbError::Dir {
        path: root.to_path_buf(),
        reason,
    };
    let meta = fs_err::metadata(root).map_err(|e| dir_err(io_reason(&e)))?;
    if !meta.is_dir() {
        return Err(dir_err("not a directory".into()));
    }
    let mut walk = Walk {
        root,
        files: Vec::new(),
        entries: 0,
        bytes: 0,
    };
    walk.dir(root)?;
    let mut files = walk.files;
    if files.is_empty() {
        return Err(DbError::Empty {
            path: root.to_path_buf(),
        });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

fn io_reason(e: &std::io::Error) -> String {
    // fs-err puts the path in the message; the kind alone reads better after ours.
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such directory".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

/// One walk over a database directory, with what it has taken so far.
struct Walk<'a> {
    root: &'a Path,
    files: Vec<SourceFile>,
    entries: usize,
    bytes: u64,
}

impl Walk<'_> {
    fn over(&self, what: String) -> DbError {
        DbError::Dir {
            path: self.root.to_path_buf(),
            reason: format!("it holds {what}; a database has one small file per record"),
        }
    }

    fn dir(&mut self, dir: &Path) -> Result<(), DbError> {
        use crate::files::limits;
        let dir_err = |e: std::io::Error| DbError::Dir {
            path: self.root.to_path_buf(),
            reason: io_reason(&e),
        };
        for entry in fs_err::read_dir(dir).map_err(dir_err)? {
            let entry = entry.map_err(dir_err)?;
            self.entries += 1;
            if self.entries > limits::DB_ENTRIES {
                return Err(self.over(format!("more than {} entries", limits::DB_ENTRIES)));
            }
            let path = entry.path();
            let rel = path
                .strip_prefix(self.root)
                .unwrap_or(&path)
                .to_string_lossy()
                .replace('\\', "/");
            // Not followed: a link is read as what it is, so a link to a folder cannot loop.
            let ft = entry.file_type().map_err(dir_err)?;
            if ft.is_dir() {
                if rel != "templates" && !rel.starts_with('.') {
                    self.dir(&path)?;
                }
            } else if rel.ends_with(".toml") {
                if self.files.len() >= limits::DB_RECORDS {
                    return Err(self.over(format!("more than {} record files", limits::DB_RECORDS)));
                }
                let bytes = crate::files::read_bytes(&path, limits::DB_RECORD, "database record")
                    .map_err(DbError::File)?;
                self.bytes += bytes.len() as u64;
                if self.bytes > limits::DB_TOTAL {
                    return Err(self.over(format!(
                        "more than {} of records",
                        crate::files::bytes(limits::DB_TOTAL)
                    )));
                }
                self.files.push(SourceFile {
                    path: rel,
                    text: String::from_utf8(bytes).ok().map(Cow::Owned),
                });
            }
        }
        Ok(())
    }
}

/// The whole database, checked.
#[derive(Debug, Clone, Default)]
pub struct Db {
    /// Python release lines, oldest first.
    pub python: Vec<PythonRelease>,
    /// torch releases, oldest first.
    pub torch: Vec<TorchRelease>,
    /// CUDA toolkit releases, oldest first.
    pub cuda: Vec<CudaRelease>,
    /// cuDNN releases, oldest first.
    pub cudnn: Vec<CudnnRelease>,
    /// Driver branches, oldest first.
    pub drivers: Vec<DriverBranch>,
    /// GPUs, by id.
    pub gpus: Vec<Gpu>,
    /// Images, by id.
    pub images: Vec<Image>,
    /// Python packages whose installation compiles CUDA code, by name.
    pub packages: Vec<Package>,
    /// Packages that pin torch, by name.
    pub frameworks: Vec<Framework>,
    /// Models, by id.
    pub models: Vec<Model>,
    /// XIDs, by code.
    pub xids: Vec<Xid>,
    /// Expected efficiencies of measured figures (`gpuenv bench`), by id.
    pub efficiencies: Vec<Efficiency>,
    /// GPUs gpuenv does not serve, by id.
    pub foreign_gpus: Vec<ForeignGpu>,
}

static EMBEDDED: OnceLock<Result<Db, Vec<Problem>>> = OnceLock::new();

impl Db {
    /// Checks `files` and builds the database; any problem refuses it.
    pub fn load(files: &[SourceFile]) -> Result<Db, DbError> {
        let (db, problems) = check::build(files, None);
        let problems = bounded(problems);
        if problems.is_empty() {
            Ok(db)
        } else {
            Err(DbError::Invalid(problems))
        }
    }

    /// The database compiled into the binary, read once per process.
    ///
    /// Reads the JSON form the build wrote; its records were linted by the test suite, so
    /// the cross-record checks are not repeated on every run. Should it not read, the
    /// checked TOML path runs and reports why.
    pub fn embedded() -> Result<&'static Db, DbError> {
        EMBEDDED
            .get_or_init(|| match Db::from_json(embedded::JSON) {
                Some(db) => Ok(db),
                None => Db::load(&embedded_files()).map_err(|e| match e {
                    DbError::Invalid(p) => p,
                    other => vec![Problem {
                        file: String::new(),
                        line: None,
                        key: KeyPath::default(),
                        kind: ProblemKind::Syntax,
                        message: other.to_string(),
                    }],
                }),
            })
            .as_ref()
            .map_err(|p| DbError::Invalid(p.clone()))
    }

    /// Reads the build's `{kind: {id: record}}` JSON; `None` if any record does not read.
    fn from_json(text: &str) -> Option<Db> {
        use std::collections::BTreeMap;
        #[derive(serde::Deserialize)]
        struct Blob {
            #[serde(default)]
            python: BTreeMap<String, PythonRelease>,
            #[serde(default)]
            torch: BTreeMap<String, TorchRelease>,
            #[serde(default)]
            cuda: BTreeMap<String, CudaRelease>,
            #[serde(default)]
            cudnn: BTreeMap<String, CudnnRelease>,
            #[serde(default)]
            driver: BTreeMap<String, DriverBranch>,
            #[serde(default)]
            gpu: BTreeMap<String, Gpu>,
            #[serde(default)]
            image: BTreeMap<String, Image>,
            #[serde(default)]
            package: BTreeMap<String, Package>,
            #[serde(default)]
            framework: BTreeMap<String, Framework>,
            #[serde(default)]
            model: BTreeMap<String, Model>,
            #[serde(default)]
            xid: BTreeMap<String, Xid>,
            efficiency: BTreeMap<String, Efficiency>,
            #[serde(default, rename = "foreign-gpu")]
            foreign_gpu: BTreeMap<String, ForeignGpu>,
        }
        fn ids<T>(map: BTreeMap<String, T>, set: impl Fn(&mut T, String)) -> Vec<T> {
            map.into_iter()
                .map(|(id, mut r)| {
                    set(&mut r, id);
                    r
                })
                .collect()
        }
        let blob: Blob = serde_json::from_str(text).ok()?;
        let mut db = Db {
            python: ids(blob.python, |r, id| r.id = id),
            torch: ids(blob.torch, |r, id| r.id = id),
            cuda: ids(blob.cuda, |r, id| r.id = id),
            cudnn: ids(blob.cudnn, |r, id| r.id = id),
            drivers: ids(blob.driver, |r, id| r.id = id),
            gpus: ids(blob.gpu, |r, id| r.id = id),
            images: ids(blob.image, |r, id| r.id = id),
            packages: ids(blob.package, |r, id| r.id = id),
            frameworks: ids(blob.framework, |r, id| r.id = id),
            models: ids(blob.model, |r, id| r.id = id),
            xids: ids(blob.xid, |r, id| r.id = id),
            efficiencies: ids(blob.efficiency, |r, id| r.id = id),
            foreign_gpus: ids(blob.foreign_gpu, |r, id| r.id = id),
        };
        db.sort();
        Some(db)
    }

    /// Puts every kind in its documented order.
    pub(crate) fn sort(&mut self) {
        self.python.sort_by(|a, b| a.version.cmp(&b.version));
        self.torch.sort_by(|a, b| a.version.cmp(&b.version));
        self.cuda.sort_by(|a, b| a.version.cmp(&b.version));
        self.cudnn.sort_by(|a, b| a.version.cmp(&b.version));
        self.drivers.sort_by_key(|d| d.branch);
        self.gpus.sort_by(|a, b| a.id.cmp(&b.id));
        self.images.sort_by(|a, b| a.id.cmp(&b.id));
        self.packages.sort_by(|a, b| a.name.cmp(&b.name));
        self.frameworks.sort_by(|a, b| a.name.cmp(&b.name));
        for f in &mut self.frameworks {
            f.releases.sort_by(|a, b| a.version.cmp(&b.version));
        }
        self.models.sort_by(|a, b| a.id.cmp(&b.id));
        self.xids.sort_by_key(|x| x.code);
        self.foreign_gpus.sort_by(|a, b| a.id.cmp(&b.id));
        self.efficiencies.sort_by(|a, b| a.id.cmp(&b.id));
    }

    /// The database in `dir`.
    pub fn from_dir(dir: &Path) -> Result<Db, DbError> {
        Db::load(&read_dir(dir)?)
    }

    /// The database's date: the newest `checked` date of its records, the last day its
    /// curators checked facts against their sources. `None` when no record has one.
    pub fn date(&self) -> Option<PartialDate> {
        self.checked_dates().flatten().max()
    }

    /// The oldest `checked` of its records: the record longest without a look at its
    /// sources.
    pub fn oldest_checked(&self) -> Option<PartialDate> {
        self.checked_dates().flatten().min()
    }

    /// How many records were checked more than [`STALE_AFTER_DAYS`] before the database's
    /// date: the ones the curation since has passed by. Measured against the database's own
    /// date, not the clock, so that the count is a fact of the data (`db stats`, mirrored
    /// in compat-db/README.md); `show` judges one record against today.
    pub fn stale_records(&self) -> usize {
        let newest = self.date();
        self.checked_dates().filter(|c| is_stale(*c, newest)).count()
    }

    /// Every record's `checked` date, `None` for one made at run time without it.
    fn checked_dates(&self) -> impl Iterator<Item = Option<PartialDate>> + '_ {
        let python = self.python.iter().map(|r| r.checked);
        let torch = self.torch.iter().map(|r| r.checked);
        let cuda = self.cuda.iter().map(|r| r.checked);
        let cudnn = self.cudnn.iter().map(|r| r.checked);
        let drivers = self.drivers.iter().map(|r| r.checked);
        let gpus = self.gpus.iter().map(|r| r.checked);
        let images = self.images.iter().map(|r| r.checked);
        let packages = self.packages.iter().map(|r| r.checked);
        let frameworks = self.frameworks.iter().map(|r| r.checked);
        let models = self.models.iter().map(|r| r.checked);
        let xids = self.xids.iter().map(|r| r.checked);
        let efficiencies = self.efficiencies.iter().map(|r| r.checked);
        let foreign = self.foreign_gpus.iter().map(|r| r.checked);
        python
            .chain(torch)
            .chain(cuda)
            .chain(cudnn)
            .chain(drivers)
            .chain(gpus)
            .chain(images)
            .chain(packages)
            .chain(frameworks)
            .chain(models)
            .chain(xids)
            .chain(efficiencies)
            .chain(foreign)
    }

    /// Whether the database is older than [`STALE_AFTER_DAYS`] on `today`; false when
    /// either date is unknown.
    pub fn is_stale(&self, today: Option<PartialDate>) -> bool {
        is_stale(self.date(), today)
    }

    /// How many records of a kind.
    pub fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Python => self.python.len(),
            Kind::Torch => self.torch.len(),
            Kind::Cuda => self.cuda.len(),
            Kind::Cudnn => self.cudnn.len(),
            Kind::Driver => self.drivers.len(),
            Kind::Gpu => self.gpus.len(),
            Kind::Image => self.images.len(),
            Kind::Package => self.packages.len(),
            Kind::Framework => self.frameworks.len(),
            Kind::Model => self.models.len(),
            Kind::Xid => self.xids.len(),
            Kind::Efficiency => self.efficiencies.len(),
            Kind::ForeignGpu => self.foreign_gpus.len(),
        }
    }
}

/// Every problem in `files`, in file and line order. Also checks what loading does not:
/// that no record's `checked` date lies after today (by the system clock), which a typo
/// would make look fresh for years.
pub fn lint(files: &[SourceFile]) -> Vec<Problem> {
    lint_as_of(files, today())
}

/// [`lint`] with today's date given (`None`: no check against the clock).
pub fn lint_as_of(files: &[SourceFile], today: Option<PartialDate>) -> Vec<Problem> {
    bounded(check::build(files, today).1)
}

/// Today's date by the system clock (UTC); `None` if the clock is before 1970.
pub fn today() -> Option<PartialDate> {
    let today = PartialDate::today();
    (today.year >= 1970).then_some(today)
}

/// The driver-branch key for "past its end of life by this day"; a source whose note names
/// it says which list of supported branches was read that day.
pub const END_OF_LIFE_BY: &str = "end_of_life_by";

/// After how many days the database is old enough that a release newer than any it
/// knows may well exist: `query` then says so when it is asked about one.
pub const STALE_AFTER_DAYS: i64 = 90;

/// Whether a database dated `date` is older than [`STALE_AFTER_DAYS`] on `today`; false
/// when either is unknown.
pub fn is_stale(date: Option<PartialDate>, today: Option<PartialDate>) -> bool {
    match (date, today) {
        (Some(d), Some(t)) => t.days() - d.days() > STALE_AFTER_DAYS,
        _ => false,
    }
}

/// How many days before `today` a record was `checked`; `None` when either is unknown.
pub fn age_days(checked: Option<PartialDate>, today: Option<PartialDate>) -> Option<i64> {
    Some(today?.days() - checked?.days())
}

/// Every problem's message terminal-safe, and cut to an excerpt when it is long: a message
/// may quote a value of a record, and a record of `--db DIR` is input like any other.
/// Messages of gpuenv's own words stay whole (the longest are a few hundred characters).
fn bounded(mut problems: Vec<Problem>) -> Vec<Problem> {
    for p in &mut problems {
        p.message = if p.message.chars().count() > 4 * crate::text::EXCERPT_CHARS {
            crate::text::excerpt(&p.message)
        } else {
            crate::text::terminal_safe(&p.message)
        };
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast JSON form and the checked TOML form must give the same database.
    #[test]
    fn json_form_reads_and_equals_the_checked_form() {
        let fast = Db::from_json(embedded::JSON).expect("the embedded JSON reads");
        let checked = Db::load(&embedded_files()).expect("the embedded records are clean");
        for kind in Kind::ALL {
            assert_eq!(fast.count(kind), checked.count(kind), "{kind}");
        }
        let same = |a: &dyn erased::Ser, b: &dyn erased::Ser| assert_eq!(a.json(), b.json());
        same(&fast.python, &checked.python);
        same(&fast.torch, &checked.torch);
        same(&fast.cuda, &checked.cuda);
        same(&fast.cudnn, &checked.cudnn);
        same(&fast.drivers, &checked.drivers);
        same(&fast.gpus, &checked.gpus);
        same(&fast.images, &checked.images);
        same(&fast.packages, &checked.packages);
        same(&fast.models, &checked.models);
        same(&fast.xids, &checked.xids);
        same(&fast.foreign_gpus, &checked.foreign_gpus);
        same(&fast.efficiencies, &checked.efficiencies);
    }

    /// `checked` is the day a record was last checked: a date, read into the record.
    #[test]
    fn checked_is_read_as_a_date_and_a_bad_one_is_refused() {
        let cuda = |checked: &str| SourceFile {
            path: "cuda/13.4.1.toml".into(),
            text: Some(Cow::Owned(format!(
                "version = \"13.4.1\"\nlabel = \"CUDA 13.4 GA\"\nmin_driver_linux = \"615.31\"\n\
                 sass = [\"7.5\"]\nchecked = {checked}\n[[sources]]\nurl = \"https://example.org/\"\n"
            ))),
        };
        let db = Db::load(&[cuda("\"2026-12-01\"")]).expect("a dated record loads");
        assert_eq!(
            db.cuda[0].checked.as_ref().map(ToString::to_string).as_deref(),
            Some("2026-12-01")
        );
        let problems = lint(&[cuda("\"last week\"")]);
        assert!(
            problems
                .iter()
                .any(|p| p.key.to_string() == "checked" && p.kind == ProblemKind::BadValue),
            "{problems:?}"
        );
    }

    fn cuda_record(body: &str) -> SourceFile {
        SourceFile {
            path: "cuda/13.6.0.toml".into(),
            text: Some(Cow::Owned(format!(
                "version = \"13.6.0\"\nlabel = \"CUDA 13.6 GA\"\n{body}\nchecked = \"2026-12-01\"\n\
                 [[sources]]\nurl = \"https://pypi.org/project/cuda-toolkit/13.6.0/\"\n"
            ))),
        }
    }

    /// A proposed toolkit whose driver minimum and arch list are not known yet lints clean,
    /// and loads with neither value.
    #[test]
    fn pending_facts_may_be_absent() {
        let db = Db::load(&[cuda_record("pending = [\"min_driver_linux\", \"sass\"]")]).expect("loads");
        assert!(db.cuda[0].min_driver_linux.is_none() && db.cuda[0].sass.is_empty());
        assert!(db.cuda[0].is_pending("sass"));
        // Without `pending`, both are required.
        let problems = lint(&[cuda_record("")]);
        let keys: Vec<String> = problems.iter().map(|p| p.key.to_string()).collect();
        assert!(keys.contains(&"min_driver_linux".to_string()), "{problems:?}");
        assert!(keys.contains(&"sass".to_string()), "{problems:?}");
    }

    /// `pending` names facts of the record that may be pending, once each, never one that
    /// has a value.
    #[test]
    fn pending_naming_an_unknown_field_is_a_problem() {
        let problems = lint(&[cuda_record(
            "min_driver_linux = \"620.70.06\"\npending = [\"sass\", \"colour\", \"label\"]",
        )]);
        let bad: Vec<&Problem> = problems
            .iter()
            .filter(|p| p.key.to_string().starts_with("pending"))
            .collect();
        assert_eq!(bad.len(), 2, "{problems:?}");
        assert!(bad[0].message.contains("`colour`"), "{bad:?}");
        assert!(bad[1].message.contains("`label`"), "{bad:?}");
        assert!(bad.iter().all(|p| p.kind == ProblemKind::BadValue));

        let problems = lint(&[cuda_record(
            "min_driver_linux = \"620.70.06\"\nsass = [\"7.5\"]\npending = [\"sass\", \"sass\"]",
        )]);
        assert!(
            problems.iter().any(|p| p.message.contains("listed twice")),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.key.to_string() == "sass" && p.kind == ProblemKind::Inconsistent),
            "{problems:?}"
        );

        let cudnn = SourceFile {
            path: "cudnn/9.30.0.1.toml".into(),
            text: Some(Cow::Borrowed(
                "version = \"9.30.0.1\"\npending = [\"min_driver\"]\nchecked = \"2026-12-01\"\n\
                 [[sources]]\nurl = \"https://pypi.org/project/nvidia-cudnn-cu13/9.30.0.1/\"\n",
            )),
        };
        let problems = lint(&[cudnn]);
        assert!(
            problems
                .iter()
                .any(|p| p.key.to_string() == "pending[0]" && p.message.contains("`min_driver`")),
            "{problems:?}"
        );
        // ... and cuda_majors, neither given nor pending, is still required.
        assert!(
            problems.iter().any(|p| p.key.to_string() == "cuda_majors"),
            "{problems:?}"
        );
    }

    fn model_record(body: &str) -> SourceFile {
        SourceFile {
            path: "model/llama-2-70b.toml".into(),
            text: Some(Cow::Owned(format!(
                "name = \"Llama-2-70B\"\nmodel_type = \"llama\"\n{body}\n\
                 checked = \"2026-12-01\"\n[config]\nnum_hidden_layers = 80\nhidden_size = 8192\n\
                 num_attention_heads = 64\nnum_key_value_heads = 8\nintermediate_size = 28672\n\
                 vocab_size = 32000\ntie_word_embeddings = false\n[[sources]]\nurl = \"https://huggingface.co/meta-llama/Llama-2-70b-hf\"\n"
            ))),
        }
    }

    /// The shipped `efficiency/matmul-bf16.toml` with one piece of its text replaced.
    fn efficiency_edited(from: &str, to: &str) -> SourceFile {
        let text = embedded_files()
            .into_iter()
            .find(|f| f.path == "efficiency/matmul-bf16.toml")
            .and_then(|f| f.text)
            .expect("efficiency/matmul-bf16.toml ships");
        assert!(text.contains(from), "{from}");
        SourceFile {
            path: "efficiency/matmul-bf16.toml".into(),
            text: Some(Cow::Owned(text.replace(from, to))),
        }
    }

    /// An efficiency record lints clean as shipped, and each bad value is refused by key.
    #[test]
    fn efficiency_records_are_checked() {
        let db = Db::load(&[efficiency_edited("pass_min", "pass_min")]).expect("the shipped record loads");
        assert_eq!(db.efficiencies[0].metric, "matmul-bf16");
        let refused = |from: &str, to: &str, key: &str| {
            let problems = lint(&[efficiency_edited(from, to)]);
            assert!(
                problems.iter().any(|p| p.key.to_string() == key),
                "{to}: expected a problem at `{key}`, got {problems:?}"
            );
        };
        refused("metric = \"matmul-bf16\"", "metric = \"disk-seq-read\"", "metric");
        refused("pass_min = 0.70", "pass_min = 0.50", "warn_min");
        refused("pass_min = 0.70", "pass_min = 7.0", "pass_min");
        refused("warn_min = 0.55", "warn_min = -0.1", "warn_min");
        refused("basis = \"bf16_tflops\"", "basis = \"tflops\"", "basis");
        refused(
            "pass_min = 0.70",
            "pass_min = 0.70\nbasis_factor = 0.0",
            "basis_factor",
        );
        refused("pass_min = 0.70", "pass_min = 0.70\nwhatever = 1", "whatever");
        refused("[[sources]]", "[[nope]]", "sources");
        // Two records for the same metric and scope.
        let mut twin = efficiency_edited("pass_min", "pass_min");
        twin.path = "efficiency/matmul-bf16-twin.toml".into();
        let problems = lint(&[efficiency_edited("pass_min", "pass_min"), twin]);
        assert!(
            problems.iter().any(|p| p.kind == ProblemKind::DuplicateId),
            "{problems:?}"
        );
    }

    /// [`model_record`] with one piece of its text replaced.
    fn model_edited(body: &str, from: &str, to: &str) -> SourceFile {
        let mut f = model_record(body);
        let text = f.text.take().unwrap().replace(from, to);
        f.text = Some(Cow::Owned(text));
        f
    }

    /// A shipped record with one piece of its text replaced.
    fn shipped_edited(path: &str, from: &str, to: &str) -> SourceFile {
        let f = embedded_files()
            .into_iter()
            .find(|f| f.path == path)
            .unwrap_or_else(|| panic!("{path} ships"));
        let text = f.text.as_deref().unwrap_or_default();
        assert!(text.contains(from), "{path} has `{from}`");
        SourceFile {
            path: path.into(),
            text: Some(Cow::Owned(text.replace(from, to))),
        }
    }

    /// A foreign GPU names no NVIDIA GPU and is no NVIDIA GPU itself; a modified board
    /// says what was changed and writes its memory size in its name.
    #[test]
    fn foreign_gpus_and_modified_boards_are_checked() {
        let mi300x = "foreign-gpu/amd-instinct-mi300x.toml";
        let db = Db::load(&[shipped_edited(mi300x, "stack", "stack")]).expect("the shipped record loads");
        assert_eq!(db.foreign_gpus.len(), 1);
        let has = |problems: &[Problem], key: &str, kind: ProblemKind| {
            problems
                .iter()
                .any(|p| p.key.to_string() == key && p.kind == kind)
        };
        // Beside the H100's record, an alias `H100` would make that name mean two GPUs.
        let problems = lint(&[
            shipped_edited(mi300x, "\"AMD MI300X\"", "\"AMD MI300X\", \"H100\""),
            shipped_edited("gpu/h100-sxm.toml", "name", "name"),
        ]);
        assert!(
            problems.iter().any(|p| p.kind == ProblemKind::DuplicateAlias),
            "{problems:?}"
        );
        let problems = lint(&[shipped_edited(mi300x, "vendor = \"AMD\"", "vendor = \"NVIDIA\"")]);
        assert!(
            has(&problems, "vendor", ProblemKind::Inconsistent),
            "{problems:?}"
        );
        let problems = lint(&[shipped_edited(mi300x, "stack = \"ROCm\"", "stack = \" \"")]);
        assert!(has(&problems, "stack", ProblemKind::BadValue), "{problems:?}");
        let modded = "gpu/rtx-4090-48gb.toml";
        let problems = lint(&[shipped_edited(
            modded,
            "modified = \"not an NVIDIA",
            "modified = \" \"\nnotes_x = \"",
        )]);
        assert!(has(&problems, "modified", ProblemKind::BadValue), "{problems:?}");
        let problems = lint(&[shipped_edited(
            modded,
            "name = \"RTX 4090 48GB\"",
            "name = \"RTX 4090 Modded\"",
        )]);
        assert!(has(&problems, "name", ProblemKind::Inconsistent), "{problems:?}");
    }

    /// An XID record is the file of its code, with a description and an action, and an
    /// unknown fault word is refused.
    #[test]
    fn xid_records_are_named_by_their_code_and_say_what_to_do() {
        let xid = |path: &str, body: &str| SourceFile {
            path: path.into(),
            text: Some(Cow::Owned(format!(
                "code = 79\nmnemonic = \"ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS\"\n{body}\n\
                 checked = \"2026-12-04\"\n[[sources]]\n\
                 url = \"https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html\"\n"
            ))),
        };
        let good =
            "description = \"GPU has fallen off the bus\"\nfault = \"gpu\"\naction = \"at once RESTART_BM\"";
        let db = Db::load(&[xid("xid/79.toml", good)]).expect("a whole record loads");
        assert_eq!(db.xid(79).map(|x| x.fault), Some(XidFault::Gpu));
        assert!(db.xid(48).is_none());
        let problems = lint(&[xid("xid/48.toml", good)]);
        assert!(
            problems.iter().any(|p| p.kind == ProblemKind::Layout),
            "79 in 48.toml: {problems:?}"
        );
        let problems = lint(&[xid("xid/79.toml", &good.replace("at once RESTART_BM", " "))]);
        assert!(
            problems.iter().any(|p| p.key.to_string() == "action"),
            "empty action: {problems:?}"
        );
        let problems = lint(&[xid("xid/79.toml", &good.replace("\"gpu\"", "\"hardware\""))]);
        assert!(
            problems.iter().any(|p| p.key.to_string() == "fault"),
            "unknown fault: {problems:?}"
        );
    }

    /// The count of a model's weights follows from its shape; a record that says otherwise
    /// is refused, and so is a mixture without its experts.
    #[test]
    fn model_params_must_be_the_count_of_the_shape() {
        let db = Db::load(&[model_record("params = 68976648192")]).expect("the right count loads");
        assert_eq!(db.models[0].params_from_shape(), Some(68_976_648_192));
        assert_eq!(db.models[0].active_params_from_shape(), None);
        for wrong in ["params = 70000000000", "params = 68976648193"] {
            let problems = lint(&[model_record(wrong)]);
            assert!(
                problems
                    .iter()
                    .any(|p| p.key.to_string() == "params" && p.kind == ProblemKind::Inconsistent),
                "{wrong}: {problems:?}"
            );
        }
        // Tied embeddings drop the output head: vocab x hidden fewer.
        let tied = model_edited(
            "params = 68714504192",
            "tie_word_embeddings = false",
            "tie_word_embeddings = true",
        );
        assert!(Db::load(&[tied]).is_ok());
        // Experts on a dense type, kv heads that do not divide the heads, a zero.
        let problems = lint(&[model_record("params = 68976648192\nactive_params = 8")]);
        assert!(
            problems.iter().any(|p| p.key.to_string() == "active_params"),
            "{problems:?}"
        );
        let problems = lint(&[model_edited(
            "params = 68976648192",
            "vocab_size = 32000",
            "vocab_size = 32000\nhead_dim = 0",
        )]);
        assert!(
            problems.iter().any(|p| p.key.to_string() == "config"),
            "{problems:?}"
        );
        let problems = lint(&[model_edited(
            "params = 68976648192",
            "vocab_size = 32000",
            "vocab_size = 32000\nnum_hiden_layers = 8",
        )]);
        assert!(
            problems
                .iter()
                .any(|p| p.key.to_string() == "config.num_hiden_layers"),
            "{problems:?}"
        );
        let problems = lint(&[model_edited(
            "params = 1",
            "num_key_value_heads = 8",
            "num_key_value_heads = 7",
        )]);
        assert!(
            problems
                .iter()
                .any(|p| p.key.to_string() == "config.num_key_value_heads"),
            "{problems:?}"
        );
    }

    /// Qwen2 counts its q/k/v biases; Mixtral its experts and router, and its active share.
    #[test]
    fn model_counts_by_type() {
        let db = Db::embedded().expect("loads");
        let get = |id: &str| db.models.iter().find(|m| m.id == id).expect(id);
        assert_eq!(get("qwen2-5-7b").params_from_shape(), Some(7_615_616_512));
        assert_eq!(get("mixtral-8x7b").params_from_shape(), Some(46_702_792_704));
        assert_eq!(
            get("mixtral-8x7b").active_params_from_shape(),
            Some(12_879_925_248)
        );
        for m in &db.models {
            assert_eq!(m.params_from_shape(), Some(m.params), "{}", m.id);
        }
    }

    /// `bf16_tflops` and `fp8_tflops`, where given, are positive.
    #[test]
    fn gpu_tflops_must_be_positive() {
        let gpu = |v: &str| SourceFile {
            path: "gpu/h100-sxm.toml".into(),
            text: Some(Cow::Owned(format!(
                "name = \"H100 SXM\"\narchitecture = \"hopper\"\ncompute_capability = \"9.0\"\nmemory_gib = 80\n\
                 form_factor = \"sxm5\"\nnvlink = \"board\"\nsegment = \"datacenter\"\nforward_compat = true\n{v}\n\
                 checked = \"2026-12-01\"\n[[sources]]\nurl = \"https://www.nvidia.com/en-us/data-center/h100/\"\n"
            ))),
        };
        assert!(Db::load(&[gpu("bf16_tflops = 989.5\nfp8_tflops = 1979")]).is_ok());
        for bad in [
            "bf16_tflops = 0",
            "bf16_tflops = -1.5",
            "fp8_tflops = 0.0",
            "bf16_tflops = nan",
        ] {
            let problems = lint(&[gpu(bad)]);
            let key = bad.split(' ').next().unwrap();
            assert!(
                problems
                    .iter()
                    .any(|p| p.key.to_string() == key && p.kind == ProblemKind::BadValue),
                "{bad}: {problems:?}"
            );
        }
    }

    /// Every compute figure is positive; a sparse figure is twice its dense one; and a
    /// datasheet's "with sparsity" figure written as dense (H100 SXM's "BF16 1,979*") is
    /// caught by its neighbours and named as such, unless the notes say why.
    #[test]
    fn gpu_sparse_figures_are_kept_apart() {
        let gpu = |v: &str| SourceFile {
            path: "gpu/h100-sxm.toml".into(),
            text: Some(Cow::Owned(format!(
                "name = \"H100 SXM\"\narchitecture = \"hopper\"\ncompute_capability = \"9.0\"\nmemory_gib = 80\n\
                 form_factor = \"sxm5\"\nnvlink = \"board\"\nsegment = \"datacenter\"\nforward_compat = true\n{v}\n\
                 checked = \"2026-12-01\"\n[[sources]]\nurl = \"https://www.nvidia.com/en-us/data-center/h100/\"\n"
            ))),
        };
        let h100 = "bf16_tflops = 989.5\nfp16_tflops = 989.5\ntf32_tflops = 494.5\nfp8_tflops = 1979\nint8_tops = 1979\n\
                    bf16_sparse_tflops = 1979\nfp16_sparse_tflops = 1979\ntf32_sparse_tflops = 989\n\
                    fp8_sparse_tflops = 3958\nint8_sparse_tops = 3958";
        assert!(Db::load(&[gpu(h100)]).is_ok(), "{:?}", lint(&[gpu(h100)]));
        // Datasheets round: L40S prints BF16 362.05 dense and 733 with sparsity.
        assert!(Db::load(&[gpu("bf16_tflops = 362.05\nbf16_sparse_tflops = 733")]).is_ok());
        for key in [
            "fp16_tflops",
            "tf32_tflops",
            "int8_tops",
            "fp16_sparse_tflops",
            "int8_sparse_tops",
        ] {
            let problems = lint(&[gpu(&format!("{key} = -1"))]);
            assert!(
                problems
                    .iter()
                    .any(|p| p.key.to_string() == key && p.kind == ProblemKind::BadValue),
                "{key}: {problems:?}"
            );
        }
        // (the record's figures, the key reported, a word its message must have)
        for (figures, key, says) in [
            // The sparse figure copied as dense: BF16 1,979 beside TF32 494.5 and FP8 1,979.
            (
                "bf16_tflops = 1979\ntf32_tflops = 494.5",
                "tf32_tflops",
                "`bf16_tflops` looks like a \"with sparsity\"",
            ),
            (
                "bf16_tflops = 989.5\nfp8_tflops = 3958",
                "fp8_tflops",
                "`fp8_tflops` looks like a \"with sparsity\"",
            ),
            (
                "bf16_tflops = 989.5\nfp16_tflops = 1979",
                "fp16_tflops",
                "`fp16_tflops` looks like a \"with sparsity\"",
            ),
            // A sparse figure equal to its dense one: the dense one was copied twice.
            (
                "fp8_tflops = 3958\nfp8_sparse_tflops = 3958",
                "fp8_sparse_tflops",
                "twice the dense",
            ),
            (
                "int8_tops = 1979\nint8_sparse_tops = 3000",
                "int8_sparse_tops",
                "twice the dense",
            ),
        ] {
            let problems = lint(&[gpu(figures)]);
            assert!(
                problems.iter().any(|p| p.key.to_string() == key
                    && p.kind == ProblemKind::Inconsistent
                    && p.message.contains(says)),
                "{figures}: {problems:?}"
            );
        }
        // A GPU cut down in one precision, its notes saying so, is not reported.
        let cut =
            "bf16_tflops = 148\nfp8_tflops = 500\nnotes = \"fp8_tflops: this part's FP8 is not twice BF16\"";
        assert!(Db::load(&[gpu(cut)]).is_ok(), "{:?}", lint(&[gpu(cut)]));
    }

    /// `nvlink` is required; `none` takes no bandwidth, and an SXM module is never `none`.
    #[test]
    fn gpu_nvlink_is_required_and_consistent() {
        let gpu = |form: &str, v: &str| SourceFile {
            path: "gpu/h100-sxm.toml".into(),
            text: Some(Cow::Owned(format!(
                "name = \"H100 SXM\"\narchitecture = \"hopper\"\ncompute_capability = \"9.0\"\nmemory_gib = 80\n\
                 form_factor = \"{form}\"\n{v}\nsegment = \"datacenter\"\nforward_compat = true\n\
                 checked = \"2026-12-01\"\n[[sources]]\nurl = \"https://www.nvidia.com/en-us/data-center/h100/\"\n"
            ))),
        };
        let db = Db::load(&[gpu("sxm5", "nvlink = \"board\"\nnvlink_gbs = 900")]).expect("loads");
        assert_eq!(db.gpus[0].nvlink, Nvlink::Board);
        assert_eq!(db.gpus[0].nvlink_gbs, Some(900));
        assert!(Db::load(&[gpu("pcie", "nvlink = \"bridge\"")]).is_ok());
        assert!(Db::load(&[gpu("pcie", "nvlink = \"none\"")]).is_ok());
        for (form, bad, key, kind) in [
            ("pcie", "", "nvlink", ProblemKind::MissingKey),
            ("pcie", "nvlink = \"nvswitch\"", "nvlink", ProblemKind::BadValue),
            (
                "pcie",
                "nvlink = \"none\"\nnvlink_gbs = 600",
                "nvlink_gbs",
                ProblemKind::Inconsistent,
            ),
            ("sxm5", "nvlink = \"none\"", "nvlink", ProblemKind::Inconsistent),
            ("sxm", "nvlink = \"none\"", "nvlink", ProblemKind::Inconsistent),
            (
                "sxm5",
                "nvlink = \"board\"\nnvlink_gbs = 0",
                "nvlink_gbs",
                ProblemKind::BadValue,
            ),
        ] {
            let problems = lint(&[gpu(form, bad)]);
            assert!(
                problems
                    .iter()
                    .any(|p| p.key.to_string() == key && p.kind == kind),
                "{form} {bad}: {problems:?}"
            );
        }
        // Every record of the shipped database says it, consistently.
        let db = Db::embedded().expect("loads");
        for g in &db.gpus {
            if g.nvlink == Nvlink::None {
                assert_eq!(g.nvlink_gbs, None, "{}", g.id);
            }
        }
        let get = |id: &str| db.gpus.iter().find(|g| g.id == id).expect(id);
        assert_eq!(get("h100-sxm").nvlink, Nvlink::Board);
        assert_eq!(get("a100-80gb-pcie").nvlink, Nvlink::Bridge);
        assert_eq!(get("rtx-4090").nvlink, Nvlink::None);
    }

    /// `usable_memory_mib` lies between 85% and 100% of the memory sold, and reads as bytes.
    #[test]
    fn gpu_usable_memory_is_within_the_memory_sold() {
        let gpu = |v: &str| SourceFile {
            path: "gpu/h100-sxm.toml".into(),
            text: Some(Cow::Owned(format!(
                "name = \"H100 SXM\"\narchitecture = \"hopper\"\ncompute_capability = \"9.0\"\nmemory_gib = 80\n\
                 {v}\nform_factor = \"sxm5\"\nnvlink = \"board\"\nsegment = \"datacenter\"\nforward_compat = true\n\
                 checked = \"2026-12-01\"\n[[sources]]\nurl = \"https://www.nvidia.com/en-us/data-center/h100/\"\n"
            ))),
        };
        let db = Db::load(&[gpu("usable_memory_mib = 81559")]).expect("loads");
        assert_eq!(db.gpus[0].usable_bytes(), Some(81559 * 1024 * 1024));
        // A GeForce-style report of exactly the memory sold is accepted.
        assert!(Db::load(&[gpu("usable_memory_mib = 81920")]).is_ok());
        let db = Db::load(&[gpu("")]).expect("loads");
        assert_eq!(db.gpus[0].usable_bytes(), None);
        for bad in [
            "usable_memory_mib = 81921",
            "usable_memory_mib = 69632",
            "usable_memory_mib = 40448",
        ] {
            let problems = lint(&[gpu(bad)]);
            assert!(
                problems
                    .iter()
                    .any(|p| p.key.to_string() == "usable_memory_mib" && p.kind == ProblemKind::Inconsistent),
                "{bad}: {problems:?}"
            );
        }
        let shipped = Db::embedded().expect("loads");
        let h100 = shipped
            .gpus
            .iter()
            .find(|g| g.id == "h100-sxm")
            .expect("h100-sxm");
        assert_eq!(h100.usable_memory_mib, Some(81559));
    }

    mod erased {
        pub trait Ser {
            fn json(&self) -> String;
        }
        impl<T: serde::Serialize> Ser for T {
            fn json(&self) -> String {
                serde_json::to_string(self).expect("records serialize")
            }
        }
    }
}
