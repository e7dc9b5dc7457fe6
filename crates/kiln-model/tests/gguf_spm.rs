//! GGUF SentencePiece ("llama") tokenizers: merges derived from scores, ▁ word prefix, byte
//! fallback and BOS handling, on a hand-made vocabulary.

use kiln_model::testing::{GgufTokenizer, TinyConfig, model_gguf, tiny_tensors};
use kiln_model::{DType, Model};

fn spm_model() -> Model {
    // ids: 0 <unk>, 1 <s>, 2 </s>, 3..259 <0x00>..<0xFF>, then pieces.
    let mut tokens = vec!["<unk>".to_string(), "<s>".into(), "</s>".into()];
    let mut types = vec![2u32, 3, 3];
    let mut scores = vec![0f32, 0.0, 0.0];
    for b in 0..=255u32 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
        scores.push(0.0);
    }
    for (piece, score) in [
        ("▁", -1.0),
        ("a", -2.0),
        ("b", -3.0),
        ("h", -4.0),
        ("▁a", -5.0),
        ("ab", -6.0),
        ("▁ab", -7.0),
        ("▁h", -8.0),
    ] {
        tokens.push(piece.into());
        types.push(1);
        scores.push(score);
    }
    let tok = GgufTokenizer {
        model: "llama".into(),
        tokens,
        token_types: types,
        scores,
        bos: Some(1),
        eos: Some(2),
        add_bos: true,
        ..Default::default()
    };
    let mc = TinyConfig::default().model_config();
    Model::from_gguf_bytes(
        model_gguf(&mc, &tiny_tensors(&mc, 1), DType::F32, &tok).to_bytes(),
        "spm.gguf",
    )
    .unwrap()
}

#[test]
fn sentencepiece_bpe_from_scores() {
    let m = spm_model();
    let t = &m.tokenizer;
    let id = |s: &str| t.token_to_id(s).unwrap();
    // "ab a": "▁ab" + "▁a", BOS prepended with special tokens.
    assert_eq!(
        t.encode("ab a", true).unwrap(),
        vec![1, id("▁ab"), id("▁a")]
    );
    assert_eq!(t.encode("ab a", false).unwrap(), vec![id("▁ab"), id("▁a")]);
    // "ha": "▁h" merges first (score -8 beats nothing else applicable), "a" alone.
    assert_eq!(t.encode("ha", false).unwrap(), vec![id("▁h"), id("a")]);
    // Unknown characters fall back to UTF-8 bytes.
    assert_eq!(
        t.encode("é", false).unwrap(),
        vec![id("▁"), id("<0xC3>"), id("<0xA9>")]
    );
    for s in ["ab a", "é ab", "hab  a"] {
        let ids = t.encode(s, true).unwrap();
        assert_eq!(t.decode(&ids, true).unwrap(), s);
    }
    assert!(t.is_special(1) && t.is_special(2) && !t.is_special(id("▁a")));
    assert_eq!(m.config.bos_token_id, Some(1));
    assert_eq!(m.config.eos_token_ids, vec![2]);
}
