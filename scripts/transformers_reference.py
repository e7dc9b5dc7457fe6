"""Logits of kiln's tiny random Hugging Face folders from Hugging Face transformers itself.

Writes tests/reference/tiny-transformers.json, which the `transformers` test of kiln-gpu
(crates/kiln-gpu/tests/transformers.rs) compares kiln's CPU reference forward pass with. The
folders are kiln_model::testing::transformers_cases(): one per architecture kiln runs and per
feature that changes the forward pass (Llama 3 RoPE scaling with tied embeddings, Mistral's
window, Qwen2's biases and its window from max_window_layers on, Qwen3's q/k norms, Cohere's
LayerNorm and sub-layers side by side, Gemma 2's
soft caps, Gemma 3 with and without linear RoPE scaling, SmolLM3's layers without RoPE (with and
without YaRN), Granite's multipliers, Phi-3's LongRoPE with its default and a given attention
factor, Phi-4-mini's partial rotary embedding, YaRN on Qwen3 and, with its ramp not truncated and
a given attention factor, on Llama; OLMo 2's norms; gpt-oss, whose folder is written in
transformers' layout for this script while kiln reads the same values from the GGUF file beside
it; MiniCPM, which transformers does not have (its modeling code comes with its checkpoints):
its config's scale_emb, scale_depth and dim_model_base are turned into the Granite model they
describe, as MiniCPM's forward pass is Granite's with those multipliers, and that runs;
InternLM2, which transformers does not have either: its folder is written as the Llama model
it is, each KV group's queries, key and value in `wqkv` split into q_proj, k_proj and v_proj,
its names Llama's). Each runs one sequence of 72 token ids
(past LongRoPE's original context of 64, so
transformers uses the long factors, as kiln does for these models) in float32 with eager
attention; the file keeps the logits at a few positions, the token ids, the CRC-32 of each
folder's model.safetensors (so a change to kiln's random-model writer shows as that, not as
a numerical difference), the config.json transformers itself writes for the model (its own
format: transformers 5 moves the RoPE entries into `rope_parameters`, which kiln must read
alike) and the versions used.

    cargo run -p kiln-model --example transformers_cases -- /tmp/tfcases
    python3 -m venv ~/.cache/kiln/hf-venv
    ~/.cache/kiln/hf-venv/bin/pip install torch transformers safetensors numpy
    ~/.cache/kiln/hf-venv/bin/python scripts/transformers_reference.py /tmp/tfcases \\
        tests/reference/tiny-transformers.json
"""

import argparse
import json
import os
import tempfile
import zlib

import torch
import transformers
from transformers import AutoModelForCausalLM

TOKENS = 72
POSITIONS = [0, 12, 31, 63, 64, 71]


def minicpm_as_granite(folder, out):
    """Writes MiniCPM's folder as the Granite model it is into `out`; False for others.

    MiniCPM multiplies the embeddings by scale_emb, each sub-layer's output by
    scale_depth / sqrt(num_hidden_layers) into the residual stream, and divides the logits by
    hidden_size / dim_model_base; its attention scale is 1/sqrt(head_dim) (Granite's
    attention multiplier)."""
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    if config["model_type"] != "minicpm":
        return False
    head_dim = config.get("head_dim", config["hidden_size"] // config["num_attention_heads"])
    config.update(
        architectures=["GraniteForCausalLM"],
        model_type="granite",
        embedding_multiplier=config.pop("scale_emb"),
        residual_multiplier=config.pop("scale_depth") / config["num_hidden_layers"] ** 0.5,
        logits_scaling=config["hidden_size"] / config.pop("dim_model_base"),
        attention_multiplier=head_dim**-0.5,
    )
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f)
    os.symlink(os.path.join(folder, "model.safetensors"), os.path.join(out, "model.safetensors"))
    return True


def internlm2_as_llama(folder, out):
    """Writes InternLM2's folder as the Llama model it is into `out`; False for others.

    InternLM2 is Llama's layer under other names, with q, k and v in one tensor, `wqkv`,
    whose rows are grouped by KV head: each group's query heads, then its key head and its
    value head. Its "dynamic" RoPE scaling changes nothing within the trained context, as
    transformers' Llama reads it too."""
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    if config["model_type"] != "internlm2":
        return False
    from safetensors.torch import load_file, save_file

    heads, kv = config["num_attention_heads"], config["num_key_value_heads"]
    d = config["hidden_size"] // heads
    names = {
        "attention.wo": "self_attn.o_proj",
        "attention_norm": "input_layernorm",
        "ffn_norm": "post_attention_layernorm",
        "feed_forward.w1": "mlp.gate_proj",
        "feed_forward.w3": "mlp.up_proj",
        "feed_forward.w2": "mlp.down_proj",
    }
    llama = {}
    for name, t in load_file(os.path.join(folder, "model.safetensors")).items():
        if name == "model.tok_embeddings.weight":
            llama["model.embed_tokens.weight"] = t
        elif name == "output.weight":
            llama["lm_head.weight"] = t
        elif name.endswith(".attention.wqkv.weight"):
            base = name.removesuffix("attention.wqkv.weight")
            groups = t.reshape(kv, heads // kv + 2, d, t.shape[-1])
            llama[base + "self_attn.q_proj.weight"] = groups[:, :-2].reshape(-1, t.shape[-1])
            llama[base + "self_attn.k_proj.weight"] = groups[:, -2].reshape(-1, t.shape[-1])
            llama[base + "self_attn.v_proj.weight"] = groups[:, -1].reshape(-1, t.shape[-1])
        else:
            stem, suffix = name.rsplit(".", 1)
            layer = next((k for k in names if stem.endswith("." + k)), None)
            if layer:
                stem = stem.removesuffix(layer) + names[layer]
            llama[stem + "." + suffix] = t
    save_file({k: v.contiguous() for k, v in llama.items()}, os.path.join(out, "model.safetensors"))
    config.update(architectures=["LlamaForCausalLM"], model_type="llama", attention_bias=False)
    config.pop("bias", None)
    config.pop("auto_map", None)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f)
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", help="the folder the transformers_cases example wrote")
    ap.add_argument("out", help="the JSON file to write")
    args = ap.parse_args()

    torch.manual_seed(0)
    cases = {}
    for name in sorted(os.listdir(args.cases)):
        folder = os.path.join(args.cases, name)
        with open(os.path.join(folder, "config.json")) as f:
            vocab = json.load(f)["vocab_size"]
        ids = [(i * 97 + 13) % vocab for i in range(TOKENS)]
        with open(os.path.join(folder, "model.safetensors"), "rb") as f:
            crc = zlib.crc32(f.read())
        stand_in = tempfile.TemporaryDirectory()
        if any(
            as_other(folder, stand_in.name)
            for as_other in (minicpm_as_granite, internlm2_as_llama)
        ):
            folder = stand_in.name
        model, info = AutoModelForCausalLM.from_pretrained(
            folder,
            dtype=torch.float32,
            attn_implementation="eager",
            pad_token_id=0,
            output_loading_info=True,
        )
        # Every weight from the folder, none left at its random initialization.
        assert not info["missing_keys"] and not info["unexpected_keys"], (name, info)
        model.eval()
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0]
        with tempfile.TemporaryDirectory() as saved:
            model.config.save_pretrained(saved)
            with open(os.path.join(saved, "config.json")) as f:
                saved_config = json.load(f)
        cases[name] = {
            "class": type(model).__name__,
            "saved_config": saved_config,
            "crc32": crc,
            "tokens": ids,
            "logits": [[float(f"{x:.6g}") for x in logits[p].tolist()] for p in POSITIONS],
        }
        print(f"{name}: {type(model).__name__}, max |logit| {logits.abs().max().item():.3f}")

    out = {
        "made_by": "scripts/transformers_reference.py",
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "seed": 7,
        "positions": POSITIONS,
        "cases": cases,
    }
    with open(args.out, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
