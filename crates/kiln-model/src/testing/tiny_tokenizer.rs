//! The tiny models' byte-level BPE tokenizer: 256 byte tokens, a few English merges and the
//! ChatML specials `<|im_start|>` / `<|im_end|>` (eos) / `<|endoftext|>`; as an HF tokenizer.json
//! and as GGUF tokenizer metadata.

use serde_json::{Value, json};

use super::gguf_writer::GgufTokenizer;

pub const CHATML_TEMPLATE: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// ChatML for a model that reasons: the generation prompt opens a `<think>` block, and past
/// assistant turns' `reasoning_content` is rendered in one (as Qwen3's templates do).
pub const THINK_TEMPLATE: &str = concat!(
    "{%- for m in messages -%}{{ '<|im_start|>' + m.role + '\\n' }}",
    "{%- if m.reasoning_content -%}{{ '<think>\\n' + m.reasoning_content + '\\n</think>\\n\\n' }}{%- endif -%}",
    "{{ m.content + '<|im_end|>\\n' }}{%- endfor -%}",
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n<think>\\n' }}{%- endif -%}",
);

/// ChatML that renders tools (Hermes-style `<tool_call>` blocks, past calls included), past
/// reasoning in a block, and a `<think>` block opened after the generation prompt when
/// `enable_thinking` is set.
pub const TOOLS_THINK_TEMPLATE: &str = concat!(
    "{%- if tools -%}{{ '<|im_start|>system\\n' + tools|tojson + ' <tool_call><|im_end|>\\n' }}{%- endif -%}",
    "{%- for m in messages -%}{{ '<|im_start|>' + m.role + '\\n' }}",
    "{%- if m.reasoning_content -%}{{ '<think>\\n' + m.reasoning_content + '\\n</think>\\n\\n' }}{%- endif -%}",
    "{{ m.content or '' }}",
    "{%- for c in m.tool_calls or [] -%}{{ '<tool_call>\\n' + c.function|tojson + '\\n</tool_call>' }}{%- endfor -%}",
    "{{ '<|im_end|>\\n' }}{%- endfor -%}",
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}",
    "{%- if enable_thinking -%}{{ '<think>\\n' }}{%- endif -%}{%- endif -%}",
);

const MERGES: &[(&str, &str)] = &[
    ("Ġ", "t"),
    ("h", "e"),
    ("Ġt", "he"),
    ("i", "n"),
    ("Ġ", "a"),
    ("e", "r"),
    ("o", "n"),
    ("Ġ", "s"),
    ("r", "e"),
    ("a", "t"),
    ("e", "n"),
    ("Ġ", "w"),
    ("o", "r"),
    ("Ġ", "c"),
    ("i", "s"),
    ("Ġ", "Ġ"),
    ("Ġ", "i"),
    ("in", "g"),
    ("Ġ", "o"),
    ("l", "l"),
];

pub const SPECIALS: &[&str] = &["<|endoftext|>", "<|im_start|>", "<|im_end|>"];

/// GPT-2's reversible byte → printable character map.
pub fn byte_to_char(b: u8) -> char {
    let printable = |x: u8| (33..=126).contains(&x) || (161..=172).contains(&x) || x >= 174;
    if printable(b) {
        return b as char;
    }
    let rank = (0..b).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(256 + rank).expect("valid char")
}

/// All tokens in id order, number of special tokens at the end.
pub fn tokens() -> Vec<String> {
    let mut t: Vec<String> = (0..=255u8).map(|b| byte_to_char(b).to_string()).collect();
    t.extend(MERGES.iter().map(|(a, b)| format!("{a}{b}")));
    t.extend(SPECIALS.iter().map(|s| s.to_string()));
    t
}

pub fn eos_id() -> u32 {
    (tokens().len() - 1) as u32
}

pub fn tokenizer_json() -> Value {
    tokenizer_json_with(&[])
}

/// The tokenizer with `extra_specials` as more special tokens, numbered after [`tokens`]
/// (a model's own markers, such as a tool-call opener).
pub fn tokenizer_json_with(extra_specials: &[&str]) -> Value {
    let mut toks = tokens();
    let first_special = toks.len() - SPECIALS.len();
    toks.extend(extra_specials.iter().map(|s| s.to_string()));
    let vocab: serde_json::Map<String, Value> = toks
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), json!(i)))
        .collect();
    let added: Vec<Value> = toks[first_special..]
        .iter()
        .enumerate()
        .map(|(i, t)| crate::tokenizer::added_token_json((first_special + i) as u32, t, true))
        .collect();
    let bl = json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true});
    json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": added,
        "normalizer": null, "pre_tokenizer": bl, "post_processor": null, "decoder": bl,
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
            "vocab": vocab, "merges": MERGES.iter().map(|(a, b)| json!([a, b])).collect::<Vec<_>>()},
    })
}

/// tokenizer_config.json with `chat_template` (ChatML when `None`).
pub fn tokenizer_config_json(chat_template: Option<&str>) -> Value {
    json!({
        "bos_token": null, "eos_token": "<|im_end|>", "add_bos_token": false,
        "chat_template": chat_template.unwrap_or(CHATML_TEMPLATE), "model_max_length": 512,
    })
}

/// The same tokenizer as GGUF metadata (pre-tokenizer "gpt2").
pub fn gguf_tokenizer() -> GgufTokenizer {
    let toks = tokens();
    let first_special = toks.len() - SPECIALS.len();
    GgufTokenizer {
        model: "gpt2".into(),
        pre: Some("gpt2".into()),
        token_types: (0..toks.len())
            .map(|i| if i >= first_special { 3 } else { 1 })
            .collect(),
        merges: MERGES.iter().map(|(a, b)| format!("{a} {b}")).collect(),
        scores: Vec::new(),
        bos: None,
        eos: Some(eos_id()),
        add_bos: false,
        chat_template: Some(CHATML_TEMPLATE.into()),
        tokens: toks,
    }
}
