//! `gpuenv plan` held to published measurements: every case of
//! `tests/fixtures/plan/measured.toml` (a peak memory, a run that fit or did not, GPU hours
//! of a training run, a decode rate) run through the command, and a table of every memory
//! case beside accelerate's and DeepSpeed's estimators
//! (`tests/fixtures/plan/measured-table.md`, rewritten with `GPUENV_BLESS=1`).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use gpuenv::plan::reference::{
    AccelerateDtype, accelerate_size, accelerate_training_usage, estimate_zero2_model_states_mem_needs,
    estimate_zero3_model_states_mem_needs,
};
use serde::Deserialize;
use serde_json::Value;

use crate::support::{fixture, gpuenv};

/// How far gpuenv's figure may be from the measured one, either way, as a fraction of it.
const TOLERANCE: f64 = 0.25;

/// The `plan` flags a case may use to state its run; anything else the run did goes in its
/// `conditions`.
const FLAGS: &[&str] = &[
    "--method",
    "--precision",
    "--optimizer",
    "--seq-len",
    "--batch",
    "--lora-rank",
    "--attention",
    "--engine",
    "--no-checkpointing",
    "--trainer",
    "--offload",
    "--optimizer-in-backward",
    "--gpu-memory-utilization",
    "--tp",
    "--pp",
    "--shard",
    "--gpu",
    "--gpus",
    "--tokens",
    "--mfu",
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Measurements {
    case: Vec<Case>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    id: String,
    what: String,
    model: String,
    args: Vec<String>,
    kind: Kind,
    measured: Option<f64>,
    unit: Option<String>,
    scope: Option<Scope>,
    deepspeed: Option<String>,
    source: String,
    quote: String,
    conditions: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Memory,
    Fits,
    TooBig,
    GpuHours,
    DecodeTokensPerS,
}

/// Whose memory a memory figure is: one GPU's peak, or the peaks summed over the GPUs used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Scope {
    PerGpu,
    AllGpus,
}

impl Case {
    /// The value after `flag` in the args.
    fn flag(&self, flag: &str) -> Option<&str> {
        let at = self.args.iter().position(|a| a == flag)?;
        self.args.get(at + 1).map(String::as_str)
    }

    fn gpu(&self) -> &str {
        self.flag("--gpu").expect("checked: every case names its GPU")
    }

    fn count(&self) -> u64 {
        self.flag("--gpus")
            .map_or(1, |n| n.parse().expect("checked: --gpus is a number"))
    }

    fn measured(&self) -> f64 {
        self.measured.expect("checked: the kind has a figure")
    }

    fn unit(&self) -> &str {
        self.unit.as_deref().expect("checked: the kind has a unit")
    }

    /// Bytes in one of the case's memory units: GiB, or decimal GB.
    fn unit_bytes(&self) -> f64 {
        match self.unit() {
            "GiB" => (1u64 << 30) as f64,
            "GB" => 1e9,
            u => panic!("{}: not a memory unit: {u}", self.id),
        }
    }

    /// How many GPUs' memory the measured figure covers.
    fn gpus_measured(&self) -> u64 {
        match self.scope {
            Some(Scope::AllGpus) => self.count(),
            _ => 1,
        }
    }
}

fn measurements() -> Vec<Case> {
    let path = fixture("plan/measured.toml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file: Measurements = toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    file.case
}

/// gpuenv's plan of a case as JSON, or why there is none (the first line of what it said).
fn plan(case: &Case) -> Result<Value, String> {
    let mut args = vec!["plan", "--model", case.model.as_str()];
    args.extend(case.args.iter().map(String::as_str));
    args.push("--json");
    let run = gpuenv(&args);
    if !matches!(run.code, 0 | 1) {
        let said = run.stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(format!("exit {}: {}", run.code, said.trim()));
    }
    serde_json::from_str(&run.stdout).map_err(|e| format!("stdout is not JSON: {e}"))
}

/// The entry of `fits[]` for the case's GPU.
fn fit_entry<'a>(case: &Case, doc: &'a Value) -> Result<&'a Value, String> {
    doc["fits"]
        .as_array()
        .and_then(|fits| fits.iter().find(|f| f["gpu"] == case.gpu()))
        .ok_or_else(|| format!("no entry for {} in fits[]", case.gpu()))
}

/// gpuenv's figure for a case with one, in the case's unit.
fn gpuenv_figure(case: &Case, doc: &Value) -> Result<f64, String> {
    let number = |v: &Value, what: &str| v.as_f64().ok_or_else(|| format!("no {what} in the plan"));
    match case.kind {
        Kind::Memory => {
            let per_gpu = number(&doc["memory"]["per_gpu"]["total"], "memory.per_gpu.total")?;
            Ok(per_gpu * case.gpus_measured() as f64 / case.unit_bytes())
        }
        Kind::GpuHours => {
            let f = fit_entry(case, doc)?;
            Ok(number(&f["hours"], "hours")? * number(&f["count"], "count")?)
        }
        Kind::DecodeTokensPerS => number(
            &fit_entry(case, doc)?["decode_tokens_per_s"],
            "decode_tokens_per_s",
        ),
        Kind::Fits | Kind::TooBig => unreachable!("a fit has no figure"),
    }
}

/// Holds gpuenv's plan to one case; the failure names the case, the measured figure and
/// gpuenv's.
fn judge(case: &Case) -> Result<(), String> {
    let fail = |why: String| Err(format!("{}: {why}", case.id));
    let doc = match plan(case) {
        Ok(doc) => doc,
        Err(e) => return fail(format!("gpuenv gave no plan ({e})")),
    };
    match case.kind {
        Kind::Fits | Kind::TooBig => {
            let want = case.kind == Kind::Fits;
            let said = match fit_entry(case, &doc) {
                Ok(f) => f,
                Err(e) => return fail(e),
            };
            let (fits, count) = (said["fits"].as_bool(), said["count"].as_u64());
            if fits == Some(want) && count == Some(case.count()) {
                return Ok(());
            }
            let measured = if want { "ran" } else { "did not fit" };
            fail(format!(
                "measured: {measured} on {} x {}; gpuenv: fits={} at {} GPUs ({} bytes a GPU of {})",
                case.count(),
                case.gpu(),
                said["fits"],
                said["count"],
                said["per_gpu_bytes"],
                said["memory_bytes"],
            ))
        }
        _ => {
            let measured = case.measured();
            match gpuenv_figure(case, &doc) {
                Ok(got) if (got / measured - 1.0).abs() <= TOLERANCE => Ok(()),
                Ok(got) => fail(format!(
                    "measured {measured} {unit}, gpuenv {got:.2} {unit} ({:.2}x; allowed {:.2}x to {:.2}x)",
                    got / measured,
                    1.0 - TOLERANCE,
                    1.0 + TOLERANCE,
                    unit = case.unit(),
                )),
                Err(e) => fail(format!("measured {measured} {}, gpuenv: {e}", case.unit())),
            }
        }
    }
}

/// The file states every case fully: a kind with its figure and unit, a source and its
/// words, only the flags that state a run, and one GPU.
#[test]
fn the_measurements_file_states_every_case() {
    let cases = measurements();
    assert!(!cases.is_empty());
    let mut ids = BTreeSet::new();
    for c in &cases {
        let id = &c.id;
        assert!(ids.insert(id.clone()), "{id}: the id is used twice");
        assert!(
            id.chars()
                .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || "-.".contains(ch)),
            "{id}: ids are lower-case kebab"
        );
        for (field, text) in [
            ("what", &c.what),
            ("quote", &c.quote),
            ("conditions", &c.conditions),
        ] {
            assert!(!text.trim().is_empty(), "{id}: empty {field}");
        }
        assert!(c.source.starts_with("https://"), "{id}: source {}", c.source);
        assert!(
            c.model.split('/').count() == 2,
            "{id}: model {} is not a repository id",
            c.model
        );
        let mut args = c.args.iter();
        while let Some(a) = args.next() {
            assert!(
                FLAGS.contains(&a.as_str()),
                "{id}: {a} is not a flag that states a run"
            );
            if a != "--no-checkpointing" && a != "--optimizer-in-backward" {
                assert!(args.next().is_some(), "{id}: {a} without a value");
            }
        }
        assert!(c.flag("--gpu").is_some(), "{id}: no --gpu");
        assert!(c.count() >= 1, "{id}: --gpus");
        let unit = c.unit.as_deref();
        match c.kind {
            Kind::Memory => {
                assert!(matches!(unit, Some("GiB" | "GB")), "{id}: memory in {unit:?}");
                assert!(c.scope.is_some(), "{id}: memory without a scope");
            }
            Kind::GpuHours => {
                assert_eq!(unit, Some("GPU hours"), "{id}");
                assert!(c.flag("--tokens").is_some(), "{id}: GPU hours need --tokens");
            }
            Kind::DecodeTokensPerS => assert_eq!(unit, Some("tokens/s"), "{id}"),
            Kind::Fits | Kind::TooBig => {
                assert!(
                    c.measured.is_none() && c.unit.is_none(),
                    "{id}: a fit has no figure"
                );
            }
        }
        if c.kind != Kind::Fits && c.kind != Kind::TooBig {
            assert!(c.measured.is_some_and(|m| m > 0.0), "{id}: no figure");
        }
        if c.kind != Kind::Memory {
            assert!(
                c.scope.is_none() && c.deepspeed.is_none(),
                "{id}: scope and deepspeed are for memory"
            );
        }
        if let Some(d) = &c.deepspeed {
            assert!(
                ["zero2", "zero3", "zero3-offload"].contains(&d.as_str()),
                "{id}: deepspeed {d}"
            );
        }
    }
}

/// Every published figure within 25% and every fit as it was. Each failure names the case,
/// the measured figure and gpuenv's.
#[test]
fn plan_meets_the_published_measurements() {
    let cases = measurements();
    let failures: Vec<String> = cases.iter().filter_map(|c| judge(c).err()).collect();
    assert!(
        failures.is_empty(),
        "{} of {} published measurements missed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// accelerate's dtype for a plan precision (it has no fp8: one byte, as its int8).
fn accelerate_dtype(precision: &str) -> AccelerateDtype {
    match precision {
        "fp32" => AccelerateDtype::Float32,
        "int8" | "fp8" => AccelerateDtype::Int8,
        "int4" => AccelerateDtype::Int4,
        _ => AccelerateDtype::Float16,
    }
}

/// accelerate's figure for a case, bytes over the GPUs the measurement covers: the load
/// size for inference and for the frozen weights of LoRA (4-bit for QLoRA), "Training
/// using Adam" for full training. accelerate plans one device, so a figure for one GPU of
/// several is its whole-model figure divided by their count. fp32 bytes are the
/// parameters x 4 (accelerate also counts buffers, a few KiB).
fn accelerate_figure(case: &Case, params: u64) -> Option<(f64, &'static str)> {
    let fp32 = params * 4;
    let precision = case.flag("--precision").unwrap_or("mixed");
    let (bytes, how) = match case.flag("--method").unwrap_or("full") {
        "inference" => (accelerate_size(fp32, accelerate_dtype(precision)), "load"),
        "lora" => (accelerate_size(fp32, accelerate_dtype(precision)), "load"),
        "qlora" => (accelerate_size(fp32, AccelerateDtype::Int4), "load"),
        _ => (
            accelerate_training_usage(fp32, accelerate_dtype(precision))? as f64,
            "Adam",
        ),
    };
    Some((bytes * case.gpus_measured() as f64 / case.count() as f64, how))
}

/// DeepSpeed's estimator named by the case, bytes on one GPU: model states only, 16-bit
/// weights and fp32 Adam.
fn deepspeed_figure(case: &Case, doc: &Value) -> Result<f64, String> {
    let kind = case.deepspeed.as_deref().ok_or("")?;
    let params = doc["params"].as_u64().ok_or("no params")?;
    let count = case.count();
    let per_node = u32::try_from(count.min(8)).expect("small");
    let nodes = u32::try_from(count.div_ceil(8)).expect("small");
    let gpu = match kind {
        "zero2" => estimate_zero2_model_states_mem_needs(params, per_node, nodes, false, 1.5).1,
        _ => {
            let largest = doc["model"]["largest_layer_params"]
                .as_u64()
                .ok_or("the plan gives no largest layer")?;
            let offload = kind == "zero3-offload";
            estimate_zero3_model_states_mem_needs(
                params, largest, per_node, nodes, offload, offload, true, 1.5,
            )
            .1
        }
    };
    Ok(gpu as f64 * case.gpus_measured() as f64)
}

/// The model's parameter count as gpuenv knows it, from a plan with no other flags: the
/// estimators' columns need only the count, even where the case's flags are not yet read.
fn model_params(model: &str) -> Option<u64> {
    let run = gpuenv(&["plan", "--model", model, "--json"]);
    let doc: Value = serde_json::from_str(&run.stdout).ok()?;
    doc["params"].as_u64()
}

/// A Markdown table cell: no pipes or newlines from what a command said.
fn cell(text: &str) -> String {
    text.replace('|', "/").replace('\n', " ")
}

/// The table of every memory case: the measured figure, gpuenv's, accelerate's and
/// DeepSpeed's (where a case names one), each with its ratio to the measured figure.
fn render_table(cases: &[Case]) -> String {
    let mut out = String::new();
    out.push_str(
        "# Memory: published measurements against gpuenv and other estimators\n\n\
         Written by `tests/it/plan_measured.rs` from `measured.toml` (rewrite with\n\
         `GPUENV_BLESS=1 cargo test --test it plan_measured`). Figures are in each case's\n\
         unit, over the GPUs its measurement covers (Qwen's figures are summed over the GPUs\n\
         used). accelerate: `accelerate estimate-memory`'s load size (`load`: inference, and the\n\
         frozen weights of LoRA and QLoRA) or its \"Training using Adam\" (`Adam`), divided\n\
         over the GPUs, with no activations or cache. DeepSpeed: its ZeRO model-states\n\
         estimator, where the case names one.\n\n\
         | case | measured | gpuenv | ratio | accelerate | ratio | DeepSpeed | ratio |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    let ratio = |v: f64, m: f64| format!("{:.2}x", v / m);
    for c in cases.iter().filter(|c| c.kind == Kind::Memory) {
        let m = c.measured();
        let unit = c.unit();
        let per = c.unit_bytes();
        let shown = |v: f64| format!("{v:.2} {unit}");
        let doc = plan(c);
        let (gpuenv, gpuenv_ratio) = match doc
            .as_ref()
            .map_err(String::clone)
            .and_then(|d| gpuenv_figure(c, d))
        {
            Ok(v) => (shown(v), ratio(v, m)),
            Err(e) => (cell(&format!("error: {e}")), "-".into()),
        };
        let params = doc
            .as_ref()
            .ok()
            .and_then(|d| d["params"].as_u64())
            .or_else(|| model_params(&c.model));
        let (accel, accel_ratio) = match params.map(|p| accelerate_figure(c, p)) {
            Some(Some((bytes, how))) => (format!("{} ({how})", shown(bytes / per)), ratio(bytes / per, m)),
            Some(None) => ("no estimate for this dtype".into(), "-".into()),
            None => ("- (no parameter count)".into(), "-".into()),
        };
        let (ds, ds_ratio) = match (&c.deepspeed, doc.as_ref()) {
            (None, _) => ("-".into(), "-".into()),
            (Some(_), Err(_)) => ("- (no plan)".into(), "-".into()),
            (Some(kind), Ok(d)) => match deepspeed_figure(c, d) {
                Ok(bytes) => (format!("{} ({kind})", shown(bytes / per)), ratio(bytes / per, m)),
                Err(e) => (cell(&format!("- ({e})")), "-".into()),
            },
        };
        writeln!(
            out,
            "| {} | {} | {gpuenv} | {gpuenv_ratio} | {accel} | {accel_ratio} | {ds} | {ds_ratio} |",
            c.id,
            shown(m),
        )
        .expect("writing to a String");
    }
    out
}

/// The committed table is the rendering of today's cases and today's gpuenv.
#[test]
fn the_comparison_table_is_current() {
    let path = fixture("plan/measured-table.md");
    let table = render_table(&measurements());
    if std::env::var_os("GPUENV_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &table).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        committed == table,
        "{} is not the rendering of today's cases and plan; rewrite it with GPUENV_BLESS=1 \
         cargo test --test it plan_measured, and read the diff",
        path.display()
    );
    // The README shows the same rows, so what it claims is what the test holds.
    let readme = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let rows = &table[table.find("| case |").expect("the table's header")..];
    assert!(
        readme.contains(rows.trim_end()),
        "README.md's table under 'How `plan` is held to measured runs' is not today's \
         tests/fixtures/plan/measured-table.md: copy its rows over"
    );
}
