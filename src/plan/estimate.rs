//! The memory estimate: bytes per GPU, term by term, from the model's shape and the
//! settings, with every constant it uses stated as an [`Assumption`] with its source.
//!
//! Owns: the bytes of each term for one GPU under the parallelism the settings name
//! (tensor, pipeline, sharded data parallel). Must not: choose the parallelism or the GPU
//! count (the fit does), or read anything.
//!
//! Pure arithmetic on `u128` (rounded up to whole bytes): the inputs are bounded where
//! they are read (the command refuses a sequence, batch or shape past its limits), so no
//! product overflows, and a total past `u64` is clamped to `u64::MAX`, which fits no GPU.
//! Model states (weights, gradients, optimizer) follow the ZeRO paper's accounting
//! (Rajbhandari et al. 2020, arXiv:1910.02054, §3.1 and §5); activations count what
//! autograd keeps for a Llama-style decoder layer under the attention kernel in use; the
//! rest is said where used.

use super::types::{
    Assumption, Attention, Engine, Estimate, MemoryTerms, Method, ModelShape, Offload, Optimizer, Precision,
    Settings, Shard, Trainer,
};

const ZERO_PAPER: &str = "Rajbhandari et al. 2020, ZeRO (arXiv:1910.02054) §3.1";
const ZERO_SHARDING: &str = "Rajbhandari et al. 2020, ZeRO (arXiv:1910.02054) Figure 1 and §5 (Pos, Pos+g, Pos+g+p); \
     PyTorch FSDP FULL_SHARD shards as ZeRO-3";
const DEEPSPEED_ZERO3: &str = "DeepSpeed, estimate_zero3_model_states_mem_needs (deepspeed/runtime/zero/stage3.py; \
     docs/code-docs/source/memory.rst): largest_layer_memory = 4 x largest_layer_params";
const KORTHIKANTI: &str = "Korthikanti et al. 2022, Reducing Activation Recomputation in Large Transformer Models \
     (arXiv:2205.05198) §4.1-4.3";
const AUTOGRAD_LAYER: &str = "what autograd keeps for one decoder layer of Hugging Face transformers' modeling_llama \
     (LlamaRMSNorm upcasts to fp32 and keeps that copy and its 16-bit output; the SwiGLU MLP keeps gate, \
     SiLU(gate), up and their product; a frozen weight keeps no input), the layout of Korthikanti et al. 2022 \
     (arXiv:2205.05198) §4.1 with no dropout";
const FLASH: &str = "Dao 2023, FlashAttention-2 (arXiv:2307.08691) §3.1: the forward pass keeps Q, K, V, the \
     output and one fp32 log-sum-exp per row, never the s x s scores; PyTorch's scaled_dot_product_attention \
     dispatches to the flash or memory-efficient kernel, which keep the same";
const EAGER: &str = "Hugging Face transformers' eager_attention_forward: softmax in fp32 over the s x s scores, \
     cast back to 16 bits for the product with V; autograd keeps both (Korthikanti et al. 2022, \
     arXiv:2205.05198 §4.1 counts the same matrices as 5as^2b with dropout)";
const QLORA_PAPER: &str = "Dettmers et al. 2023, QLoRA (arXiv:2305.14314) §3: NF4 with double quantization, \
     8/64 + 32/(64*256) = 0.127 bits of constants per parameter";
const LORA_PAPER: &str = "Hu et al. 2021, LoRA (arXiv:2106.09685) §4.1: W + BA, B d x r, A r x k";
const KV_SOURCE: &str = "Pope et al. 2022, Efficiently Scaling Transformer Inference (arXiv:2211.05102) §3.1; \
     Ainslie et al. 2023, GQA (arXiv:2305.13245); DeepSeek-AI 2024, DeepSeek-V2 (arXiv:2405.04434) §2.1 (MLA \
     caches kv_lora_rank + qk_rope_head_dim values per token and layer)";
const TORCH_ADAMW: &str = "PyTorch torch.optim.AdamW: exp_avg and exp_avg_sq are zeros_like(param), in the \
     parameter's dtype";
const VLLM_MEMORY: &str = "vLLM docs, Engine Arguments: --gpu-memory-utilization 0.9 (the share of the GPU \
     vLLM takes for weights, activations and the paged KV cache); vllm/engine/arg_utils.py: \
     max_num_batched_tokens 8192 (OpenAI server, GPUs of 70 GiB or more except the A100) or 2048 (others), \
     the chunk a prefill runs in";
const SGLANG_MEMORY: &str = "SGLang python/sglang/srt/server_args.py: mem_fraction_static 0.88 at TP 1, 0.87 at \
     TP 2, 0.85 at TP 4, 0.81 at TP 8, 0.79 at 16 (weights and the KV cache pool); chunked_prefill_size 8192 \
     (2048 below 25 GB)";

/// The CUDA context and framework overhead per GPU: 1 GiB.
pub const OVERHEAD_BYTES: u64 = 1 << 30;

/// NF4 with double quantization, in bits per parameter: 4 + 8/64 + 32/(64*256)
/// = 2113/512 (QLoRA §3; the paper rounds the constants to 0.127 bits).
const NF4_DQ_BITS: (u128, u128) = (2113, 512);

/// Hidden size per layer when only a parameter count is known (see [`Dims`]).
const ASPECT_RATIO: u128 = 128;

/// The share of the GPU an engine takes for itself (weights, activations and cache), in
/// hundredths; the fit holds the estimate to that share of the card. `None`: all of it.
pub fn engine_share(engine: Engine, method: Method, tp: u32, asked: Option<u32>) -> Option<u32> {
    if method != Method::Inference {
        return None;
    }
    if engine != Engine::Hf && asked.is_some() {
        return asked;
    }
    match engine {
        Engine::Hf => None,
        Engine::Vllm => Some(90),
        Engine::Sglang => Some(match tp {
            0..=1 => 88,
            2..=3 => 87,
            4..=7 => 85,
            8..=15 => 81,
            _ => 79,
        }),
    }
}

/// The assumption that goes with [`engine_share`].
pub fn engine_assumption(engine: Engine) -> Option<Assumption> {
    let (what, value, source) = match engine {
        Engine::Hf => return None,
        Engine::Vllm => (
            "engine, vLLM",
            "the estimate must fit in vLLM's share of the GPU, 90% by default (--gpu-memory-utilization sets \
             another); vLLM fills what is left of that share with cache blocks, so nvidia-smi shows the whole share \
             used whatever the model",
            VLLM_MEMORY,
        ),
        Engine::Sglang => (
            "engine, SGLang",
            "the estimate must fit in mem_fraction_static of the GPU (by default 0.88 at TP 1 down to 0.81 at TP 8; \
             --gpu-memory-utilization sets another); SGLang fills the rest of that share with its KV pool",
            SGLANG_MEMORY,
        ),
    };
    Some(Assumption {
        what: what.into(),
        value: value.into(),
        source: source.into(),
    })
}

/// The estimate for `model` under `s`, per GPU. Every term is in bytes; `total` is their
/// sum; `assumptions` lists every constant and choice behind them with its source.
pub fn estimate(model: &ModelShape, s: &Settings) -> Estimate {
    let mut notes = Notes(Vec::new());
    let dims = Dims::of(model, &mut notes);
    if beyond_exact(&dims, model, s) {
        // No GPU count holds it; the exact arithmetic below could overflow, so say so
        // rather than compute it.
        notes.add(
            "size",
            "past 2^100 bytes per GPU: larger than any machine; the terms are not computed".to_string(),
            "by arithmetic",
        );
        let all = u64::MAX;
        return Estimate {
            per_gpu: MemoryTerms {
                weights: all,
                gradients: all,
                optimizer: all,
                activations: all,
                kv_cache: all,
                overhead: OVERHEAD_BYTES,
                total: all,
            },
            assumptions: notes.0,
        };
    }
    let params = u128::from(model.params);
    let training = s.method != Method::Inference;
    let tp = u128::from(s.tp.max(1));
    let pp = u128::from(s.pp.max(1));
    // Data-parallel ranks: what is left of the GPUs after tensor and pipeline parallelism.
    let dp = (u128::from(s.gpus.max(1)) / (tp * pp)).max(1);

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
    // PEFT keeps the adapters in fp32 under 16-bit base weights (autocast_adapter_dtype).
    let adapter_bytes = 4;
    let weights_all = match s.method {
        Method::Inference
            if matches!(s.precision, Precision::Int4 | Precision::Int8 | Precision::Fp8)
                && dims.vocab.is_some() =>
        {
            let unquantized = dims
                .vocab
                .map_or(0, |v| v * dims.hidden * if dims.tied { 1 } else { 2 })
                .min(params);
            notes.add(
                "weights",
                format!(
                    "the linear layers at {} per parameter ({}); the embeddings and lm_head ({unquantized} \
                     parameters) in 16 bits, as GPTQ, AWQ, bitsandbytes and FP8 checkpoints leave them",
                    bytes_text(num, den),
                    name(s.precision)
                ),
                "AutoGPTQ / AutoAWQ quantize the decoder's nn.Linear layers only; transformers' quantizers keep \
                 lm_head unquantized (modules_to_not_convert, get_keys_to_not_convert); DeepSeek-V3's FP8 \
                 checkpoint keeps embed_tokens and lm_head in bf16",
            );
            div_ceil((params - unquantized) * num, den) + 2 * unquantized
        }
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
                    "the frozen base at {} per parameter ({}), the adapters at {adapter_bytes} (fp32)",
                    bytes_text(num, den),
                    name(s.precision)
                ),
                format!("{LORA_PAPER}; PEFT LoraConfig autocast_adapter_dtype=True keeps adapters in fp32"),
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
            // PEFT's prepare_model_for_kbit_training, which the transformers recipes call,
            // upcasts every parameter left in 16 bits to fp32.
            let unquantized_bytes: u128 = if s.trainer == Trainer::Hf { 4 } else { 2 };
            notes.add(
                "weights, QLoRA",
                format!(
                    "the frozen linear layers in 4-bit NF4 with double quantization, \
                     {}/{} bits per parameter; embeddings and lm_head ({unquantized} \
                     parameters) at {unquantized_bytes} bytes{}; the adapters at {adapter_bytes} bytes (fp32)",
                    NF4_DQ_BITS.0,
                    NF4_DQ_BITS.1,
                    if s.trainer == Trainer::Hf {
                        " (fp32: prepare_model_for_kbit_training)"
                    } else {
                        ""
                    }
                ),
                format!(
                    "{QLORA_PAPER}; transformers' bitsandbytes integration keeps the output \
                     embedding unquantized (get_keys_to_not_convert); PEFT prepare_model_for_kbit_training casts \
                     the fp16/bf16 parameters that are not Params4bit to fp32"
                ),
            );
            div_ceil(quantized * NF4_DQ_BITS.0, NF4_DQ_BITS.1 * 8)
                + unquantized * unquantized_bytes
                + adapters * adapter_bytes
        }
    };

    // Gradients and optimizer states, of the trained parameters.
    let (gradients_all, optimizer_all) = if training {
        let lora = matches!(s.method, Method::Lora | Method::Qlora);
        // The trained tensors' own width: fp32 adapters, else the weights' precision.
        let param_bytes: u128 = if lora || s.precision == Precision::Fp32 {
            4
        } else {
            2
        };
        notes.add(
            "gradients",
            format!(
                "{param_bytes} bytes per trained parameter ({trained} trained), the parameters' own width"
            ),
            format!("{ZERO_PAPER}: 16-bit gradients under mixed precision; 4 bytes for fp32 parameters"),
        );
        let master = match s.precision {
            _ if lora => 0,
            Precision::Mixed | Precision::Fp8 | Precision::Int8 | Precision::Int4 => 4,
            Precision::Fp32 | Precision::Bf16 | Precision::Fp16 => 0,
        };
        if master > 0 {
            notes.add(
                "fp32 master copy",
                "4 bytes per trained parameter, counted with the optimizer states".to_string(),
                format!("{ZERO_PAPER}: mixed-precision Adam keeps an fp32 copy of the parameters"),
            );
        } else if !lora && s.precision != Precision::Fp32 {
            notes.add(
                "fp32 master copy",
                format!(
                    "none: pure {} trains the 16-bit weights directly (--precision mixed keeps an fp32 copy)",
                    name(s.precision)
                ),
                ZERO_PAPER,
            );
        }
        // Moments in the parameters' width unless the optimizer quantizes them: fp32
        // under mixed precision (they live beside the fp32 master copy).
        let moment_bytes: u128 = if master > 0 { 4 } else { param_bytes };
        let states = match s.optimizer {
            Optimizer::Adamw => {
                let (value, source) = if master > 0 {
                    (
                        "8 bytes per trained parameter: two fp32 moments (K = 12 with the master copy)"
                            .to_string(),
                        ZERO_PAPER.to_string(),
                    )
                } else {
                    (
                        format!(
                            "{} bytes per trained parameter: two moments in the parameters' width ({moment_bytes} bytes)",
                            2 * moment_bytes
                        ),
                        TORCH_ADAMW.to_string(),
                    )
                };
                notes.add("optimizer states, AdamW", value, source);
                trained * 2 * moment_bytes
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
                    format!("{moment_bytes} bytes per trained parameter: one momentum buffer"),
                    "PyTorch torch.optim.SGD (momentum_buffer per parameter, in its dtype)",
                );
                trained * moment_bytes
            }
            Optimizer::Adafactor => {
                // A factored second moment keeps n + m fp32 values for an n x m matrix, no
                // first moment (beta1 off). Counted as if every matrix were at least
                // hidden x hidden (full) or r x hidden (adapters): an upper bound.
                let h = dims.hidden.max(1);
                let bytes = if lora {
                    let r = u128::from(s.lora_rank.max(1));
                    div_ceil(4 * trained * (r + h), r * h)
                } else {
                    div_ceil(8 * trained, h)
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
        (trained * param_bytes, states + trained * master)
    } else {
        notes.add(
            "gradients and optimizer",
            "none: inference runs forward passes only".to_string(),
            "by definition",
        );
        (0, 0)
    };

    // Model parallelism splits every weight (and its gradient and states); sharding then
    // divides over the data-parallel ranks.
    let mp = tp * pp;
    let (weights_all, gradients_all, optimizer_all) = (
        div_ceil(weights_all, mp),
        div_ceil(gradients_all, mp),
        div_ceil(optimizer_all, mp),
    );
    if mp > 1 {
        notes.add(
            "model parallelism",
            format!(
                "tensor parallel {tp} x pipeline parallel {pp}: each GPU holds 1/{mp} of the weights (and of \
                 their gradients and optimizer states); tensor parallelism also splits the attention heads, \
                 their KV cache and the MLP, pipeline parallelism the layers"
            ),
            "Shoeybi et al. 2019, Megatron-LM (arXiv:1909.08053) §3; Narayanan et al. 2021 (arXiv:2104.04473) §2",
        );
    }
    let (weights, gradients, optimizer) = match s.shard {
        Shard::None => (weights_all, gradients_all, optimizer_all),
        Shard::Zero1 => (weights_all, gradients_all, div_ceil(optimizer_all, dp)),
        Shard::Zero2 => (
            weights_all,
            div_ceil(gradients_all, dp),
            div_ceil(optimizer_all, dp),
        ),
        Shard::Zero3 | Shard::Fsdp => (
            div_ceil(weights_all, dp),
            div_ceil(gradients_all, dp),
            div_ceil(optimizer_all, dp),
        ),
    };
    // ZeRO-3 and FSDP gather one layer's 16-bit weights (and reduce its gradients) at a
    // time: DeepSpeed's estimator counts 4 bytes a parameter of the largest layer.
    let gather = if training && matches!(s.shard, Shard::Zero3 | Shard::Fsdp) && dp > 1 {
        let largest = div_ceil(dims.largest_layer, tp);
        notes.add(
            "sharding",
            format!(
                "{}: {} divided over {dp} data-parallel GPUs, plus the gather buffers: 4 bytes a parameter of \
                 the largest layer ({largest} parameters{}), its 16-bit weights gathered whole for its forward and \
                 backward (counted with the weights) and its 16-bit gradients before they are reduced (with the \
                 gradients)",
                name(s.shard),
                "optimizer states, gradients and weights",
                if dims.largest_guessed { ", guessed as one block" } else { "" }
            ),
            format!("{ZERO_SHARDING}; {DEEPSPEED_ZERO3}"),
        );
        2 * largest
    } else {
        if s.shard != Shard::None {
            let what = match s.shard {
                Shard::Zero1 => "optimizer states",
                Shard::Zero2 => "optimizer states and gradients",
                _ => "optimizer states, gradients and weights",
            };
            notes.add(
                "sharding",
                format!("{}: {what} divided over {dp} data-parallel GPUs", name(s.shard)),
                ZERO_SHARDING,
            );
        }
        0
    };
    if dims.experts.is_some() {
        notes.add(
            "mixture of experts",
            "every expert's weights held (no expert parallelism beyond the split above); activations and \
             time count the experts a token is routed to"
                .to_string(),
            "by choice of this estimate",
        );
    }

    // LoRA and QLoRA gather the frozen weights only; their gradients are the adapters'.
    let lora = matches!(s.method, Method::Lora | Method::Qlora);
    let (mut weights, mut gradients, mut optimizer) = (
        weights + gather,
        gradients + if lora { 0 } else { gather },
        optimizer,
    );
    if training && s.optimizer_in_backward && gradients > 0 {
        // Each parameter steps as its gradient arrives: about one layer's gradients at once.
        let one = div_ceil(dims.largest_layer, tp)
            * if s.precision == Precision::Fp32 || lora {
                4
            } else {
                2
            };
        gradients = gradients.min(one + if lora { 0 } else { gather });
        notes.add(
            "gradients, optimizer in the backward pass",
            format!("one layer's gradients at a time ({gradients} bytes): each parameter steps as soon as its gradient is ready"),
            "torchtune optimizer_in_bwd (torchtune/training/_activation_offloading and recipes \
             full_finetune_single_device.py: register_post_accumulate_grad_hook steps and frees each gradient); \
             PyTorch tutorial 'How to save memory by fusing the optimizer step into the backward pass'",
        );
    }
    match s.offload {
        Offload::None => {}
        Offload::Optimizer if training => {
            notes.add(
                "offload",
                format!(
                    "the optimizer states ({optimizer} bytes a GPU) in CPU memory, not the GPU's: DeepSpeed \
                     ZeRO-Offload steps them on the CPU; bitsandbytes' paged optimizers keep them in unified memory \
                     that the driver evicts to the host when the GPU fills"
                ),
                "Ren et al. 2021, ZeRO-Offload (arXiv:2101.06840) §4; bitsandbytes docs, Paged optimizers \
                 (cudaMallocManaged, evicted to CPU RAM under GPU memory pressure)",
            );
            optimizer = 0;
        }
        Offload::All if training => {
            notes.add(
                "offload",
                format!(
                    "parameters, gradients and optimizer states in CPU memory ({} bytes a GPU); the GPU holds the \
                     layer being computed and its gradients (the gather buffers)",
                    weights + gradients + optimizer - gather - if lora { 0 } else { gather }
                ),
                "PyTorch FSDP CPUOffload(offload_params=True): parameters and gradients live on the CPU and the \
                 optimizer steps there; Rajbhandari et al. 2021, ZeRO-Infinity (arXiv:2104.07857)",
            );
            weights = gather;
            gradients = if lora { 0 } else { gather };
            optimizer = 0;
        }
        _ => {}
    }
    let (seq, batch) = (u128::from(s.seq_len), u128::from(s.batch));
    let (activations, kv_cache) = if training {
        (training_activations(&dims, s, tp, seq, batch, &mut notes), 0)
    } else {
        inference_memory(&dims, s, tp, pp, seq, batch, &mut notes)
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

/// Bytes one token keeps in one decoder layer for the backward pass, in 16-bit
/// activations, with tensor parallelism `tp` splitting the attention and the MLP (the
/// norms stay whole: no sequence parallelism).
fn layer_bytes_per_token(d: &Dims, attention: Attention, seq: u128, tp: u128) -> u128 {
    // Two RMSNorms: an fp32 copy of the input (4h) and the 16-bit output (2h) each.
    let norms = 12 * d.hidden;
    // Q and the attention output (2 bytes each, heads x head_dim), K and V (2 bytes a
    // cached value), and one fp32 log-sum-exp per head.
    let qo = 4 * d.heads * d.head_dim;
    let kv = 2 * d.kv_per_token;
    let lse = 4 * d.heads;
    // SwiGLU: gate, SiLU(gate), up and their product, 2 bytes each.
    let mlp = 8 * d.active_intermediate;
    // Eager attention also keeps the scores: fp32 softmax output and its 16-bit copy.
    let scores = match attention {
        Attention::Eager => 6 * d.heads * seq,
        Attention::Flash | Attention::Sdpa => 0,
    };
    norms + div_ceil(qo + kv + lse + mlp + scores, tp)
}

/// Activations kept for the backward pass, per GPU.
fn training_activations(d: &Dims, s: &Settings, tp: u128, seq: u128, batch: u128, notes: &mut Notes) -> u128 {
    let tokens = seq * batch;
    let layer = tokens * layer_bytes_per_token(d, s.attention, seq, tp);
    let kernel = match s.attention {
        Attention::Flash => ("flash", FLASH),
        Attention::Sdpa => ("sdpa", FLASH),
        Attention::Eager => ("eager", EAGER),
    };
    let per_token_text = format!(
        "12h (two RMSNorms) + (4 x heads x head_dim + 2 x kv values + 4 x heads + 8 x MLP width{}){} bytes a \
         token a layer",
        if s.attention == Attention::Eager {
            " + 6 x heads x seq"
        } else {
            ""
        },
        if tp > 1 {
            format!(" / {tp} (tensor parallel)")
        } else {
            String::new()
        }
    );
    notes.add(
        "attention kernel",
        format!(
            "{}: {}",
            kernel.0,
            if s.attention == Attention::Eager {
                "the s x s score matrices are kept, growing with the square of the sequence"
            } else {
                "no score matrix is kept, memory grows linearly with the sequence (--attention eager keeps them)"
            }
        ),
        kernel.1,
    );
    // The loss, bytes a token a vocabulary entry: transformers holds the 16-bit logits,
    // their fp32 upcast, the shifted fp32 copy, the log-softmax the cross-entropy keeps and
    // its fp32 gradient; torchtune keeps the 16-bit logits and upcasts one of 8 chunks at a
    // time; Unsloth's fused loss never holds them.
    let logits = match d.vocab {
        Some(v) => {
            let (num, den, value, source) = match s.trainer {
                Trainer::Hf => (
                    18,
                    1,
                    "18 x s x b x vocab bytes: the 16-bit logits, their fp32 upcast, the shifted fp32 copy, the \
                     fp32 log-softmax the cross-entropy keeps and its fp32 gradient",
                    "transformers LlamaForCausalLM.forward / ForCausalLMLoss: logits.float(), \
                     shift_logits = logits[..., :-1, :].contiguous(), then cross_entropy; \
                     torch.nn.functional.log_softmax keeps its output for the backward pass",
                ),
                Trainer::Torchtune => (
                    28,
                    8,
                    "3.5 x s x b x vocab bytes: the 16-bit logits (2) and, one of 8 chunks at a time, their fp32 \
                     upcast, log-softmax and gradient (12 / 8)",
                    "torchtune torchtune/modules/loss/ce_chunked_output_loss.py: CEWithChunkedOutputLoss, \
                     num_output_chunks = 8, upcasts each chunk to fp32",
                ),
                Trainer::Unsloth => (
                    0,
                    1,
                    "none kept: the fused cross-entropy computes the loss and its gradient chunk by chunk \
                     without holding the logits",
                    "Unsloth README and blog 'Long context' (2024): fused chunked cross-entropy; \
                     unslothai/unsloth kernels/cross_entropy_loss.py",
                ),
            };
            notes.add("logits", value.to_string(), source);
            div_ceil(num * tokens * v, den * tp)
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
    if s.checkpointing && s.trainer == Trainer::Unsloth {
        notes.add(
            "activations (an estimate)",
            format!(
                "Unsloth's gradient checkpointing: each layer's 16-bit input offloaded to CPU memory ({} bytes \
                 of RAM), two in flight on the GPU, plus one layer recomputed in the backward pass at \
                 {per_token_text}",
                d.layers * 2 * tokens * d.hidden
            ),
            format!(
                "Unsloth, use_gradient_checkpointing=\"unsloth\": offloads the checkpointed activations to system \
                 RAM asynchronously (Unsloth blog, 'Long context' 2024); {AUTOGRAD_LAYER}"
            ),
        );
        return 2 * 2 * tokens * d.hidden + layer.max(logits);
    }
    if s.checkpointing {
        notes.add(
            "activations (an estimate)",
            format!(
                "gradient checkpointing (the default; --no-checkpointing turns it off): each layer's 16-bit \
                 input kept, 2 x s x b x h bytes per layer, plus one layer recomputed in the backward pass at \
                 {per_token_text}; the peak is the kept inputs plus the larger of that layer and the logits"
            ),
            format!("{KORTHIKANTI} (full recomputation); {AUTOGRAD_LAYER}"),
        );
        d.layers * 2 * tokens * d.hidden + layer.max(logits)
    } else {
        notes.add(
            "activations (an estimate)",
            format!("every layer kept (--no-checkpointing): {per_token_text}, plus the logits"),
            AUTOGRAD_LAYER,
        );
        d.layers * layer + logits
    }
}

/// Inference: the KV cache and the working set of one forward pass, per GPU.
fn inference_memory(
    d: &Dims,
    s: &Settings,
    tp: u128,
    pp: u128,
    seq: u128,
    batch: u128,
    notes: &mut Notes,
) -> (u128, u128) {
    let kv_bytes: u128 = if s.precision == Precision::Fp32 { 4 } else { 2 };
    // Tokens a layer caches: the whole context, or the window for sliding layers.
    let cached = |window_layers: u128| {
        let global = d.layers - window_layers;
        let windowed = d.window.map_or(seq, |w| seq.min(w));
        global * seq + window_layers * windowed
    };
    let layer_tokens = cached(d.window.map_or(0, |_| d.sliding_layers));
    // Tensor parallelism splits the KV heads; past the number of KV heads each rank keeps
    // one (vLLM replicates them). An MLA latent is shared by every head: not split.
    let kv_split = if d.mla { 1 } else { tp.min(d.kv_heads.max(1)) };
    let kv_all = kv_bytes * d.kv_per_token * layer_tokens * batch;
    let kv_cache = div_ceil(div_ceil(kv_all, kv_split), pp);
    notes.add(
        "KV cache",
        format!(
            "{kv_bytes} bytes x {} values a token a layer ({}) x the context {seq} x batch {batch}{}{}{}; \
             fp8 and int weights keep a 16-bit cache unless the engine is told otherwise",
            d.kv_per_token,
            if d.mla {
                "kv_lora_rank + qk_rope_head_dim: multi-head latent attention"
            } else {
                "2 x kv_heads x head_dim"
            },
            match d.window {
                Some(w) => format!(
                    "; {} of {} layers attend through a {w}-token window and cache at most that",
                    d.sliding_layers, d.layers
                ),
                None => String::new(),
            },
            if kv_split > 1 {
                format!("; split over {kv_split} tensor-parallel GPUs by KV head")
            } else if tp > 1 && d.mla {
                "; not split by tensor parallelism (one latent shared by every head)".to_string()
            } else {
                String::new()
            },
            if pp > 1 {
                format!("; each of {pp} pipeline stages caches its own layers")
            } else {
                String::new()
            }
        ),
        KV_SOURCE,
    );
    // The working set: one chunk of prompt through the widest layer. Transformers runs
    // the whole prompt at once; vLLM and SGLang prefill in chunks.
    let (chunk, engine_text) = match s.engine {
        Engine::Hf => (
            seq * batch,
            "transformers runs the whole prompt (s x b tokens) at once",
        ),
        Engine::Vllm => (
            (seq * batch).min(8192),
            "vLLM prefills in chunks of at most max_num_batched_tokens (8192)",
        ),
        Engine::Sglang => (
            (seq * batch).min(8192),
            "SGLang prefills in chunks of at most chunked_prefill_size (8192)",
        ),
    };
    // The MLP's three live intermediates (SiLU(gate), up, their product) and the residual
    // and normed hidden state, 16-bit, for each token of the chunk.
    let per_token = div_ceil(6 * d.active_intermediate, tp) + 4 * d.hidden;
    let scores = match s.attention {
        Attention::Eager => div_ceil(6 * d.heads * seq * chunk, tp),
        Attention::Flash | Attention::Sdpa => 0,
    };
    // Only the last token's logits are computed while generating, in fp32.
    let logits = d.vocab.map_or(0, |v| 4 * batch * v);
    notes.add(
        "activations, inference (an estimate)",
        format!(
            "the working set of one prefill chunk ({chunk} tokens: {engine_text}): the MLP's three live \
             intermediates and the hidden state, (6 x MLP width{} + 4 x h) bytes a token{}, plus the last \
             token's fp32 logits (4 x b x vocab{}); no layer's activations are kept",
            if tp > 1 { format!(" / {tp}") } else { String::new() },
            if s.attention == Attention::Eager {
                ", plus the s x chunk score matrices of eager attention (6 bytes each per head)"
            } else {
                ""
            },
            if d.vocab.is_none() {
                ", vocabulary unknown: 0"
            } else {
                ""
            }
        ),
        format!(
            "{AUTOGRAD_LAYER}; {}; transformers' generate computes logits for the last token only \
             (logits_to_keep)",
            match s.engine {
                Engine::Hf => FLASH,
                Engine::Vllm => VLLM_MEMORY,
                Engine::Sglang => SGLANG_MEMORY,
            }
        ),
    );
    if let Some(a) = engine_assumption(s.engine) {
        notes.0.push(a);
    }
    (chunk * per_token + scores + logits, kv_cache)
}

/// Whether a bound on every product the estimate forms passes 2^100 bytes: then some
/// product could pass `u128`, and no GPU holds the model anyway. Computed in `f64`, which
/// cannot overflow here (each factor is below 2^64).
fn beyond_exact(d: &Dims, m: &ModelShape, s: &Settings) -> bool {
    let f = |v: u128| v as f64;
    let (seq, batch) = (f64::from(s.seq_len), f64::from(s.batch));
    let tokens = seq * batch;
    let (h, a, hd, l) = (f(d.hidden), f(d.heads), f(d.head_dim), f(d.layers));
    let widths = 12.0 * h
        + 4.0 * a * hd
        + 2.0 * f(d.kv_per_token)
        + 4.0 * a
        + 8.0 * f(d.active_intermediate)
        + 6.0 * a * seq;
    let vocab = d.vocab.map_or(0.0, f);
    let adapters = f64::from(s.lora_rank) * l * 6.0 * (h + a * hd + d.kv_heads as f64 * hd);
    let bound = 16.0 * m.params as f64
        + 16.0 * adapters
        + l * tokens * widths
        + 10.0 * tokens * vocab
        + tokens * (6.0 * f(d.active_intermediate) + 4.0 * h + 6.0 * a * seq)
        + 4.0 * f(d.kv_per_token) * l * tokens
        + 8.0 * f(d.largest_layer)
        + 16.0 * h * h * f(d.experts.map_or(1, u128::from)) * f(d.active_intermediate.max(d.hidden));
    // A NaN bound (it cannot arise from these finite factors) counts as too large.
    bound.is_nan() || bound >= 2f64.powi(100)
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
    /// Values cached per token per layer.
    kv_per_token: u128,
    mla: bool,
    window: Option<u128>,
    sliding_layers: u128,
    /// The MLP width one token passes through.
    active_intermediate: u128,
    largest_layer: u128,
    largest_guessed: bool,
    vocab: Option<u128>,
    tied: bool,
    experts: Option<u32>,
}

impl Dims {
    fn of(m: &ModelShape, notes: &mut Notes) -> Dims {
        let (layers, hidden, guessed) = match (m.layers, m.hidden) {
            (Some(l), Some(h)) if l > 0 && h > 0 => (u128::from(l), u128::from(h), false),
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
                         with hidden = 128 x layers, heads of 128, no grouped KV heads, an MLP 4 x hidden wide: \
                         activations, the KV cache and the LoRA adapters rest on this guess (a config.json or a \
                         model compat-db knows gives the real shape; a mixture of experts or a compressed cache \
                         such as DeepSeek's cannot be guessed from a count)"
                    ),
                    "Kaplan et al. 2020, Scaling Laws for Neural Language Models \
                     (arXiv:2001.08361) §2.1; the aspect ratio of Llama 2 7B (4096/32) and \
                     GPT-3 175B (12288/96)",
                );
                (l, h, true)
            }
        };
        let heads = match m.heads {
            Some(a) if a > 0 && !guessed => u128::from(a),
            _ => (hidden / 128).max(1),
        };
        let kv_heads = m
            .kv_heads
            .filter(|&k| k > 0 && !guessed)
            .map_or(heads, u128::from)
            .min(heads);
        let head_dim = m
            .head_dim
            .filter(|&d| d > 0 && !guessed)
            .map_or((hidden / heads).max(1), u128::from);
        let kv_per_token = m
            .kv_per_token_layer
            .filter(|&v| v > 0 && !guessed)
            .map_or(2 * kv_heads * head_dim, u128::from);
        let intermediate = m
            .intermediate
            .filter(|&i| i > 0 && !guessed)
            .map_or(4 * hidden, u128::from);
        let active_intermediate = m
            .active_intermediate
            .filter(|&i| i > 0 && !guessed)
            .map_or(intermediate, u128::from);
        let window = m.sliding_window.filter(|&w| w > 0 && !guessed).map(u128::from);
        let sliding_layers = m.sliding_layers.map_or(layers, u128::from).min(layers);
        // One block: attention (q, o and k, v) and the MLP with every expert.
        let experts = u128::from(m.experts.unwrap_or(1).max(1));
        let block = 2 * hidden * heads * head_dim
            + 2 * hidden * kv_heads * head_dim
            + experts * 3 * hidden * intermediate;
        let embedding = m.vocab.map_or(0, |v| u128::from(v) * hidden);
        let (largest_layer, largest_guessed) = match m.largest_layer_params {
            Some(p) if p > 0 && !guessed => (u128::from(p), false),
            _ => (block.max(embedding), true),
        };
        Dims {
            layers,
            hidden,
            heads,
            kv_heads,
            head_dim,
            kv_per_token,
            mla: m.mla && !guessed,
            window,
            sliding_layers,
            active_intermediate,
            largest_layer,
            largest_guessed,
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

    /// The command's defaults with checkpointing off: the tests count every layer.
    fn settings(method: Method, precision: Precision, optimizer: Optimizer) -> Settings {
        Settings {
            method,
            precision,
            optimizer,
            checkpointing: false,
            ..Settings::default()
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

    /// The block a count-only 7.5B model is guessed to have: 34 layers of hidden 4352
    /// (cube root of 7.5e9 / (12 x 128^2), rounded), q, k, v and o of 4352^2 each and an MLP
    /// 4 x 4352 wide, three matrices: 16 x 4352^2 parameters.
    const GUESSED_7_5B_BLOCK: u64 = 16 * 4352 * 4352;

    /// ZeRO paper (Rajbhandari et al. 2020, arXiv:1910.02054) Figure 1: Ψ = 7.5B, Nd = 64,
    /// K = 12 (mixed-precision Adam): 120 GB per GPU for the baseline, 31.4 GB with Pos
    /// (ZeRO-1), 16.6 GB with Pos+g (ZeRO-2), 1.9 GB with Pos+g+p (ZeRO-3); GB = 1e9. The
    /// figure counts model states only; under ZeRO-3 the estimate adds the gathered
    /// layer's 16-bit weights and gradients, 4 bytes a parameter, as DeepSpeed does.
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
            let gather = match shard {
                Shard::Zero3 | Shard::Fsdp => 4 * GUESSED_7_5B_BLOCK,
                _ => 0,
            };
            let states = model_states(&e) - gather;
            let gb = states as f64 / 1e9;
            assert!(
                (gb - published_gb).abs() <= 0.05,
                "{shard:?}: {gb} GB, the paper prints {published_gb}"
            );
            let paper = reference::zero_paper_model_states(7_500_000_000, 12, 64, shard);
            assert_eq!(states, paper, "{shard:?}");
        }
    }

    /// The same, exactly: (2 + 2 + 12) x 7.5e9 / 64 = 1.875e9 bytes under ZeRO-3, and the
    /// gathered layer on top.
    #[test]
    fn zero3_over_64_gpus_is_16_bytes_over_64() {
        let mut s = settings(Method::Full, Precision::Mixed, Optimizer::Adamw);
        s.gpus = 64;
        s.shard = Shard::Zero3;
        let e = estimate(&count_only(7_500_000_000), &s);
        assert_eq!(model_states(&e), 1_875_000_000 + 4 * GUESSED_7_5B_BLOCK);
        assert_eq!(e.per_gpu.weights, 234_375_000 + 2 * GUESSED_7_5B_BLOCK);
        assert_eq!(e.per_gpu.gradients, 234_375_000 + 2 * GUESSED_7_5B_BLOCK);
        assert_eq!(e.per_gpu.optimizer, 1_406_250_000);
        let sharding = e.assumptions.iter().find(|a| a.what == "sharding").unwrap();
        assert!(sharding.value.contains("gather buffers"), "{sharding:?}");
        assert!(sharding.source.contains("largest_layer_memory"), "{sharding:?}");
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
        // The frozen base dominates: about 4.127 bits per linear parameter (33.4 GB), the
        // embeddings and lm_head in fp32 as PEFT's prepare_model_for_kbit_training leaves
        // them (2.1 GB), and the adapters: 35-38 GB.
        assert!(e.per_gpu.weights > 35_000_000_000 && e.per_gpu.weights < 38_000_000_000);
        s.optimizer = Optimizer::Adamw;
        let e = estimate(&model, &s);
        assert!(e.per_gpu.total < 48_000_000_000, "{:?}", e.per_gpu);
        // Without QLoRA, 16-bit LoRA of the same model does not fit.
        s.method = Method::Lora;
        assert!(estimate(&model, &s).per_gpu.total > 48_000_000_000);
    }

    /// DeepSpeed's ZeRO-3 estimator (no offload) counts 18 bytes per parameter over the
    /// GPUs plus 4 x the largest layer; this estimate counts the ZeRO paper's 16 (2-byte
    /// gradients, DeepSpeed's 4-byte fp32 gradient copy left out) and the same 4 x the
    /// largest layer. The gap is exactly 2 x params / gpus.
    #[test]
    fn zero3_against_deepspeeds_estimator() {
        let mut model = fixture("llama-2-7b-hf.config.json");
        let largest_layer = 32000 * 4096; // the embedding, as DeepSpeed's example takes it
        model.largest_layer_params = Some(largest_layer);
        let mut s = settings(Method::Full, Precision::Mixed, Optimizer::Adamw);
        s.gpus = 8;
        s.shard = Shard::Zero3;
        let mine = model_states(&estimate(&model, &s));
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
        assert_eq!(deepspeed - mine, 2 * p / 8);
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

    /// The issue's case: a 70B model with 8 KV heads at a 32,768-token context holds
    /// 327,680 x 32,768 bytes = 10 GiB of cache on one GPU; tensor parallel 8 gives each
    /// GPU one KV head, 1.25 GiB, and an eighth of the weights. Tensor parallel 16 cannot
    /// split 8 KV heads further: each GPU keeps one.
    #[test]
    fn tensor_parallelism_splits_weights_and_the_kv_cache() {
        let model = fixture("llama-2-70b-hf.config.json");
        let mut s = settings(Method::Inference, Precision::Bf16, Optimizer::Adamw);
        s.seq_len = 32768;
        let one = estimate(&model, &s);
        assert_eq!(one.per_gpu.kv_cache, 10 << 30);
        s.gpus = 8;
        s.tp = 8;
        let eight = estimate(&model, &s);
        assert_eq!(eight.per_gpu.kv_cache, (10 << 30) / 8);
        assert_eq!(eight.per_gpu.weights, 2 * 68_976_648_192 / 8);
        assert!(eight.per_gpu.activations < one.per_gpu.activations);
        s.gpus = 16;
        s.tp = 16;
        assert_eq!(estimate(&model, &s).per_gpu.kv_cache, (10 << 30) / 8);
        // Pipeline stages each cache their own layers.
        s.tp = 1;
        s.pp = 4;
        s.gpus = 4;
        assert_eq!(estimate(&model, &s).per_gpu.kv_cache, (10 << 30) / 4);
    }

    /// Multi-head latent attention caches one latent per token and layer, shared by every
    /// head: DeepSeek-V3 (61 layers, kv_lora_rank 512 + qk_rope_head_dim 64) keeps 576
    /// values, 70,272 bytes a token in bf16 (DeepSeek-V2 paper §2.1.2: (d_c + d_h^R) x l
    /// elements); tensor parallelism does not split it.
    #[test]
    fn mla_caches_the_latent_and_tensor_parallelism_keeps_it_whole() {
        let model = ModelShape {
            params: 671_000_000_000,
            active_params: 37_000_000_000,
            layers: Some(61),
            hidden: Some(7168),
            heads: Some(128),
            kv_heads: Some(128),
            head_dim: Some(192),
            vocab: Some(129_280),
            kv_per_token_layer: Some(576),
            mla: true,
            source: "test".into(),
            ..ModelShape::default()
        };
        let mut s = settings(Method::Inference, Precision::Fp8, Optimizer::Adamw);
        s.seq_len = 1000;
        let one = estimate(&model, &s);
        assert_eq!(one.per_gpu.kv_cache, 2 * 576 * 61 * 1000);
        s.gpus = 8;
        s.tp = 8;
        assert_eq!(estimate(&model, &s).per_gpu.kv_cache, one.per_gpu.kv_cache);
        let kv = one.assumptions.iter().find(|a| a.what == "KV cache").unwrap();
        assert!(kv.value.contains("multi-head latent attention"), "{kv:?}");
    }

    /// Sliding-window layers cache at most the window: Gemma 2's alternate layers attend
    /// through 4096 tokens, so at 8192 tokens half the layers cache half as much.
    #[test]
    fn sliding_window_layers_cap_their_cache() {
        let model = ModelShape {
            params: 9_000_000_000,
            active_params: 9_000_000_000,
            layers: Some(42),
            hidden: Some(3584),
            heads: Some(16),
            kv_heads: Some(8),
            head_dim: Some(256),
            sliding_window: Some(4096),
            sliding_layers: Some(21),
            source: "test".into(),
            ..ModelShape::default()
        };
        let mut s = settings(Method::Inference, Precision::Bf16, Optimizer::Adamw);
        s.seq_len = 8192;
        let per_token_layer = 2 * 2 * 8 * 256;
        assert_eq!(
            estimate(&model, &s).per_gpu.kv_cache,
            per_token_layer * (21 * 8192 + 21 * 4096)
        );
        s.seq_len = 2048;
        assert_eq!(estimate(&model, &s).per_gpu.kv_cache, per_token_layer * 42 * 2048);
    }

    /// Flash and SDPA keep no score matrix: activations grow linearly with the sequence.
    /// Eager keeps the s x s scores (6 bytes an entry a head), quadratic.
    #[test]
    fn attention_kernels_keep_what_they_store() {
        let model = fixture("llama-2-7b-hf.config.json");
        let mut s = settings(Method::Full, Precision::Mixed, Optimizer::Adamw);
        let (h, a, d, kv, i, l, v) = (4096u64, 32u64, 128u64, 2 * 32 * 128u64, 11008u64, 32u64, 32000u64);
        let per_token = 12 * h + 4 * a * d + 2 * kv + 4 * a + 8 * i;
        for seq in [2048u64, 8192] {
            s.seq_len = seq as u32;
            let flash = estimate(&model, &s).per_gpu.activations;
            assert_eq!(flash, l * seq * per_token + 18 * seq * v, "seq {seq}");
            s.attention = Attention::Sdpa;
            assert_eq!(estimate(&model, &s).per_gpu.activations, flash);
            s.attention = Attention::Eager;
            let eager = estimate(&model, &s).per_gpu.activations;
            assert_eq!(eager - flash, l * seq * 6 * a * seq, "seq {seq}");
            s.attention = Attention::Flash;
        }
        // Checkpointing keeps each layer's input and recomputes one layer at a time.
        s.seq_len = 2048;
        s.checkpointing = true;
        let seq = 2048u64;
        assert_eq!(
            estimate(&model, &s).per_gpu.activations,
            l * 2 * seq * h + (seq * per_token).max(18 * seq * v)
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
        // torch.optim.AdamW on bf16 parameters keeps bf16 moments: 8 bytes a parameter.
        assert_eq!(states(Precision::Bf16, Optimizer::Adamw), (2 * g, 2 * g, 4 * g));
        assert_eq!(
            states(Precision::Mixed, Optimizer::Adamw8bit),
            (2 * g, 2 * g, 6 * g)
        );
        assert_eq!(
            states(Precision::Bf16, Optimizer::Adamw8bit),
            (2 * g, 2 * g, 2 * g)
        );
        assert_eq!(states(Precision::Fp32, Optimizer::Sgd), (4 * g, 4 * g, 4 * g));
        assert_eq!(states(Precision::Mixed, Optimizer::Sgd), (2 * g, 2 * g, 8 * g));
        let (_, _, adafactor) = states(Precision::Fp32, Optimizer::Adafactor);
        assert!(adafactor > 0 && adafactor < g / 100, "{adafactor}");
    }

    #[test]
    fn lora_trains_only_the_adapters() {
        let model = fixture("llama-2-7b-hf.config.json");
        let mut s = settings(Method::Lora, Precision::Bf16, Optimizer::Adamw);
        s.lora_rank = 8;
        let e = estimate(&model, &s);
        // 32 layers x 4 projections x 8 x (4096 + 4096), in fp32 with fp32 moments.
        let adapters = 32 * 4 * 8 * 8192;
        assert_eq!(e.per_gpu.gradients, 4 * adapters);
        assert_eq!(e.per_gpu.optimizer, 8 * adapters);
        assert_eq!(e.per_gpu.weights, 2 * 6_738_415_616 + 4 * adapters);
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
        assert!(whats.contains(&"attention kernel"), "{whats:?}");
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

    /// The trainers differ in the loss and in where checkpoints live: torchtune keeps the
    /// 16-bit logits and upcasts an eighth at a time (3.5 bytes a vocabulary entry against
    /// transformers' 18); Unsloth holds no logits and keeps two layer inputs on the GPU.
    #[test]
    fn trainers_hold_the_loss_and_checkpoints_their_way() {
        let model = fixture("llama-2-7b-hf.config.json");
        let mut s = settings(Method::Lora, Precision::Bf16, Optimizer::Adamw);
        s.checkpointing = true;
        s.seq_len = 8192;
        let (seq, h, v, l) = (8192u64, 4096u64, 32000u64, 32u64);
        let hf = estimate(&model, &s).per_gpu.activations;
        assert_eq!(hf, l * 2 * seq * h + 18 * seq * v);
        s.trainer = Trainer::Torchtune;
        let tt = estimate(&model, &s).per_gpu.activations;
        let layer = seq * (12 * h + 4 * 32 * 128 + 2 * 2 * 32 * 128 + 4 * 32 + 8 * 11008);
        assert_eq!(tt, l * 2 * seq * h + layer.max((28 * seq * v).div_ceil(8)));
        s.trainer = Trainer::Unsloth;
        let e = estimate(&model, &s);
        assert_eq!(e.per_gpu.activations, 2 * 2 * seq * h + layer);
        let a = e
            .assumptions
            .iter()
            .find(|a| a.what.starts_with("activations"))
            .unwrap();
        assert!(a.value.contains("offloaded to CPU memory"), "{a:?}");
        // QLoRA under transformers: prepare_model_for_kbit_training keeps the 16-bit
        // embeddings and lm_head in fp32; torchtune keeps them in bf16.
        s.method = Method::Qlora;
        s.trainer = Trainer::Hf;
        let hf = estimate(&model, &s).per_gpu.weights;
        s.trainer = Trainer::Torchtune;
        assert_eq!(hf - estimate(&model, &s).per_gpu.weights, 2 * 2 * 32000 * 4096);
    }

    /// The engines' shares of the card, as their code sets them.
    #[test]
    fn engines_take_their_share() {
        assert_eq!(engine_share(Engine::Hf, Method::Inference, 1, None), None);
        assert_eq!(engine_share(Engine::Vllm, Method::Inference, 2, None), Some(90));
        assert_eq!(engine_share(Engine::Sglang, Method::Inference, 1, None), Some(88));
        assert_eq!(engine_share(Engine::Sglang, Method::Inference, 8, None), Some(81));
        assert_eq!(engine_share(Engine::Vllm, Method::Full, 1, None), None);
        assert_eq!(
            engine_share(Engine::Vllm, Method::Inference, 2, Some(100)),
            Some(100)
        );
    }

    /// The largest inputs the command takes (2^27 tokens, a batch of 2^20, the widest
    /// shapes a config may give) stay inside the arithmetic: a total past u64 is clamped,
    /// never wrapped to something that fits.
    #[test]
    fn the_largest_inputs_do_not_wrap() {
        let model = ModelShape {
            params: 1_000_000_000_000_000,
            active_params: 1_000_000_000_000_000,
            layers: Some(u32::MAX),
            hidden: Some(u32::MAX),
            heads: Some(u32::MAX),
            kv_heads: Some(u32::MAX),
            head_dim: Some(u32::MAX),
            vocab: Some(u32::MAX),
            intermediate: Some(u32::MAX),
            source: "test".into(),
            ..ModelShape::default()
        };
        for method in [Method::Full, Method::Inference, Method::Qlora] {
            let mut s = settings(method, Precision::Fp32, Optimizer::Adamw);
            s.seq_len = 1 << 27;
            s.batch = 1 << 20;
            s.attention = Attention::Eager;
            let e = estimate(&model, &s);
            assert_eq!(e.per_gpu.total, u64::MAX, "{method:?}");
        }
    }
}
