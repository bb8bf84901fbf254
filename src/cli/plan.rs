//! `gpuenv plan`: its flags, read into a model, settings and options for [`crate::plan`].

use std::path::PathBuf;

use clap::Args;

use super::stack::StackArgs;
use super::{CliError, Exit};
use crate::db::Db;
use crate::files::{self, Replace};
use crate::plan::{Method, ModelShape, Optimizer, Precision, Settings, Shard};

/// The flags of `plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The model's size: `7B`, `70b`, `1.5T`, `7000000000`.
    #[arg(
        long,
        value_name = "COUNT",
        conflicts_with = "model",
        allow_hyphen_values = true
    )]
    pub params: Option<String>,
    /// A Hugging Face config.json (read offline), or a model compat-db knows
    /// (`Llama-2-70B`, `meta-llama/Llama-2-70b-hf`; `gpuenv db list model`).
    #[arg(long, value_name = "FILE|NAME")]
    pub model: Option<String>,
    /// What is done with it.
    #[arg(long, value_name = "METHOD", default_value = "full", value_parser = ["inference", "full", "lora", "qlora"])]
    pub method: String,
    /// Number format: `mixed` is 16-bit with an fp32 master copy (for training).
    #[arg(long, value_name = "PRECISION", default_value = "mixed",
          value_parser = ["fp32", "bf16", "fp16", "mixed", "fp8", "int8", "int4"])]
    pub precision: String,
    /// The optimizer (training).
    #[arg(long, value_name = "OPTIMIZER", default_value = "adamw",
          value_parser = ["adamw", "adamw-8bit", "sgd", "adafactor"])]
    pub optimizer: String,
    /// Tokens per sequence.
    #[arg(long, value_name = "N", default_value_t = 2048)]
    pub seq_len: u32,
    /// Sequences per GPU per step (micro-batch).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub batch: u32,
    /// Activation recomputation (gradient checkpointing): the default for training, as
    /// torchtune and LLaMA-Factory run it; kept for scripts that pass it.
    #[arg(long, overrides_with = "no_checkpointing")]
    pub checkpointing: bool,
    /// Keep every layer's activations instead of recomputing them.
    #[arg(long)]
    pub no_checkpointing: bool,
    /// The attention kernel: `flash` (FlashAttention, the default in transformers, vLLM,
    /// torchtune and LLaMA-Factory) and `sdpa` keep no score matrix; `eager` keeps them.
    #[arg(long, value_name = "KERNEL", default_value = "flash", value_parser = ["flash", "sdpa", "eager"])]
    pub attention: String,
    /// The inference engine: `hf` (transformers' generate), `vllm` or `sglang`; they lay
    /// out memory differently.
    #[arg(long, value_name = "ENGINE", default_value = "hf", value_parser = ["hf", "vllm", "sglang"])]
    pub engine: String,
    /// The training framework: `hf` (transformers' Trainer, TRL, LLaMA-Factory),
    /// `torchtune` (chunked loss) or `unsloth` (fused loss, checkpoints offloaded to RAM).
    #[arg(long, value_name = "TRAINER", default_value = "hf", value_parser = ["hf", "torchtune", "unsloth"])]
    pub trainer: String,
    /// Model states kept in CPU memory: `optimizer` (ZeRO-Offload, bitsandbytes' paged
    /// optimizers) or `all` (FSDP `cpu_offload`: parameters, gradients and optimizer).
    #[arg(long, value_name = "WHAT", default_value = "none", value_parser = ["none", "optimizer", "all"])]
    pub offload: String,
    /// The optimizer steps each parameter in the backward pass (torchtune's
    /// `optimizer_in_bwd`): the whole model's gradients are never held at once.
    #[arg(long)]
    pub optimizer_in_backward: bool,
    /// The share of each GPU vLLM or SGLang takes (vLLM's `--gpu-memory-utilization`,
    /// SGLang's `--mem-fraction-static`), a fraction (0.9) or percent (90%).
    #[arg(long, value_name = "FRACTION")]
    pub gpu_memory_utilization: Option<String>,
    /// GPUs to use; without it, the fewest of each GPU that hold the model.
    #[arg(long, value_name = "N")]
    pub gpus: Option<u32>,
    /// Tensor-parallel size (it must divide the attention heads).
    #[arg(long, value_name = "N")]
    pub tp: Option<u32>,
    /// Pipeline stages (the layers split into N).
    #[arg(long, value_name = "N")]
    pub pp: Option<u32>,
    /// Data-parallel sharding of the model states across the GPUs.
    #[arg(long, value_name = "SHARD", default_value = "none",
          value_parser = ["none", "zero1", "zero2", "zero3", "fsdp"])]
    pub shard: String,
    /// LoRA rank (lora, qlora).
    #[arg(long, value_name = "R", default_value_t = 16)]
    pub lora_rank: u32,
    /// Tokens to train on (or generate), for the time and the cost.
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub tokens: Option<String>,
    /// Model FLOPs utilization assumed for the time, a fraction (0.4) or percent (40%).
    #[arg(long, value_name = "FRACTION", default_value = "0.4")]
    pub mfu: String,
    /// Price of one GPU for an hour, for the cost, as listings write it: `2.49`, `$2.49`,
    /// `¥14.4/卡时`, `40元/时`, `$2.1/GPU-hr` (its currency is kept). A machine's price goes
    /// in an --offers file, with its GPU count.
    #[arg(long, value_name = "PRICE")]
    pub price: Option<String>,
    /// The currency of --price (CNY, RMB, USD, EUR, or ¥, $, €), printed with the costs.
    #[arg(long, value_name = "CURRENCY", requires = "price")]
    pub currency: Option<String>,
    /// The dataset's size on disk, GB (decimal).
    #[arg(long, value_name = "GB", default_value_t = 0.0)]
    pub dataset: f64,
    /// Checkpoints kept on disk.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub keep_checkpoints: u32,
    /// Offers to rank: TOML (`[[offer]]` tables) or CSV with the columns name, gpu, count,
    /// driver, price_per_hour (`¥1.98/卡时`, `98 元/台/时`, `$2.49/GPU/hr`, `19.92`),
    /// currency, price_unit (gpu-hour, machine-hour), interconnect, ram, disk, cpus.
    #[arg(long, value_name = "FILE")]
    pub offers: Option<PathBuf>,
    /// Write the order to accept on delivery (`gpuenv check --order FILE`).
    #[arg(long, value_name = "FILE")]
    pub order_out: Option<PathBuf>,
    /// Also list the GPUs that do not fit.
    #[arg(long)]
    pub all: bool,
    /// The stack: `--torch`, `--python`, `--cuda`, `--driver`, `--gpu` (only these GPUs).
    #[command(flatten)]
    pub stack: StackArgs,
    /// Print a JSON document.
    #[arg(long)]
    pub json: bool,
}

/// The longest sequence `--seq-len` takes: 2^27 tokens, past the 10M-token contexts of
/// the longest models.
const MAX_SEQ_LEN: u32 = 1 << 27;
/// The largest micro-batch `--batch` takes.
const MAX_BATCH: u32 = 1 << 20;
/// The largest LoRA rank `--lora-rank` takes.
const MAX_LORA_RANK: u32 = 1 << 16;

/// An offers file: a price list is small.
const OFFERS_LIMIT: u64 = 4 << 20;
/// A config.json: the largest are a few KiB.
const CONFIG_LIMIT: u64 = 1 << 20;

fn usage(flag: &str, e: impl std::fmt::Display) -> CliError {
    CliError::Usage(format!("{flag}: {e}"))
}

/// `--price` as listings write it (`¥14.4/卡时`, `40元/时`, `$2.1/GPU-hr`, `2.49`): per
/// GPU-hour, its currency kept.
fn read_price(text: &str) -> Result<crate::plan::offers::PriceText, CliError> {
    let shown = crate::text::excerpt(text);
    let p = crate::plan::offers::read_price(text).map_err(|e| usage("--price", format!("`{shown}`: {e}")))?;
    if p.unit == Some(crate::plan::offers::PriceUnit::MachineHour) {
        return Err(usage(
            "--price",
            format!(
                "`{shown}` is a machine's price, and --price is one GPU's for an hour; give the price per GPU-hour, or put the machine in an --offers file (price_unit machine-hour, with its GPU count)"
            ),
        ));
    }
    if !(p.amount.is_finite() && (0.0..=1e6).contains(&p.amount)) {
        return Err(usage(
            "--price",
            format!("`{shown}`: expected a price per GPU-hour from 0 to 1000000"),
        ));
    }
    Ok(p)
}

/// The model: a count, a config file, or a compat-db record.
fn model(db: &Db, a: &PlanArgs) -> Result<ModelShape, CliError> {
    if let Some(p) = &a.params {
        let params = crate::plan::parse_params(p).map_err(|e| usage("--params", e))?;
        return Ok(ModelShape {
            params,
            active_params: params,
            source: format!("--params {}", p.trim()),
            ..ModelShape::default()
        });
    }
    let Some(m) = &a.model else {
        return Err(CliError::Usage(
            "plan needs the model: --params COUNT (7B), or --model with a config.json or a name compat-db knows".into(),
        ));
    };
    let path = std::path::Path::new(m);
    if path.is_file() || m.ends_with(".json") {
        let text = files::read_text(path, CONFIG_LIMIT, "model config").map_err(super::stack::read_error)?;
        return crate::plan::from_hf_config(&text, &files::shown(path)).map_err(|e| usage("--model", e));
    }
    let (rec, read) = db.model_read(m).map_err(CliError::Lookup)?;
    // The linter holds every record's config to its count, so this fails only for a
    // database that was not linted; say which record, rather than plan from half a shape.
    let counted = rec
        .count()
        .map_err(|e| CliError::Usage(format!("--model: compat-db model/{}: {e}", rec.id)))?;
    let source = match read {
        Some(note) => format!("compat-db model/{} ({note})", rec.id),
        None => format!("compat-db model/{}", rec.id),
    };
    let mut shape = crate::plan::model::shape_of(&counted, &source);
    // The record's own count is the one its sources were checked against.
    shape.params = rec.params;
    shape.active_params = rec.active_params.unwrap_or(rec.params);
    Ok(shape)
}

fn settings(a: &PlanArgs) -> Result<Settings, CliError> {
    let method = match a.method.as_str() {
        "inference" => Method::Inference,
        "lora" => Method::Lora,
        "qlora" => Method::Qlora,
        _ => Method::Full,
    };
    let precision = match a.precision.as_str() {
        "fp32" => Precision::Fp32,
        "bf16" => Precision::Bf16,
        "fp16" => Precision::Fp16,
        "fp8" => Precision::Fp8,
        "int8" => Precision::Int8,
        "int4" => Precision::Int4,
        _ => Precision::Mixed,
    };
    let optimizer = match a.optimizer.as_str() {
        "adamw-8bit" => Optimizer::Adamw8bit,
        "sgd" => Optimizer::Sgd,
        "adafactor" => Optimizer::Adafactor,
        _ => Optimizer::Adamw,
    };
    let shard = match a.shard.as_str() {
        "zero1" => Shard::Zero1,
        "zero2" => Shard::Zero2,
        "zero3" => Shard::Zero3,
        "fsdp" => Shard::Fsdp,
        _ => Shard::None,
    };
    // Bounds that keep every product of the estimate far inside its integers: no model
    // has run past them, so a larger number is a typo.
    for (flag, v, max) in [
        ("--seq-len", a.seq_len, MAX_SEQ_LEN),
        ("--batch", a.batch, MAX_BATCH),
        ("--lora-rank", a.lora_rank, MAX_LORA_RANK),
    ] {
        if v == 0 || v > max {
            return Err(usage(flag, format!("`{v}`: expected a number from 1 to {max}")));
        }
    }
    for (flag, v) in [("--tp", a.tp), ("--pp", a.pp)] {
        if let Some(n) = v {
            if n == 0 || n > crate::model::MAX_GPU_COUNT {
                return Err(usage(
                    flag,
                    format!(
                        "`{n}`: expected a number of GPUs from 1 to {}",
                        crate::model::MAX_GPU_COUNT
                    ),
                ));
            }
        }
    }
    let attention = match a.attention.as_str() {
        "sdpa" => crate::plan::Attention::Sdpa,
        "eager" => crate::plan::Attention::Eager,
        _ => crate::plan::Attention::Flash,
    };
    let engine = match a.engine.as_str() {
        "vllm" => crate::plan::Engine::Vllm,
        "sglang" => crate::plan::Engine::Sglang,
        _ => crate::plan::Engine::Hf,
    };
    let trainer = match a.trainer.as_str() {
        "torchtune" => crate::plan::Trainer::Torchtune,
        "unsloth" => crate::plan::Trainer::Unsloth,
        _ => crate::plan::Trainer::Hf,
    };
    if trainer != crate::plan::Trainer::Hf && method == Method::Inference {
        return Err(usage(
            "--trainer",
            format!(
                "`{}` trains models: it goes with --method full, lora or qlora",
                a.trainer
            ),
        ));
    }
    let offload = match a.offload.as_str() {
        "optimizer" => crate::plan::Offload::Optimizer,
        "all" => crate::plan::Offload::All,
        _ => crate::plan::Offload::None,
    };
    if method == Method::Inference && (offload != crate::plan::Offload::None || a.optimizer_in_backward) {
        return Err(usage(
            if a.optimizer_in_backward {
                "--optimizer-in-backward"
            } else {
                "--offload"
            },
            "offloads and steps model states of training: it goes with --method full, lora or qlora",
        ));
    }
    let engine_memory_percent = match &a.gpu_memory_utilization {
        None => None,
        Some(t) => {
            if engine == crate::plan::Engine::Hf || method != Method::Inference {
                return Err(usage(
                    "--gpu-memory-utilization",
                    "is the share vLLM or SGLang takes: it goes with --method inference --engine vllm or sglang",
                ));
            }
            let f = fraction("--gpu-memory-utilization", t)?;
            Some((f * 100.0).round() as u32)
        }
    };
    if engine != crate::plan::Engine::Hf && method != Method::Inference {
        return Err(usage(
            "--engine",
            format!("`{}` serves models: it goes with --method inference", a.engine),
        ));
    }
    if let Some(n) = a.gpus {
        if n == 0 || n > crate::model::MAX_GPU_COUNT {
            return Err(usage(
                "--gpus",
                format!(
                    "`{n}`: expected a number of GPUs from 1 to {}",
                    crate::model::MAX_GPU_COUNT
                ),
            ));
        }
    }
    Ok(Settings {
        method,
        precision,
        optimizer,
        seq_len: a.seq_len,
        batch: a.batch,
        checkpointing: method != Method::Inference && !a.no_checkpointing,
        gpus: a.gpus.unwrap_or(1),
        shard,
        tp: 1,
        pp: 1,
        lora_rank: a.lora_rank,
        attention,
        engine,
        trainer,
        offload,
        optimizer_in_backward: a.optimizer_in_backward,
        engine_memory_percent,
    })
}

/// `--mfu 0.4` or `40%`.
fn mfu(text: &str) -> Result<f64, CliError> {
    fraction("--mfu", text)
}

/// A share: `0.4` or `40%`, above 0 and at most 1.
fn fraction(flag: &str, text: &str) -> Result<f64, CliError> {
    let t = text.trim();
    let (num, scale) = match t.strip_suffix('%') {
        Some(p) => (p.trim(), 100.0),
        None => (t, 1.0),
    };
    match num.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v / scale <= 1.0 => Ok(v / scale),
        _ => Err(usage(
            flag,
            format!(
                "`{}`: expected a fraction above 0 and at most 1 (0.4) or a percent (40%)",
                crate::text::excerpt(t)
            ),
        )),
    }
}

/// Runs `plan`.
pub fn run(
    db: &Db,
    a: &PlanArgs,
    out: &mut dyn std::io::Write,
    styles: crate::report::Styles,
) -> Result<Exit, CliError> {
    if let Some(p) = &a.order_out {
        files::check_target(p, Replace::RegularFile).map_err(super::write_error)?;
    }
    let shape = model(db, a)?;
    let s = settings(a)?;
    let mut only = Vec::new();
    for g in &a.stack.gpu {
        let (asks, _) = super::stack::gpu_asks(db, "--gpu", g)?;
        only.extend(asks.into_iter().map(|a| a.gpu));
    }
    let mut stack_flags = a.stack.clone();
    stack_flags.gpu.clear();
    let stack = stack_flags.to_query(db)?;
    let offers = match &a.offers {
        None => Vec::new(),
        Some(p) => {
            let text = files::read_text(p, OFFERS_LIMIT, "offers").map_err(super::stack::read_error)?;
            crate::plan::offers::parse(&files::shown(p), &text).map_err(|e| CliError::Usage(e.join("\n")))?
        }
    };
    if !a.dataset.is_finite() || a.dataset < 0.0 {
        return Err(usage("--dataset", "expected a size in GB, 0 or more"));
    }
    let price = a.price.as_deref().map(read_price).transpose()?;
    let currency = a
        .currency
        .as_deref()
        .map(|c| {
            crate::plan::offers::Currency::from_word(c).ok_or_else(|| {
                usage(
                    "--currency",
                    format!(
                        "`{}`: expected CNY, RMB, USD or EUR (or ¥, $, €)",
                        crate::text::excerpt(c)
                    ),
                )
            })
        })
        .transpose()?;
    let currency = match (currency, price.and_then(|p| p.currency)) {
        (Some(flag), Some(sign)) if flag != sign => {
            return Err(usage(
                "--currency",
                format!("{flag} contradicts the {sign} of --price; give one of them"),
            ));
        }
        (flag, sign) => flag.or(sign),
    };
    let tokens = a
        .tokens
        .as_deref()
        .map(|t| {
            crate::plan::parse_params(t)
                .map_err(|e| usage("--tokens", e.replace("parameter count", "token count")))
        })
        .transpose()?;
    let opts = crate::plan::run::Options {
        gpus: a.gpus,
        tp: a.tp,
        pp: a.pp,
        only,
        tokens,
        mfu: mfu(&a.mfu)?,
        price_per_gpu_hour: price.map(|p| p.amount),
        currency,
        dataset_gb: a.dataset,
        keep_checkpoints: a.keep_checkpoints,
        stack,
        offers,
    };
    let plan = crate::plan::run::plan(db, shape, s, &opts);
    let order = crate::plan::run::order(&plan);
    crate::report::plan(out, &plan, &opts, a.all, a.json, db.date(), styles)?;
    if let Some(p) = &a.order_out {
        match &order {
            Some(text) => {
                files::write_file(p, text.as_bytes(), Replace::RegularFile).map_err(super::write_error)?
            }
            // The report says that nothing fits; there is no order to write.
            None => return Ok(Exit::Findings),
        }
    }
    Ok(if plan.fits.iter().any(|f| f.fits) {
        Exit::Ok
    } else {
        Exit::Findings
    })
}
