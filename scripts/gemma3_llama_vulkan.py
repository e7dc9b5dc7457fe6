"""A third reference for Gemma 3 270M: llama.cpp's Vulkan backend in f32.

Adds to tests/reference/gemma3-270m.json (made by scripts/gemma3_reference.py) what llama.cpp
computes on the same file and the same input ids when it runs every layer on the first Vulkan
device (lavapipe here) with no f16 or 8-bit integer arithmetic and an f32 KV cache: per
prompt its 16 greedy tokens and the top-20 logits of the last prompt position, and the
teacher-forced top-1 token at the long prompt's last 64 positions. Its agreement with the
NumPy pass goes in as "agreement_vulkan_f32". llama.cpp on the CPU, recorded by
gemma3_reference.py, quantizes its matrix products' activations to 8 bits; this one computes
what the file holds, so kiln must agree with it as with NumPy.

Needs llama-cpp-python 0.3.16 built with -DGGML_VULKAN=on (the venv that
`scripts/llama-cpp-compare.sh --vulkan` builds) and gguf:

    ~/.cache/kiln/llama-vk-venv/bin/python scripts/gemma3_llama_vulkan.py \\
        models/gemma-3-270m-Q4_K_M.gguf tests/reference/gemma3-270m.json
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
# Sets the Vulkan backend's switches (the device, no f16, no integer dot products).
import llama_cpp_reference  # noqa: E402,F401
import llama_cpp  # noqa: E402
import numpy as np  # noqa: E402
from gemma3_reference import FORCED_POSITIONS, common_prefix, llama_greedy, top_k  # noqa: E402


def main():
    path, out = sys.argv[1], sys.argv[2]
    t0 = time.time()
    ref = json.load(open(out))
    # GGML_TYPE_F32 for K and V.
    llm = llama_cpp.Llama(model_path=path, n_ctx=1024, n_batch=1024, n_ubatch=1024,
                          logits_all=True, n_gpu_layers=-1, type_k=0, type_v=0, verbose=False)
    agreement = {"greedy_equal_positions": {}, "greedy_common_prefix": {},
                 "last_top20_max_abs_diff": {}}
    for name, p in ref["prompts"].items():
        ids = p["input_ids"]
        llm.reset()
        llm.eval(ids)
        scores = np.asarray(llm.scores[: len(ids)], dtype=np.float64)
        last = scores[-1].copy()
        if name == "long":
            positions = ref["forced"]["positions"]
            top1 = [int(np.argmax(scores[q])) for q in positions]
            ref["forced"]["llama_cpp_vulkan_f32_top1"] = top1
            agree = sum(a == b for a, b in zip(top1, ref["forced"]["numpy_top1"]))
            agreement["forced_top1_agree"] = agree
        del scores
        greedy = llama_greedy(llm)
        tids, tlogits = top_k(last)
        p["llama_cpp_vulkan_f32"] = {"greedy": greedy, "last_top20": {"ids": tids, "logits": tlogits}}
        numpy_ids = p["numpy_last_top20"]["ids"]
        numpy_logits = np.asarray(p["numpy_last_top20"]["logits"])
        diff = float(np.max(np.abs(last[numpy_ids] - numpy_logits)))
        agreement["greedy_equal_positions"][name] = sum(
            a == b for a, b in zip(greedy, p["numpy_greedy"]))
        agreement["greedy_common_prefix"][name] = common_prefix(greedy, p["numpy_greedy"])
        agreement["last_top20_max_abs_diff"][name] = round(diff, 4)
        print(f"llama.cpp vulkan-f32 {name}: greedy {greedy}, "
              f"{agreement['greedy_common_prefix'][name]}/16 as NumPy's, top-20 |diff| {diff:.4f}",
              flush=True)
    print(f"forced top-1 {agreement['forced_top1_agree']}/{FORCED_POSITIONS} as NumPy's", flush=True)
    ref["agreement_vulkan_f32"] = agreement
    ref["how_vulkan_f32"] = (
        "scripts/gemma3_llama_vulkan.py: llama-cpp-python 0.3.16 built with -DGGML_VULKAN=on, every "
        "layer on Vulkan device 0 (lavapipe, Mesa 25), GGML_VK_DISABLE_F16 and "
        "GGML_VK_DISABLE_INTEGER_DOT_PRODUCT set, f32 K and V, n_ctx=n_batch=n_ubatch=1024, on the "
        "prompts' input_ids above; greedy, last_top20 and forced as for llama.cpp on the CPU; "
        "agreement_vulkan_f32 against the NumPy pass (last_top20 at NumPy's top-20 ids)."
    )
    with open(out, "w") as fh:
        json.dump(ref, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    print(f"wrote {out} in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
