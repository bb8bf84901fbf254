//! Finding records by the names people type: canonical names, aliases, versions, tags.
//!
//! GPU names are read as tokens, in any order, case- and punctuation-insensitively:
//! identity words (`a100`, `rtx`, `4090`, `d`, `nvl`), memory (`80G` and `80GB` alike),
//! form factor (`sxm`, `sxm4`, `pcie`), memory type (`hbm3`) and architecture (`sm_90`);
//! the vendor words `nvidia`, `tesla`, `geforce` and the word `gpu` are dropped. A name
//! covers a record when its identity words are those of the record's name or of one of
//! its aliases, and no other token contradicts the record: `A100 80G SXM4`, `A100-80G`
//! and `NVIDIA A100-SXM4-80GB` all cover the A100 80GB SXM, and `A100 40G` never does.
//! compat-db's names and aliases stay the only spellings; nothing here lists others.
//!
//! A name may cover several records (`A100`: 40 and 80 GB, SXM and PCIe). Acceptance
//! takes any of them ([`GpuMatch::records`]); a query needs one and uses the record whose
//! own name or alias is written out in full in the input (`A100` is an alias of the A100
//! 80GB SXM), saying so ([`GpuMatch::why`]).
//!
//! Versions compare as versions: `12.4` finds CUDA 12.4.0, `2.4.1+cu121` finds torch
//! 2.4.1, `535.104.05`, `535`, `R535` and `535.x` find branch R535.

use serde::Serialize;

use super::records::*;
use super::{Db, Kind};
use crate::model::{
    CudaVersion, CudnnVersion, DriverInput, DriverVersion, ParseError, count_candidates, parse_version,
    public,
};

/// Words that add nothing to a GPU's identity, wherever they stand.
const NOISE_WORDS: [&str; 5] = ["nvidia", "tesla", "geforce", "gpu", "gpus"];

/// Lowercase letters and digits only, without the noise words: the form names are
/// suggested in.
pub fn normalize(name: &str) -> String {
    let lower = name.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let kept: Vec<&str> = words
        .iter()
        .copied()
        .filter(|w| !NOISE_WORDS.contains(w))
        .collect();
    if kept.is_empty() {
        words.concat()
    } else {
        kept.concat()
    }
}

/// A model name as one key: lowercase words of letters or of digits, joined by `-`
/// (`Llama 2 70B`, `llama2-70b` and `LLAMA_2_70b` are all `llama-2-70-b`). Digits
/// stay apart from each other where the name separates them, so `Qwen2.5-7B`
/// (`qwen-2-5-7-b`) is never `Qwen2-57B` (`qwen-2-57-b`).
pub fn model_key(name: &str) -> String {
    let mut words: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut cur_digit = false;
    for c in name.trim().chars().flat_map(char::to_lowercase) {
        if !c.is_alphanumeric() {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            continue;
        }
        let digit = c.is_ascii_digit();
        if !cur.is_empty() && digit != cur_digit {
            words.push(std::mem::take(&mut cur));
        }
        cur_digit = digit;
        cur.push(c);
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words.join("-")
}

/// The keys a model name answers to: [`model_key`] of the whole name and, for a Hub
/// repository (`org/name`), of the name without its organization. Empty when the name
/// has no letter or digit.
pub(crate) fn model_keys(name: &str) -> Vec<String> {
    let mut keys = vec![model_key(name)];
    if let Some((_, repo)) = name.trim().rsplit_once('/') {
        keys.push(model_key(repo));
    }
    keys.retain(|k| !k.is_empty());
    keys.dedup();
    keys
}

/// Words after a model's name that leave its shape as it is: fine-tunes for chat and
/// instructions, and the Hub's `-hf` conversions.
const SHAPE_NEUTRAL_SUFFIXES: [&str; 6] = ["instruct", "chat", "it", "base", "hf", "sft"];

/// A GPU name read as tokens.
#[derive(Debug, Clone, Default, PartialEq)]
struct GpuTokens {
    /// Identity words, lowercase, in the order written.
    model: Vec<String>,
    /// Memory sizes, GB (`80G`, `80 GB`, `80GiB`).
    memory: Vec<f64>,
    /// Form factors: `pcie`, `sxm`, `sxm4`...
    forms: Vec<String>,
    /// Memory types: `hbm3`, `gddr6x`...
    memory_types: Vec<String>,
    /// Architectures written as `sm_90`: `(major, minor)`.
    sm: Vec<(u32, u32)>,
}

fn memory_size(token: &str) -> Option<f64> {
    let digits = token.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &token[digits.len()..];
    if digits.is_empty() || !matches!(unit, "g" | "gb" | "gib") {
        return None;
    }
    digits.parse().ok()
}

fn is_form(token: &str) -> bool {
    token == "pcie"
        || token
            .strip_prefix("sxm")
            .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
}

fn is_memory_type(token: &str) -> bool {
    ["hbm", "gddr"].iter().any(|p| {
        token
            .strip_prefix(p)
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
    })
}

/// `sm_90`, `sm90`, `sm_120`: the compute capability it names.
fn sm_token(token: &str) -> Option<(u32, u32)> {
    let digits = token.strip_prefix("sm")?.trim_start_matches('_');
    let digits = digits.trim_end_matches(['a', 'f']);
    if !(2..=3).contains(&digits.len()) || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let (major, minor) = digits.split_at(digits.len() - 1);
    Some((major.parse().ok()?, minor.parse().ok()?))
}

impl GpuTokens {
    fn read(name: &str) -> GpuTokens {
        let lower = name.to_lowercase();
        let mut raw: Vec<&str> = Vec::new();
        for word in lower
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
        {
            if sm_token(word).is_some() {
                raw.push(word);
            } else {
                raw.extend(word.split('_').filter(|w| !w.is_empty()));
            }
        }
        let mut t = GpuTokens::default();
        let mut i = 0;
        while i < raw.len() {
            let w = raw[i];
            // `80 GB`: a number and its unit written apart.
            let joined = raw
                .get(i + 1)
                .filter(|u| matches!(**u, "g" | "gb" | "gib") && w.chars().all(|c| c.is_ascii_digit()))
                .map(|u| format!("{w}{u}"));
            if let Some(size) = joined.as_deref().and_then(memory_size) {
                t.memory.push(size);
                i += 2;
                continue;
            }
            if NOISE_WORDS.contains(&w) {
            } else if let Some(size) = memory_size(w) {
                t.memory.push(size);
            } else if is_form(w) {
                t.forms.push(w.to_string());
            } else if is_memory_type(w) {
                t.memory_types.push(w.to_string());
            } else if let Some(cc) = sm_token(w) {
                t.sm.push(cc);
            } else {
                t.model.push(w.to_string());
            }
            i += 1;
        }
        t
    }

    /// Whether the identity words are the same: as a set in any order (`NVL H100`), or
    /// run together (`RTX5090` is `RTX 5090`).
    fn same_model(&self, other: &GpuTokens) -> bool {
        if self.model.is_empty() || other.model.is_empty() {
            return false;
        }
        let mut a = self.model.clone();
        let mut b = other.model.clone();
        a.sort();
        b.sort();
        a == b || self.model.concat() == other.model.concat()
    }
}

/// The memory sizes a GPU name writes (`RTX 4090 48GB`: 48), in GB.
pub(crate) fn written_memory(name: &str) -> Vec<f64> {
    GpuTokens::read(name).memory
}

fn same_size(a: f64, b: f64) -> bool {
    // Sizes as sold and as printed differ by rounding, never by 5%: 40 vs 80 GB, 80 vs 94.
    (a - b).abs() <= 0.05 * a.max(b)
}

/// Whether form factor `a` (written) agrees with `b` (known): equal, or one of them is a
/// plain `sxm` of unspecified generation.
fn same_form(a: &str, b: &str) -> bool {
    a == b || (a.starts_with("sxm") && b.starts_with("sxm") && (a == "sxm" || b == "sxm"))
}

/// A record's names, read once per lookup.
struct Named<'a> {
    gpu: &'a Gpu,
    /// The name and every alias, each with its tokens.
    forms: Vec<(&'a str, GpuTokens)>,
}

impl<'a> Named<'a> {
    fn new(gpu: &'a Gpu) -> Named<'a> {
        let forms = std::iter::once(gpu.name.as_str())
            .chain(gpu.aliases.iter().map(String::as_str))
            .map(|n| (n, GpuTokens::read(n)))
            .collect();
        Named { gpu, forms }
    }

    fn memory_fits(&self, size: f64) -> bool {
        same_size(size, self.gpu.memory_gib)
            || self
                .forms
                .iter()
                .any(|(_, t)| t.memory.iter().any(|m| same_size(size, *m)))
    }

    fn form_fits(&self, form: &str) -> bool {
        let own = serde_json::to_value(self.gpu.form_factor)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        // The record's form factor decides, not its aliases: an alias that says otherwise
        // is a curation error the linter reports.
        same_form(form, &own)
    }

    fn memory_type_fits(&self, kind: &str) -> bool {
        self.gpu
            .memory_type
            .as_deref()
            .is_some_and(|m| m.eq_ignore_ascii_case(kind))
            || self
                .forms
                .iter()
                .any(|(_, t)| t.memory_types.iter().any(|m| m == kind))
    }

    /// Whether `input` names this GPU: its identity words are those of one of the
    /// record's names, and none of its other tokens contradicts the record. A board
    /// modified after sale is named only by a name that writes its memory size: `RTX 4090`
    /// is NVIDIA's card, `RTX 4090 48G` the modified one.
    fn covered_by(&self, input: &GpuTokens) -> bool {
        (self.gpu.modified.is_none() || !input.memory.is_empty())
            && input.memory.iter().all(|m| self.memory_fits(*m))
            && self.same_but_memory(input)
    }

    /// Whether `input` would name this GPU if it wrote no memory size: the GPUs whose
    /// sizes an unknown size is told against.
    fn same_but_memory(&self, input: &GpuTokens) -> bool {
        let cc = self.gpu.compute_capability;
        self.forms.iter().any(|(_, t)| t.same_model(input))
            && input.forms.iter().all(|f| self.form_fits(f))
            && input.memory_types.iter().all(|k| self.memory_type_fits(k))
            && input.sm.iter().all(|s| *s == (cc.major.into(), cc.minor.into()))
    }

    /// The longest of the record's names that `input` writes out in full (every token of
    /// it is in the input), with its length in tokens.
    fn written_in_full(&self, input: &GpuTokens) -> Option<(usize, &'a str)> {
        self.forms
            .iter()
            .filter(|(_, t)| {
                t.same_model(input)
                    && t.memory
                        .iter()
                        .all(|m| input.memory.iter().any(|i| same_size(*i, *m)))
                    && t.forms
                        .iter()
                        .all(|f| input.forms.iter().any(|i| same_form(i, f)))
                    && t.memory_types.iter().all(|k| input.memory_types.contains(k))
            })
            .map(|(n, t)| {
                (
                    t.model.len() + t.memory.len() + t.forms.len() + t.memory_types.len(),
                    *n,
                )
            })
            .max_by_key(|(len, _)| *len)
    }
}

/// The GPU records a written name covers.
#[derive(Debug, Clone)]
pub struct GpuMatch<'a> {
    /// Every record the name covers, in database order.
    pub records: Vec<&'a Gpu>,
    /// The record an answer about one GPU uses.
    pub chosen: &'a Gpu,
    /// Why that one, when the name covers several.
    pub why: Option<String>,
}

impl GpuMatch<'_> {
    /// Whether the name covers the record with this id.
    pub fn covers(&self, id: &str) -> bool {
        self.records.iter().any(|g| g.id == id)
    }
}

/// Matches a written GPU name against records (the database's, or a linter's).
pub fn match_gpu<'a>(gpus: &'a [Gpu], name: &str) -> Option<GpuMatch<'a>> {
    if let Some(g) = gpus.iter().find(|g| g.id == name.trim()) {
        return Some(GpuMatch {
            records: vec![g],
            chosen: g,
            why: None,
        });
    }
    let input = GpuTokens::read(name);
    let named: Vec<Named<'a>> = gpus
        .iter()
        .map(Named::new)
        .filter(|n| n.covered_by(&input))
        .collect();
    let best = named
        .iter()
        .filter_map(|n| n.written_in_full(&input).map(|(len, form)| (len, form, n.gpu)))
        .fold(None::<(usize, &str, &Gpu)>, |acc, x| match acc {
            Some(a) if a.0 >= x.0 => Some(a),
            _ => Some(x),
        });
    let records: Vec<&Gpu> = named.iter().map(|n| n.gpu).collect();
    let (chosen, because) = match best {
        Some((_, form, g)) => (g, format!("which compat-db names `{form}`")),
        None => (*records.first()?, "the first of them in compat-db".to_string()),
    };
    let why = (records.len() > 1).then(|| {
        let names: Vec<&str> = records.iter().map(|g| g.name.as_str()).collect();
        let other = records
            .iter()
            .find(|g| g.id != chosen.id)
            .map_or(String::new(), |g| format!(" (`{}`)", g.name));
        format!(
            "`{}` names {} GPUs in compat-db ({}); used the {}, {because}; name another in full{other} to choose it",
            name.trim(),
            records.len(),
            names.join(", "),
            chosen.name,
        )
    });
    Some(GpuMatch { records, chosen, why })
}

/// Written GPUs that cannot be read: a count out of range, or a name no record answers to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GpuTextError {
    /// `H100x0`, `H100x99999999`.
    #[error(transparent)]
    Count(#[from] ParseError),
    /// No record answers to the name.
    #[error(transparent)]
    Lookup(#[from] LookupError),
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
    /// A package that pins torch.
    Framework(&'a Framework),
    /// A model's shape.
    Model(&'a Model),
    /// An XID of the NVIDIA driver.
    Xid(&'a Xid),
    /// An expected efficiency of a measured figure.
    Efficiency(&'a Efficiency),
    /// A GPU gpuenv does not serve.
    ForeignGpu(&'a ForeignGpu),
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
            Found::Framework(_) => Kind::Framework,
            Found::Model(_) => Kind::Model,
            Found::Xid(_) => Kind::Xid,
            Found::Efficiency(_) => Kind::Efficiency,
            Found::ForeignGpu(_) => Kind::ForeignGpu,
        }
    }

    /// The day the record's facts were last checked against its sources.
    pub fn checked(&self) -> Option<crate::model::PartialDate> {
        match self {
            Found::Gpu(r) => r.checked,
            Found::Cuda(r) => r.checked,
            Found::Cudnn(r) => r.checked,
            Found::Torch(r) => r.checked,
            Found::Driver(r) => r.checked,
            Found::Python(r) => r.checked,
            Found::Image(r) => r.checked,
            Found::Package(r) => r.checked,
            Found::Model(r) => r.checked,
            Found::Xid(r) => r.checked,
            Found::Efficiency(r) => r.checked,
            Found::ForeignGpu(r) => r.checked,
            Found::Framework(r) => r.checked,
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
    /// The whole answer, where the name was recognized and is refused for a reason of its
    /// own (a GPU gpuenv does not serve, a memory size no record of the GPU has).
    pub message: Option<String>,
}

impl LookupError {
    fn render(&self) -> String {
        if let Some(m) = &self.message {
            return m.clone();
        }
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
        // `get` rather than slicing: the input may hold non-ASCII characters.
        if let (Some(head), Some(rest)) = (t.get(..w.len()), t.get(w.len()..)) {
            if !rest.is_empty() && head.eq_ignore_ascii_case(w) {
                return rest.trim_start_matches([' ', '-', '_']);
            }
        }
    }
    t
}

impl Db {
    /// Finds the record of `kind` that answers to `name`.
    // Long as a table is: one arm per record kind, each reading a name its own way.
    pub fn find(&self, kind: Kind, name: &str) -> Result<Found<'_>, LookupError> {
        let err = |suggestions: Vec<String>, ambiguous: bool| LookupError {
            kind,
            name: name.to_string(),
            suggestions,
            ambiguous,
            message: None,
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
                let text = strip_word(name, &["driver"]);
                if let Ok(input) = text.parse::<DriverInput>() {
                    if let Some(r) = self.drivers.iter().find(|r| r.branch == input.branch()) {
                        return Ok(Found::Driver(r));
                    }
                }
                Err(err(
                    closest(name, self.drivers.iter().map(|r| (r.id.clone(), r.id.as_str()))),
                    false,
                ))
            }
            Kind::Image => self.image(name).map(Found::Image),
            Kind::Model => self.model(name).map(Found::Model),
            Kind::Xid => {
                // As the kernel log and people write it: `79`, `Xid 79`, `XID79`.
                let text = strip_word(name, &["xid"]);
                let code = text.trim().parse::<u32>().ok();
                code.and_then(|c| self.xid(c)).map(Found::Xid).ok_or_else(|| {
                    err(
                        closest(name, self.xids.iter().map(|x| (x.id.clone(), x.id.as_str()))),
                        false,
                    )
                })
            }
            Kind::Efficiency => {
                // By id (`matmul-bf16-hopper`), in any case.
                let want = name.trim().to_ascii_lowercase();
                self.efficiencies
                    .iter()
                    .find(|r| r.id == want)
                    .map(Found::Efficiency)
                    .ok_or_else(|| {
                        err(
                            closest(
                                name,
                                self.efficiencies.iter().map(|r| (r.id.clone(), r.id.as_str())),
                            ),
                            false,
                        )
                    })
            }
            Kind::ForeignGpu => self.foreign_gpu(name).map(Found::ForeignGpu).ok_or_else(|| {
                let candidates = self.foreign_gpus.iter().flat_map(|f| {
                    std::iter::once((f.name.clone(), f.name.as_str()))
                        .chain(f.aliases.iter().map(move |a| (a.clone(), f.name.as_str())))
                });
                err(closest(name, candidates), false)
            }),
            Kind::Package => self.package(name).map(Found::Package).ok_or_else(|| {
                err(
                    closest(
                        name,
                        self.packages.iter().map(|r| (r.name.clone(), r.name.as_str())),
                    ),
                    false,
                )
            }),
            Kind::Framework => self.framework(name).map(Found::Framework).ok_or_else(|| {
                err(
                    closest(
                        name,
                        self.frameworks.iter().map(|r| (r.name.clone(), r.name.as_str())),
                    ),
                    false,
                )
            }),
        }
    }

    /// Finds the model a name stands for, as people write it: the record's name or an
    /// alias, in any case, with `-`, `_`, `.` or spaces between its words or none between
    /// letters and digits (`Llama 2 70B`, `llama2-70b`, `LLAMA_2_70B`), and with or
    /// without an organization before a `/` as on the Hugging Face Hub
    /// (`meta-llama/Llama-2-70b-hf`). Unknown names suggest the closest ones.
    pub fn model(&self, name: &str) -> Result<&Model, LookupError> {
        self.model_read(name).map(|(m, _)| m)
    }

    /// [`Db::model`], and how the name was read when a suffix that leaves the shape as it
    /// is was set aside: `Qwen2.5-72B-Instruct`, `gemma-2-9b-it` and `Llama-2-7b-chat-hf`
    /// have their base model's weights, layer for layer. A quantized name (`-AWQ`,
    /// `-GPTQ-Int4`, `-FP8`) is not read as its base: its weights take other bytes.
    pub fn model_read(&self, name: &str) -> Result<(&Model, Option<String>), LookupError> {
        let find = |text: &str| {
            let wanted = model_keys(text);
            self.models.iter().find(|m| {
                std::iter::once(&m.name)
                    .chain(&m.aliases)
                    .any(|n| model_keys(n).iter().any(|k| wanted.contains(k)))
            })
        };
        if let Some(m) = find(name) {
            return Ok((m, None));
        }
        let repo = name.trim().rsplit_once('/').map_or(name.trim(), |(_, r)| r);
        let mut base = repo;
        while let Some((head, last)) = base.rsplit_once(['-', '_', ' ', '.']) {
            if !SHAPE_NEUTRAL_SUFFIXES.contains(&last.to_ascii_lowercase().as_str()) {
                break;
            }
            base = head;
            if let Some(m) = find(base) {
                let note = format!(
                    "`{}` read as {}: a `-{}` checkpoint has its base model's shape",
                    crate::text::excerpt(name.trim()),
                    m.name,
                    &repo[base.len() + 1..]
                );
                return Ok((m, Some(note)));
            }
        }
        let candidates = self.models.iter().flat_map(|m| {
            std::iter::once((m.name.clone(), m.name.as_str()))
                .chain(m.aliases.iter().map(move |a| (a.clone(), m.name.as_str())))
        });
        Err(LookupError {
            kind: Kind::Model,
            name: name.to_string(),
            suggestions: closest(name, candidates),
            ambiguous: false,
            message: None,
        })
    }

    /// The record of XID `code`, when compat-db holds it.
    pub fn xid(&self, code: u32) -> Option<&Xid> {
        self.xids.iter().find(|x| x.code == code)
    }

    /// The framework record (a package that pins torch) for a project name, in any
    /// spelling PEP 503 equates (`TensorRT_LLM`).
    pub fn framework(&self, name: &str) -> Option<&Framework> {
        let n = crate::model::pep508::normalize_name(name.trim());
        self.frameworks.iter().find(|r| r.name == n)
    }

    /// The package record for a project name, in any spelling PEP 503 equates
    /// (`flash_attn`, `Flash-Attn`).
    pub fn package(&self, name: &str) -> Option<&Package> {
        let n = crate::model::pep508::normalize_name(name.trim());
        self.packages.iter().find(|r| r.name == n)
    }

    /// Finds the GPU a name stands for: the one record it covers, or, when it covers
    /// several, the one [`Db::gpu_match`] chooses.
    pub fn gpu(&self, name: &str) -> Result<&Gpu, LookupError> {
        self.gpu_match(name).map(|m| m.chosen)
    }

    /// The GPU a driver reports: its name (which says no memory size: nvidia-smi prints
    /// "NVIDIA GeForce RTX 4060 Ti" for the 8 GB and the 16 GB card alike) and the memory
    /// it reports. Among the records that differ from the name's only in memory, the one
    /// whose memory is nearest the reported total is chosen, within a tenth of it; with no
    /// reported memory, or none that near, the name alone decides ([`Db::gpu`]).
    pub fn gpu_reported(&self, name: &str, memory_mib: Option<u64>) -> Result<&Gpu, LookupError> {
        let chosen = self.gpu(name)?;
        let Some(mib) = memory_mib.filter(|m| *m > 0) else {
            return Ok(chosen);
        };
        let input = GpuTokens::read(name);
        if !input.memory.is_empty() {
            return Ok(chosen); // the name says its size; the lookup has chosen by it
        }
        let reported = mib as f64 / 1024.0;
        // What nvidia-smi prints for the record, in GiB: the captured total where recorded,
        // else the size sold (in GB, which nvidia-smi's MiB total falls a little below).
        let capacity = |g: &Gpu| {
            g.usable_memory_mib
                .map_or(g.memory_gib, |u| f64::from(u) / 1024.0)
        };
        let distance = |g: &Gpu| (capacity(g) - reported).abs() / reported;
        let nearest = self
            .gpus
            .iter()
            .filter(|g| g.id == chosen.id || Named::new(g).same_but_memory(&GpuTokens::read(&chosen.name)))
            .filter(|g| g.architecture == chosen.architecture)
            .min_by(|a, b| distance(a).total_cmp(&distance(b)));
        Ok(match nearest {
            Some(g) if distance(g) <= 0.1 => g,
            _ => chosen,
        })
    }

    /// Every GPU record a written name covers (see the module's doc for how names are
    /// read), and the one chosen when a single GPU is needed.
    pub fn gpu_match(&self, name: &str) -> Result<GpuMatch<'_>, LookupError> {
        if let Some(m) = match_gpu(&self.gpus, name) {
            return Ok(m);
        }
        // A GPU of another vendor is refused for what it is, not matched to the nearest
        // NVIDIA name.
        if let Some(f) = self.foreign_gpu(name) {
            return Err(LookupError {
                kind: Kind::Gpu,
                name: name.to_string(),
                suggestions: Vec::new(),
                ambiguous: false,
                message: Some(f.refusal()),
            });
        }
        if let Some(e) = self.unknown_size(name) {
            return Err(e);
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
            message: None,
        })
    }

    /// A GPU gpuenv does not serve that `name` stands for: its identity words are those
    /// of the record's name or an alias (a memory size or form factor beside them changes
    /// nothing: `MI300X 192GB` is still the MI300X).
    pub fn foreign_gpu(&self, name: &str) -> Option<&ForeignGpu> {
        let mut input = GpuTokens::read(name);
        input.memory.clear();
        input.forms.clear();
        input.memory_types.clear();
        self.foreign_gpus.iter().find(|f| {
            std::iter::once(&f.name)
                .chain(&f.aliases)
                .any(|n| GpuTokens::read(n).same_model(&input))
        })
    }

    /// The answer to a name that writes a memory size no record of its GPU has
    /// (`RTX 4090 32GB`): the sizes the records have, each with its records. `None` when
    /// the name writes no size, or names no GPU without it.
    fn unknown_size(&self, name: &str) -> Option<LookupError> {
        let input = GpuTokens::read(name);
        if input.memory.is_empty() {
            return None;
        }
        let same: Vec<&Gpu> = self
            .gpus
            .iter()
            .filter(|g| Named::new(g).same_but_memory(&input))
            .collect();
        if same.is_empty() {
            return None;
        }
        let mut sizes: Vec<(f64, Vec<String>)> = Vec::new();
        for g in &same {
            let label = match g.modified {
                Some(_) => format!("the {}, a board modified after sale", g.name),
                None => format!("the {}", g.name),
            };
            match sizes.iter_mut().find(|(m, _)| same_size(*m, g.memory_gib)) {
                Some((_, names)) => names.push(label),
                None => sizes.push((g.memory_gib, vec![label])),
            }
        }
        sizes.sort_by(|a, b| a.0.total_cmp(&b.0));
        let known: Vec<String> = sizes
            .iter()
            .map(|(m, names)| format!("{m} GB: {}", names.join(", ")))
            .collect();
        let written: Vec<String> = input.memory.iter().map(|m| format!("{m} GB")).collect();
        let gpu = input.model.join(" ").to_uppercase();
        let names: Vec<String> = same.iter().map(|g| format!("`{}`", g.name)).collect();
        Some(LookupError {
            kind: Kind::Gpu,
            name: name.to_string(),
            suggestions: same.iter().map(|g| g.name.clone()).collect(),
            ambiguous: false,
            message: Some(format!(
                "no gpu record named `{}`: no {gpu} in compat-db has {} (known: {}); did you mean {}?",
                name.trim(),
                written.join(" and "),
                known.join("; "),
                names.join(", ")
            )),
        })
    }

    /// Reads GPUs as people write them: a comma-separated list of names, each with an
    /// optional count before or after it (`8x H800`, `H800x8`, `8*A800`, `A800*8`,
    /// `8×A800`, `8卡 A800`, `8x H100 SXM, 2x A100`). The whole of each item is tried as a
    /// name first, so `RTX 5090` and `4090` stay names.
    pub fn gpus_written(&self, text: &str) -> Result<Vec<(GpuMatch<'_>, u32)>, GpuTextError> {
        let mut out = Vec::new();
        for item in text.split(',') {
            if item.trim().is_empty() && text.contains(',') {
                continue; // `H100x8,` : a trailing comma
            }
            out.push(self.gpu_written(item)?);
        }
        Ok(out)
    }

    fn gpu_written(&self, item: &str) -> Result<(GpuMatch<'_>, u32), GpuTextError> {
        let mut whole: Option<LookupError> = None;
        let mut named: Option<LookupError> = None;
        let mut count: Option<ParseError> = None;
        for (i, candidate) in count_candidates(item).into_iter().enumerate() {
            match candidate {
                Ok((name, n)) => match self.gpu_match(&name) {
                    Ok(m) => return Ok((m, n)),
                    Err(e) if i == 0 => whole = Some(e),
                    Err(e) => {
                        named.get_or_insert(e);
                    }
                },
                Err(e) => {
                    count.get_or_insert(e);
                }
            }
        }
        // The most specific complaint: a bad count, then the name beside a count, then
        // the whole text as a name.
        Err(match (count, named, whole) {
            (Some(c), _, _) => c.into(),
            (None, Some(n), _) => n.into(),
            (None, None, Some(w)) => w.into(),
            (None, None, None) => LookupError {
                kind: Kind::Gpu,
                name: item.to_string(),
                suggestions: Vec::new(),
                ambiguous: false,
                message: None,
            }
            .into(),
        })
    }

    /// Reads a driver given where one driver is meant (`query --driver`, `verify --driver`):
    /// a release is itself; a branch (`535`, `R535`, `535.x`) stands for its earliest
    /// release in compat-db, the one a verdict for the whole branch must assume, and the
    /// second value says so.
    pub fn driver_written(&self, text: &str) -> Result<(DriverVersion, Option<String>), ParseError> {
        match text.parse::<DriverInput>()? {
            DriverInput::Version(v) => Ok((v, None)),
            DriverInput::Branch(b) => {
                let first = self
                    .drivers
                    .iter()
                    .find(|r| r.branch == b)
                    .and_then(|r| r.first_version.clone());
                match first {
                    Some(v) => {
                        let note = format!(
                            "`{}` is a branch: read as {v}, the earliest R{b} release in compat-db (a later {b}.x release can only do better)",
                            text.trim()
                        );
                        Ok((v, Some(note)))
                    }
                    None => Err(ParseError::new(
                        "driver version",
                        text,
                        format!(
                            "compat-db knows no release of branch R{b}; give the full version, as `nvidia-smi` prints it (e.g. {b}.xx.yy)"
                        ),
                    )),
                }
            }
        }
    }

    /// The first driver whose CUDA (the version `nvidia-smi` shows) is `cuda`: what a
    /// listing's "CUDA 12.4 driver" means. Read as the least Linux minimum driver of the
    /// `cuda` toolkits compat-db has (12.4.0's 550.54.14, not 12.4.1's 550.54.15), with a
    /// note saying so.
    pub fn driver_for_cuda(&self, text: &str) -> Result<(DriverVersion, String), ParseError> {
        const WHAT: &str = "CUDA version of a driver";
        let t = text.trim();
        let word = crate::model::without_words(t, &["cuda", "driver", "nvidia", "version"]);
        let digits = word.trim_start_matches(|c: char| c.is_ascii_alphabetic());
        let want: CudaVersion = digits.parse().map_err(|_| {
            ParseError::new(
                WHAT,
                text,
                "expected the CUDA version nvidia-smi shows for the driver: 12.4, `CUDA 12.4`",
            )
        })?;
        let (major, minor) = want.major_minor();
        let first = self
            .cuda
            .iter()
            .filter(|c| c.version.major_minor() == (major, minor))
            .filter_map(|c| c.min_driver_linux.clone().map(|d| (d, c.version.clone())))
            .min_by(|a, b| a.0.cmp(&b.0));
        match first {
            Some((driver, toolkit)) => {
                let note = format!(
                    "`{}` read as driver {driver}: the first whose CUDA is {major}.{minor} (CUDA {toolkit}'s Linux minimum); a later driver can only do better",
                    crate::text::excerpt(t)
                );
                Ok((driver, note))
            }
            None => Err(ParseError::new(
                WHAT,
                text,
                format!(
                    "compat-db has no CUDA {major}.{minor} toolkit with a driver minimum; give the driver version nvidia-smi prints"
                ),
            )),
        }
    }

    /// `(id, display name)` of every record of a kind.
    pub fn display_names(&self, kind: Kind) -> Vec<(String, String)> {
        let db = self;
        match kind {
            Kind::Gpu => db.gpus.iter().map(|g| (g.id.clone(), g.name.clone())).collect(),
            Kind::Cuda => db.cuda.iter().map(|c| (c.id.clone(), c.label.clone())).collect(),
            Kind::Cudnn => db
                .cudnn
                .iter()
                .map(|c| (c.id.clone(), format!("cuDNN {}", c.version)))
                .collect(),
            Kind::Torch => db
                .torch
                .iter()
                .map(|t| {
                    let tags: Vec<String> = t.variants.iter().map(|v| v.tag.to_string()).collect();
                    (t.id.clone(), format!("torch {} ({})", t.version, tags.join(", ")))
                })
                .collect(),
            Kind::Driver => db
                .drivers
                .iter()
                .map(|d| (d.id.clone(), format!("R{}", d.branch)))
                .collect(),
            Kind::Python => db
                .python
                .iter()
                .map(|p| (p.id.clone(), format!("Python {}", p.version)))
                .collect(),
            Kind::Image => db
                .images
                .iter()
                .map(|i| {
                    let name = match &i.tag {
                        Some(t) => format!("{}:{t}", i.repository),
                        None => format!(
                            "{}:{}-*",
                            i.repository,
                            i.cuda.as_ref().map_or("", |c| c.as_str())
                        ),
                    };
                    (i.id.clone(), name)
                })
                .collect(),
            Kind::Package => db
                .packages
                .iter()
                .map(|p| {
                    (
                        p.id.clone(),
                        format!("{} (compiles CUDA code: {})", p.name, p.compiles.as_str()),
                    )
                })
                .collect(),
            Kind::Framework => db
                .frameworks
                .iter()
                .map(|f| {
                    let newest = f
                        .releases
                        .last()
                        .map_or("-".to_string(), |r| r.version.to_string());
                    (
                        f.id.clone(),
                        format!(
                            "{} (pins torch; {} releases read, newest {newest})",
                            f.name,
                            f.releases.len()
                        ),
                    )
                })
                .collect(),
            Kind::Xid => db
                .xids
                .iter()
                .map(|x| {
                    (
                        x.id.clone(),
                        format!("Xid {}: {} ({})", x.code, x.description, x.fault.as_str()),
                    )
                })
                .collect(),
            Kind::Efficiency => db
                .efficiencies
                .iter()
                .map(|e| {
                    (
                        e.id.clone(),
                        format!("{} against {} ({})", e.metric, e.basis.key(), e.measured),
                    )
                })
                .collect(),
            Kind::ForeignGpu => db
                .foreign_gpus
                .iter()
                .map(|f| {
                    (
                        f.id.clone(),
                        format!("{} ({}; {}, not CUDA)", f.name, f.vendor, f.stack),
                    )
                })
                .collect(),
            Kind::Model => db
                .models
                .iter()
                .map(|m| {
                    (
                        m.id.clone(),
                        format!("{} ({}, {} params)", m.name, m.model_type, m.params),
                    )
                })
                .collect(),
        }
    }

    /// Finds an image by id, tag or `repository:tag`, as people write them: the repository
    /// in full or by its last components (`pytorch:24.08-py3`, `nvidia/pytorch:24.08-py3`),
    /// with a transport (`docker://`), a registry (`docker.io/`) or a digest, or an NGC
    /// release alone (`24.08`); for `nvidia/cuda`, any tag of a family.
    pub fn image(&self, name: &str) -> Result<&Image, LookupError> {
        let wanted = image_name(name);
        let n = normalize(&wanted);
        // `repo:tag`: the tag follows the last `:` after the last `/`.
        let (repo, tag) = match wanted.rsplit_once(':') {
            Some((r, t)) if !t.contains('/') && !r.is_empty() => (Some(r), t),
            _ => (None, wanted.as_str()),
        };
        let repo_fits =
            |im: &Image| repo.is_none_or(|r| im.repository == r || im.repository.ends_with(&format!("/{r}")));
        for im in &self.images {
            let mut names = vec![im.id.clone()];
            if let Some(t) = &im.tag {
                names.push(format!("{}:{t}", im.repository));
                if repo_fits(im) && normalize(t) == normalize(tag) {
                    return Ok(im);
                }
                // An NGC release by its number: `24.08` is `24.08-py3`.
                if repo.is_none() && im.family == ImageFamily::Ngc && t.strip_suffix("-py3") == Some(tag) {
                    return Ok(im);
                }
            }
            if im.family == ImageFamily::NvidiaCuda && repo.is_some() && repo_fits(im) {
                if let Some(c) = &im.cuda {
                    if tag == c.as_str() {
                        return Ok(im);
                    }
                    if let Some(rest) = tag.strip_prefix(&format!("{c}-")) {
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
            message: None,
        })
    }
}

/// An image name without what does not pick a record: a transport (`docker://`,
/// `docker-daemon:`), Docker Hub's registry and `library/`, a digest.
fn image_name(name: &str) -> String {
    let mut s = name.trim();
    for prefix in ["docker://", "docker-daemon:"] {
        s = s.strip_prefix(prefix).unwrap_or(s);
    }
    for prefix in ["docker.io/", "index.docker.io/", "registry-1.docker.io/"] {
        s = s.strip_prefix(prefix).unwrap_or(s);
    }
    s = s.strip_prefix("library/").unwrap_or(s);
    s.split_once('@').map_or(s, |(n, _)| n).to_string()
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

    fn db() -> &'static Db {
        Db::embedded().unwrap()
    }

    /// The record a name resolves to, by canonical name.
    fn resolved(name: &str) -> Option<String> {
        db().gpu(name).ok().map(|g| g.name.clone())
    }

    fn covered(name: &str) -> Vec<String> {
        db().gpu_match(name)
            .map(|m| m.records.iter().map(|g| g.name.clone()).collect())
            .unwrap_or_default()
    }

    #[test]
    fn memory_is_a_token_and_g_is_gb() {
        for (name, want) in [
            ("A100 80G SXM4", "A100 80GB SXM"),
            ("A100-80G", "A100 80GB SXM"),
            ("A100 80 GB SXM", "A100 80GB SXM"),
            ("A100 80GB PCIe", "A100 80GB PCIe"),
            ("A100 40G", "A100 40GB SXM"),
            ("A100 40G PCIe", "A100 40GB PCIe"),
            ("H800 80G", "H800"),
            ("L20 48G", "L20"),
            ("H20 96G", "H20"),
            ("4090 24G", "RTX 4090"),
            ("RTX 4090 24GB", "RTX 4090"),
            ("V100 32G", "V100 SXM2 32GB"),
            ("GH200 480GB", "GH200"),
            ("H200 141G", "H200 SXM"),
        ] {
            assert_eq!(resolved(name).as_deref(), Some(want), "{name}");
        }
    }

    #[test]
    fn form_factor_and_vendor_words_stand_anywhere() {
        for (name, want) in [
            ("SXM4 A100 80G", "A100 80GB SXM"),
            ("PCIe A100 80GB", "A100 80GB PCIe"),
            ("H100 PCIe", "H100 PCIe"),
            ("PCIe H100", "H100 PCIe"),
            ("NVL H100", "H100 NVL"),
            ("H100 NVL 94G", "H100 NVL"),
            ("NVIDIA H100 80GB HBM3", "H100 SXM"),
            ("H100 SXM5", "H100 SXM"),
            ("H800 SXM5 80G", "H800"),
            ("GeForce RTX 4090", "RTX 4090"),
            ("RTX 4090 GeForce", "RTX 4090"),
            ("Tesla T4", "T4"),
            ("NVIDIA A10G", "A10G"),
            ("RTX5090", "RTX 5090"),
            ("rtx4090d", "RTX 4090 D"),
            ("RTX 4090 D", "RTX 4090 D"),
            ("Tesla V100-PCIE-32GB", "V100 PCIe 32GB"),
            ("NVIDIA H100 sm_90", "H100 SXM"),
            ("8x H100 GPU", "H100 SXM"),
        ] {
            let got = resolved(name.trim_start_matches("8x "));
            assert_eq!(got.as_deref(), Some(want), "{name}");
        }
    }

    #[test]
    fn a_contradicting_token_is_no_match() {
        for name in [
            "A100 96G",
            "A100 SXM5",
            "RTX 4090 32G",
            "H100 PCIe HBM3",
            "H100 sm_80",
            "H20 192G",
            "RTX 6000",
        ] {
            assert!(
                db().gpu_match(name).is_err(),
                "{name} matched {:?}",
                covered(name)
            );
        }
        // Names whose extra word contradicts a neighbour find only their own record:
        // never the SXM H800, the 80 GB A800s or the 96 GB H20.
        assert_eq!(covered("H800 PCIe"), ["H800 PCIe"]);
        assert_eq!(covered("A800 40GB Active"), ["A800 40GB Active"]);
        assert_eq!(covered("H20-3e"), ["H20-3e"]);
        assert_eq!(covered("RTX 5090 D"), ["RTX 5090 D"]);
        // The 40 GB parts are never the 80 GB one, and the reverse.
        assert!(covered("A100 40G").iter().all(|n| n.contains("40GB")));
        assert!(covered("A100 80GB").iter().all(|n| n.contains("80GB")));
        // A different model word is a different GPU.
        assert_eq!(covered("RTX 4090"), ["RTX 4090"]);
        assert_eq!(covered("A10"), ["A10"]);
    }

    /// nvidia-smi names the 8 and 16 GB boards alike; the memory it reports chooses. The
    /// totals are nvidia-smi's own (`memory.total` of captured cards).
    #[test]
    fn the_reported_memory_chooses_between_boards_of_one_name() {
        let db = db();
        let reported = |name: &str, mib: Option<u64>| db.gpu_reported(name, mib).unwrap().name.clone();
        let ti = "NVIDIA GeForce RTX 4060 Ti";
        assert_eq!(reported(ti, Some(16380)), "RTX 4060 Ti 16GB");
        assert_eq!(reported(ti, Some(8188)), "RTX 4060 Ti");
        // Nothing reported, or a total no board of the name has: the name alone decides.
        assert_eq!(reported(ti, None), "RTX 4060 Ti");
        assert_eq!(reported(ti, Some(12000)), "RTX 4060 Ti");
        assert_eq!(
            reported("NVIDIA GeForce RTX 5060 Ti", Some(16311)),
            "RTX 5060 Ti 16GB"
        );
        // The modified 4090 prints NVIDIA's name; its 49140 MiB (a captured table) tells it.
        assert_eq!(reported("NVIDIA GeForce RTX 4090", Some(49140)), "RTX 4090 48GB");
        assert_eq!(reported("NVIDIA GeForce RTX 4090", Some(24564)), "RTX 4090");
        // A name that writes its size keeps it; another form factor is another GPU.
        assert_eq!(reported("NVIDIA A100-SXM4-40GB", Some(81920)), "A100 40GB SXM");
        assert_eq!(reported("NVIDIA H100 80GB HBM3", Some(81559)), "H100 SXM");
        assert_eq!(reported("NVIDIA H100 PCIe", Some(81559)), "H100 PCIe");
        assert!(db.gpu_reported("NVIDIA Nonesuch", Some(1)).is_err());
    }

    /// A size written in the name chooses the record of that size; a size no record of
    /// the GPU has is an error naming the sizes there are.
    #[test]
    fn a_memory_size_chooses_the_record_of_that_size() {
        for (name, want) in [
            ("RTX 4060 Ti 16GB", "RTX 4060 Ti 16GB"),
            ("RTX 4060 Ti 16G", "RTX 4060 Ti 16GB"),
            ("4060 Ti 16 GB", "RTX 4060 Ti 16GB"),
            ("RTX 4060 Ti 8GB", "RTX 4060 Ti"),
            ("RTX 5060 Ti 16GB", "RTX 5060 Ti 16GB"),
            ("RTX 4090 48G", "RTX 4090 48GB"),
            ("4090 48GB", "RTX 4090 48GB"),
            ("RTX 4090 24GB", "RTX 4090"),
            ("H20 141G", "H20-3e"),
            ("H20 96G", "H20"),
            ("NVIDIA A800-SXM4-40GB", "A800 40GB SXM"),
            ("A800 40G SXM", "A800 40GB SXM"),
            ("NVIDIA A800 80GB PCIe LC", "A800 80GB PCIe LC"),
            ("NVIDIA A800 80GB PCIe", "A800 80GB PCIe"),
            ("NVIDIA L2", "L2"),
        ] {
            assert_eq!(resolved(name).as_deref(), Some(want), "{name}");
        }
        // The 16 GB board is never read as the 8 GB one, nor the reverse.
        assert_eq!(covered("RTX 4060 Ti 16GB"), ["RTX 4060 Ti 16GB"]);
        assert_eq!(covered("RTX 4060 Ti 8GB"), ["RTX 4060 Ti"]);
        // A plain name is the smaller card, and says the other exists.
        let m = db().gpu_match("NVIDIA GeForce RTX 4060 Ti").unwrap();
        assert_eq!(m.chosen.name, "RTX 4060 Ti");
        assert!(m.why.unwrap().contains("RTX 4060 Ti 16GB"));
        let e = db().gpu("RTX 4090 32GB").unwrap_err().to_string();
        for want in [
            "32 GB",
            "24 GB: the RTX 4090",
            "48 GB: the RTX 4090 48GB, a board modified after sale",
        ] {
            assert!(e.contains(want), "{want}: {e}");
        }
        let e = db().gpu("A100 96G").unwrap_err().to_string();
        assert!(
            e.contains("no A100 in compat-db has 96 GB") && e.contains("80 GB"),
            "{e}"
        );
    }

    /// A board modified after sale answers only to a name that writes its size: NVIDIA's
    /// card stays the only record of its plain name, and of nvidia-smi's.
    #[test]
    fn a_modified_board_needs_its_size_written() {
        for name in ["RTX 4090", "4090", "NVIDIA GeForce RTX 4090", "RTX 4090 24G"] {
            assert_eq!(covered(name), ["RTX 4090"], "{name}");
        }
        let g = db().gpu("4090 48G").unwrap();
        assert!(g.modified.as_deref().unwrap().contains("not an NVIDIA product"));
    }

    /// GPUs of other vendors are refused for what they are, with any count or size
    /// beside them, and never matched to an NVIDIA name.
    #[test]
    fn other_vendors_gpus_are_refused_by_name() {
        for (text, want) in [
            (
                "MI300X",
                "AMD Instinct MI300X: not an NVIDIA GPU; gpuenv judges CUDA stacks only (ROCm builds are not covered)",
            ),
            ("AMD Instinct MI300X", "AMD Instinct MI300X: not an NVIDIA GPU"),
            ("8x MI300X 192GB", "AMD Instinct MI300X: not an NVIDIA GPU"),
            ("MI325X", "AMD Instinct MI325X"),
            ("mi250x*8", "AMD Instinct MI250X"),
            ("MI250", "AMD Instinct MI250:"),
            ("MI210", "AMD Instinct MI210"),
            (
                "910B",
                "Huawei Ascend 910B: not an NVIDIA GPU; gpuenv judges CUDA stacks only (CANN builds are not covered)",
            ),
            ("昇腾910B", "Huawei Ascend 910B"),
            ("8卡 昇腾 910B", "Huawei Ascend 910B"),
            ("Ascend 910C", "Huawei Ascend 910C"),
        ] {
            let e = db().gpus_written(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
            assert!(!e.contains("did you mean"), "{text}: {e}");
        }
        match db().find(Kind::ForeignGpu, "MI300X") {
            Ok(Found::ForeignGpu(f)) => assert_eq!((f.vendor.as_str(), f.stack.as_str()), ("AMD", "ROCm")),
            other => panic!("{other:?}"),
        }
        assert!(db().foreign_gpu("H100").is_none());
    }

    #[test]
    fn a_name_may_cover_several_records_and_says_which_it_uses() {
        let m = db().gpu_match("A100").unwrap();
        let mut names: Vec<&str> = m.records.iter().map(|g| g.name.as_str()).collect();
        names.sort();
        assert_eq!(
            names,
            [
                "A100 40GB PCIe",
                "A100 40GB SXM",
                "A100 80GB PCIe",
                "A100 80GB SXM"
            ]
        );
        assert_eq!(m.chosen.name, "A100 80GB SXM");
        let why = m.why.unwrap();
        assert!(why.contains("names 4 GPUs") && why.contains("`A100`"), "{why}");
        assert_eq!(covered("H100").len(), 2);
        assert_eq!(covered("A100 SXM").len(), 2);
        assert_eq!(resolved("A100 SXM").as_deref(), Some("A100 80GB SXM"));
        assert_eq!(covered("V100").len(), 4);
        // One record: no explanation needed.
        assert!(db().gpu_match("A100 80G SXM4").unwrap().why.is_none());
    }

    #[test]
    fn every_name_and_alias_in_compat_db_finds_its_own_record() {
        for g in &db().gpus {
            for n in std::iter::once(&g.name).chain(&g.aliases) {
                assert_eq!(db().gpu(n).map(|r| r.id.as_str()), Ok(g.id.as_str()), "{n}");
            }
        }
    }

    proptest::proptest! {
        /// Any text, read as GPUs or as a name of any kind, gives an answer or an error.
        #[test]
        fn any_text_reads_without_panic(text in "\\PC{0,30}") {
            let _ = db().gpus_written(&text);
            let _ = db().driver_written(&text);
            for kind in Kind::ALL {
                let _ = db().find(kind, &text);
            }
        }

        /// Any characters at all (control characters, combining marks, any script), alone
        /// or beside the words and counts that are read, in every lookup of user text.
        #[test]
        fn any_characters_read_without_panic(
            text in proptest::prelude::any::<String>(),
            word in proptest::prelude::prop_oneof![
                proptest::prelude::Just("H100"), proptest::prelude::Just("8x"),
                proptest::prelude::Just("R535"), proptest::prelude::Just("12.4"),
                proptest::prelude::Just("2.4.1+cu121"), proptest::prelude::Just("flash_attn"),
                proptest::prelude::Just("80G"), proptest::prelude::Just("卡"),
            ],
        ) {
            for t in [text.clone(), format!("{word}{text}"), format!("{text} {word}"), format!("{word}x{text}")] {
                let _ = db().gpus_written(&t);
                let _ = db().driver_written(&t);
                let _ = db().gpu_match(&t);
                for kind in Kind::ALL {
                    let _ = db().find(kind, &t);
                }
            }
        }
    }

    #[test]
    fn unknown_names_suggest_and_never_panic() {
        let e = db().gpu("H1000").unwrap_err();
        assert!(e.to_string().contains("did you mean"), "{e}");
        for name in ["", "é", "卡", "x", "80G", "SXM4", "___", "sm_", "NVIDIA"] {
            let _ = db().gpu_match(name);
        }
        assert!(db().gpu_match("80G").is_err());
        assert!(db().gpu_match("").is_err());
        for kind in [
            Kind::Cuda,
            Kind::Cudnn,
            Kind::Torch,
            Kind::Driver,
            Kind::Python,
            Kind::Image,
        ] {
            for name in ["é", "ü12.4", "r", "R", "卡"] {
                let _ = db().find(kind, name);
            }
        }
    }

    fn written(text: &str) -> Vec<(String, u32)> {
        db().gpus_written(text)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .into_iter()
            .map(|(m, n)| (m.chosen.name.clone(), n))
            .collect()
    }

    #[test]
    fn counts_in_every_common_form() {
        for text in [
            "8x H800",
            "8 x H800",
            "H800x8",
            "H800 x 8",
            "8X H800",
            "8*H800",
            "H800*8",
            "8×H800",
            "8 × H800",
            "8卡 H800",
            "8卡H800",
            "H800 8卡",
            "8x H800 80G",
            "8x NVIDIA H800",
        ] {
            assert_eq!(written(text), [("H800".to_string(), 8)], "{text}");
        }
        assert_eq!(written("2x4090"), [("RTX 4090".to_string(), 2)]);
        assert_eq!(written("4090x2"), [("RTX 4090".to_string(), 2)]);
        assert_eq!(written("RTX 5090"), [("RTX 5090".to_string(), 1)]);
        assert_eq!(written("A10Gx4"), [("A10G".to_string(), 4)]);
        assert_eq!(
            written("8x H100 SXM, 2x A100 40G PCIe"),
            [("H100 SXM".to_string(), 8), ("A100 40GB PCIe".to_string(), 2)]
        );
        // What gpuenv prints in its headers reads back.
        assert_eq!(written("8x A800 80GB SXM"), [("A800 80GB SXM".to_string(), 8)]);
        assert_eq!(
            written("1x RTX PRO 6000 Blackwell"),
            [("RTX PRO 6000 Blackwell".to_string(), 1)]
        );
    }

    #[test]
    fn unreadable_gpu_text_is_an_error_never_an_unknown_gpu() {
        for (text, says) in [
            ("H100x0", "at least 1"),
            ("H100x99999999", "1024"),
            ("8x H1000", "`H1000`"),
            ("H1000", "`H1000`"),
            ("8x", "`8x`"),
            ("x8", "`x8`"),
            ("8 H100", "`8 H100`"),
        ] {
            let e = db().gpus_written(text).unwrap_err();
            assert!(e.to_string().contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn driver_branches_as_people_write_them() {
        for name in ["535", "R535", "r535", "535.x", "535.104.05", "driver 535"] {
            match db().find(Kind::Driver, name) {
                Ok(Found::Driver(d)) => assert_eq!(d.branch, 535, "{name}"),
                other => panic!("{name}: {other:?}"),
            }
        }
    }

    #[test]
    fn model_names_as_people_write_them() {
        assert_eq!(model_key("Llama 2 70B"), "llama-2-70-b");
        assert_eq!(model_key("llama2-70b"), "llama-2-70-b");
        assert_eq!(model_key("LLAMA_2_70b"), "llama-2-70-b");
        // Digits the name separates stay apart: Qwen2.5-7B is not Qwen2-57B.
        assert_ne!(model_key("Qwen2.5-7B"), model_key("Qwen2-57B"));
        assert_eq!(
            model_keys("meta-llama/Llama-2-70b-hf"),
            ["meta-llama-llama-2-70-b-hf", "llama-2-70-b-hf"]
        );
        for name in [
            "meta-llama/Llama-2-70b-hf",
            "llama-2-70b",
            "Llama 2 70B",
            "Llama-2-70b-hf",
            "org/llama2-70b",
        ] {
            assert_eq!(
                db().model(name).map(|m| m.id.as_str()),
                Ok("llama-2-70b"),
                "{name}"
            );
        }
        assert_eq!(
            db().model("Qwen/Qwen2.5-7B").map(|m| m.id.as_str()),
            Ok("qwen2-5-7b")
        );
        assert_eq!(
            db().model("mixtral 8x7b").map(|m| m.id.as_str()),
            Ok("mixtral-8x7b")
        );
        let e = db().model("Llama-2-7OB").unwrap_err();
        assert!(e.to_string().contains("did you mean"), "{e}");
        for name in ["", "/", "é", "卡", "org/"] {
            assert!(db().model(name).is_err(), "{name}");
        }
    }

    #[test]
    fn every_model_name_and_alias_finds_its_own_record() {
        for m in &db().models {
            for n in std::iter::once(&m.name).chain(&m.aliases) {
                assert_eq!(db().model(n).map(|r| r.id.as_str()), Ok(m.id.as_str()), "{n}");
            }
        }
    }

    #[test]
    fn message() {
        let e = LookupError {
            kind: Kind::Gpu,
            name: "H1000".into(),
            suggestions: vec!["H100 SXM".into(), "H100 PCIe".into()],
            ambiguous: false,
            message: None,
        };
        assert_eq!(
            e.to_string(),
            "no gpu record named `H1000`; did you mean `H100 SXM`, `H100 PCIe`?"
        );
    }
}
