"""A small SentencePiece BPE model and what SentencePiece itself makes of test texts.

Writes tests/reference/sentencepiece/bpe.model (a tokenizer.model as Llama's, InternLM2's and
other SentencePiece models ship it: BPE pieces with scores, byte fallback, a space prefix, no
normalization) trained here on the repository's README, and bpe.json: for each test text the
ids SentencePiece encodes it to, the ids of each stretch of text between its user-defined
pieces encoded on its own (llama.cpp's reading), and the text SentencePiece decodes those
to. Read by
crates/kiln-model/tests/sentencepiece.rs, which checks kiln's reading of tokenizer.model files
(the same construction as its GGUF "llama" vocabularies) against them.

    python3 -m venv ~/.cache/kiln/hf-venv
    ~/.cache/kiln/hf-venv/bin/pip install sentencepiece
    ~/.cache/kiln/hf-venv/bin/python scripts/sentencepiece_reference.py
"""

import io
import json
import os

import sentencepiece as spm

ROOT = os.path.join(os.path.dirname(__file__), "..")
OUT = os.path.join(ROOT, "tests", "reference", "sentencepiece")

SPECIAL = ["<|im_start|>", "<|im_end|>"]

TEXTS = [
    "Hello world",
    " leading space and  two spaces",
    "trailing space ",
    "line one\nline two\n\nafter a blank line",
    "tabs\tand\tcolumns",
    "numbers 12345 and 3.14159",
    "kiln's KV cache holds blocks of 16 tokens; prefill is chunked at 2048.",
    "Unicode beyond the corpus: Ω≈ç √ 漢字 かな 한국어 🙂🔥",
    "<|im_start|>user\nA question<|im_end|>",
    "",
    "   ",
    "CamelCaseIdentifiers and snake_case_ones()",
]


def by_segment(sp, text):
    """The ids of `text` with its user-defined pieces split off first and each stretch of text
    between them encoded on its own (a space prefix on each): how llama.cpp and Hugging Face's
    legacy SentencePiece tokenizers read text around added tokens, where SentencePiece itself
    puts one space prefix before the whole text."""
    ids, rest = [], text
    while rest:
        at = [(rest.find(s), s) for s in SPECIAL if s in rest]
        if not at:
            return ids + sp.encode(rest)
        i, s = min(at)
        ids += (sp.encode(rest[:i]) if i else []) + [sp.piece_to_id(s)]
        rest = rest[i + len(s) :]
    return ids


def main():
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        corpus = [line for line in f.read().splitlines() if line.strip()][:2000]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus),
        model_writer=model,
        model_type="bpe",
        vocab_size=600,
        byte_fallback=True,
        character_coverage=0.9995,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        add_dummy_prefix=True,
        user_defined_symbols=SPECIAL,
        bos_id=1,
        eos_id=2,
        unk_id=0,
        num_threads=1,
        minloglevel=2,
    )
    data = model.getvalue()
    with open(os.path.join(OUT, "bpe.model"), "wb") as f:
        f.write(data)
    sp = spm.SentencePieceProcessor(model_proto=data)
    cases = [
        {
            "text": t,
            "ids": sp.encode(t),
            "ids_by_segment": by_segment(sp, t),
            "decoded": sp.decode(by_segment(sp, t)),
        }
        for t in TEXTS
    ]
    out = {
        "made_by": "scripts/sentencepiece_reference.py",
        "sentencepiece": spm.__version__,
        "vocab_size": sp.get_piece_size(),
        "bos": sp.bos_id(),
        "eos": sp.eos_id(),
        "cases": cases,
    }
    with open(os.path.join(OUT, "bpe.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(data)} bytes, {sp.get_piece_size()} pieces, {len(cases)} cases")


if __name__ == "__main__":
    main()
