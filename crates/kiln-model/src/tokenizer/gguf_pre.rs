//! The split rules that GGUF's `tokenizer.ggml.pre` names. A byte-level BPE vocabulary is
//! cut into pieces before its merges run, each model family by its own regular expressions;
//! a GGUF file carries only the rule's name, which llama.cpp's converter chose by hashing the
//! original tokenizer's output. Each name here maps to the pieces that rule cuts, written
//! as the original Hugging Face tokenizers write them (llama.cpp rewrites some for C++'s
//! regex engine), with llama.cpp's flags for the name: whether merges are skipped where a
//! whole piece is a token, and whether a BOS token is added when the file does not say.
//! A name not here is refused with the list.

use serde_json::{Value, json};

use crate::ModelError;

/// Llama 3's split (cl100k's): numbers in groups of up to three digits.
const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2's: every digit on its own.
const QWEN2: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Seed-Coder's and Seed-OSS's: Qwen2's, but a run of punctuation keeps no line breaks.
const SEED_CODER: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Mistral's Tekken (Mistral NeMo, Small 3, Devstral): words split where lower case turns to
/// upper case, every digit on its own, contractions apart.
const TEKKEN: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// o200k's (Phi-4-mini, Llama 4): Tekken's case split with contractions kept on their word
/// and numbers in threes.
const GPT4O: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// DeepSeek Coder's splits, one after another: line breaks, letters, punctuation, CJK and
/// Hangul runs, digits.
const DEEPSEEK_CODER: &[&str] = &[
    r"[\r\n]",
    r"\s?\p{L}+",
    r"\s?\p{P}+",
    r"[\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+",
];

/// DeepSeek V3's splits (Hunyuan's dense models' too), one after another: numbers in threes,
/// runs of CJK ideographs and kana, then words (an ASCII punctuation mark keeps the Latin
/// letters after it), punctuation runs and spaces.
const DEEPSEEK3: &[&str] = &[
    r"\p{N}{1,3}",
    r"[\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+",
    r##"[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"##,
];
const DEEPSEEK3_NAMES: &[&str] = &["deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"];

/// Names whose rule is Llama 3's with merges skipped for whole-token pieces and a BOS token
/// by default (llama.cpp's `LLAMA3` group).
const LLAMA3_NAMES: &[&str] = &[
    "llama-bpe",
    "llama3",
    "llama-v3",
    "falcon3",
    "falcon-h1",
    "pixtral",
    "midm-2.0",
];
/// Llama 3's split with every merge applied (GLM-4's, DBRX's, Smaug's).
const LLAMA3_SPLIT_NAMES: &[&str] = &["glm4", "chatglm-bpe", "dbrx", "smaug-bpe"];
/// Qwen2's split; the first two with Qwen's NFC normalization.
const QWEN2_NAMES: &[&str] = &[
    "qwen2",
    "deepseek-r1-qwen",
    "megrez",
    "stablelm2",
    "hunyuan",
    "grok-2",
];
/// GPT-2's own split (byte-level BPE's default).
const GPT2_NAMES: &[&str] = &[
    "gpt2", "gpt-2", "default", "phi-2", "mpt", "olmo", "jais", "exaone4", "trillion",
];
/// BLOOM's split (Poro's and GPT-3 Finnish's too): a run of anything but white space and
/// a few punctuation marks, with the space before it; what lies between runs is a piece of
/// its own. No byte-level split after it.
const BLOOM_NAMES: &[&str] = &["bloom", "poro-chat", "gpt3-finnish"];
const BLOOM: &str = " ?[^(\\s|.,!?…。，、।۔،)]+";
/// GPT-2's split after every digit is cut apart (StarCoder's, SmolLM's).
const DIGITS_NAMES: &[&str] = &[
    "smollm",
    "starcoder",
    "refact",
    "command-r",
    "codeshell",
    "exaone",
    "minerva-7b",
];
const GPT4O_NAMES: &[&str] = &["gpt-4o", "llama4", "minimax-m2"];

/// How a named rule cuts text, as tokenizer.json parts.
pub(crate) struct Pre {
    pub normalizer: Value,
    pub pre_tokenizer: Value,
    /// A piece that is a token as a whole is that token, its merges not run.
    pub ignore_merges: bool,
    /// Whether a BOS token starts a prompt when the file does not say
    /// (`tokenizer.ggml.add_bos_token`).
    pub add_bos: bool,
}

pub(crate) fn byte_level(use_regex: bool) -> Value {
    json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": use_regex})
}

fn split(regex: &str) -> Value {
    json!({"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": false})
}

fn digits() -> Value {
    json!({"type": "Digits", "individual_digits": true})
}

impl Pre {
    /// Splits, in order, then the byte-level mapping.
    fn splits(parts: Vec<Value>) -> Pre {
        Pre {
            normalizer: Value::Null,
            pre_tokenizer: json!({"type": "Sequence", "pretokenizers": parts}),
            ignore_merges: false,
            add_bos: false,
        }
    }

    /// One regular expression's split.
    fn regex(regex: &str) -> Pre {
        Pre::splits(vec![split(regex), byte_level(false)])
    }

    /// The rule `tokenizer.ggml.pre` names; `file` names the model in the error.
    pub fn named(pre: &str, file: &str) -> Result<Pre, ModelError> {
        let is = |names: &[&str]| names.contains(&pre);
        Ok(if is(LLAMA3_NAMES) {
            Pre {
                ignore_merges: true,
                add_bos: true,
                ..Pre::regex(LLAMA3)
            }
        } else if is(LLAMA3_SPLIT_NAMES) {
            Pre::regex(LLAMA3)
        } else if is(QWEN2_NAMES) {
            Pre {
                normalizer: match pre {
                    "qwen2" | "deepseek-r1-qwen" => json!({"type": "NFC"}),
                    _ => Value::Null,
                },
                ..Pre::regex(QWEN2)
            }
        } else if pre == "seed-coder" {
            Pre::regex(SEED_CODER)
        } else if pre == "tekken" {
            Pre {
                ignore_merges: true,
                add_bos: true,
                ..Pre::regex(TEKKEN)
            }
        } else if is(GPT4O_NAMES) {
            Pre::regex(GPT4O)
        } else if is(GPT2_NAMES) {
            Pre {
                pre_tokenizer: byte_level(true),
                ..Pre::splits(Vec::new())
            }
        } else if is(DIGITS_NAMES) {
            Pre::splits(vec![digits(), byte_level(true)])
        } else if is(DEEPSEEK3_NAMES) {
            let mut parts: Vec<Value> = DEEPSEEK3.iter().map(|r| split(r)).collect();
            parts.push(byte_level(false));
            Pre::splits(parts)
        } else if is(BLOOM_NAMES) {
            Pre::splits(vec![split(BLOOM), byte_level(false)])
        } else if pre == "falcon" {
            // Falcon's: punctuation runs apart, GPT-2's split, numbers in threes.
            Pre::splits(vec![
                json!({"type": "Punctuation", "behavior": "Contiguous"}),
                byte_level(true),
                json!({"type": "Digits", "individual_digits": false}),
                split("[0-9][0-9][0-9]"),
            ])
        } else if pre == "deepseek-coder" {
            let mut parts: Vec<Value> = DEEPSEEK_CODER.iter().map(|r| split(r)).collect();
            parts.extend([digits(), byte_level(false)]);
            Pre::splits(parts)
        } else {
            let known: Vec<&str> = [
                LLAMA3_NAMES,
                LLAMA3_SPLIT_NAMES,
                QWEN2_NAMES,
                &["seed-coder", "tekken", "deepseek-coder", "falcon"],
                DEEPSEEK3_NAMES,
                GPT4O_NAMES,
                GPT2_NAMES,
                DIGITS_NAMES,
                BLOOM_NAMES,
            ]
            .concat();
            return Err(ModelError::Unsupported {
                file: file.into(),
                reason: format!(
                    "tokenizer pre-tokenizer \"{pre}\" (supported: {})",
                    known.join(", ")
                ),
            });
        })
    }
}

#[cfg(test)]
mod tests {
    use tokenizers::pre_tokenizers::PreTokenizerWrapper;
    use tokenizers::{OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer};

    use super::Pre;

    /// The pieces `pre`'s splits cut `text` into (before the byte-level mapping, whose own
    /// split, where it has one, is GPT-2's).
    fn pieces(pre: &str, text: &str) -> Vec<String> {
        let rule = Pre::named(pre, "test.gguf").unwrap();
        let parts = match rule.pre_tokenizer["pretokenizers"].as_array() {
            Some(parts) => parts.clone(),
            None => vec![rule.pre_tokenizer],
        };
        let mut s = PreTokenizedString::from(text);
        for part in parts {
            let mut part: PreTokenizerWrapper = serde_json::from_value(part).unwrap();
            if let PreTokenizerWrapper::ByteLevel(b) = &part {
                if !b.use_regex {
                    continue;
                }
                // Its split alone, without the mapping of bytes to printable characters.
                part = serde_json::from_value(super::split(GPT2_SPLIT)).unwrap();
            }
            part.pre_tokenize(&mut s).unwrap();
        }
        (s.get_splits(OffsetReferential::Original, OffsetType::Byte)
            .into_iter())
        .map(|(p, _, _)| p.to_string())
        .collect()
    }

    /// The split byte-level BPE's `use_regex` runs.
    const GPT2_SPLIT: &str =
        r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";

    /// Each rule on text where the rules differ: digits in threes, alone or in runs; a line
    /// break after punctuation kept with it or on its own; words cut where the case turns
    /// and contractions on their word or apart; as llama.cpp's rules for these names cut it.
    #[test]
    fn each_named_rule_cuts_as_its_family_does() {
        let text = "It's 12345 HelloWorld!!\n\nOK";
        let llama3 = "It|'s| |123|45| HelloWorld|!!\n\n|OK";
        let qwen2 = "It|'s| |1|2|3|4|5| HelloWorld|!!\n\n|OK";
        let cases = [
            ("llama-bpe", llama3),
            ("falcon3", llama3),
            ("glm4", llama3),
            ("chatglm-bpe", llama3),
            ("dbrx", llama3),
            ("qwen2", qwen2),
            ("deepseek-r1-qwen", qwen2),
            ("stablelm2", qwen2),
            ("seed-coder", "It|'s| |1|2|3|4|5| HelloWorld|!!|\n\n|OK"),
            ("tekken", "It|'s| |1|2|3|4|5| Hello|World|!!\n\n|OK"),
            ("gpt-4o", "It's| |123|45| Hello|World|!!\n\n|OK"),
            ("gpt2", "It|'s| 12345| HelloWorld|!!|\n|\n|OK"),
            ("exaone4", "It|'s| 12345| HelloWorld|!!|\n|\n|OK"),
            ("smollm", "It|'s| |1|2|3|4|5| HelloWorld|!!|\n|\n|OK"),
            ("refact", "It|'s| |1|2|3|4|5| HelloWorld|!!|\n|\n|OK"),
            (
                "deepseek-coder",
                "It|'|s| |1|2|3|4|5| HelloWorld|!!|\n|\n|OK",
            ),
            ("hunyuan-dense", "It|'s| |123|45| HelloWorld|!!\n\n|OK"),
            ("falcon", "It|'|s| |123|45| HelloWorld|!!|\n|\n|OK"),
            ("bloom", "It's| 12345| HelloWorld|!!\n\n|OK"),
        ];
        for (pre, want) in cases {
            assert_eq!(pieces(pre, text).join("|"), want, "{pre}");
        }
    }

    /// DeepSeek Coder's and V3's CJK runs, and Qwen2's NFC normalizer (not the others').
    #[test]
    fn cjk_runs_and_normalization() {
        assert_eq!(pieces("deepseek-coder", "代码abc").join("|"), "代码|abc");
        // A punctuation mark keeps the Latin letters after it; kana and ideographs in runs.
        assert_eq!(
            pieces("deepseek-v3", "a.b,代码かなx").join("|"),
            "a|.b|,|代码かな|x"
        );
        let nfc = Pre::named("qwen2", "m.gguf").unwrap().normalizer;
        assert_eq!(nfc["type"], "NFC");
        assert!(
            Pre::named("stablelm2", "m.gguf")
                .unwrap()
                .normalizer
                .is_null()
        );
    }

    #[test]
    fn llama3_family_adds_bos_and_skips_merges() {
        for (pre, flags) in [
            ("llama-bpe", (true, true)),
            ("tekken", (true, true)),
            ("glm4", (false, false)),
            ("qwen2", (false, false)),
        ] {
            let p = Pre::named(pre, "m.gguf").unwrap();
            assert_eq!((p.ignore_merges, p.add_bos), flags, "{pre}");
        }
    }

    #[test]
    fn unknown_names_are_refused_with_the_list() {
        let e = Pre::named("chameleon", "m.gguf").err().unwrap().to_string();
        assert!(
            e.contains("\"chameleon\"") && e.contains("tekken") && e.contains("m.gguf"),
            "{e}"
        );
    }
}
