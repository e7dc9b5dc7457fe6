#!/usr/bin/env python3
"""Regenerates crates/kiln-model/tests/data/dequant/: quantized rows and the floats the `gguf`
package (PyPI, gguf.quants.dequantize) decodes them to, for the test `dequant_gguf_py`.

Cases per type: rows cut from real GGUF files given on the command line (made by llama.cpp's
quantizer), rows of real weights quantized by gguf.quants.quantize where it supports the type,
rows of real weights quantized by llama.cpp's own reference quantizers (ggml's
`quantize_row_<type>_ref`, called through ctypes) when KILN_GGML_LIB names a libggml-base.so
(llama-cpp-python's has them), and blocks of random bits (every bit pattern of the quants,
scales in a sane range).

    KILN_GGML_LIB=~/.cache/kiln/llama-vk-venv/lib/python3.11/site-packages/llama_cpp/lib/libggml-base.so \
    scripts/gguf-py.sh scripts/dequant-fixtures.py models/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import ctypes
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES

OUT = os.path.join(os.path.dirname(__file__), "..", "crates", "kiln-model", "tests", "data", "dequant")
TYPES = [T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q4_K, T.Q5_K, T.Q6_K, T.MXFP4, T.Q3_K, T.Q2_K, T.IQ4_NL, T.IQ4_XS]
# Byte ranges of the f16 fields of each block (random bits there could be NaN or huge).
F16_FIELDS = {T.Q8_0: [0], T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2],
              T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208], T.MXFP4: [], T.Q3_K: [108], T.Q2_K: [80, 82], T.IQ4_NL: [0], T.IQ4_XS: [0]}
# Byte offsets of the E8M0 exponents of each block (random ones span 2^-127 to 2^127).
E8M0_FIELDS = {T.MXFP4: [0]}
MAX_ROWS = 3
cases = []


def write(name, qtype, raw, cols, source):
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    bs, bb = GGML_QUANT_SIZES[qtype]
    want = gguf.quants.dequantize(raw.reshape(-1, cols // bs * bb), qtype)
    want = np.asarray(want, dtype=np.float32).reshape(-1)
    assert want.size == raw.size // bb * bs
    raw.tofile(os.path.join(OUT, name + ".q"))
    want.astype("<f4").tofile(os.path.join(OUT, name + ".f32"))
    cases.append(f"{name} {qtype.name} {cols} {source}")


def from_file(path):
    reader = gguf.GGUFReader(path)
    base = os.path.basename(path)
    seen = set()
    for t in reader.tensors:
        if t.tensor_type not in TYPES or t.tensor_type in seen:
            continue
        seen.add(t.tensor_type)
        cols = int(t.shape[0])
        bs, bb = GGML_QUANT_SIZES[t.tensor_type]
        row_bytes = cols // bs * bb
        raw = np.asarray(t.data, dtype=np.uint8).reshape(-1)[: MAX_ROWS * row_bytes]
        stem = base.replace(".gguf", "").replace(".", "_")
        write(f"file_{stem}_{t.tensor_type.name}", t.tensor_type, raw, cols, f"{base}:{t.name}")


def random_blocks(rng):
    for qtype in TYPES:
        bs, bb = GGML_QUANT_SIZES[qtype]
        n_blocks = 12
        raw = rng.integers(0, 256, size=(n_blocks, bb), dtype=np.uint8)
        for at in F16_FIELDS[qtype]:
            vals = rng.uniform(-0.05, 0.05, size=n_blocks).astype(np.float16)
            raw[:, at:at + 2] = vals.view(np.uint8).reshape(n_blocks, 2)
        for at in E8M0_FIELDS.get(qtype, []):
            raw[:, at] = rng.integers(118, 131, size=n_blocks, dtype=np.uint8)
        write(f"random_{qtype.name}", qtype, raw.reshape(-1), bs * 3, "random bits")


def requantized(path, rng):
    """Real weights (dequantized from `path`) quantized by the gguf package itself."""
    reader = gguf.GGUFReader(path)
    t = next(t for t in reader.tensors if t.name == "blk.0.attn_q.weight")
    cols = int(t.shape[0])
    w = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(-1, cols)[:MAX_ROWS]
    for qtype in TYPES:
        try:
            raw = gguf.quants.quantize(w.astype(np.float32), qtype)
        except (NotImplementedError, gguf.quants.QuantError):
            continue
        write(f"gguf_quantize_{qtype.name}", qtype, np.asarray(raw).reshape(-1), cols, f"gguf.quants.quantize of {os.path.basename(path)}:{t.name}")


def ggml_quantized(path):
    """Real weights (dequantized from `path`) quantized by ggml's reference quantizers."""
    lib = ctypes.CDLL(os.environ["KILN_GGML_LIB"])
    reader = gguf.GGUFReader(path)
    t = next(t for t in reader.tensors if t.name == "blk.0.ffn_down.weight")
    cols = int(t.shape[0])
    w = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(-1, cols)[:MAX_ROWS]
    w = np.ascontiguousarray(w, dtype=np.float32)
    for qtype in TYPES:
        bs, bb = GGML_QUANT_SIZES[qtype]
        if cols % bs:
            continue
        fn = getattr(lib, f"quantize_row_{qtype.name.lower().replace('_k', '_K')}_ref")
        out = np.zeros(w.size // bs * bb, dtype=np.uint8)
        fn(w.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(w.size))
        write(f"ggml_quantize_{qtype.name}", qtype, out, cols, f"ggml's quantize_row_{qtype.name.lower()}_ref of {os.path.basename(path)}:{t.name}")


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.remove(os.path.join(OUT, f))
    rng = np.random.default_rng(9)
    random_blocks(rng)
    if len(sys.argv) > 1:
        requantized(sys.argv[1], rng)
        if os.environ.get("KILN_GGML_LIB"):
            ggml_quantized(sys.argv[1])
    for path in sys.argv[1:]:
        from_file(path)
    with open(os.path.join(OUT, "cases.txt"), "w") as f:
        f.write(f"# name type cols source  (gguf {gguf.__version__ if hasattr(gguf, '__version__') else 'PyPI'}; scripts/dequant-fixtures.py)\n")
        f.write("\n".join(cases) + "\n")
    print(f"{len(cases)} cases in {OUT}")


if __name__ == "__main__":
    main()
