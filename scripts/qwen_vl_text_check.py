"""Qwen2-VL's, Qwen2.5-VL's and Qwen3-VL's language models on text equal Qwen2's and Qwen3's.

kiln reads the multimodal RoPE of Qwen's VL models (`mrope_section`, interleaved in Qwen3-VL)
as plain RoPE on text, where every section of a token turns by its one position. This runs
transformers' own Qwen2VL-, Qwen2_5_VL- and Qwen3VLForConditionalGeneration (a
one-block vision tower at random, unused) with the language-model weights of kiln's tiny Qwen2
and Qwen3 folders, on text alone, against Qwen2ForCausalLM and Qwen3ForCausalLM on the same
folders, and prints the largest logit difference (1.2e-6 on 2026-12-07, transformers 5.25).
Not part of CI (it needs torch); the folders come from the transformers_cases example:

    cargo run -p kiln-model --example transformers_cases -- /tmp/tfcases
    ~/.cache/kiln/hf-venv/bin/python scripts/qwen_vl_text_check.py /tmp/tfcases
"""

import json
import sys

import torch
from safetensors.torch import load_file
from transformers import (
    AutoModelForCausalLM,
    Qwen2_5_VLConfig,
    Qwen2_5_VLForConditionalGeneration,
    Qwen2VLConfig,
    Qwen2VLForConditionalGeneration,
    Qwen3VLConfig,
    Qwen3VLForConditionalGeneration,
)

VISION = {"depth": 1, "hidden_size": 16, "num_heads": 2, "intermediate_size": 32}


def qwen2_vl(cfg):
    """Qwen2-VL whose language model is the text folder's (its RoPE in 2, 3 and 3 pairs)."""
    text = {k: v for k, v in cfg.items() if k not in ("architectures", "model_type")}
    text["rope_scaling"] = {"type": "mrope", "mrope_section": [2, 3, 3]}
    vision = {"depth": 1, "embed_dim": 16, "num_heads": 2, "hidden_size": cfg["hidden_size"]}
    return Qwen2VLForConditionalGeneration(Qwen2VLConfig(text_config=text, vision_config=vision))


def qwen2_5_vl(cfg):
    """Qwen2.5-VL whose language model is the text folder's (its RoPE in 2, 3 and 3 pairs)."""
    text = {k: v for k, v in cfg.items() if k not in ("architectures", "model_type")}
    text["rope_scaling"] = {"type": "mrope", "mrope_section": [2, 3, 3]}
    vision = dict(VISION, out_hidden_size=cfg["hidden_size"])
    return Qwen2_5_VLForConditionalGeneration(Qwen2_5_VLConfig(text_config=text, vision_config=vision))


def qwen3_vl(cfg):
    """Qwen3-VL whose language model is the text folder's (its RoPE interleaved, 4, 6, 6)."""
    text = {k: v for k, v in cfg.items() if k not in ("architectures", "model_type")}
    text["rope_scaling"] = {"mrope_interleaved": True, "mrope_section": [4, 6, 6], "rope_type": "default"}
    vision = dict(VISION, out_hidden_size=cfg["hidden_size"], deepstack_visual_indexes=[])
    return Qwen3VLForConditionalGeneration(Qwen3VLConfig(text_config=text, vision_config=vision))


def compare(folder, make):
    text = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
    with open(f"{folder}/config.json") as f:
        cfg = json.load(f)
    vl = make(cfg).to(torch.float32)
    weights = {
        ("model.language_model." + k.removeprefix("model.") if k.startswith("model.") else k): v
        for k, v in load_file(f"{folder}/model.safetensors").items()
    }
    missing, unexpected = vl.load_state_dict(weights, strict=False)
    # Only the vision tower (and a tied head) keep their random values.
    assert not unexpected, unexpected
    assert all("visual" in m or m == "lm_head.weight" for m in missing), missing
    ids = torch.tensor([[(i * 97 + 13) % cfg["vocab_size"] for i in range(40)]])
    with torch.no_grad():
        diff = (text.eval()(ids).logits - vl.eval()(input_ids=ids).logits).abs().max()
    print(f"{folder}: {type(vl).__name__} against {type(text).__name__}: {float(diff):.3g}")
    assert diff < 1e-4, diff


if __name__ == "__main__":
    torch.manual_seed(0)
    compare(f"{sys.argv[1]}/qwen2", qwen2_vl)
    compare(f"{sys.argv[1]}/qwen2", qwen2_5_vl)
    compare(f"{sys.argv[1]}/qwen3", qwen3_vl)
