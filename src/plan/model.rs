//! The model's size: a parameter count as written (`7B`), or a Hugging Face `config.json`
//! read offline and counted layer by layer.
//!
//! The count from a config is exact for the architectures it knows (Llama, Mistral,
//! Mixtral, Qwen2): every weight matrix, bias and norm the modeling code in
//! `huggingface/transformers` creates for that `model_type`.

use serde_json::{Map, Value};

use super::types::ModelShape;

/// The largest count `parse_params` accepts: a quadrillion parameters is far past any
/// model that exists, so a bigger number is a typo.
const MAX_PARAMS: u128 = 1_000_000_000_000_000;

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
pub const SUPPORTED_MODEL_TYPES: [&str; 4] = ["llama", "mistral", "mixtral", "qwen2"];

/// Count a model's parameters from its Hugging Face `config.json` (the text; reading and
/// bounding the file is the caller's), exactly as the modeling code in
/// `huggingface/transformers` builds the model:
///
/// - embeddings `vocab_size x hidden_size`, and the output projection (`lm_head`) of the
///   same size unless `tie_word_embeddings` (default false for these four);
/// - attention: q and o `hidden x heads*head_dim`, k and v `hidden x kv_heads*head_dim`
///   (`num_key_value_heads`, default `num_attention_heads`; `head_dim`, default
///   `hidden_size / num_attention_heads`); biases on all four when Llama's
///   `attention_bias`, on q, k and v always for Qwen2 (`modeling_qwen2.py`), none for
///   Mistral and Mixtral;
/// - the gated MLP: three `hidden x intermediate_size` matrices (Llama's `mlp_bias` adds
///   their biases); Mixtral: `num_local_experts` of them plus a router
///   `hidden x experts` per layer, of which `num_experts_per_tok` are active;
/// - RMSNorm weights: two per layer and the final one.
///
/// `source` is recorded in the shape (the file's path, say). Errors name the key:
/// `config.json: no "num_hidden_layers": needed to count the layers`.
pub fn from_hf_config(text: &str, source: &str) -> Result<ModelShape, String> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| format!("config.json: not JSON ({e}): expected a Hugging Face config.json"))?;
    let Value::Object(config) = value else {
        return Err("config.json: not a JSON object: expected a Hugging Face config.json".into());
    };
    let model_type = match config.get("model_type") {
        Some(Value::String(t)) => t.as_str(),
        Some(other) => {
            return Err(format!(
                "config.json: \"model_type\" is {other}, expected a string such as \"llama\""
            ));
        }
        None => {
            return Err("config.json: no \"model_type\": needed to know the architecture to count".into());
        }
    };
    if !SUPPORTED_MODEL_TYPES.contains(&model_type) {
        return Err(format!(
            "config.json: \"model_type\" is \"{model_type}\", which gpuenv cannot count yet: \
             supported are {}",
            SUPPORTED_MODEL_TYPES.join(", ")
        ));
    }
    let c = Config(&config);

    let vocab = c.count("vocab_size", "count the embeddings")?;
    let hidden = c.count("hidden_size", "count every weight matrix")?;
    let layers = c.count("num_hidden_layers", "count the layers")?;
    let heads = c.count("num_attention_heads", "count the attention weights")?;
    let intermediate = c.count("intermediate_size", "count the MLP weights")?;
    let kv_heads = c.optional_count("num_key_value_heads")?.unwrap_or(heads);
    let head_dim = match c.optional_count("head_dim")? {
        Some(d) => d,
        None if hidden % heads == 0 => hidden / heads,
        None => {
            return Err(format!(
                "config.json: no \"head_dim\" and \"hidden_size\" {hidden} is not a multiple of \
                 \"num_attention_heads\" {heads}: needed to size the attention heads"
            ));
        }
    };
    let tied = c.optional_bool("tie_word_embeddings")?.unwrap_or(false);
    let (experts, experts_per_token) = if model_type == "mixtral" {
        let experts = c.count("num_local_experts", "count the experts of each MoE layer")?;
        let active = c.count("num_experts_per_tok", "count the active experts")?;
        if active > experts {
            return Err(format!(
                "config.json: \"num_experts_per_tok\" {active} is more than \
                 \"num_local_experts\" {experts}"
            ));
        }
        (Some(experts), Some(active))
    } else {
        (None, None)
    };
    // Biases: (on q, k, v; on o; on the MLP).
    let (qkv_bias, o_bias, mlp_bias) = match model_type {
        "llama" => {
            let attention = c.optional_bool("attention_bias")?.unwrap_or(false);
            let mlp = c.optional_bool("mlp_bias")?.unwrap_or(false);
            (attention, attention, mlp)
        }
        // modeling_qwen2.py: q_proj, k_proj, v_proj with bias=True, o_proj without.
        "qwen2" => (true, false, false),
        // modeling_mistral.py / modeling_mixtral.py: no biases.
        _ => (false, false, false),
    };

    let (v, h, l, a, kv, d, i) = (
        u128::from(vocab),
        u128::from(hidden),
        u128::from(layers),
        u128::from(heads),
        u128::from(kv_heads),
        u128::from(head_dim),
        u128::from(intermediate),
    );
    let embeddings = v * h;
    let lm_head = if tied { 0 } else { v * h };
    let q = h * a * d + if qkv_bias { a * d } else { 0 };
    let kv_proj = 2 * (h * kv * d + if qkv_bias { kv * d } else { 0 });
    let o = a * d * h + if o_bias { h } else { 0 };
    let attention = q + kv_proj + o;
    let one_mlp = 3 * h * i + if mlp_bias { 2 * i + h } else { 0 };
    let norms = 2 * h;
    let (mlp_total, mlp_active) = match (experts, experts_per_token) {
        (Some(e), Some(k)) => {
            let router = h * u128::from(e);
            (u128::from(e) * one_mlp + router, u128::from(k) * one_mlp + router)
        }
        _ => (one_mlp, one_mlp),
    };
    let outside_layers = embeddings + lm_head + h;
    let total = outside_layers + l * (attention + mlp_total + norms);
    let active = outside_layers + l * (attention + mlp_active + norms);
    if total > MAX_PARAMS {
        return Err(format!(
            "config.json: the sizes give {total} parameters, over 10^15: not a real model"
        ));
    }
    Ok(ModelShape {
        params: total as u64,
        active_params: active as u64,
        layers: Some(layers),
        hidden: Some(hidden),
        heads: Some(heads),
        kv_heads: Some(kv_heads),
        head_dim: Some(head_dim),
        vocab: Some(vocab),
        intermediate: Some(intermediate),
        experts,
        experts_per_token,
        tied_embeddings: Some(tied),
        source: source.to_string(),
        ..ModelShape::default()
    })
}

/// Typed reads from a config's top-level object.
struct Config<'a>(&'a Map<String, Value>);

impl Config<'_> {
    /// A positive whole number the count needs.
    fn count(&self, key: &str, why: &str) -> Result<u32, String> {
        self.optional_count(key)?
            .ok_or_else(|| format!("config.json: no \"{key}\": needed to {why}"))
    }

    /// A positive whole number, `None` when absent or `null`.
    fn optional_count(&self, key: &str) -> Result<Option<u32>, String> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => match value.as_u64() {
                Some(n) if n > 0 && n <= u64::from(u32::MAX) => Ok(Some(n as u32)),
                _ => Err(format!(
                    "config.json: \"{key}\" is {value}, expected a positive whole number"
                )),
            },
        }
    }

    /// A boolean, `None` when absent or `null`.
    fn optional_bool(&self, key: &str) -> Result<Option<bool>, String> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(value) => Err(format!(
                "config.json: \"{key}\" is {value}, expected true or false"
            )),
        }
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
        let err = from_hf_config(r#"{"model_type":"gemma2"}"#, "x").unwrap_err();
        assert!(err.contains("\"model_type\" is \"gemma2\""), "{err}");
        assert!(err.contains("llama, mistral, mixtral, qwen2"), "{err}");
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
