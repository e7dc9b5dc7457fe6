"""llama.cpp as the reference for kiln on quantized files (run by scripts/llama-cpp-compare.sh).

Makes Q4_K_M, Q5_K_M, Q6_K, Q8_0, Q3_K_M, Q2_K, IQ4_XS and IQ4_NL versions of the default
model with llama.cpp's own quantizer (requantizing from its Q4_1 file), and an MXFP4 one with the `gguf` package's
(scripts/requantize.py: llama.cpp's quantizer makes MXFP4 of a mixture of experts' experts
only), then runs llama.cpp on each and on the Q4_1 file
itself: greedy tokens for the reference prompts, and the top-1 token at every position of a
forced sequence (teacher forcing). Writes one JSON per file next to it, which the Rust test
crates/kiln-engine/tests/llama_cpp.rs compares kiln's output with.

Backends (the fourth argument): `cpu` (the default; its matrix products quantize the
activations to 8 bits) or `vulkan-f32` (a build with -DGGML_VULKAN=on, every layer on the first
Vulkan device, in f32: no f16 or 8-bit integer arithmetic, an f32 KV cache), which computes
what the file holds.
"""

import ctypes
import json
import os
import shutil
import subprocess
import sys

# llama.cpp's Vulkan backend skips CPU devices (lavapipe) unless one is named, and uses f16
# and 8-bit integer arithmetic where the device has them, unless told not to.
os.environ.setdefault("GGML_VK_VISIBLE_DEVICES", "0")
os.environ["GGML_VK_DISABLE_F16"] = "1"
os.environ["GGML_VK_DISABLE_INTEGER_DOT_PRODUCT"] = "1"

import llama_cpp  # noqa: E402
import numpy as np  # noqa: E402

TYPES = {
    "Q4_1": None,  # the default model's own file, as it is
    "Q4_K_M": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M,
    "Q5_K_M": llama_cpp.LLAMA_FTYPE_MOSTLY_Q5_K_M,
    "Q6_K": llama_cpp.LLAMA_FTYPE_MOSTLY_Q6_K,
    "Q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0,
    "Q3_K_M": llama_cpp.LLAMA_FTYPE_MOSTLY_Q3_K_M,
    "Q2_K": llama_cpp.LLAMA_FTYPE_MOSTLY_Q2_K,
    "IQ4_XS": llama_cpp.LLAMA_FTYPE_MOSTLY_IQ4_XS,
    "IQ4_NL": llama_cpp.LLAMA_FTYPE_MOSTLY_IQ4_NL,
    "MXFP4": "gguf",  # every matrix, by the gguf package's quantizer
}
GREEDY_TOKENS = 16


def quantize(src, dst, ftype):
    if os.path.exists(dst):
        return
    if ftype is None:
        shutil.copyfile(src, dst)
        return
    if ftype == "gguf":
        requantize = os.path.join(os.path.dirname(__file__), "requantize.py")
        name = os.path.basename(dst).split(".")[-2]
        subprocess.run([sys.executable, requantize, src, dst + ".part", name], check=True,
                       stderr=subprocess.DEVNULL)
        os.rename(dst + ".part", dst)
        return
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.allow_requantize = True
    params.nthread = os.cpu_count() or 1
    rc = llama_cpp.llama_model_quantize(src.encode(), (dst + ".part").encode(), ctypes.byref(params))
    if rc != 0:
        sys.exit(f"llama_model_quantize({dst}) failed: {rc}")
    os.rename(dst + ".part", dst)


def greedy_and_forced(llm, prompts, forced):
    """llm's greedy tokens for each prompt, and its scores at every position of `forced`."""
    greedy = {}
    for name, ids in prompts.items():
        llm.reset()
        llm.eval(ids)
        out = []
        for _ in range(GREEDY_TOKENS):
            tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
            out.append(tok)
            llm.eval([tok])
        greedy[name] = {"prompt": ids, "ids": out}
    llm.reset()
    llm.eval(forced)
    return greedy, np.array(llm.scores[: len(forced)])


def run(path, prompts, forced, backend):
    gpu = {"cpu": {"n_gpu_layers": 0},
           # GGML_TYPE_F32 for K and V.
           "vulkan-f32": {"n_gpu_layers": -1, "type_k": 0, "type_v": 0}}[backend]
    llm = llama_cpp.Llama(model_path=path, n_ctx=256, logits_all=True, n_threads=os.cpu_count(),
                          verbose=False, **gpu)
    greedy, scores = greedy_and_forced(llm, prompts, forced)
    last = scores[len(prompts["chat"]) - 1]
    top = np.argsort(-last)[:20]
    return {
        "greedy": greedy,
        "forced": {
            "ids": forced,
            "top1": [int(i) for i in np.argmax(scores, axis=1)],
        },
        "chat_last_top20": {"ids": [int(i) for i in top], "logits": [float(last[i]) for i in top]},
    }


def main():
    src, out_dir, reference = sys.argv[1], sys.argv[2], sys.argv[3]
    backend = sys.argv[4] if len(sys.argv) > 4 else "cpu"
    os.makedirs(out_dir, exist_ok=True)
    ref = json.load(open(reference))["prompts"]
    prompts = {name: p["input_ids"] for name, p in ref.items()}
    # Forced sequence: the chat prompt and the reference model's greedy continuation.
    forced = ref["chat"]["input_ids"] + ref["chat"]["greedy_32"]["ids"]
    only = os.environ.get("KILN_LLAMA_CPP_TYPES")  # e.g. "MXFP4,Q8_0": those files alone
    for name, ftype in TYPES.items():
        if only and name not in only.split(","):
            continue
        path = os.path.join(out_dir, f"SmolLM2-135M-Instruct.{name}.gguf")
        quantize(src, path, ftype)
        result = {"type": name, "file": os.path.basename(path), "backend": backend,
                  **run(path, prompts, forced, backend)}
        with open(path + ".llama-cpp.json", "w") as f:
            json.dump(result, f)
        print(f"{name}: {os.path.getsize(path)} bytes, greedy {result['greedy']['chat']['ids'][:8]}...")


if __name__ == "__main__":
    main()
