"""llama.cpp as the reference for kiln's reading of GGUF LoRA adapter files (run by
scripts/llama-cpp-compare.sh).

Makes an F32 version of the default model with llama.cpp's quantizer (so that llama.cpp's CPU
products run in f32 and its logits are near the exact ones), writes a random rank-8 LoRA
adapter for it with the `gguf` package's writer (every projection of every layer, alpha 16, so
a scale of 2), then runs llama.cpp on the CPU with and without the adapter: greedy tokens for
the reference prompts, the top-1 token at each position of a forced sequence, and the
log-probabilities of the top 20 tokens after the chat prompt. Writes lora.compare.json, which
the Rust test crates/kiln-engine/tests/llama_cpp_lora.rs compares kiln's output with.
"""

import json
import os
import sys

import gguf
import llama_cpp
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from llama_cpp_reference import greedy_and_forced, quantize  # noqa: E402

RANK = 8
ALPHA = 16.0
PROJECTIONS = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"]


def write_adapter(base, path):
    """A random adapter for every projection of `base` (a GGUF model file), as llama.cpp's
    converter lays one out: A is rank x in, B out x rank, named after the model's tensor."""
    reader = gguf.GGUFReader(base)
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
    rng = np.random.default_rng(20261205)
    w = gguf.GGUFWriter(path, arch)
    w.add_type("adapter")
    w.add_string("adapter.type", "lora")
    w.add_float32("adapter.lora.alpha", ALPHA)
    for t in reader.tensors:
        if t.name.split(".")[-2] not in PROJECTIONS:
            continue
        n_in, n_out = int(t.shape[0]), int(t.shape[1])
        a = rng.normal(0, 1 / np.sqrt(n_in), (RANK, n_in)).astype(np.float32)
        b = rng.normal(0, 0.04, (n_out, RANK)).astype(np.float32)
        w.add_tensor(t.name + ".lora_a", a)
        w.add_tensor(t.name + ".lora_b", b)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    m = x.max()
    return x - m - np.log(np.exp(x - m).sum())


def run(path, prompts, forced, chat, lora):
    kw = {"lora_path": lora} if lora else {}
    llm = llama_cpp.Llama(model_path=path, n_ctx=512, logits_all=True, n_threads=os.cpu_count(),
                          n_gpu_layers=0, verbose=False, **kw)
    greedy, scores = greedy_and_forced(llm, prompts, forced)
    last = log_softmax(scores[len(chat) - 1])
    top = np.argsort(-last)[:20]
    return {
        "greedy": greedy,
        "forced_top1": [int(i) for i in np.argmax(scores, axis=1)],
        "chat_top20": {"ids": [int(i) for i in top], "logprobs": [float(last[i]) for i in top]},
    }


def main():
    src, out_dir, reference = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(out_dir, exist_ok=True)
    ref = json.load(open(reference))["prompts"]
    prompts = {name: p["input_ids"] for name, p in ref.items()}
    chat = ref["chat"]["input_ids"]
    forced = chat + ref["chat"]["greedy_32"]["ids"]
    base = os.path.join(out_dir, "SmolLM2-135M-Instruct.F32.gguf")
    quantize(src, base, llama_cpp.LLAMA_FTYPE_ALL_F32)
    adapter = os.path.join(out_dir, "lora-rank8.gguf")
    write_adapter(base, adapter)
    result = {
        "base": os.path.basename(base),
        "adapter": os.path.basename(adapter),
        "forced": forced,
        "chat_len": len(chat),
        "with": run(base, prompts, forced, chat, adapter),
        "without": run(base, prompts, forced, chat, None),
    }
    with open(os.path.join(out_dir, "lora.compare.json"), "w") as f:
        json.dump(result, f)
    for k in ("with", "without"):
        print(f"{k} the adapter: greedy {result[k]['greedy']['chat']['ids'][:8]}...")


if __name__ == "__main__":
    main()
