//! A model's weights counted from the keys of its Hugging Face `config.json`, exactly as
//! the modeling code in `huggingface/transformers` builds the model for that `model_type`.
//!
//! One function, [`count`], serves both `plan --model config.json` and compat-db's lint
//! (which holds each model record's `params` to it), so the two cannot drift apart.
//!
//! Every product and sum is checked: a config whose sizes give more than 10^15 parameters
//! (a crafted `num_hidden_layers = 4294967295`, say) is refused with the keys that made it
//! so, never wrapped or clamped. A key the count needs and the config lacks is named, with
//! what it was needed for; keys the config may leave out take the default of the
//! architecture's configuration class in transformers, as loading the model would.

use serde_json::{Map, Value};

/// The most parameters a count may give: a quadrillion is far past any model that exists.
pub const MAX_PARAMS: u128 = 1_000_000_000_000_000;

/// The `model_type`s [`count`] knows, each counted weight by weight.
pub const MODEL_TYPES: &[&str] = &[
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "deepseek_v2",
    "deepseek_v3",
    "gemma2",
    "gemma3",
    "gemma3_text",
    "phi3",
    "gpt_oss",
];

/// Every key [`count`] reads, at any level (`text_config` and `vision_config` hold some of
/// them again): a key outside this list does not change the count.
pub const READ_KEYS: &[&str] = &[
    "model_type",
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "tie_word_embeddings",
    "attention_bias",
    "qkv_bias",
    "mlp_bias",
    "q_lora_rank",
    "kv_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "num_local_experts",
    "num_experts",
    "n_routed_experts",
    "n_shared_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
    "decoder_sparse_step",
    "mlp_only_layers",
    "first_k_dense_replace",
    "moe_layer_freq",
    "num_nextn_predict_layers",
    "sliding_window",
    "use_sliding_window",
    "max_window_layers",
    "layer_types",
    "sliding_window_pattern",
    "_sliding_window_pattern",
    "text_config",
    "vision_config",
    "image_size",
    "patch_size",
    "num_channels",
    "vision_use_head",
];

/// What the count finds: the parameters and the shape facts a memory estimate reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counted {
    /// The `model_type` counted (the text model's, `gemma3_text`, for a multimodal Gemma 3).
    pub model_type: String,
    /// Every weight the checkpoint holds: all experts, DeepSeek-V3's multi-token-prediction
    /// module, Gemma 3's vision tower.
    pub params: u64,
    /// The weights one text token's forward pass uses: the shared weights and the routed
    /// experts it is sent to; without DeepSeek-V3's multi-token-prediction module (which
    /// only training and speculative decoding run). Equal to `params` for a dense model.
    pub active_params: u64,
    /// `num_hidden_layers` of the language model.
    pub layers: u32,
    /// `hidden_size`.
    pub hidden: u32,
    /// `num_attention_heads`.
    pub heads: u32,
    /// `num_key_value_heads` (`heads` when not grouped).
    pub kv_heads: u32,
    /// The width of a query/key head: `head_dim`, or `hidden / heads`; for multi-head
    /// latent attention `qk_nope_head_dim + qk_rope_head_dim`.
    pub head_dim: u32,
    /// `vocab_size`.
    pub vocab: u32,
    /// The MLP width: `intermediate_size` of a dense model; one routed expert's
    /// (`moe_intermediate_size`, or Mixtral's and GPT-OSS's `intermediate_size`) of a
    /// mixture.
    pub intermediate: u32,
    /// Routed experts per MoE layer; `None` for a dense model.
    pub experts: Option<u32>,
    /// Routed experts each token is sent to.
    pub experts_per_token: Option<u32>,
    /// Whether the output head is the input embedding.
    pub tied_embeddings: bool,
    /// Values the KV cache keeps per token per layer: `2 x kv_heads x head_dim`, or
    /// `kv_lora_rank + qk_rope_head_dim` for multi-head latent attention.
    pub kv_per_token_layer: u64,
    /// Multi-head latent attention (DeepSeek-V2/V3).
    pub mla: bool,
    /// The attention window of the layers that slide, in tokens.
    pub sliding_window: Option<u32>,
    /// How many layers attend through the window (with `sliding_window`).
    pub sliding_layers: Option<u32>,
    /// The larger of the embedding and one whole transformer block (every expert of it).
    pub largest_layer_params: u64,
    /// The MLP width one token passes through in a layer, the largest over the layers:
    /// `intermediate_size` for a dense layer; `experts_per_token` routed experts' widths
    /// plus the shared experts' for a mixture.
    pub active_intermediate: u64,
}

/// Count the weights of the model a config describes. `config` is the top-level object
/// of `config.json` (a compat-db record's `[config]` table with its `model_type`).
///
/// Errors name the key: `no "num_hidden_layers": needed to count the layers`.
pub fn count(config: &Map<String, Value>) -> Result<Counted, String> {
    let top = Keys::new(config, "");
    let model_type = top.model_type()?;
    match model_type.as_str() {
        "gemma3" => {
            // The multimodal Gemma 3 nests its language model and its vision tower.
            let text = top.object("text_config", "count the language model")?;
            let text = Keys::new(text, "text_config.");
            let vision = match config.get("vision_config") {
                None | Some(Value::Null) => None,
                Some(Value::Object(v)) => Some(Keys::new(v, "vision_config.")),
                Some(other) => {
                    return Err(format!(
                        "\"vision_config\" is {}, expected an object",
                        shown(other)
                    ));
                }
            };
            let mut counted = decoder("gemma3_text", &text)?;
            if let Some(vision) = vision {
                let text_hidden = u128::from(counted.hidden);
                let extra = siglip_and_projector(&vision, text_hidden)?;
                counted.params = add(&[u128::from(counted.params), extra])? as u64;
                counted.active_params = add(&[u128::from(counted.active_params), extra])? as u64;
            }
            Ok(counted)
        }
        t if MODEL_TYPES.contains(&t) => decoder(t, &top),
        other => Err(format!(
            "\"model_type\" is \"{other}\", which gpuenv cannot count yet: supported are {}",
            MODEL_TYPES.join(", ")
        )),
    }
}

/// The architecture families: which weights a layer has.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    /// Llama, Mistral, Mixtral, Qwen2/3 and their MoEs, Phi-3: q/k/v/o, gated MLP,
    /// two RMSNorms a layer.
    Llama,
    /// Gemma 2 and 3: four RMSNorms a layer (before and after attention and MLP).
    Gemma,
    /// DeepSeek-V2/V3: multi-head latent attention, routed and shared experts.
    DeepSeek,
    /// GPT-OSS: biased attention with sinks, biased experts and router.
    GptOss,
}

/// A decoder-only language model.
fn decoder(model_type: &str, c: &Keys<'_>) -> Result<Counted, String> {
    let family = match model_type {
        "gemma2" | "gemma3_text" => Family::Gemma,
        "deepseek_v2" | "deepseek_v3" => Family::DeepSeek,
        "gpt_oss" => Family::GptOss,
        _ => Family::Llama,
    };
    let gemma3 = model_type == "gemma3_text";
    let vocab = match c.optional_count("vocab_size")? {
        Some(v) => v,
        // Gemma3TextConfig's default; the Hub's multimodal Gemma 3 configs leave it out of
        // `text_config`.
        None if gemma3 => 262_208,
        None => return Err(c.missing("vocab_size", "count the embeddings")),
    };
    let hidden = c.count("hidden_size", "count every weight matrix")?;
    let layers = c.count("num_hidden_layers", "count the layers")?;
    let heads = c.count("num_attention_heads", "count the attention weights")?;
    let kv_heads = c.optional_count("num_key_value_heads")?.unwrap_or(heads);
    let tied_default = family == Family::Gemma;
    let tied = c.optional_bool("tie_word_embeddings")?.unwrap_or(tied_default);
    let (v, h, l, a, kv) = (
        u128::from(vocab),
        u128::from(hidden),
        u128::from(layers),
        u128::from(heads),
        u128::from(kv_heads),
    );

    // Attention of one layer, and what the cache keeps per token.
    let (attention, head_dim, kv_per_token, mla) = if family == Family::DeepSeek {
        let kv_rank = c.count("kv_lora_rank", "size the compressed key/value latent")?;
        let nope = c.count("qk_nope_head_dim", "size the query/key heads")?;
        let rope = c.count("qk_rope_head_dim", "size the rotary part of the heads")?;
        let v_dim = c.count("v_head_dim", "size the value heads")?;
        let bias = c.optional_bool("attention_bias")?.unwrap_or(false);
        let (kvr, n, r, vd) = (
            u128::from(kv_rank),
            u128::from(nope),
            u128::from(rope),
            u128::from(v_dim),
        );
        let qk = n + r;
        // `q_lora_rank` null (V2-Lite) is a plain q_proj; a rank is q_a_proj, its norm and
        // q_b_proj. Absent, it takes the configuration classes' default, 1536.
        let q = match c.get("q_lora_rank") {
            Some(Value::Null) => product(&[
                ("hidden_size", h),
                ("num_attention_heads", a),
                ("qk head dim", qk),
            ])?,
            _ => {
                let q_rank = u128::from(c.optional_count("q_lora_rank")?.unwrap_or(1536));
                add(&[
                    product(&[("hidden_size", h), ("q_lora_rank", q_rank)])?,
                    if bias { q_rank } else { 0 },
                    q_rank,
                    product(&[
                        ("q_lora_rank", q_rank),
                        ("num_attention_heads", a),
                        ("qk head dim", qk),
                    ])?,
                ])?
            }
        };
        let kv_a = add(&[
            product(&[("hidden_size", h), ("kv_lora_rank + qk_rope_head_dim", kvr + r)])?,
            if bias { kvr + r } else { 0 },
            kvr,
        ])?;
        let kv_b = product(&[
            ("kv_lora_rank", kvr),
            ("num_attention_heads", a),
            ("qk_nope_head_dim + v_head_dim", n + vd),
        ])?;
        let o = add(&[
            product(&[("num_attention_heads", a), ("v_head_dim", vd), ("hidden_size", h)])?,
            if bias { h } else { 0 },
        ])?;
        let head_dim = u32::try_from(qk).map_err(|_| {
            "\"qk_nope_head_dim\" + \"qk_rope_head_dim\" is over 2^32: not a real head".to_string()
        })?;
        (add(&[q, kv_a, kv_b, o])?, head_dim, add(&[kvr, r])?, true)
    } else {
        let head_dim = match c.optional_count("head_dim")? {
            Some(d) => d,
            // Gemma2Config and Gemma3TextConfig default to 256 rather than hidden / heads.
            None if family == Family::Gemma => 256,
            None if hidden % heads == 0 => hidden / heads,
            None => {
                return Err(format!(
                    "no \"{}head_dim\" and \"hidden_size\" {hidden} is not a multiple of \
                     \"num_attention_heads\" {heads}: needed to size the attention heads",
                    c.prefix
                ));
            }
        };
        let d = u128::from(head_dim);
        // Biases: on q, k, v; on o.
        let (qkv_bias, o_bias) = match model_type {
            // modeling_qwen2.py: q, k and v with bias=True, o without.
            "qwen2" => (true, false),
            // Qwen2MoeConfig.qkv_bias, default true.
            "qwen2_moe" => (c.optional_bool("qkv_bias")?.unwrap_or(true), false),
            // GptOssConfig.attention_bias defaults to true: all four.
            "gpt_oss" => {
                let b = c.optional_bool("attention_bias")?.unwrap_or(true);
                (b, b)
            }
            // modeling_mistral.py, modeling_mixtral.py, modeling_phi3.py: no biases.
            "mistral" | "mixtral" | "phi3" => (false, false),
            // Llama, Qwen3 and its MoE, Gemma: `attention_bias` on all four, default false.
            _ => {
                let b = c.optional_bool("attention_bias")?.unwrap_or(false);
                (b, b)
            }
        };
        let q = product(&[("num_attention_heads", a), ("head_dim", d)])?;
        let kvw = product(&[("num_key_value_heads", kv), ("head_dim", d)])?;
        let mut attention = add(&[
            product(&[("hidden_size", h), ("q, k and v widths", q + 2 * kvw)])?,
            if qkv_bias { q + 2 * kvw } else { 0 },
            product(&[("hidden_size", h), ("q width", q)])?,
            if o_bias { h } else { 0 },
        ])?;
        // Qwen3 and Gemma 3 normalize each query and key head (q_norm, k_norm).
        if matches!(model_type, "qwen3" | "qwen3_moe" | "gemma3_text") {
            attention = add(&[attention, 2 * d])?;
        }
        // GPT-OSS: one learned attention sink per head.
        if family == Family::GptOss {
            attention = add(&[attention, a])?;
        }
        (
            attention,
            head_dim,
            product(&[("2", 2), ("num_key_value_heads", kv), ("head_dim", d)])?,
            false,
        )
    };
    let norms = match family {
        Family::Gemma => 4 * h,
        _ => 2 * h,
    };

    // The MLP of a dense layer, and which layers are mixtures.
    let mlp_bias = model_type == "llama" && c.optional_bool("mlp_bias")?.unwrap_or(false);
    let gated = |width: u128, what: &'static str| -> Result<u128, String> {
        add(&[
            product(&[("3", 3), ("hidden_size", h), (what, width)])?,
            if mlp_bias { 2 * width + h } else { 0 },
        ])
    };
    let moe = Moe::read(model_type, c, layers)?;
    let dense_intermediate = if moe.as_ref().is_some_and(|m| m.dense_layers == 0) {
        // Every layer a mixture: `intermediate_size` is not read (Qwen3-MoE configs carry
        // one no layer uses) unless it is the experts' width.
        None
    } else {
        Some(c.count("intermediate_size", "count the MLP weights")?)
    };
    let dense_mlp = match dense_intermediate {
        Some(i) => gated(u128::from(i), "intermediate_size")?,
        None => 0,
    };

    let embed = product(&[("vocab_size", v), ("hidden_size", h)])?;
    let outside = add(&[embed, if tied { 0 } else { embed }, h])?;
    let per_layer = add(&[attention, norms])?;
    let all_layers = product(&[
        ("num_hidden_layers", l),
        ("parameters of attention and norms a layer", per_layer),
    ])?;
    let (mut total, active, largest_block, intermediate, active_intermediate, experts, k);
    match &moe {
        None => {
            let i = dense_intermediate.unwrap_or(0);
            let mlps = product(&[
                ("num_hidden_layers", l),
                ("parameters of the MLP a layer", dense_mlp),
            ])?;
            total = add(&[outside, all_layers, mlps])?;
            active = total;
            largest_block = add(&[per_layer, dense_mlp])?;
            intermediate = i;
            active_intermediate = u64::from(i);
            experts = None;
            k = None;
        }
        Some(m) => {
            let one_expert = match model_type {
                "gpt_oss" => {
                    // gate_up_proj (hidden x 2i) and its bias, down_proj (i x hidden) and its bias.
                    let w = u128::from(m.width);
                    add(&[
                        product(&[("3", 3), ("hidden_size", h), ("intermediate_size", w)])?,
                        2 * w,
                        h,
                    ])?
                }
                _ => gated(u128::from(m.width), m.width_key)?,
            };
            let e = u128::from(m.experts);
            let router = add(&[
                product(&[("hidden_size", h), (m.experts_key, e)])?,
                if m.router_bias { e } else { 0 },
            ])?;
            let shared = match m.shared_width {
                Some(w) => add(&[
                    gated(u128::from(w), m.shared_key)?,
                    if m.shared_gate { h } else { 0 },
                ])?,
                None => 0,
            };
            let all = add(&[
                product(&[(m.experts_key, e), ("parameters of one expert", one_expert)])?,
                router,
                shared,
            ])?;
            let used = add(&[
                product(&[
                    ("num_experts_per_tok", u128::from(m.per_token)),
                    ("parameters of one expert", one_expert),
                ])?,
                router,
                shared,
            ])?;
            let (sparse, dense) = (u128::from(m.sparse_layers), u128::from(m.dense_layers));
            let dense_all = product(&[
                ("dense layers", dense),
                ("parameters of the MLP a layer", dense_mlp),
            ])?;
            total = add(&[
                outside,
                all_layers,
                dense_all,
                product(&[
                    ("mixture-of-experts layers", sparse),
                    ("parameters of a mixture layer", all),
                ])?,
            ])?;
            active = add(&[
                outside,
                all_layers,
                dense_all,
                product(&[
                    ("mixture-of-experts layers", sparse),
                    ("parameters a token uses in a mixture layer", used),
                ])?,
            ])?;
            let sparse_block = add(&[per_layer, all])?;
            largest_block = if dense > 0 {
                sparse_block.max(add(&[per_layer, dense_mlp])?)
            } else {
                sparse_block
            };
            // DeepSeek-V3's checkpoint holds its multi-token-prediction modules after the
            // main layers: each one embedding (a copy of the main one), the norms enorm
            // and hnorm, eh_proj (2 x hidden -> hidden), a full decoder layer (a mixture
            // where the layer index says so) and its own norm and output head.
            if model_type == "deepseek_v3" {
                let mtp = u128::from(c.optional_count_or_zero("num_nextn_predict_layers")?);
                let mut mtp_total = 0;
                for index in 0..mtp {
                    let block = if m.is_sparse(layers as u128 + index) {
                        sparse_block
                    } else {
                        add(&[per_layer, dense_mlp])?
                    };
                    mtp_total = add(&[
                        mtp_total,
                        embed,
                        2 * h,
                        product(&[("hidden_size", h), ("2 x hidden_size", 2 * h)])?,
                        block,
                        h,
                        embed,
                    ])?;
                }
                total = add(&[total, mtp_total])?;
            }
            intermediate = m.width;
            let routed = product(&[
                ("num_experts_per_tok", u128::from(m.per_token)),
                (m.width_key, u128::from(m.width)),
            ])?;
            let mixture_width = add(&[routed, u128::from(m.shared_width.unwrap_or(0))])?;
            active_intermediate = if dense > 0 {
                mixture_width.max(u128::from(dense_intermediate.unwrap_or(0))) as u64
            } else {
                mixture_width as u64
            };
            experts = Some(m.experts);
            k = Some(m.per_token);
        }
    }
    if total > MAX_PARAMS {
        return Err(format!(
            "the sizes give {total} parameters, over 10^15: not a real model"
        ));
    }
    let (sliding_window, sliding_layers) = sliding(model_type, c, layers)?;
    Ok(Counted {
        model_type: model_type.to_string(),
        params: total as u64,
        active_params: active as u64,
        layers,
        hidden,
        heads,
        kv_heads,
        head_dim,
        vocab,
        intermediate,
        experts,
        experts_per_token: k,
        tied_embeddings: tied,
        kv_per_token_layer: kv_per_token as u64,
        mla,
        sliding_window,
        sliding_layers,
        largest_layer_params: largest_block.max(embed) as u64,
        active_intermediate,
    })
}

/// The mixture-of-experts layers of a model.
struct Moe {
    /// Routed experts a mixture layer holds.
    experts: u32,
    /// The key that gives them (`num_local_experts`, `num_experts`, `n_routed_experts`).
    experts_key: &'static str,
    /// Routed experts a token is sent to.
    per_token: u32,
    /// One routed expert's MLP width, and its key.
    width: u32,
    width_key: &'static str,
    /// The shared experts' MLP width (Qwen2-MoE, DeepSeek), and its key.
    shared_width: Option<u32>,
    shared_key: &'static str,
    /// Qwen2-MoE gates its shared expert with a `hidden x 1` projection.
    shared_gate: bool,
    /// GPT-OSS's router has a bias.
    router_bias: bool,
    /// Layers that are mixtures, and those that keep a dense MLP.
    sparse_layers: u32,
    dense_layers: u32,
    /// Which layer indices are mixtures.
    rule: SparseRule,
}

/// Which layers of a mixture model hold experts, as the modeling code decides.
enum SparseRule {
    /// Every layer (Mixtral, GPT-OSS).
    All,
    /// Qwen2/3-MoE: not in `mlp_only_layers`, and `(i + 1) % decoder_sparse_step == 0`.
    Qwen { step: u128, dense: Vec<u128> },
    /// DeepSeek: `i >= first_k_dense_replace` and `i % moe_layer_freq == 0`.
    DeepSeek { first_dense: u128, freq: u128 },
}

impl Moe {
    fn is_sparse(&self, i: u128) -> bool {
        match &self.rule {
            SparseRule::All => true,
            SparseRule::Qwen { step, dense } => !dense.contains(&i) && (i + 1) % step == 0,
            SparseRule::DeepSeek { first_dense, freq } => i >= *first_dense && i % freq == 0,
        }
    }

    /// The mixture of a `model_type`, `None` for a dense one.
    fn read(model_type: &str, c: &Keys<'_>, layers: u32) -> Result<Option<Moe>, String> {
        let per_token_key = "num_experts_per_tok";
        let mut m = match model_type {
            "mixtral" | "gpt_oss" => Moe {
                experts: c.count("num_local_experts", "count the experts of each layer")?,
                experts_key: "num_local_experts",
                per_token: c.count(per_token_key, "count the experts a token uses")?,
                width: c.count("intermediate_size", "count the experts' weights")?,
                width_key: "intermediate_size",
                shared_width: None,
                shared_key: "",
                shared_gate: false,
                router_bias: model_type == "gpt_oss",
                sparse_layers: 0,
                dense_layers: 0,
                rule: SparseRule::All,
            },
            "qwen2_moe" | "qwen3_moe" => {
                let step = c.optional_count("decoder_sparse_step")?.unwrap_or(1);
                let dense = c.index_list("mlp_only_layers")?;
                let shared = if model_type == "qwen2_moe" {
                    Some(c.count(
                        "shared_expert_intermediate_size",
                        "count the shared expert of each layer",
                    )?)
                } else {
                    None
                };
                Moe {
                    experts: c.count("num_experts", "count the experts of each layer")?,
                    experts_key: "num_experts",
                    per_token: c.count(per_token_key, "count the experts a token uses")?,
                    width: c.count("moe_intermediate_size", "count the experts' weights")?,
                    width_key: "moe_intermediate_size",
                    shared_width: shared,
                    shared_key: "shared_expert_intermediate_size",
                    shared_gate: shared.is_some(),
                    router_bias: false,
                    sparse_layers: 0,
                    dense_layers: 0,
                    rule: SparseRule::Qwen {
                        step: u128::from(step),
                        dense,
                    },
                }
            }
            "deepseek_v2" | "deepseek_v3" => {
                // `n_routed_experts` null makes every layer dense (modeling_deepseek.py).
                let Some(experts) = c.optional_count("n_routed_experts")? else {
                    return Ok(None);
                };
                let width = c.count("moe_intermediate_size", "count the experts' weights")?;
                let shared = c.optional_count("n_shared_experts")?;
                let shared_width = match shared {
                    Some(s) => Some(width.checked_mul(s).ok_or_else(|| {
                        format!(
                            "\"{}n_shared_experts\" {s} x \"moe_intermediate_size\" {width} overflows",
                            c.prefix
                        )
                    })?),
                    None => None,
                };
                Moe {
                    experts,
                    experts_key: "n_routed_experts",
                    per_token: c.count(per_token_key, "count the experts a token uses")?,
                    width,
                    width_key: "moe_intermediate_size",
                    shared_width,
                    shared_key: "moe_intermediate_size x n_shared_experts",
                    shared_gate: false,
                    // V3's router also keeps `e_score_correction_bias` (one per expert),
                    // which the checkpoint holds.
                    router_bias: model_type == "deepseek_v3",
                    sparse_layers: 0,
                    dense_layers: 0,
                    rule: SparseRule::DeepSeek {
                        first_dense: u128::from(c.optional_count_or_zero("first_k_dense_replace")?),
                        freq: u128::from(c.optional_count("moe_layer_freq")?.unwrap_or(1)),
                    },
                }
            }
            _ => return Ok(None),
        };
        if m.per_token > m.experts {
            return Err(format!(
                "\"{}{per_token_key}\" {} is more than \"{}{}\" {}",
                c.prefix, m.per_token, c.prefix, m.experts_key, m.experts
            ));
        }
        let sparse = (0..u128::from(layers)).filter(|&i| m.is_sparse(i)).count();
        m.sparse_layers = sparse as u32;
        m.dense_layers = layers - m.sparse_layers;
        Ok(Some(m))
    }
}

/// The sliding window and how many layers use it, as each architecture's configuration
/// class and modeling code decide.
fn sliding(model_type: &str, c: &Keys<'_>, layers: u32) -> Result<(Option<u32>, Option<u32>), String> {
    let every = |window: Option<u32>| Ok((window, window.map(|_| layers)));
    match model_type {
        // MistralConfig's default window is 4096; `null` (v0.2 on) turns it off.
        "mistral" => match c.get("sliding_window") {
            None => every(Some(4096)),
            Some(_) => every(c.optional_count("sliding_window")?),
        },
        // MixtralConfig and Phi3Config: no window unless given; then every layer.
        "mixtral" | "phi3" => every(c.optional_count("sliding_window")?),
        "qwen2" | "qwen3" | "qwen2_moe" | "qwen3_moe" => {
            if !c.optional_bool("use_sliding_window")?.unwrap_or(false) {
                return Ok((None, None));
            }
            let Some(window) = c
                .optional_count("sliding_window")?
                .or(match c.get("sliding_window") {
                    None => Some(4096),
                    Some(_) => None,
                })
            else {
                return Ok((None, None));
            };
            if let Some(n) = c.layer_types(layers)? {
                return Ok((Some(window), Some(n)));
            }
            let max_window = u64::from(c.optional_count_or_zero_default("max_window_layers", 28)?);
            let n = (0..u64::from(layers))
                .filter(|&i| match model_type {
                    // Qwen2MoeConfig: odd-numbered layers below max_window_layers.
                    "qwen2_moe" => (i + 1) % 2 != 0 && i < max_window,
                    // Qwen3MoeConfig has no layer types: the window applies to every layer.
                    "qwen3_moe" => true,
                    // Qwen2Config, Qwen3Config: the layers from max_window_layers on.
                    _ => i >= max_window,
                })
                .count() as u32;
            Ok((Some(window), Some(n)))
        }
        "gemma2" | "gemma3_text" | "gpt_oss" => {
            let default = if model_type == "gpt_oss" { 128 } else { 4096 };
            let window = match c.get("sliding_window") {
                None => default,
                Some(_) => match c.optional_count("sliding_window")? {
                    Some(w) => w,
                    None => return Ok((None, None)),
                },
            };
            if let Some(n) = c.layer_types(layers)? {
                return Ok((Some(window), Some(n)));
            }
            // Gemma 3 configs written before `layer_types` give the pattern: every
            // `sliding_window_pattern`-th layer global, the others local (default 6).
            // Gemma 2 and GPT-OSS alternate, starting with a sliding layer.
            let pattern = if model_type == "gemma3_text" {
                match c.optional_count("sliding_window_pattern")? {
                    Some(p) => p,
                    None => c.optional_count("_sliding_window_pattern")?.unwrap_or(6),
                }
            } else {
                2
            };
            let n = (0..layers).filter(|i| (i + 1) % pattern != 0).count() as u32;
            Ok((Some(window), Some(n)))
        }
        _ => Ok((None, None)),
    }
}

/// Gemma 3's SigLIP vision tower and the projector into the language model, as
/// `modeling_siglip.py` and `modeling_gemma3.py` build them: a patch convolution with its
/// bias, a position embedding per patch, `num_hidden_layers` encoder layers (two
/// LayerNorms with biases, q/k/v/out projections with biases, a two-layer MLP with
/// biases), a final LayerNorm, the attention-pooling head where `vision_use_head`; then
/// `mm_input_projection_weight` (vision hidden x text hidden) and `mm_soft_emb_norm`.
fn siglip_and_projector(c: &Keys<'_>, text_hidden: u128) -> Result<u128, String> {
    let hv = u128::from(c.count("hidden_size", "count the vision tower")?);
    let iv = u128::from(c.count("intermediate_size", "count the vision tower's MLP")?);
    let layers = u128::from(c.count("num_hidden_layers", "count the vision tower's layers")?);
    let image = c.count("image_size", "count the vision tower's position embeddings")?;
    let patch = c.count("patch_size", "count the vision tower's patch embedding")?;
    if image % patch != 0 {
        return Err(format!(
            "\"{}image_size\" {image} is not a multiple of \"{}patch_size\" {patch}",
            c.prefix, c.prefix
        ));
    }
    let channels = u128::from(c.optional_count("num_channels")?.unwrap_or(3));
    let (p, side) = (u128::from(patch), u128::from(image / patch));
    let patch_embed = add(&[
        product(&[
            ("num_channels", channels),
            ("patch_size", p),
            ("patch_size", p),
            ("hidden_size", hv),
        ])?,
        hv,
    ])?;
    let positions = product(&[("patches", side * side), ("hidden_size", hv)])?;
    let attention = add(&[
        product(&[("4", 4), ("hidden_size", hv), ("hidden_size", hv)])?,
        4 * hv,
    ])?;
    let mlp = add(&[
        product(&[("2", 2), ("hidden_size", hv), ("intermediate_size", iv)])?,
        iv,
        hv,
    ])?;
    let layer = add(&[attention, mlp, 4 * hv])?;
    let mut tower = add(&[
        patch_embed,
        positions,
        product(&[
            ("num_hidden_layers", layers),
            ("parameters a vision layer", layer),
        ])?,
        2 * hv,
    ])?;
    // SiglipVisionTransformer: `use_head` unless the config says `vision_use_head: false`.
    if c.optional_bool("vision_use_head")?.unwrap_or(true) {
        // probe, nn.MultiheadAttention (in_proj 3hv x hv with bias, out_proj), LayerNorm, MLP.
        tower = add(&[
            tower,
            hv,
            product(&[("4", 4), ("hidden_size", hv), ("hidden_size", hv)])?,
            4 * hv,
            2 * hv,
            mlp,
        ])?;
    }
    let projector = add(&[
        product(&[
            ("vision_config.hidden_size", hv),
            ("text_config.hidden_size", text_hidden),
        ])?,
        hv,
    ])?;
    add(&[tower, projector])
}

/// `factors` multiplied, each named by its key: a product over 10^15 is refused with the
/// keys and values that make it, before it can overflow.
fn product(factors: &[(&str, u128)]) -> Result<u128, String> {
    let mut p: u128 = 1;
    for (_, f) in factors {
        p = match p.checked_mul(*f) {
            Some(p) if p <= MAX_PARAMS => p,
            _ => {
                let named: Vec<String> = factors.iter().map(|(k, v)| format!("\"{k}\" {v}")).collect();
                return Err(format!(
                    "{} multiply to over 10^15 parameters: not a real model",
                    named.join(" x ")
                ));
            }
        };
    }
    Ok(p)
}

/// `terms` added, refused over 10^15.
fn add(terms: &[u128]) -> Result<u128, String> {
    let mut s: u128 = 0;
    for t in terms {
        s = match s.checked_add(*t) {
            Some(s) if s <= MAX_PARAMS => s,
            _ => return Err("the sizes give over 10^15 parameters: not a real model".into()),
        };
    }
    Ok(s)
}

fn shown(v: &Value) -> String {
    let text = v.to_string();
    if text.len() > 40 {
        format!(
            "{}...",
            &text[..text.char_indices().nth(37).map_or(text.len(), |(i, _)| i)]
        )
    } else {
        text
    }
}

/// Typed reads from one object of the config, named with the path to it
/// (`text_config.`).
struct Keys<'a> {
    map: &'a Map<String, Value>,
    prefix: &'static str,
}

impl<'a> Keys<'a> {
    fn new(map: &'a Map<String, Value>, prefix: &'static str) -> Self {
        Keys { map, prefix }
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key)
    }

    fn missing(&self, key: &str, why: &str) -> String {
        format!("no \"{}{key}\": needed to {why}", self.prefix)
    }

    fn model_type(&self) -> Result<String, String> {
        match self.get("model_type") {
            Some(Value::String(t)) => Ok(t.clone()),
            Some(other) => Err(format!(
                "\"model_type\" is {}, expected a string such as \"llama\"",
                shown(other)
            )),
            None => Err("no \"model_type\": needed to know the architecture to count".into()),
        }
    }

    fn object(&self, key: &str, why: &str) -> Result<&'a Map<String, Value>, String> {
        match self.get(key) {
            Some(Value::Object(o)) => Ok(o),
            None | Some(Value::Null) => Err(self.missing(key, why)),
            Some(other) => Err(format!(
                "\"{}{key}\" is {}, expected an object",
                self.prefix,
                shown(other)
            )),
        }
    }

    /// A positive whole number the count needs.
    fn count(&self, key: &str, why: &str) -> Result<u32, String> {
        self.optional_count(key)?.ok_or_else(|| self.missing(key, why))
    }

    /// A positive whole number, `None` when absent or `null`.
    fn optional_count(&self, key: &str) -> Result<Option<u32>, String> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => match value.as_u64() {
                Some(n) if n > 0 && n <= u64::from(u32::MAX) => Ok(Some(n as u32)),
                _ => Err(format!(
                    "\"{}{key}\" is {}, expected a positive whole number",
                    self.prefix,
                    shown(value)
                )),
            },
        }
    }

    /// A whole number that may be 0, 0 when absent or `null`.
    fn optional_count_or_zero(&self, key: &str) -> Result<u32, String> {
        self.optional_count_or_zero_default(key, 0)
    }

    /// A whole number that may be 0, `default` when absent or `null`.
    fn optional_count_or_zero_default(&self, key: &str, default: u32) -> Result<u32, String> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(value) => match value.as_u64() {
                Some(n) if n <= u64::from(u32::MAX) => Ok(n as u32),
                _ => Err(format!(
                    "\"{}{key}\" is {}, expected a whole number",
                    self.prefix,
                    shown(value)
                )),
            },
        }
    }

    /// A boolean, `None` when absent or `null`.
    fn optional_bool(&self, key: &str) -> Result<Option<bool>, String> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(value) => Err(format!(
                "\"{}{key}\" is {}, expected true or false",
                self.prefix,
                shown(value)
            )),
        }
    }

    /// A list of layer indices (`mlp_only_layers`), empty when absent or `null`.
    fn index_list(&self, key: &str) -> Result<Vec<u128>, String> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| {
                    v.as_u64().map(u128::from).ok_or_else(|| {
                        format!(
                            "\"{}{key}\" holds {}, expected layer indices",
                            self.prefix,
                            shown(v)
                        )
                    })
                })
                .collect(),
            Some(other) => Err(format!(
                "\"{}{key}\" is {}, expected a list of layer indices",
                self.prefix,
                shown(other)
            )),
        }
    }

    /// How many of `layer_types` are `sliding_attention`; `None` when the config has no
    /// list. A list of another length than the layers is refused.
    fn layer_types(&self, layers: u32) -> Result<Option<u32>, String> {
        match self.get("layer_types") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => {
                if items.len() != layers as usize {
                    return Err(format!(
                        "\"{}layer_types\" has {} entries for {layers} layers",
                        self.prefix,
                        items.len()
                    ));
                }
                let mut sliding = 0;
                for item in items {
                    match item.as_str() {
                        Some("sliding_attention") => sliding += 1,
                        Some("full_attention") => {}
                        _ => {
                            return Err(format!(
                                "\"{}layer_types\" holds {}, expected \"sliding_attention\" or \
                                 \"full_attention\"",
                                self.prefix,
                                shown(item)
                            ));
                        }
                    }
                }
                Ok(Some(sliding))
            }
            Some(other) => Err(format!(
                "\"{}layer_types\" is {}, expected a list",
                self.prefix,
                shown(other)
            )),
        }
    }
}
