//! The model's size: a parameter count as written (`7B`), or a Hugging Face `config.json`
//! read offline and counted layer by layer.
//!
//! The count from a config is exact for the architectures it knows (Llama, Mistral,
//! Mixtral, Qwen2): every weight matrix, bias and norm the modeling code in
//! `huggingface/transformers` creates for that `model_type`.

use serde_json::Value;

use super::types::ModelShape;
use crate::model::hf_config::{Counted, count};

/// The largest count `parse_params` accepts: a quadrillion parameters is far past any
/// model that exists, so a bigger number is a typo.
const MAX_PARAMS: u128 = crate::model::hf_config::MAX_PARAMS;

/// What `parse_params` expects, for its error messages.
const PARAMS_EXPECTED: &str = "expected a parameter count such as 7B, 350M, 1.5T or 7000000000";

/// Parse a parameter count as people write it: `7B`, `7b`, `7.5B`, `350M`, `1.5T`, `12K`
/// or the plain number `7000000000`.
///
/// Rejects the empty string, zero, negative numbers, `NaN`, separators (`1_000`,
/// `1,000`), unknown suffixes, counts that are not whole (`1.5` without a suffix) and
/// absurd ones (over 10^15), with a message that says what was expected.
pub fn parse_params(text: &str) -> Result<u64, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err(format!("no parameter count given: {PARAMS_EXPECTED}"));
    }
    let (number, exponent) = match text.char_indices().last() {
        Some((at, c)) if c.is_ascii_alphabetic() => {
            let exponent = match c.to_ascii_uppercase() {
                'K' => 3,
                'M' => 6,
                'B' | 'G' => 9,
                'T' => 12,
                _ => {
                    return Err(format!(
                        "{text:?}: unknown suffix {c:?} (K, M, B or T): {PARAMS_EXPECTED}"
                    ));
                }
            };
            (&text[..at], exponent)
        }
        _ => (text, 0u32),
    };
    let (whole, fraction) = match number.split_once('.') {
        Some((whole, fraction)) => (whole, fraction),
        None => (number, ""),
    };
    let digits_only = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty())
        || !digits_only(whole)
        || !digits_only(fraction)
        || (number.contains('.') && fraction.is_empty())
    {
        return Err(format!("{text:?} is not a parameter count: {PARAMS_EXPECTED}"));
    }
    let fraction = fraction.trim_end_matches('0');
    if fraction.len() > exponent as usize {
        return Err(format!(
            "{text:?} is not a whole number of parameters: {PARAMS_EXPECTED}"
        ));
    }
    // Exact decimal arithmetic: `7.5B` is 75 x 10^8, no float rounding.
    let whole = whole.trim_start_matches('0');
    if whole.len() + exponent as usize > 20 {
        return Err(format!(
            "{text:?} is absurdly large (over 10^15 parameters): {PARAMS_EXPECTED}"
        ));
    }
    let mut value: u128 = 0;
    for b in whole.bytes().chain(fraction.bytes()) {
        value = value * 10 + u128::from(b - b'0');
    }
    value *= 10u128.pow(exponent - fraction.len() as u32);
    if value == 0 {
        return Err(format!(
            "{text:?}: a model has more than zero parameters: {PARAMS_EXPECTED}"
        ));
    }
    if value > MAX_PARAMS {
        return Err(format!(
            "{text:?} is absurdly large (over 10^15 parameters): {PARAMS_EXPECTED}"
        ));
    }
    Ok(value as u64)
}

/// The architectures `from_hf_config` counts.
pub use crate::model::hf_config::MODEL_TYPES as SUPPORTED_MODEL_TYPES;

/// Count a model's parameters from its Hugging Face `config.json` (the text; reading and
/// bounding the file is the caller's), exactly as the modeling code in
/// `huggingface/transformers` builds the model, and fill the shape the estimate reads.
/// The count is [`crate::model::hf_config::count`], the one compat-db's lint holds model
/// records to.
///
/// `source` is recorded in the shape (the file's path, say). Errors name the key:
/// `config.json: no "num_hidden_layers": needed to count the layers`.
pub fn from_hf_config(text: &str, source: &str) -> Result<ModelShape, String> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| format!("config.json: not JSON ({e}): expected a Hugging Face config.json"))?;
    let Value::Object(config) = value else {
        return Err("config.json: not a JSON object: expected a Hugging Face config.json".into());
    };
    let counted = count(&config).map_err(|e| format!("config.json: {e}"))?;
    Ok(shape_of(&counted, source))
}

/// The shape the estimate reads, from a count: every field filled.
pub fn shape_of(c: &Counted, source: &str) -> ModelShape {
    ModelShape {
        params: c.params,
        active_params: c.active_params,
        layers: Some(c.layers),
        hidden: Some(c.hidden),
        heads: Some(c.heads),
        kv_heads: Some(c.kv_heads),
        head_dim: Some(c.head_dim),
        vocab: Some(c.vocab),
        intermediate: Some(c.intermediate),
        experts: c.experts,
        experts_per_token: c.experts_per_token,
        tied_embeddings: Some(c.tied_embeddings),
        kv_per_token_layer: Some(c.kv_per_token_layer),
        mla: c.mla,
        sliding_window: c.sliding_window,
        sliding_layers: c.sliding_layers,
        largest_layer_params: Some(c.largest_layer_params),
        active_intermediate: Some(c.active_intermediate),
        source: source.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = format!("{}/tests/fixtures/plan/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn parse_params_accepts_counts_as_written() {
        assert_eq!(parse_params("7B"), Ok(7_000_000_000));
        assert_eq!(parse_params("7b"), Ok(7_000_000_000));
        assert_eq!(parse_params("70B"), Ok(70_000_000_000));
        assert_eq!(parse_params("7.5B"), Ok(7_500_000_000));
        assert_eq!(parse_params("350M"), Ok(350_000_000));
        assert_eq!(parse_params("1.5T"), Ok(1_500_000_000_000));
        assert_eq!(parse_params("12k"), Ok(12_000));
        assert_eq!(parse_params("7000000000"), Ok(7_000_000_000));
        assert_eq!(parse_params(" 6738415616 "), Ok(6_738_415_616));
        assert_eq!(parse_params("0.5B"), Ok(500_000_000));
        assert_eq!(parse_params("1.50B"), Ok(1_500_000_000));
        assert_eq!(parse_params("1000T"), Ok(1_000_000_000_000_000));
    }

    #[test]
    fn parse_params_rejects_what_is_not_a_count() {
        for bad in [
            "",
            "   ",
            "0",
            "0B",
            "0.0M",
            "-7B",
            "-1",
            "NaN",
            "nan",
            "inf",
            "1_000",
            "1,000",
            "7X",
            "7BB",
            "B",
            ".",
            "7.",
            ".5",
            "1.5",
            "7.0000000001B",
            "1001T",
            "1e9",
            "99999999999999999999999999",
            "7 B",
        ] {
            let err = parse_params(bad).expect_err(bad);
            assert!(err.contains("expected a parameter count"), "{bad:?}: {err}");
        }
        assert!(parse_params("7X").unwrap_err().contains("unknown suffix"));
        assert!(parse_params("2000T").unwrap_err().contains("absurd"));
    }

    /// meta-llama/Llama-2-70b-hf: 68,976,648,192 parameters. Its safetensors index gives
    /// `total_size` 137,953,296,384 bytes in fp16, halved; the same count is published for
    /// `togethercomputer/llama-2-70b` and in Megatron-DeepSpeed's AuroraGPT-70B notes
    /// (`TOTAL_PARAMS=68976648192`).
    #[test]
    fn llama_2_70b_config_counts_exactly() {
        let shape = from_hf_config(&fixture("llama-2-70b-hf.config.json"), "llama-2-70b").unwrap();
        assert_eq!(shape.params, 68_976_648_192);
        assert_eq!(shape.active_params, shape.params);
        assert_eq!(shape.layers, Some(80));
        assert_eq!(shape.hidden, Some(8192));
        assert_eq!(shape.heads, Some(64));
        assert_eq!(shape.kv_heads, Some(8));
        assert_eq!(shape.head_dim, Some(128));
        assert_eq!(shape.vocab, Some(32000));
        assert_eq!(shape.intermediate, Some(28672));
        assert_eq!(shape.tied_embeddings, Some(false));
        assert_eq!(shape.experts, None);
        assert_eq!(shape.source, "llama-2-70b");
    }

    /// meta-llama/Llama-2-7b-hf: 6,738,415,616 parameters; the checkpoint's index gives
    /// `total_size` 13,476,839,424 bytes in fp16, halved.
    #[test]
    fn llama_2_7b_config_counts_exactly() {
        let shape = from_hf_config(&fixture("llama-2-7b-hf.config.json"), "x").unwrap();
        assert_eq!(shape.params, 6_738_415_616);
        assert_eq!(shape.kv_heads, Some(32));
    }

    /// mistralai/Mixtral-8x7B-v0.1: 46,702,792,704 parameters; its safetensors index gives
    /// `total_size` 93,405,585,408 bytes in bf16, halved. Active: two of the eight experts,
    /// 12,879,925,248 (the paper's "13B active parameters").
    #[test]
    fn mixtral_8x7b_config_counts_every_expert_and_the_active_two() {
        let shape = from_hf_config(&fixture("mixtral-8x7b-v0.1.config.json"), "x").unwrap();
        assert_eq!(shape.params, 46_702_792_704);
        let one_expert_all_layers = 3 * 4096 * 14336 * 32;
        assert_eq!(shape.active_params, 46_702_792_704 - 6 * one_expert_all_layers);
        assert_eq!(shape.active_params, 12_879_925_248);
        assert_eq!(shape.experts, Some(8));
        assert_eq!(shape.experts_per_token, Some(2));
    }

    /// Qwen/Qwen2-7B: 7,615,616,512 parameters (the model card's 7.62B; the same count
    /// for Qwen2.5-7B, which has the same shape), with q/k/v biases and no o bias
    /// (`modeling_qwen2.py`).
    #[test]
    fn qwen2_7b_config_counts_the_qkv_biases() {
        let shape = from_hf_config(&fixture("qwen2-7b.config.json"), "x").unwrap();
        assert_eq!(shape.params, 7_615_616_512);
        assert_eq!(shape.kv_heads, Some(4));
    }

    #[test]
    fn llama_biases_and_tied_embeddings_follow_the_config() {
        let base = r#"{"model_type":"llama","vocab_size":10,"hidden_size":4,
            "num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":8"#;
        let plain = from_hf_config(&format!("{base}}}"), "x").unwrap().params;
        // 2 x 10x4 embeddings + 4x4 x 4 attention + 3 x 4x8 MLP + 2 norms x 4 + final 4.
        assert_eq!(plain, 80 + 64 + 96 + 8 + 4);
        let tied = from_hf_config(&format!("{base},\"tie_word_embeddings\":true}}"), "x").unwrap();
        assert_eq!(tied.params, plain - 40);
        let attention_bias = from_hf_config(&format!("{base},\"attention_bias\":true}}"), "x").unwrap();
        assert_eq!(attention_bias.params, plain + 4 * 4);
        let mlp_bias = from_hf_config(&format!("{base},\"mlp_bias\":true}}"), "x").unwrap();
        assert_eq!(mlp_bias.params, plain + 8 + 8 + 4);
        let gqa = from_hf_config(&format!("{base},\"num_key_value_heads\":1,\"head_dim\":2}}"), "x").unwrap();
        // k and v shrink from 4x4 to 4x2 each.
        assert_eq!(gqa.params, plain - 2 * 8);
    }

    #[test]
    fn bad_configs_name_the_field() {
        let llama = fixture("llama-2-7b-hf.config.json");
        let without = |key: &str| {
            let mut v: Value = serde_json::from_str(&llama).unwrap();
            v.as_object_mut().unwrap().remove(key);
            v.to_string()
        };
        assert_eq!(
            from_hf_config(&without("num_hidden_layers"), "x").unwrap_err(),
            "config.json: no \"num_hidden_layers\": needed to count the layers"
        );
        for key in [
            "vocab_size",
            "hidden_size",
            "num_attention_heads",
            "intermediate_size",
            "model_type",
        ] {
            let err = from_hf_config(&without(key), "x").unwrap_err();
            assert!(err.contains(&format!("no \"{key}\"")), "{key}: {err}");
        }
        let err = from_hf_config(r#"{"model_type":"falcon"}"#, "x").unwrap_err();
        assert!(err.contains("\"model_type\" is \"falcon\""), "{err}");
        assert!(err.contains("llama, mistral, mixtral, qwen2, qwen2_moe"), "{err}");
        assert!(err.contains("deepseek_v3") && err.contains("gpt_oss"), "{err}");
        let err = from_hf_config("not json {", "x").unwrap_err();
        assert!(err.contains("not JSON"), "{err}");
        let err = from_hf_config("[1, 2]", "x").unwrap_err();
        assert!(err.contains("not a JSON object"), "{err}");
        let err = from_hf_config(
            &llama.replace("\"hidden_size\": 4096", "\"hidden_size\": -1"),
            "x",
        )
        .unwrap_err();
        assert!(err.contains("\"hidden_size\" is -1"), "{err}");
        let err = from_hf_config(
            &llama.replace(
                "\"tie_word_embeddings\": false",
                "\"tie_word_embeddings\": \"no\"",
            ),
            "x",
        )
        .unwrap_err();
        assert!(err.contains("\"tie_word_embeddings\""), "{err}");
        let mixtral = fixture("mixtral-8x7b-v0.1.config.json");
        let mut v: Value = serde_json::from_str(&mixtral).unwrap();
        v.as_object_mut().unwrap().remove("num_local_experts");
        let err = from_hf_config(&v.to_string(), "x").unwrap_err();
        assert!(err.contains("no \"num_local_experts\""), "{err}");
    }

    fn count(name: &str) -> ModelShape {
        from_hf_config(&fixture(name), name).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    /// deepseek-ai/DeepSeek-V3: the checkpoint holds 684,489,845,504 parameters: the main
    /// model's 671,026,419,200 (the model card's and the paper's "671B total") and the
    /// multi-token-prediction module's 13,463,426,304 (README_WEIGHTS.md of
    /// github.com/deepseek-ai/DeepSeek-V3: "11.5B unique parameters", with its own copies
    /// of the 0.9B embedding and 0.9B output head, which the checkpoint stores as
    /// `model.layers.61.embed_tokens` and `model.layers.61.shared_head.head`); the Hub
    /// page's "685B" also counts the FP8 block scales. No one dtype (FP8 weights, bf16
    /// norms and embeddings, fp32 scales), so `total_size` cannot be divided.
    #[test]
    fn deepseek_v3_counts_the_main_model_and_the_mtp_module() {
        let s = count("deepseek-v3.config.json");
        assert_eq!(s.params, 684_489_845_504);
        let embed = 129_280 * 7168;
        let moe_block = s.largest_layer_params.unwrap();
        let mtp = 2 * embed + 7168 * 2 * 7168 + 3 * 7168 + moe_block;
        assert_eq!(s.params - mtp, 671_026_419_200);
        assert_eq!(moe_block, 11_507_286_272);
        // 37.55B a token: the paper's "37B activated".
        assert_eq!(s.active_params, 37_552_297_472);
        assert!(s.mla);
        assert_eq!(s.kv_per_token_layer, Some(512 + 64));
        assert_eq!(s.head_dim, Some(192));
        assert_eq!(s.experts, Some(256));
        assert_eq!(s.experts_per_token, Some(8));
        assert_eq!(s.intermediate, Some(2048));
        // Eight routed experts and one shared, 2048 wide each: the dense layers' 18432.
        assert_eq!(s.active_intermediate, Some(18_432));
        assert_eq!(s.sliding_window, None);
    }

    /// deepseek-ai/DeepSeek-V2-Lite: 15,706,484,224, the model card's "15.7B" (16B total,
    /// 2.4B activated: the count's 2.66B active includes the 0.2B embedding). `q_lora_rank`
    /// null: a plain q_proj.
    #[test]
    fn deepseek_v2_lite_counts_without_q_compression() {
        let s = count("deepseek-v2-lite.config.json");
        assert_eq!(s.params, 15_706_484_224);
        assert_eq!(s.active_params, 2_661_150_208);
        assert_eq!(s.kv_per_token_layer, Some(576));
        // Six routed and two shared experts of 1408 beat the first layer's dense 10944.
        assert_eq!(s.active_intermediate, Some(8 * 1408));
        let mut v: Value = serde_json::from_str(&fixture("deepseek-v2-lite.config.json")).unwrap();
        v["q_lora_rank"] = 1536.into();
        let with_rank = from_hf_config(&v.to_string(), "x").unwrap();
        // q_a (2048x1536) + its norm + q_b (1536 x 16*192) replace q_proj (2048 x 16*192).
        let per_layer = 2048 * 1536 + 1536 + 1536 * 16 * 192 - 2048 * 16 * 192;
        assert_eq!(with_rank.params, s.params + 27 * per_layer);
    }

    /// Qwen/Qwen1.5-MoE-A2.7B (`qwen2_moe`): 14,315,784,192, the model card's "14.3B
    /// parameters in total and 2.7B activated" (2,689,173,504): 60 experts of 1408, four a
    /// token, a shared expert of 5632 behind a one-output gate, q/k/v biases.
    #[test]
    fn qwen2_moe_counts_the_shared_expert_and_its_gate() {
        let s = count("qwen1.5-moe-a2.7b.config.json");
        assert_eq!(s.params, 14_315_784_192);
        assert_eq!(s.active_params, 2_689_173_504);
        assert_eq!(s.active_intermediate, Some(4 * 1408 + 5632));
        let mut v: Value = serde_json::from_str(&fixture("qwen1.5-moe-a2.7b.config.json")).unwrap();
        v["mlp_only_layers"] = serde_json::json!([0]);
        let dense_first = from_hf_config(&v.to_string(), "x").unwrap();
        let moe_mlp = 60 * 3 * 2048 * 1408 + 2048 * 60 + 3 * 2048 * 5632 + 2048;
        assert_eq!(dense_first.params, s.params - moe_mlp + 3 * 2048 * 5632);
    }

    /// Qwen/Qwen3-8B: 8,190,735,360, the model card's "8.2B" and "6.95B" without the
    /// embeddings. q_norm and k_norm, no biases.
    #[test]
    fn qwen3_8b_counts_the_head_norms() {
        let s = count("qwen3-8b.config.json");
        assert_eq!(s.params, 8_190_735_360);
        assert_eq!(s.params - 2 * 151_936 * 4096, 6_946_075_648);
        assert_eq!(s.kv_per_token_layer, Some(2 * 8 * 128));
    }

    /// Qwen/Qwen3-30B-A3B: 30,532,122,624, the model card's "30.5B, 3.3B activated"
    /// (3,353,032,704); the index's `total_size` is 61,064,245,248 bytes, all bf16.
    #[test]
    fn qwen3_moe_counts_every_expert() {
        let s = count("qwen3-30b-a3b.config.json");
        assert_eq!(s.params, 30_532_122_624);
        assert_eq!(s.active_params, 3_353_032_704);
        assert_eq!(s.experts, Some(128));
        assert_eq!(s.intermediate, Some(768));
        assert_eq!(s.active_intermediate, Some(8 * 768));
    }

    /// google/gemma-2-9b: 9,241,705,984 (the Hub's "9.24B"): four norms a layer, tied
    /// embeddings, every other layer sliding over 4096 tokens.
    #[test]
    fn gemma2_counts_four_norms_and_alternates_the_window() {
        let s = count("gemma-2-9b.config.json");
        assert_eq!(s.params, 9_241_705_984);
        assert_eq!(s.tied_embeddings, Some(true));
        assert_eq!(s.sliding_window, Some(4096));
        assert_eq!(s.sliding_layers, Some(21));
    }

    /// google/gemma-3-27b-it: 27,432,406,640 with the SigLIP vision tower and its projector
    /// (the Hub's "27.4B"); the language model's 262,208-token vocabulary is
    /// Gemma3TextConfig's default, which the Hub config leaves out. Five local layers
    /// (1024 tokens) to one global.
    #[test]
    fn gemma3_counts_the_language_model_and_the_vision_tower() {
        let s = count("gemma-3-27b.config.json");
        assert_eq!(s.params, 27_432_406_640);
        assert_eq!(s.vocab, Some(262_208));
        assert_eq!(s.layers, Some(62));
        assert_eq!(s.sliding_window, Some(1024));
        assert_eq!(s.sliding_layers, Some(62 - 10));
        let mut v: Value = serde_json::from_str(&fixture("gemma-3-27b.config.json")).unwrap();
        v.as_object_mut().unwrap().remove("vision_config");
        let text_only = from_hf_config(&v.to_string(), "x").unwrap();
        // SigLIP: patch conv, 4096 positions, 27 layers, final LayerNorm; the projector.
        let layer = 4 * (1152 * 1152 + 1152) + 2 * 1152 * 4304 + 4304 + 1152 + 4 * 1152;
        let tower = 3 * 14 * 14 * 1152 + 1152 + 4096 * 1152 + 27 * layer + 2 * 1152;
        assert_eq!(s.params - text_only.params, tower + 1152 * 5376 + 1152);
    }

    /// google/gemma-3-1b-pt (`gemma3_text`): 999,885,952, the "1B" of the model card.
    #[test]
    fn gemma3_text_counts_alone() {
        let s = count("gemma-3-1b.config.json");
        assert_eq!(s.params, 999_885_952);
        assert_eq!(s.sliding_layers, Some(26 - 4));
        assert_eq!(s.kv_per_token_layer, Some(2 * 256));
    }

    /// microsoft/Phi-3-mini-4k-instruct: 3,821,079,552, the model card's "3.8B". Fused qkv
    /// and gate_up have the weights of the separate ones; a 2047-token window on every
    /// layer.
    #[test]
    fn phi3_counts_the_fused_projections() {
        let s = count("phi-3-mini-4k.config.json");
        assert_eq!(s.params, 3_821_079_552);
        assert_eq!(s.sliding_window, Some(2047));
        assert_eq!(s.sliding_layers, Some(32));
    }

    /// openai/gpt-oss-20b: 20,914,757,184, the model card's 20.91B total (the report's
    /// table: 19.12B MLP, 0.64B attention, 1.16B embedding and unembedding). Its experts
    /// are MXFP4 on the Hub, so `total_size` mixes dtypes. Active 4,187,440,704: the
    /// report's 3.61B leaves out the input embedding (579,133,440), which this count keeps.
    #[test]
    fn gpt_oss_counts_sinks_biases_and_experts() {
        let s = count("gpt-oss-20b.config.json");
        assert_eq!(s.params, 20_914_757_184);
        assert_eq!(s.active_params, 4_187_440_704);
        assert_eq!(s.active_params - 201_088 * 2880, 3_608_307_264);
        assert_eq!(s.sliding_window, Some(128));
        assert_eq!(s.sliding_layers, Some(12));
        assert_eq!(s.active_intermediate, Some(4 * 2880));
    }

    /// Mistral v0.1's window covers every layer; Llama has none.
    #[test]
    fn windows_follow_each_architecture() {
        let mistral = r#"{"model_type":"mistral","vocab_size":10,"hidden_size":4,"num_hidden_layers":3,
            "num_attention_heads":2,"intermediate_size":8,"sliding_window":4096}"#;
        let s = from_hf_config(mistral, "x").unwrap();
        assert_eq!((s.sliding_window, s.sliding_layers), (Some(4096), Some(3)));
        let off = from_hf_config(&mistral.replace("4096", "null"), "x").unwrap();
        assert_eq!((off.sliding_window, off.sliding_layers), (None, None));
        let llama = count("llama-2-7b-hf.config.json");
        assert_eq!((llama.sliding_window, llama.sliding_layers), (None, None));
        assert_eq!(
            llama.largest_layer_params,
            Some(4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096)
        );
        assert_eq!(llama.active_intermediate, Some(11008));
        let qwen = r#"{"model_type":"qwen2","vocab_size":10,"hidden_size":4,"num_hidden_layers":6,
            "num_attention_heads":2,"intermediate_size":8,"use_sliding_window":true,"sliding_window":16,"max_window_layers":4}"#;
        let s = from_hf_config(qwen, "x").unwrap();
        assert_eq!((s.sliding_window, s.sliding_layers), (Some(16), Some(2)));
    }

    /// Sizes whose products pass 10^15 are refused with the keys that make them, never
    /// wrapped; so is a layer count no model has.
    #[test]
    fn absurd_sizes_are_refused_by_name() {
        let llama = fixture("llama-2-7b-hf.config.json");
        let err = from_hf_config(
            &llama.replace("\"num_hidden_layers\": 32", "\"num_hidden_layers\": 4294967295"),
            "x",
        )
        .unwrap_err();
        assert!(err.contains("\"num_hidden_layers\" 4294967295"), "{err}");
        assert!(err.contains("over 10^15"), "{err}");
        let err = from_hf_config(
            &llama
                .replace("\"hidden_size\": 4096", "\"hidden_size\": 4294967295")
                .replace(
                    "\"intermediate_size\": 11008",
                    "\"intermediate_size\": 4294967295",
                ),
            "x",
        )
        .unwrap_err();
        assert!(err.contains("\"hidden_size\" 4294967295"), "{err}");
        let err = from_hf_config(
            &llama.replace("\"num_hidden_layers\": 32", "\"num_hidden_layers\": 4294967296"),
            "x",
        )
        .unwrap_err();
        assert!(err.contains("\"num_hidden_layers\" is 4294967296"), "{err}");
        let mut v: Value = serde_json::from_str(&fixture("deepseek-v3.config.json")).unwrap();
        v["n_routed_experts"] = 4_294_967_295u64.into();
        v["num_experts_per_tok"] = 4_294_967_295u64.into();
        let err = from_hf_config(&v.to_string(), "x").unwrap_err();
        assert!(err.contains("over 10^15"), "{err}");
    }

    #[test]
    fn missing_architecture_keys_are_named() {
        for (file, key) in [
            ("deepseek-v3.config.json", "kv_lora_rank"),
            ("deepseek-v3.config.json", "moe_intermediate_size"),
            ("qwen1.5-moe-a2.7b.config.json", "shared_expert_intermediate_size"),
            ("qwen3-30b-a3b.config.json", "num_experts"),
            ("gpt-oss-20b.config.json", "num_local_experts"),
            ("gemma-2-9b.config.json", "vocab_size"),
        ] {
            let mut v: Value = serde_json::from_str(&fixture(file)).unwrap();
            v.as_object_mut().unwrap().remove(key);
            let err = from_hf_config(&v.to_string(), "x").unwrap_err();
            assert!(
                err.starts_with(&format!("config.json: no \"{key}\": needed to")),
                "{file} {key}: {err}"
            );
        }
        let mut v: Value = serde_json::from_str(&fixture("gemma-3-27b.config.json")).unwrap();
        v["text_config"].as_object_mut().unwrap().remove("hidden_size");
        let err = from_hf_config(&v.to_string(), "x").unwrap_err();
        assert!(err.contains("no \"text_config.hidden_size\""), "{err}");
        let mut v: Value = serde_json::from_str(&fixture("gpt-oss-20b.config.json")).unwrap();
        v["layer_types"] = serde_json::json!(["sliding_attention"]);
        let err = from_hf_config(&v.to_string(), "x").unwrap_err();
        assert!(
            err.contains("\"layer_types\" has 1 entries for 24 layers"),
            "{err}"
        );
    }

    #[test]
    fn counting_a_70b_config_is_fast() {
        let text = fixture("llama-2-70b-hf.config.json");
        let start = std::time::Instant::now();
        for _ in 0..100 {
            from_hf_config(&text, "x").unwrap();
        }
        assert!(start.elapsed() < std::time::Duration::from_millis(500));
    }
}

#[cfg(test)]
mod against_the_database {
    use super::*;

    /// The count read from a config file and the count compat-db's lint holds each model
    /// record to are two computations of one formula; they must agree on every model both
    /// know.
    #[test]
    fn configs_and_records_count_alike() {
        let db = crate::db::Db::embedded().unwrap();
        for (file, record) in [
            ("llama-2-70b-hf.config.json", "Llama-2-70B"),
            ("llama-2-7b-hf.config.json", "Llama-2-7B"),
            ("mixtral-8x7b-v0.1.config.json", "Mixtral-8x7B"),
            ("deepseek-v3.config.json", "DeepSeek-V3"),
            ("qwen3-8b.config.json", "Qwen3-8B"),
            ("qwen3-30b-a3b.config.json", "Qwen3-30B-A3B"),
            ("gemma-2-9b.config.json", "Gemma-2-9B"),
            ("gemma-3-27b.config.json", "Gemma-3-27B"),
            ("phi-3-mini-4k.config.json", "Phi-3-mini-4k"),
            ("gpt-oss-20b.config.json", "gpt-oss-20b"),
        ] {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/plan")
                .join(file);
            let shape = from_hf_config(&std::fs::read_to_string(path).unwrap(), file).unwrap();
            let rec = db.model(record).unwrap();
            assert_eq!(shape.params, rec.params, "{file}");
            assert_eq!(
                shape.active_params,
                rec.active_params.unwrap_or(rec.params),
                "{file}"
            );
        }
    }
}
