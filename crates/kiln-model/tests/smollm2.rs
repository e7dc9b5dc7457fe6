//! The real default model (SmolLM2-135M-Instruct Q4_1 GGUF) against the Hugging Face reference.

use std::path::PathBuf;

use kiln_model::{Architecture, ChatMessage, Model};
use serde_json::Value;

fn model_path() -> PathBuf {
    let p = match std::env::var_os("KILN_MODEL") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../models/SmolLM2-135M-Instruct.Q4_1.gguf"),
    };
    assert!(
        p.is_file(),
        "model file {} not found: run scripts/fetch-model.sh (or set KILN_MODEL to the .gguf path)",
        p.display()
    );
    p
}

fn reference() -> Value {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/reference/smollm2-135m-instruct.json");
    let text = std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("reference file {} unreadable: {e}", p.display()));
    serde_json::from_str(&text).expect("reference JSON")
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .expect("id list")
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn load() -> Model {
    Model::load(&model_path()).expect("load SmolLM2")
}

#[test]
fn config_values() {
    let m = load();
    let c = &m.config;
    assert_eq!(c.architecture, Architecture::Llama);
    assert_eq!(c.num_layers, 30);
    assert_eq!(c.hidden_size, 576);
    assert_eq!(c.intermediate_size, 1536);
    assert_eq!(c.num_heads, 9);
    assert_eq!(c.num_kv_heads, 3);
    assert_eq!(c.head_dim, 64);
    assert_eq!(c.vocab_size, 49152);
    assert_eq!(c.rope_theta, 100000.0);
    assert!(c.tie_word_embeddings);
    assert!(!c.attention_bias);
    assert_eq!(c.rope_scaling, None);
    assert_eq!(c.max_position_embeddings, 8192);
    assert!((c.rms_norm_eps - 1e-5).abs() < 1e-9);
    assert_eq!(c.bos_token_id, Some(1));
    assert_eq!(c.eos_token_ids, vec![2]);
    let inv = c.layer_rope(0).inv_freq;
    assert_eq!(inv.len(), 32);
    assert_eq!(inv[0], 1.0);
    assert!((inv[1] - 100000f64.powf(-2.0 / 64.0)).abs() < 1e-12);
    // 134.5M parameters for SmolLM2-135M.
    assert_eq!(c.param_count(), 134_515_008);
    assert_eq!(m.tokenizer.vocab_size(), 49152);
}

#[test]
fn weights_shapes_and_values() {
    let m = load();
    let w = &m.weights;
    assert!(!w.contains("lm_head.weight"));
    assert_eq!(
        w.shape("model.embed_tokens.weight").unwrap(),
        vec![49152, 576]
    );
    assert_eq!(
        w.shape("model.layers.0.self_attn.k_proj.weight").unwrap(),
        vec![192, 576]
    );
    assert_eq!(
        w.shape("model.layers.29.mlp.down_proj.weight").unwrap(),
        vec![576, 1536]
    );
    for name in [
        "model.embed_tokens.weight",
        "model.layers.0.self_attn.q_proj.weight",
        "model.norm.weight",
    ] {
        let data = w.read_f32(name).unwrap();
        let n: usize = w.shape(name).unwrap().iter().product();
        assert_eq!(data.len(), n);
        assert!(
            data.iter().all(|x| x.is_finite()),
            "{name} has non-finite values"
        );
        let mean_abs = data.iter().map(|x| x.abs() as f64).sum::<f64>() / n as f64;
        assert!(
            mean_abs > 1e-3 && mean_abs < 10.0,
            "{name} mean |x| = {mean_abs}"
        );
    }
}

#[test]
fn tokenizer_matches_reference_ids() {
    let m = load();
    let r = reference();
    let plain = &r["prompts"]["plain_short"];
    let got = m
        .tokenizer
        .encode(plain["text"].as_str().unwrap(), true)
        .unwrap();
    assert_eq!(got, ids(&plain["input_ids"]));
    let chat = &r["prompts"]["chat"];
    let got = m
        .tokenizer
        .encode(chat["text"].as_str().unwrap(), true)
        .unwrap();
    assert_eq!(got, ids(&chat["input_ids"]));
    // Reference greedy continuation decodes to the reference text (special tokens kept / skipped).
    let greedy = &chat["greedy_32"];
    assert_eq!(
        m.tokenizer.decode(&ids(&greedy["ids"]), false).unwrap(),
        greedy["text"].as_str().unwrap()
    );
    assert_eq!(
        m.tokenizer.decode(&ids(&greedy["ids"]), true).unwrap(),
        greedy["text_skip_special"].as_str().unwrap()
    );
}

#[test]
fn tokenizer_tricky_strings_round_trip() {
    let m = load();
    let t = &m.tokenizer;
    // Digits are split one by one (SmolLM2 pre-tokenizer).
    let digits = t.encode("12345", false).unwrap();
    assert_eq!(digits.len(), 5);
    for s in [
        "12345",
        "héllo wörld — 日本語 🚀",
        "a   b\n\n\nc \t d  ",
        "<|im_start|>user\nhi<|im_end|>\n",
        " leading space",
    ] {
        let ids = t.encode(s, false).unwrap();
        assert!(!ids.is_empty());
        assert_eq!(t.decode(&ids, false).unwrap(), s, "round trip of {s:?}");
    }
    let im_start = t.token_to_id("<|im_start|>").unwrap();
    let im_end = t.token_to_id("<|im_end|>").unwrap();
    assert_eq!((im_start, im_end), (1, 2));
    assert!(t.is_special(im_start) && t.is_special(im_end));
    assert!(!t.is_special(t.token_to_id("Ġthe").unwrap()));
    assert_eq!(t.id_to_token(2).as_deref(), Some("<|im_end|>"));
    let ids = t.encode("<|im_start|>user\nhi<|im_end|>", false).unwrap();
    assert_eq!(ids[0], im_start);
    assert_eq!(*ids.last().unwrap(), im_end);
    assert_eq!(t.decode(&ids, true).unwrap(), "user\nhi");
}

#[test]
fn chat_template_renders_reference_prompt() {
    let m = load();
    let r = reference();
    let chat = &r["prompts"]["chat"];
    let messages: Vec<ChatMessage> = serde_json::from_value(chat["messages"].clone()).unwrap();
    let tmpl = m
        .chat_template
        .as_ref()
        .expect("SmolLM2 GGUF carries a chat template");
    assert_eq!(
        tmpl.render(&messages, true).unwrap(),
        chat["text"].as_str().unwrap()
    );
    let no_prompt = tmpl.render(&messages, false).unwrap();
    assert!(no_prompt.ends_with("<|im_end|>\n"));
}
