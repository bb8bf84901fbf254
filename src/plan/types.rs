//! The typed inputs and outputs of a plan, shared by the estimate, the fit and the command.

use serde::{Deserialize, Serialize};

/// What the model is, as far as memory goes. `params` is exact when read from a config;
/// the architecture numbers are `None` when only a count was given (`--params 7B`), and
/// the terms that need them (activations, the KV cache) then say so in their assumption.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelShape {
    /// Total parameters (every expert of an MoE).
    pub params: u64,
    /// Parameters that take part in one token's forward pass (MoE: the active experts);
    /// equal to `params` for dense models.
    pub active_params: u64,
    /// Transformer layers.
    pub layers: Option<u32>,
    /// Hidden size.
    pub hidden: Option<u32>,
    /// Attention heads.
    pub heads: Option<u32>,
    /// Key/value heads (grouped-query attention); `heads` when not grouped.
    pub kv_heads: Option<u32>,
    /// Size of one head (`hidden / heads` unless the config says).
    pub head_dim: Option<u32>,
    /// Vocabulary size.
    pub vocab: Option<u32>,
    /// Width of the MLP (one expert's, for an MoE).
    #[serde(default)]
    pub intermediate: Option<u32>,
    /// Experts per MoE layer; `None` for a dense model.
    #[serde(default)]
    pub experts: Option<u32>,
    /// Experts each token is routed to (MoE).
    #[serde(default)]
    pub experts_per_token: Option<u32>,
    /// Whether the output projection shares the input embedding's weights.
    #[serde(default)]
    pub tied_embeddings: Option<bool>,
    /// Values the KV cache keeps per token per layer: `2 x kv_heads x head_dim` for multi-head
    /// and grouped-query attention (the default when `None`); `kv_lora_rank +
    /// qk_rope_head_dim` for DeepSeek's multi-head latent attention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_per_token_layer: Option<u64>,
    /// Multi-head latent attention (DeepSeek-V2/V3): one compressed latent per token shared
    /// by every head, so tensor parallelism does not split the cache (each rank keeps it all).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mla: bool,
    /// Sliding-window attention: the window in tokens (Gemma 2/3, Mistral v0.1, GPT-OSS);
    /// a layer that uses it caches at most this many tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<u32>,
    /// How many of the layers attend through the window (the others attend globally);
    /// `None` with a window means every layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_layers: Option<u32>,
    /// Parameters of the largest piece gathered or run at once: the larger of the embedding
    /// and one whole transformer block (every expert of it). ZeRO-3 gathers about this
    /// much; inference's working set is bounded by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub largest_layer_params: Option<u64>,
    /// The MLP width one token passes through in a layer: `intermediate` for a dense model;
    /// for a mixture of experts, the routed experts' widths (`experts_per_token x
    /// moe_intermediate_size`) plus the shared experts'. Sizes the activations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_intermediate: Option<u64>,
    /// Where the numbers came from: `--params 7B`, the config file's path, the compat-db
    /// record's id.
    pub source: String,
}

/// How the model is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Forward passes only, with a KV cache.
    Inference,
    /// Every weight trained.
    Full,
    /// Low-rank adapters on frozen weights.
    Lora,
    /// LoRA on 4-bit quantized frozen weights.
    Qlora,
}

/// The number format of the weights and the arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// 4 bytes.
    Fp32,
    /// 2 bytes.
    Bf16,
    /// 2 bytes.
    Fp16,
    /// 16-bit weights and activations with an fp32 master copy (mixed precision).
    Mixed,
    /// 1 byte.
    Fp8,
    /// 1 byte.
    Int8,
    /// Half a byte.
    Int4,
}

/// The optimizer, for its states per trained parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Optimizer {
    /// Adam with decoupled weight decay: two fp32 moments.
    Adamw,
    /// bitsandbytes' 8-bit AdamW: two 1-byte moments.
    Adamw8bit,
    /// SGD with momentum: one fp32 buffer.
    Sgd,
    /// Adafactor: factored second moments, about one value per row and column.
    Adafactor,
}

/// Data-parallel sharding of model states across the GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Shard {
    /// Every GPU holds everything.
    None,
    /// Optimizer states sharded.
    Zero1,
    /// Optimizer states and gradients sharded.
    Zero2,
    /// Optimizer states, gradients and weights sharded.
    Zero3,
    /// PyTorch FSDP (full sharding): as ZeRO-3.
    Fsdp,
}

/// The settings of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// What is done with the model.
    pub method: Method,
    /// Number format.
    pub precision: Precision,
    /// Optimizer (training only).
    pub optimizer: Optimizer,
    /// Tokens per sequence.
    pub seq_len: u32,
    /// Sequences per GPU per step (micro-batch).
    pub batch: u32,
    /// Activation recomputation (gradient checkpointing).
    pub checkpointing: bool,
    /// GPUs in all: `tp x pp x` the data-parallel ranks.
    pub gpus: u32,
    /// How model states are sharded over the data-parallel ranks.
    pub shard: Shard,
    /// Tensor-parallel size: each layer's weights, attention heads (and their KV cache)
    /// and MLP split over this many GPUs.
    #[serde(default = "one")]
    pub tp: u32,
    /// Pipeline-parallel size: the layers split into this many stages (Hugging Face's
    /// `device_map="auto"` is this, run one stage after the other).
    #[serde(default = "one")]
    pub pp: u32,
    /// LoRA rank.
    pub lora_rank: u32,
    /// The attention kernel, for what it stores.
    pub attention: Attention,
    /// The inference engine, for how it lays out memory.
    pub engine: Engine,
    /// The training framework, for its loss and where it keeps checkpoints.
    pub trainer: Trainer,
    /// Model states kept in CPU memory instead of the GPU's.
    #[serde(default = "no_offload")]
    pub offload: Offload,
    /// The optimizer steps each parameter as soon as its gradient is ready, so the
    /// gradients of the whole model are never held at once (torchtune's
    /// `optimizer_in_bwd`).
    #[serde(default)]
    pub optimizer_in_backward: bool,
    /// The share of the GPU an inference engine takes, in hundredths, when set
    /// (`--gpu-memory-utilization`); else the engine's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_memory_percent: Option<u32>,
}

fn no_offload() -> Offload {
    Offload::None
}

/// Model states kept in CPU memory (DeepSpeed ZeRO-Offload, FSDP's `cpu_offload`,
/// bitsandbytes' paged optimizers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Offload {
    /// Everything on the GPU.
    None,
    /// The optimizer states (and the fp32 master copy) in CPU memory; the optimizer steps
    /// there (ZeRO-Offload) or pages them in (bitsandbytes' paged optimizers).
    Optimizer,
    /// Parameters, gradients and optimizer states in CPU memory; each layer is brought to
    /// the GPU when it runs (FSDP `cpu_offload`, ZeRO-Infinity).
    All,
}

/// The training framework: they differ in how the loss holds the logits and where the
/// checkpointed activations live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trainer {
    /// Hugging Face transformers' Trainer (and TRL, LLaMA-Factory on it): the loss
    /// upcasts the whole logits to fp32.
    Hf,
    /// torchtune: the loss runs over the logits in 8 chunks (CEWithChunkedOutputLoss).
    Torchtune,
    /// Unsloth: a fused cross-entropy that never holds the logits, and checkpointed
    /// activations offloaded to CPU memory.
    Unsloth,
}

impl Default for Settings {
    /// The command's defaults: full training in mixed precision with AdamW, 2048 tokens, a
    /// micro-batch of 1, gradient checkpointing, FlashAttention, one GPU.
    fn default() -> Self {
        Settings {
            method: Method::Full,
            precision: Precision::Mixed,
            optimizer: Optimizer::Adamw,
            seq_len: 2048,
            batch: 1,
            checkpointing: true,
            gpus: 1,
            shard: Shard::None,
            tp: 1,
            pp: 1,
            lora_rank: 16,
            attention: Attention::Flash,
            engine: Engine::Hf,
            trainer: Trainer::Hf,
            offload: Offload::None,
            optimizer_in_backward: false,
            engine_memory_percent: None,
        }
    }
}

fn one() -> u32 {
    1
}

/// The attention kernel: what it keeps in memory for the backward pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Attention {
    /// FlashAttention-2/3: the score matrices are never stored, one row statistic a head.
    Flash,
    /// PyTorch's scaled_dot_product_attention, which dispatches to a fused kernel
    /// (FlashAttention or memory-efficient): O(s) like flash.
    Sdpa,
    /// The plain matmul-softmax-matmul: the score matrices are stored (O(s^2)).
    Eager,
}

/// The inference engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// Hugging Face transformers' `generate`: the cache grows with the tokens asked.
    Hf,
    /// vLLM: reserves `gpu_memory_utilization` (0.9) of the card and fills what the
    /// weights leave with a paged cache.
    Vllm,
    /// SGLang: reserves `mem_fraction_static` of the card for weights and a paged cache.
    Sglang,
}

/// Bytes per GPU, term by term.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryTerms {
    /// The model's weights (the share this GPU holds).
    pub weights: u64,
    /// Gradients of the trained parameters.
    pub gradients: u64,
    /// Optimizer states, with the fp32 master copy under mixed precision.
    pub optimizer: u64,
    /// Activations kept for the backward pass (training) or of one forward pass.
    pub activations: u64,
    /// The KV cache (inference).
    pub kv_cache: u64,
    /// The CUDA context and framework overhead.
    pub overhead: u64,
    /// The sum.
    pub total: u64,
}

/// One assumption or constant behind the estimate, with where it comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assumption {
    /// What it is about (`optimizer states, mixed-precision Adam`).
    pub what: String,
    /// Its value as used (`12 bytes per parameter`).
    pub value: String,
    /// The paper, document or page it comes from.
    pub source: String,
}

/// The estimate: bytes per GPU and what they rest on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Per GPU.
    pub per_gpu: MemoryTerms,
    /// Every assumption, in the order the terms use them.
    pub assumptions: Vec<Assumption>,
}

/// The stack the resolver answers for a fitting GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FitStack {
    /// `compatible`, `conditional` or `incompatible`.
    pub status: String,
    /// torch build (`2.6.0+cu124`), when one runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<String>,
    /// Python.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<String>,
    /// The build's CUDA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
    /// The oldest driver the build runs natively on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_driver: Option<String>,
    /// The driver the order asks for, and the stack it comes from: not always this one
    /// (the newest build needs the newest driver, which few rented hosts have).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_floor: Option<DriverFloor>,
    /// Why none runs, when none does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// The driver floor an order asks for: the oldest driver a chosen stack runs natively on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverFloor {
    /// The driver, at least (`520.61.05`).
    pub driver: String,
    /// The stack it comes from (`2.7.1+cu118`).
    pub torch: String,
    /// Why that stack, in a sentence.
    pub why: String,
}
