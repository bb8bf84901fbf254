//! The JSON documents gpuenv prints, as types.
//!
//! Every `--json` document is one of these structs, serialized as it is: the field order
//! of a struct is the order of its document, and `#[serde(flatten)]` puts a payload's
//! fields (a [`Verification`], a record) at the top level where the document has always
//! had them. Each derives `Deserialize` as well, so a document gpuenv wrote reads back
//! into the same type and writes the same JSON again (the tests hold `doctor`, `check`,
//! `query` and `verify` to that): a script, or a later gpuenv (a fleet merging `doctor`
//! reports), can take the typed value instead of picking at untyped JSON.
//!
//! What a document holds that the type cannot rebuild is not part of it: a stack's rank,
//! the database records behind a target's GPUs. Those read back empty, and the document
//! written again is the same, because they were never written.

use serde::{Deserialize, Serialize};

use super::SCHEMA_VERSION;
use crate::db::{Kind, Problem};
use crate::host::HostReport;
use crate::judge::{Acceptance, Check};
use crate::model::{PartialDate, Reading, Variant};
use crate::resolve::extensions::ExtensionReq;
use crate::resolve::{Finding, Stack, Status, Suggestion};
use crate::upstream::Summary;
use crate::verify::{Origin, Target, Verification};

/// The `schema_version` of a document read back when it has none (a hand-written one).
fn schema_version() -> u32 {
    SCHEMA_VERSION
}

/// The host architecture a query was answered for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchDoc {
    /// `x86_64` or `aarch64`.
    pub name: crate::model::HostArch,
    /// Where it came from (`--arch`, `uname -m`, `the GH200 brings its aarch64 host`).
    pub from: String,
}

/// `gpuenv query --json`: the answer, best stack first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueryDoc {
    /// [`SCHEMA_VERSION`].
    #[serde(default = "schema_version")]
    pub schema_version: u32,
    /// What was asked, in a line (`torch ==2.4.*, H100 SXM, driver 535.104.05`).
    pub query: String,
    /// Each input that was not taken literally, and how it was read.
    pub readings: Vec<Reading>,
    /// The host's CPU architecture the answer is for, and where it came from; absent when
    /// nothing said (x86_64 wheels are then assumed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<ArchDoc>,
    /// The best stack's verdict.
    pub verdict: Status,
    /// The database's date: the newest `checked` of its records.
    pub db_date: Option<PartialDate>,
    /// Findings about the question as a whole.
    pub findings: Vec<Finding>,
    /// The newest torch that runs only under a rule, when newer than the native best.
    pub newer_conditional: Option<Stack>,
    /// The project's requirements on packages that compile CUDA code at install.
    pub extensions_from: Vec<ExtensionReq>,
    /// The stacks shown, best first (with `--all` also the incompatible ones).
    pub stacks: Vec<Stack>,
    /// The smallest changes that make something fit.
    pub suggestions: Vec<Suggestion>,
}

/// `gpuenv check --json`: `query`'s document for this host, and acceptance against the
/// order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckDoc {
    /// The answer for the project on this host.
    #[serde(flatten)]
    pub answer: QueryDoc,
    /// One item per key of the order.
    pub acceptance: Vec<Acceptance>,
    /// Whether every item passed on evidence.
    pub accepted: bool,
    /// The `GPUENV_*` overrides used (`VAR=value`).
    pub overrides: Vec<String>,
    /// With `--bench-results`: the figures judged against their datasheets
    /// (`figures`), the GPUs below their peers (`outliers`), the burn-in (`burn`), what was
    /// skipped, and whether they count for acceptance (`counts_for_acceptance`: the order
    /// asked for measured figures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bench: Option<crate::judge::Measured>,
}

/// `gpuenv doctor --json`: the host's facts and the checks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DoctorDoc {
    /// [`SCHEMA_VERSION`].
    #[serde(default = "schema_version")]
    pub schema_version: u32,
    /// The database's date.
    pub db_date: Option<PartialDate>,
    /// What the probes found.
    pub host: HostReport,
    /// Each check, in the order of [`crate::judge::CHECKS`].
    pub checks: Vec<Check>,
    /// The `GPUENV_*` overrides used (`VAR=value`), as in `host.overrides`.
    pub overrides: Vec<String>,
}

/// `gpuenv fleet report --json`: each node's summary, the drift between nodes, the files
/// that could not be merged, the worst verdict.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FleetDoc {
    /// [`SCHEMA_VERSION`].
    #[serde(default = "schema_version")]
    pub schema_version: u32,
    /// One per node, in the order read.
    pub nodes: Vec<crate::fleet::NodeSummary>,
    /// `{kind, what_it_breaks, values: [{value, nodes}]}`, in the order of
    /// [`crate::fleet::DRIFT_KINDS`].
    pub drift: Vec<crate::fleet::Drift>,
    /// The kinds of drift found that break multi-node jobs and no `--allow-drift`
    /// relaxed: any fails the report (exit 1).
    #[serde(default)]
    pub failing_drift: Vec<String>,
    /// `{file, message}` for each file left out.
    pub problems: Vec<crate::fleet::FileProblem>,
    /// The worst verdict of any node (its checks, acceptance and stack).
    pub worst: Option<crate::judge::Verdict>,
    /// With an order: its items as asked, `{item, expected}`; each node's `acceptance`
    /// says which it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<Vec<crate::fleet::OrderItem>>,
    /// With query's flags or files: the stack asked, in a line (`torch ==2.4.*`); each
    /// node's `stack` is its verdict on that node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_asked: Option<String>,
    /// The nodes slower than the others, from their `gpuenv bench --json` results: `{metric,
    /// who, value, median, peers, unit, rule}` for each figure more than 10% worse than
    /// the median of the nodes (empty without bench results).
    #[serde(default)]
    pub bench_outliers: Vec<crate::bench::Outlier>,
}

/// `gpuenv verify --json`: the verification, then the version and the database's date.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VerifyDoc {
    /// What the image holds and how it was judged.
    #[serde(flatten)]
    pub verification: Verification,
    /// [`SCHEMA_VERSION`].
    #[serde(default = "schema_version")]
    pub schema_version: u32,
    /// The database it was judged with.
    pub db_date: Option<PartialDate>,
    /// With `--propose DIR`: the record proposed from what was read, fact by fact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposal: Option<crate::verify::propose::Proposal>,
}

/// `gpuenv show KIND NAME --json`: the record's fields at the top level, after the
/// version and its kind. `R` is the record: a [`crate::db::Found`] when written, an owned
/// record type (`crate::db::Gpu`, ...) when read back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShowDoc<R> {
    /// [`SCHEMA_VERSION`].
    #[serde(default = "schema_version")]
    pub schema_version: u32,
    /// The kind of record.
    pub kind: Kind,
    /// Days from the record's `checked` to today, by the clock; absent for a record
    /// without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub age_days: Option<i64>,
    /// `checked` lies more than 90 days back: the facts may have changed since.
    #[serde(default)]
    pub stale: bool,
    /// The record.
    #[serde(flatten)]
    pub record: R,
}

/// `gpuenv show image NAME --driver ... --gpu ... --json`: the record, the database's date,
/// and the verdict on the target from the catalog's facts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShowJudgedDoc<R> {
    /// The record, as `show` writes it.
    #[serde(flatten)]
    pub show: ShowDoc<R>,
    /// The database's date.
    pub db_date: Option<PartialDate>,
    /// The verdict.
    pub verdict: CatalogVerdict,
}

/// A [`Verification`] of an image from compat-db's catalog, without its facts: they are
/// the record's, which the document holds already. The fields and their attributes are
/// [`Verification`]'s; `failed` comes second, where the document has always had it (it
/// was once made by removing `facts` from a JSON object, which moved the last field into
/// its place).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CatalogVerdict {
    /// Where the image came from (`catalog`).
    pub origin: Origin,
    /// Whether it failed.
    pub failed: bool,
    /// The claims, each beside what was found.
    pub claims: Vec<crate::image::claims::ClaimCheck>,
    /// Where the claims came from.
    pub claims_source: Vec<String>,
    /// How many claims were compared with something found.
    pub claims_checked: usize,
    /// What the verdict covers.
    #[serde(deserialize_with = "covers")]
    pub covers: Vec<crate::model::known::Word>,
    /// Findings.
    pub findings: Vec<Finding>,
    /// The target judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
    /// How the NVIDIA runtime would judge it on the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require: Option<crate::image::require::RequireOutcome>,
    /// Each torch of the image on the target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub torch_on_target: Vec<Stack>,
}

fn covers<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<&'static str>, D::Error> {
    crate::model::known::each_of(d, "cover", crate::verify::COVERS)
}

impl From<Verification> for CatalogVerdict {
    fn from(v: Verification) -> CatalogVerdict {
        CatalogVerdict {
            origin: v.origin,
            failed: v.failed,
            claims: v.claims,
            claims_source: v.claims_source,
            claims_checked: v.claims_checked,
            covers: v.covers,
            findings: v.findings,
            target: v.target,
            require: v.require,
            torch_on_target: v.torch_on_target,
        }
    }
}

/// `gpuenv db lint --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LintDoc {
    /// [`SCHEMA_VERSION`].
    #[serde(default = "schema_version")]
    pub schema_version: u32,
    /// Record files read.
    pub files: usize,
    /// No problem.
    pub clean: bool,
    /// Every problem, with file, line and key.
    pub problems: Vec<Problem>,
}

/// `gpuenv db list KIND --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ListDoc {
    /// [`SCHEMA_VERSION`].
    #[serde(default = "schema_version")]
    pub schema_version: u32,
    /// The kind listed.
    pub kind: Kind,
    /// Its records.
    pub records: Vec<Listed>,
}

/// A record in [`ListDoc`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Listed {
    /// Its id (the file's stem).
    pub id: String,
    /// Its name.
    pub name: String,
}

/// `gpuenv db stats --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatsDoc {
    /// [`SCHEMA_VERSION`].
    #[serde(default = "schema_version")]
    pub schema_version: u32,
    /// The database's date.
    pub db_date: Option<PartialDate>,
    /// The oldest `checked` of its records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest_checked: Option<PartialDate>,
    /// Records checked more than 90 days (`stale_after_days`) before `db_date`.
    #[serde(default)]
    pub stale_records: usize,
    /// The age, in days, past which a record or the database counts as stale.
    #[serde(default = "stale_after_days")]
    pub stale_after_days: i64,
    /// Coverage per kind.
    pub kinds: Vec<KindStats>,
}

fn stale_after_days() -> i64 {
    crate::db::STALE_AFTER_DAYS
}

/// Coverage of one kind, in [`StatsDoc`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KindStats {
    /// The kind.
    pub kind: Kind,
    /// Its records.
    pub records: usize,
    /// Facts marked unverified in them.
    pub unverified_facts: usize,
    /// Its newest release, where that means something.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newest: Option<String>,
}

/// `gpuenv db refresh --json`: the summary, then the version.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RefreshDoc {
    /// What upstream proposes.
    #[serde(flatten)]
    pub summary: Summary,
    /// [`SCHEMA_VERSION`].
    #[serde(default = "schema_version")]
    pub schema_version: u32,
}

/// A stack as `build` and `pull` name it: the build, its Python and libraries, its
/// verdict.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StackBrief {
    /// The torch release.
    pub torch: String,
    /// The build (`cu121`, `cpu`).
    pub variant: Variant,
    /// The Python.
    pub python: String,
    /// CUDA of the build.
    pub cuda: Option<String>,
    /// cuDNN it brings.
    pub cudnn: Option<String>,
    /// NCCL it brings.
    pub nccl: Option<String>,
    /// The verdict.
    pub status: Status,
}

impl From<&Stack> for StackBrief {
    fn from(s: &Stack) -> StackBrief {
        StackBrief {
            torch: s.torch.to_string(),
            variant: s.variant,
            python: s.python.clone(),
            cuda: s.cuda.as_ref().map(|c| c.to_string()),
            cudnn: s.cudnn.as_ref().map(|c| c.to_string()),
            nccl: s.nccl.as_ref().map(|c| c.to_string()),
            status: s.status,
        }
    }
}

/// `gpuenv build --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BuiltDoc {
    /// [`SCHEMA_VERSION`].
    #[serde(default = "schema_version")]
    pub schema_version: u32,
    /// The name given.
    pub tag: String,
    /// `sha256:...`.
    pub image_id: String,
    /// Bytes.
    pub size: Option<u64>,
    /// Steps the Dockerfile had.
    pub steps: Option<u32>,
    /// The base image.
    pub base: String,
    /// `NVIDIA_REQUIRE_CUDA` of the image.
    pub require_cuda: Option<String>,
    /// The requirements on packages that compile CUDA code.
    pub extensions_from: Vec<ExtensionReq>,
    /// The stack it holds.
    pub stack: StackBrief,
    /// Its labels, in the Dockerfile's order.
    #[serde(with = "pairs")]
    pub labels: Vec<(String, String)>,
}

/// Where `pull` took the image from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PullSource {
    /// The name given.
    Name,
    /// compat-db's catalog, for the stack the flags describe.
    Catalog,
}

/// `gpuenv pull --json` (and `--dry-run`: `pulled` false, no result).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PullDoc {
    /// [`SCHEMA_VERSION`].
    #[serde(default = "schema_version")]
    pub schema_version: u32,
    /// The image.
    pub image: String,
    /// Whether it was pulled (false for `--dry-run`).
    pub pulled: bool,
    /// What the pull gave, when it ran.
    #[serde(flatten)]
    pub result: Option<PullResult>,
    /// The catalog's pick, when the image came from it.
    #[serde(flatten)]
    pub choice: Option<PullChoiceDoc>,
}

/// What a pull gave, in [`PullDoc`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PullResult {
    /// The manifest digest.
    pub digest: String,
    /// Always true: a digest other than the one announced is an error.
    pub digest_verified: bool,
    /// `sha256:...`.
    pub image_id: String,
    /// Bytes.
    pub size: Option<u64>,
    /// Layers of the image.
    pub layers: usize,
    /// Layers downloaded (not already present).
    pub downloaded_layers: usize,
    /// Where the image came from.
    pub source: PullSource,
}

/// The image chosen from the catalog, in [`PullDoc`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PullChoiceDoc {
    /// The catalog's image and why.
    pub catalog: CatalogPick,
    /// The stack it serves.
    pub stack: StackBrief,
    /// `query`'s best stack for the same flags.
    pub query_best: StackBrief,
    /// Whether the image is not that stack.
    pub query_best_differs: bool,
    /// How and why it differs.
    pub query_best_why: Option<String>,
}

/// A catalog image, in [`PullChoiceDoc`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CatalogPick {
    /// The reference.
    pub image: String,
    /// Its catalog.
    pub family: crate::db::ImageFamily,
    /// Whether it holds torch.
    pub has_torch: bool,
    /// Why it was chosen.
    pub why: String,
}

/// Pairs written as a JSON object in their order, and read back in the object's.
mod pairs {
    use std::fmt;

    use serde::de::{MapAccess, Visitor};
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(pairs: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(pairs.iter().map(|(k, v)| (k, v)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, String)>, D::Error> {
        struct Pairs;
        impl<'de> Visitor<'de> for Pairs {
            type Value = Vec<(String, String)>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of strings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(pair) = map.next_entry()? {
                    out.push(pair);
                }
                Ok(out)
            }
        }
        d.deserialize_map(Pairs)
    }
}

/// `gpuenv plan --json`: the model's size, the memory per GPU with its assumptions, the
/// GPUs it fits on with their stacks, the machine, the offers ranked, and the order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlanDoc {
    /// [`SCHEMA_VERSION`].
    #[serde(default = "schema_version")]
    pub schema_version: u32,
    /// The database's date.
    pub db_date: Option<PartialDate>,
    /// The model's parameters, exact where a config or record gave them.
    pub params: u64,
    /// The model as read.
    pub model: crate::plan::ModelShape,
    /// The settings the memory is estimated for.
    pub settings: crate::plan::Settings,
    /// The memory: `per_gpu` with each term in bytes.
    pub memory: PlanMemory,
    /// Each GPU tried: `{gpu, count, fits, headroom_bytes, stack}` and more, fitting first.
    pub fits: Vec<crate::plan::fit::Fit>,
    /// CPU cores, RAM and disk for the first fitting GPU.
    pub machine: Option<crate::plan::fit::Machine>,
    /// Every assumption and constant: `{what, value, source}`.
    pub assumptions: Vec<crate::plan::Assumption>,
    /// With `--offers`: the offers, best first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offers: Vec<crate::plan::offers::RankedOffer>,
    /// With offers priced in more than one currency: the sentence saying that their costs
    /// are ranked within each currency, never across.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offers_note: Option<String>,
    /// What the machine and the order are for: the best offer that falls short in nothing,
    /// else the first GPU that fits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pick: Option<crate::plan::run::Pick>,
    /// The order `--order-out` writes (TOML), when a GPU fits.
    pub order: Option<String>,
}

/// The memory of a plan.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlanMemory {
    /// Bytes per GPU, term by term.
    pub per_gpu: crate::plan::MemoryTerms,
}
