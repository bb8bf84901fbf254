//! The memory estimate: bytes per GPU, term by term, from the model's shape and the
//! settings, with every constant it uses stated as an [`Assumption`] with its source.
//!
//! Pure arithmetic on integers (`u128` inside, rounded up to whole bytes), so it answers
//! in microseconds. Model states (weights, gradients, optimizer) follow the ZeRO paper's
//! accounting (Rajbhandari et al. 2020, arXiv:1910.02054, §3.1 and §5); activations
//! follow Korthikanti et al. 2022 (arXiv:2205.05198, §4); the rest is said where used.

use super::types::{
    Assumption, Estimate, MemoryTerms, Method, ModelShape, Optimizer, Precision, Settings, Shard,
};

const ZERO_PAPER: &str = "Rajbhandari et al. 2020, ZeRO (arXiv:1910.02054) §3.1";
const ZERO_SHARDING: &str = "Rajbhandari et al. 2020, ZeRO (arXiv:1910.02054) Figure 1 and §5 (Pos, Pos+g, Pos+g+p); \
     PyTorch FSDP FULL_SHARD shards as ZeRO-3";
const KORTHIKANTI: &str = "Korthikanti et al. 2022, Reducing Activation Recomputation in Large Transformer Models \
     (arXiv:2205.05198) §4.1-4.3";
const QLORA_PAPER: &str = "Dettmers et al. 2023, QLoRA (arXiv:2305.14314) §3: NF4 with double quantization, \
     8/64 + 32/(64*256) = 0.127 bits of constants per parameter";
const LORA_PAPER: &str = "Hu et al. 2021, LoRA (arXiv:2106.09685) §4.1: W + BA, B d x r, A r x k";

/// The CUDA context and framework overhead per GPU: 1 GiB.
pub const OVERHEAD_BYTES: u64 = 1 << 30;

/// NF4 with double quantization, in bits per parameter: 4 + 8/64 + 32/(64*256)
/// = 2113/512 (QLoRA §3; the paper rounds the constants to 0.127 bits).
const NF4_DQ_BITS: (u128, u128) = (2113, 512);

/// Hidden size per layer when only a parameter count is known (see [`Dims`]).
const ASPECT_RATIO: u128 = 128;

/// The estimate for `model` under `s`, per GPU. Every term is in bytes; `total` is their
/// sum; `assumptions` lists every constant and choice behind them with its source.
pub fn estimate(model: &ModelShape, s: &Settings) -> Estimate {
    let mut notes = Notes(Vec::new());
    let gpus = u128::from(s.gpus.max(1));
    let params = u128::from(model.params);
    let dims = Dims::of(model, &mut notes);
    let training = s.method != Method::Inference;

    // Trained parameters: every one for full training, the adapters for LoRA and QLoRA.
    let adapters = match s.method {
        Method::Lora | Method::Qlora => {
            let r = u128::from(s.lora_rank.max(1));
            let (h, l) = (dims.hidden, dims.layers);
            let q_out = dims.heads * dims.head_dim;
            let kv_out = dims.kv_heads * dims.head_dim;
            // q: h -> heads*d, k and v: h -> kv*d, o: heads*d -> h; r x (d_in + d_out) each.
            let per_layer = r * ((h + q_out) + 2 * (h + kv_out) + (q_out + h));
            let n = l * per_layer;
            notes.add(
                "LoRA adapters",
                format!(
                    "rank {r} on q, k, v and o of every layer, r x (d_in + d_out) each: \
                     {n} trainable parameters (PEFT's usual target; QLoRA's paper adapts \
                     every linear layer, the MLP's too, which adds more)"
                ),
                LORA_PAPER,
            );
            n
        }
        _ => 0,
    };
    let trained = match s.method {
        Method::Full => params,
        Method::Lora | Method::Qlora => adapters,
        Method::Inference => 0,
    };

    // Weights.
    let (num, den) = weight_bytes(s.precision);
    let adapter_bytes = if s.precision == Precision::Fp32 { 4 } else { 2 };
    let weights_all = match s.method {
        Method::Inference | Method::Full => {
            notes.add(
                "weights",
                format!("{} per parameter ({})", bytes_text(num, den), name(s.precision)),
                "IEEE 754 and bfloat16 widths: fp32 4 bytes, bf16/fp16 2 (mixed precision \
                 computes with 16-bit weights, ZeRO §3.1), fp8/int8 1, int4 half a byte",
            );
            div_ceil(params * num, den)
        }
        Method::Lora => {
            notes.add(
                "weights",
                format!(
                    "the frozen base at {} per parameter ({}), the adapters at {adapter_bytes}",
                    bytes_text(num, den),
                    name(s.precision)
                ),
                LORA_PAPER,
            );
            div_ceil(params * num, den) + adapters * adapter_bytes
        }
        Method::Qlora => {
            // bitsandbytes replaces the linear layers; the embeddings and the output
            // projection stay in 16 bits (transformers keeps `lm_head` unquantized).
            let unquantized = match dims.vocab {
                Some(v) => v * dims.hidden * if dims.tied { 1 } else { 2 },
                None => 0,
            }
            .min(params);
            let quantized = params - unquantized;
            notes.add(
                "weights, QLoRA",
                format!(
                    "the frozen linear layers in 4-bit NF4 with double quantization, \
                     {}/{} bits per parameter; embeddings and lm_head ({unquantized} \
                     parameters) in 16 bits; the adapters at {adapter_bytes} bytes",
                    NF4_DQ_BITS.0, NF4_DQ_BITS.1
                ),
                format!(
                    "{QLORA_PAPER}; transformers' bitsandbytes integration keeps the output \
                     embedding unquantized (get_keys_to_not_convert)"
                ),
            );
            div_ceil(quantized * NF4_DQ_BITS.0, NF4_DQ_BITS.1 * 8)
                + unquantized * 2
                + adapters * adapter_bytes
        }
    };

    // Gradients and optimizer states, of the trained parameters.
    let (gradients_all, optimizer_all) = if training {
        let grad_bytes = if s.precision == Precision::Fp32 { 4 } else { 2 };
        notes.add(
            "gradients",
            format!("{grad_bytes} bytes per trained parameter ({trained} trained)"),
            format!("{ZERO_PAPER}: 16-bit gradients under mixed precision; 4 bytes when training in fp32"),
        );
        let master = match s.precision {
            Precision::Mixed | Precision::Fp8 | Precision::Int8 | Precision::Int4 => 4,
            Precision::Fp32 | Precision::Bf16 | Precision::Fp16 => 0,
        };
        if master > 0 {
            notes.add(
                "fp32 master copy",
                "4 bytes per trained parameter, counted with the optimizer states".to_string(),
                format!("{ZERO_PAPER}: mixed-precision Adam keeps an fp32 copy of the parameters"),
            );
        } else if s.precision != Precision::Fp32 {
            notes.add(
                "fp32 master copy",
                format!(
                    "none: {} trains the 16-bit weights directly (choose mixed for an fp32 copy)",
                    name(s.precision)
                ),
                ZERO_PAPER,
            );
        }
        let states = match s.optimizer {
            Optimizer::Adamw => {
                notes.add(
                    "optimizer states, AdamW",
                    "8 bytes per trained parameter: two fp32 moments (K = 12 with the master copy)"
                        .to_string(),
                    ZERO_PAPER,
                );
                trained * 8
            }
            Optimizer::Adamw8bit => {
                notes.add(
                    "optimizer states, 8-bit AdamW",
                    "2 bytes per trained parameter: two 8-bit moments (block-wise quantization; \
                     the per-block constants are left out); paged or not, the same bytes"
                        .to_string(),
                    "Dettmers et al. 2022, 8-bit Optimizers via Block-wise Quantization \
                     (arXiv:2110.02861) §2; bitsandbytes",
                );
                trained * 2
            }
            Optimizer::Sgd => {
                notes.add(
                    "optimizer states, SGD with momentum",
                    "4 bytes per trained parameter: one fp32 momentum buffer".to_string(),
                    "PyTorch torch.optim.SGD (momentum_buffer per parameter)",
                );
                trained * 4
            }
            Optimizer::Adafactor => {
                // A factored second moment keeps n + m fp32 values for an n x m matrix, no
                // first moment (beta1 off). Counted as if every matrix were at least
                // hidden x hidden (full) or r x hidden (adapters): an upper bound.
                let h = dims.hidden.max(1);
                let bytes = match s.method {
                    Method::Lora | Method::Qlora => {
                        let r = u128::from(s.lora_rank.max(1));
                        div_ceil(4 * trained * (r + h), r * h)
                    }
                    _ => div_ceil(8 * trained, h),
                };
                notes.add(
                    "optimizer states, Adafactor",
                    format!(
                        "factored second moment only (no momentum): n + m fp32 values per \
                         n x m matrix, bounded by 4 x trained x (1/rows + 1/cols) with the \
                         hidden size {h} (and the LoRA rank) as the sides: {bytes} bytes"
                    ),
                    "Shazeer & Stern 2018, Adafactor (arXiv:1804.04235) §3-4, beta1 = 0",
                );
                bytes
            }
        };
        (trained * grad_bytes, states + trained * master)
    } else {
        notes.add(
            "gradients and optimizer",
            "none: inference runs forward passes only".to_string(),
            "by definition",
        );
        (0, 0)
    };

    // Sharding.
    let (weights, gradients, optimizer) = match s.shard {
        Shard::None => (weights_all, gradients_all, optimizer_all),
        Shard::Zero1 => (weights_all, gradients_all, div_ceil(optimizer_all, gpus)),
        Shard::Zero2 => (
            weights_all,
            div_ceil(gradients_all, gpus),
            div_ceil(optimizer_all, gpus),
        ),
        Shard::Zero3 | Shard::Fsdp => (
            div_ceil(weights_all, gpus),
            div_ceil(gradients_all, gpus),
            div_ceil(optimizer_all, gpus),
        ),
    };
    if s.shard != Shard::None {
        let what = match s.shard {
            Shard::Zero1 => "optimizer states",
            Shard::Zero2 => "optimizer states and gradients",
            _ => "optimizer states, gradients and weights",
        };
        notes.add(
            "sharding",
            format!(
                "{}: {what} divided over {gpus} GPUs; the gather buffers of ZeRO-3/FSDP \
                 (about one layer) are left out",
                name(s.shard)
            ),
            ZERO_SHARDING,
        );
    }
    if dims.experts.is_some() {
        notes.add(
            "mixture of experts",
            "every expert's weights on every GPU (no expert parallelism)".to_string(),
            "by choice of this estimate",
        );
    }

    // Activations.
    let (seq, batch) = (u128::from(s.seq_len), u128::from(s.batch));
    let (h, l, a) = (dims.hidden, dims.layers, dims.heads);
    let one_layer = 34 * seq * batch * h + 5 * a * seq * seq * batch;
    let activations = if training {
        let layers_part = if s.checkpointing {
            notes.add(
                "activations (an estimate)",
                "full recomputation: each layer's input kept, 2 x s x b x h bytes per layer, \
                     plus one layer's activations recomputed during the backward pass, \
                     s x b x h x (34 + 5 x a x s / h) bytes (16-bit, no tensor or sequence \
                     parallelism, attention scores stored; FlashAttention stores less)",
                KORTHIKANTI,
            );
            l * 2 * seq * batch * h + one_layer
        } else {
            notes.add(
                "activations (an estimate)",
                "s x b x h x (34 + 5 x a x s / h) bytes per layer, every layer kept (16-bit, \
                 no tensor or sequence parallelism, no recomputation, attention scores \
                 stored; FlashAttention stores less)"
                    .to_string(),
                KORTHIKANTI,
            );
            l * one_layer
        };
        let logits = match dims.vocab {
            Some(v) => {
                notes.add(
                    "logits",
                    "4 x s x b x vocab bytes: the cross-entropy loss keeps fp32 logits".to_string(),
                    KORTHIKANTI,
                );
                4 * seq * batch * v
            }
            None => {
                notes.add(
                    "logits",
                    "not counted: the vocabulary size is unknown (a config.json gives it)".to_string(),
                    KORTHIKANTI,
                );
                0
            }
        };
        layers_part + logits
    } else {
        let logits = dims.vocab.map_or(0, |v| 4 * batch * v);
        notes.add(
            "activations, inference (an estimate)",
            format!(
                "one forward pass's working set: one layer's activations, \
                 s x b x h x (34 + 5 x a x s / h) bytes, freed as the next layer runs, plus \
                 fp32 logits of the last token (4 x b x vocab{})",
                if dims.vocab.is_none() {
                    ", vocabulary unknown: 0"
                } else {
                    ""
                }
            ),
            KORTHIKANTI,
        );
        one_layer + logits
    };
    if dims.experts.is_some() {
        notes.add(
            "activations, mixture of experts",
            "counted as for a dense model of the same width; routing buffers left out".to_string(),
            "by choice of this estimate",
        );
    }

    // The KV cache.
    let kv_cache = if s.method == Method::Inference {
        let kv_bytes = match s.precision {
            Precision::Fp32 => 4,
            Precision::Fp8 => 1,
            _ => 2,
        };
        notes.add(
            "KV cache",
            format!(
                "2 x layers x kv_heads x head_dim x {kv_bytes} bytes x seq_len x batch \
                 ({} x {} x {}); int8/int4 quantize the weights, not the cache",
                l, dims.kv_heads, dims.head_dim
            ),
            "Pope et al. 2022, Efficiently Scaling Transformer Inference (arXiv:2211.05102) \
             §3.1; Ainslie et al. 2023, GQA (arXiv:2305.13245)",
        );
        2 * l * dims.kv_heads * dims.head_dim * kv_bytes * seq * batch
    } else {
        0
    };

    notes.add(
        "overhead (an estimate)",
        "1 GiB per GPU: the CUDA context and PyTorch's kernels (about 0.8 GB before any \
         tensor), with some slack for the caching allocator; fragmentation can take more"
            .to_string(),
        "pytorch/pytorch#34323 (nvidia-smi shows 781 MB once CUDA is initialised); PyTorch \
         docs, torch.cuda.memory_allocated: \"some context needs to be created on GPU\"",
    );
    let overhead = u128::from(OVERHEAD_BYTES);

    let total = weights + gradients + optimizer + activations + kv_cache + overhead;
    let clamp = |v: u128| u64::try_from(v).unwrap_or(u64::MAX);
    Estimate {
        per_gpu: MemoryTerms {
            weights: clamp(weights),
            gradients: clamp(gradients),
            optimizer: clamp(optimizer),
            activations: clamp(activations),
            kv_cache: clamp(kv_cache),
            overhead: clamp(overhead),
            total: clamp(total),
        },
        assumptions: notes.0,
    }
}

/// Bytes per weight as a fraction: (numerator, denominator).
fn weight_bytes(p: Precision) -> (u128, u128) {
    match p {
        Precision::Fp32 => (4, 1),
        Precision::Bf16 | Precision::Fp16 | Precision::Mixed => (2, 1),
        Precision::Fp8 | Precision::Int8 => (1, 1),
        Precision::Int4 => (1, 2),
    }
}

/// The lowercase name a setting has on the command line (`bf16`, `zero3`).
fn name(setting: impl std::fmt::Debug) -> String {
    format!("{setting:?}").to_lowercase()
}

fn bytes_text(num: u128, den: u128) -> String {
    if den == 1 {
        format!("{num} bytes")
    } else {
        format!("{num}/{den} byte")
    }
}

fn div_ceil(a: u128, b: u128) -> u128 {
    a.div_ceil(b.max(1))
}

/// The assumptions, in the order the terms use them.
struct Notes(Vec<Assumption>);

impl Notes {
    fn add(&mut self, what: &str, value: impl Into<String>, source: impl Into<String>) {
        self.0.push(Assumption {
            what: what.to_string(),
            value: value.into(),
            source: source.into(),
        });
    }
}

/// The architecture numbers the terms need, from the shape or, where it lacks them,
/// guessed from the parameter count (and said so).
struct Dims {
    layers: u128,
    hidden: u128,
    heads: u128,
    kv_heads: u128,
    head_dim: u128,
    vocab: Option<u128>,
    tied: bool,
    experts: Option<u32>,
}

impl Dims {
    fn of(m: &ModelShape, notes: &mut Notes) -> Dims {
        let (layers, hidden) = match (m.layers, m.hidden) {
            (Some(l), Some(h)) if l > 0 && h > 0 => (u128::from(l), u128::from(h)),
            _ => {
                // params ~ 12 x L x h^2 (Kaplan et al. 2020, arXiv:2001.08361 §2.1) with
                // h = 128 x L (Llama 2 7B: 4096 / 32; GPT-3 175B: 12288 / 96).
                let p = m.params as f64;
                let l = (p / (12.0 * (ASPECT_RATIO * ASPECT_RATIO) as f64))
                    .cbrt()
                    .round()
                    .max(1.0) as u128;
                let h = ASPECT_RATIO * l;
                notes.add(
                    "shape (guessed)",
                    format!(
                        "{l} layers of hidden size {h}, from params = 12 x layers x hidden^2 \
                         with hidden = 128 x layers, heads of 128, no grouped KV heads: \
                         activations, the KV cache and the LoRA adapters rest on this guess \
                         (a config.json gives the real shape)"
                    ),
                    "Kaplan et al. 2020, Scaling Laws for Neural Language Models \
                     (arXiv:2001.08361) §2.1; the aspect ratio of Llama 2 7B (4096/32) and \
                     GPT-3 175B (12288/96)",
                );
                (l, h)
            }
        };
        let heads = match m.heads {
            Some(a) if a > 0 && m.layers.is_some() && m.hidden.is_some() => u128::from(a),
            _ => (hidden / 128).max(1),
        };
        let kv_heads = m.kv_heads.filter(|&k| k > 0).map_or(heads, u128::from).min(heads);
        let head_dim = m
            .head_dim
            .filter(|&d| d > 0)
            .map_or((hidden / heads).max(1), u128::from);
        Dims {
            layers,
            hidden,
            heads,
            kv_heads,
            head_dim,
            vocab: m.vocab.filter(|&v| v > 0).map(u128::from),
            tied: m.tied_embeddings.unwrap_or(false),
            experts: m.experts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::model::from_hf_config;
    use crate::plan::reference;
    use crate::plan::types::{Attention, Engine};

    fn settings(method: Method, precision: Precision, optimizer: Optimizer) -> Settings {
        Settings {
            method,
            precision,
            optimizer,
            seq_len: 2048,
            batch: 1,
            checkpointing: false,
            gpus: 1,
            shard: Shard::None,
            lora_rank: 16,
            attention: Attention::Flash,
            engine: Engine::Hf,
        }
    }

    fn count_only(params: u64) -> ModelShape {
        ModelShape {
            params,
            active_params: params,
            source: "--params".into(),
            ..ModelShape::default()
        }
    }

    fn model_states(e: &Estimate) -> u64 {
        e.per_gpu.weights + e.per_gpu.gradients + e.per_gpu.optimizer
    }

    fn fixture(name: &str) -> ModelShape {
        let path = format!("{}/tests/fixtures/plan/{name}", env!("CARGO_MANIFEST_DIR"));
        from_hf_config(&std::fs::read_to_string(&path).unwrap(), name).unwrap()
    }

    /// ZeRO paper (Rajbhandari et al. 2020, arXiv:1910.02054) Figure 1: Ψ = 7.5B, Nd = 64,
    /// K = 12 (mixed-precision Adam): 120 GB per GPU for the baseline, 31.4 GB with Pos
    /// (ZeRO-1), 16.6 GB with Pos+g (ZeRO-2), 1.9 GB with Pos+g+p (ZeRO-3); GB = 1e9.
    #[test]
    fn zero_paper_figure_1() {
        let model = count_only(7_500_000_000);
        let mut s = settings(Method::Full, Precision::Mixed, Optimizer::Adamw);
        s.gpus = 64;
        for (shard, published_gb) in [
            (Shard::None, 120.0),
            (Shard::Zero1, 31.4),
            (Shard::Zero2, 16.6),
            (Shard::Zero3, 1.9),
            (Shard::Fsdp, 1.9),
        ] {
            s.shard = shard;
            let e = estimate(&model, &s);
            let gb = model_states(&e) as f64 / 1e9;
            assert!(
                (gb - published_gb).abs() <= 0.05,
                "{shard:?}: {gb} GB, the paper prints {published_gb}"
            );
            let paper = reference::zero_paper_model_states(7_500_000_000, 12, 64, shard);
            assert_eq!(model_states(&e), paper, "{shard:?}");
        }
    }

    /// The same, exactly: (2 + 2 + 12) x 7.5e9 / 64 = 1.875e9 bytes under ZeRO-3.
    #[test]
    fn zero3_over_64_gpus_is_16_bytes_over_64() {
        let mut s = settings(Method::Full, Precision::Mixed, Optimizer::Adamw);
        s.gpus = 64;
        s.shard = Shard::Zero3;
        let e = estimate(&count_only(7_500_000_000), &s);
        assert_eq!(model_states(&e), 1_875_000_000);
        assert_eq!(e.per_gpu.weights, 234_375_000);
        assert_eq!(e.per_gpu.gradients, 234_375_000);
        assert_eq!(e.per_gpu.optimizer, 1_406_250_000);
    }

    /// The rule of thumb: a 7B model in fp16 needs about 14 GB for its weights alone
    /// (2 bytes per parameter; e.g. Lightning-AI/lit-llama#67: "fp16 and use about 14GB").
    #[test]
    fn seven_b_in_fp16_is_14_gb_of_weights() {
        let e = estimate(
            &count_only(7_000_000_000),
            &settings(Method::Inference, Precision::Fp16, Optimizer::Adamw),
        );
        assert_eq!(e.per_gpu.weights, 14_000_000_000);
        assert_eq!(e.per_gpu.gradients, 0);
        assert_eq!(e.per_gpu.optimizer, 0);
        let int4 = estimate(
            &count_only(7_000_000_000),
            &settings(Method::Inference, Precision::Int4, Optimizer::Adamw),
        );
        assert_eq!(int4.per_gpu.weights, 3_500_000_000);
    }

    /// QLoRA paper (Dettmers et al. 2023, arXiv:2305.14314), abstract and §1: a 65B model
    /// fine-tuned on a single 48 GB GPU. LLaMA-65B's shape (80 layers, hidden 8192, 64
    /// heads, intermediate 22016, vocab 32000, untied); the paper's LoRA rank 64; batch 1,
    /// sequence 512, gradient checkpointing, bf16 compute, paged 8-bit AdamW (and the
    /// qlora repository's default, paged 32-bit AdamW): the total stays below 48e9.
    #[test]
    fn qlora_65b_fits_one_48_gb_gpu() {
        let llama_65b = r#"{"model_type":"llama","vocab_size":32000,"hidden_size":8192,
            "num_hidden_layers":80,"num_attention_heads":64,"intermediate_size":22016}"#;
        let model = from_hf_config(llama_65b, "llama-65b").unwrap();
        // 65.3B: the paper's "65B".
        assert_eq!(model.params, 65_285_660_672);
        let mut s = settings(Method::Qlora, Precision::Bf16, Optimizer::Adamw8bit);
        s.lora_rank = 64;
        s.seq_len = 512;
        s.batch = 1;
        s.checkpointing = true;
        let e = estimate(&model, &s);
        assert!(e.per_gpu.total < 48_000_000_000, "{:?}", e.per_gpu);
        // The frozen base dominates: about 4.127 bits per parameter, 33-36 GB.
        assert!(e.per_gpu.weights > 33_000_000_000 && e.per_gpu.weights < 36_000_000_000);
        s.optimizer = Optimizer::Adamw;
        let e = estimate(&model, &s);
        assert!(e.per_gpu.total < 48_000_000_000, "{:?}", e.per_gpu);
        // Without QLoRA, 16-bit LoRA of the same model does not fit.
        s.method = Method::Lora;
        assert!(estimate(&model, &s).per_gpu.total > 48_000_000_000);
    }

    /// DeepSpeed's ZeRO-3 estimator (no offload) counts 18 bytes per parameter over the
    /// GPUs plus 4 x the largest layer; this estimate counts the ZeRO paper's 16 (2-byte
    /// gradients, DeepSpeed's 4-byte fp32 gradient copy left out) and no gather buffer.
    /// The gap is exactly 2 x params / gpus + 4 x largest layer.
    #[test]
    fn zero3_against_deepspeeds_estimator() {
        let model = fixture("llama-2-7b-hf.config.json");
        let mut s = settings(Method::Full, Precision::Mixed, Optimizer::Adamw);
        s.gpus = 8;
        s.shard = Shard::Zero3;
        let mine = model_states(&estimate(&model, &s));
        let largest_layer = 32000 * 4096; // the embedding
        let (_, deepspeed, _) = reference::estimate_zero3_model_states_mem_needs(
            model.params,
            largest_layer,
            8,
            1,
            false,
            false,
            true,
            1.5,
        );
        let p = model.params;
        assert_eq!(deepspeed - mine, 2 * p / 8 + 4 * largest_layer);
    }

    #[test]
    fn kv_cache_of_llama_2_70b() {
        let model = fixture("llama-2-70b-hf.config.json");
        let mut s = settings(Method::Inference, Precision::Bf16, Optimizer::Adamw);
        s.seq_len = 4096;
        s.batch = 1;
        let e = estimate(&model, &s);
        // 2 x 80 layers x 8 KV heads x 128 x 2 bytes = 327,680 bytes per token (GQA).
        assert_eq!(e.per_gpu.kv_cache, 327_680 * 4096);
        assert_eq!(e.per_gpu.weights, 2 * 68_976_648_192);
        assert_eq!(
            e.per_gpu.total,
            e.per_gpu.weights + e.per_gpu.activations + e.per_gpu.kv_cache + OVERHEAD_BYTES
        );
    }

    #[test]
    fn activations_follow_korthikanti_with_and_without_recomputation() {
        let model = fixture("llama-2-7b-hf.config.json");
        let mut s = settings(Method::Full, Precision::Mixed, Optimizer::Adamw);
        s.seq_len = 2048;
        s.batch = 2;
        let (sq, b, h, a, l, v) = (2048u64, 2u64, 4096u64, 32u64, 32u64, 32000u64);
        let one_layer = sq * b * h * 34 + 5 * a * sq * sq * b;
        let logits = 4 * sq * b * v;
        assert_eq!(estimate(&model, &s).per_gpu.activations, l * one_layer + logits);
        s.checkpointing = true;
        assert_eq!(
            estimate(&model, &s).per_gpu.activations,
            l * 2 * sq * b * h + one_layer + logits
        );
    }

    #[test]
    fn optimizers_and_precisions_take_their_bytes() {
        let model = count_only(1_000_000_000);
        let states = |p: Precision, o: Optimizer| {
            let e = estimate(&model, &settings(Method::Full, p, o));
            (e.per_gpu.weights, e.per_gpu.gradients, e.per_gpu.optimizer)
        };
        let g = 1_000_000_000;
        assert_eq!(states(Precision::Mixed, Optimizer::Adamw), (2 * g, 2 * g, 12 * g));
        assert_eq!(states(Precision::Fp32, Optimizer::Adamw), (4 * g, 4 * g, 8 * g));
        assert_eq!(
            states(Precision::Mixed, Optimizer::Adamw8bit),
            (2 * g, 2 * g, 6 * g)
        );
        assert_eq!(
            states(Precision::Bf16, Optimizer::Adamw8bit),
            (2 * g, 2 * g, 2 * g)
        );
        assert_eq!(states(Precision::Fp32, Optimizer::Sgd), (4 * g, 4 * g, 4 * g));
        let (_, _, adafactor) = states(Precision::Fp32, Optimizer::Adafactor);
        assert!(adafactor > 0 && adafactor < g / 100, "{adafactor}");
    }

    #[test]
    fn lora_trains_only_the_adapters() {
        let model = fixture("llama-2-7b-hf.config.json");
        let mut s = settings(Method::Lora, Precision::Bf16, Optimizer::Adamw);
        s.lora_rank = 8;
        let e = estimate(&model, &s);
        // 32 layers x 4 projections x 8 x (4096 + 4096).
        let adapters = 32 * 4 * 8 * 8192;
        assert_eq!(e.per_gpu.gradients, 2 * adapters);
        assert_eq!(e.per_gpu.optimizer, 8 * adapters);
        assert_eq!(e.per_gpu.weights, 2 * 6_738_415_616 + 2 * adapters);
    }

    #[test]
    fn every_term_has_a_sourced_assumption_and_guesses_are_said() {
        let s = settings(Method::Full, Precision::Mixed, Optimizer::Adamw);
        let e = estimate(&count_only(7_000_000_000), &s);
        for a in &e.assumptions {
            assert!(
                !a.what.is_empty() && !a.value.is_empty() && !a.source.is_empty(),
                "{a:?}"
            );
        }
        let whats: Vec<&str> = e.assumptions.iter().map(|a| a.what.as_str()).collect();
        assert!(whats.contains(&"shape (guessed)"), "{whats:?}");
        assert!(whats.iter().any(|w| w.starts_with("activations")));
        assert!(whats.iter().any(|w| w.starts_with("overhead")));
        assert!(e.per_gpu.activations > 0);
        assert_eq!(
            e.per_gpu.total,
            model_states(&e) + e.per_gpu.activations + e.per_gpu.kv_cache + e.per_gpu.overhead
        );
        let shaped = estimate(&fixture("llama-2-7b-hf.config.json"), &s);
        assert!(!shaped.assumptions.iter().any(|a| a.what == "shape (guessed)"));
    }

    #[test]
    fn estimating_70b_is_fast() {
        let model = fixture("llama-2-70b-hf.config.json");
        let s = settings(Method::Full, Precision::Mixed, Optimizer::Adamw);
        let start = std::time::Instant::now();
        for _ in 0..1000 {
            std::hint::black_box(estimate(&model, &s));
        }
        assert!(start.elapsed() < std::time::Duration::from_millis(500));
    }
}
