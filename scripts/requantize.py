"""Writes a copy of a GGUF model with its quantized matrices requantized to another type, by
the PyPI `gguf` package's own dequantizer and quantizer (no llama.cpp build): every tensor of
a quantized type becomes TYPE where its row length allows; float tensors stay as they are.
For speed comparisons between weight types of the same model (BENCHMARKS.md), not accuracy.

usage: scripts/gguf-py.sh scripts/requantize.py IN.gguf OUT.gguf Q8_0|F16
"""

import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader, GGUFValueType, GGUFWriter
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

src, dst, name = sys.argv[1], sys.argv[2], sys.argv[3]
target = T[name]
reader = GGUFReader(src)
arch = reader.fields["general.architecture"].contents()
writer = GGUFWriter(dst, arch)
for key, field in reader.fields.items():
    if key.startswith("GGUF.") or key == "general.architecture":
        continue
    kind = field.types[0]
    if kind == GGUFValueType.ARRAY:
        writer.add_array(key, field.contents())
    else:
        writer.add_key_value(key, field.contents(), kind)
FLOATS = (T.F32, T.F16, T.BF16)
block = GGML_QUANT_SIZES[target][0]
for t in reader.tensors:
    shape = [int(x) for x in reversed(t.shape.tolist())]  # numpy order: rows, columns
    if t.tensor_type in FLOATS or shape[-1] % block != 0:
        writer.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
        continue
    values = dequantize(t.data, t.tensor_type).reshape(shape).astype(np.float32)
    if target == T.F16:
        writer.add_tensor(t.name, values.astype(np.float16))
    else:
        q = quantize(values, target)
        writer.add_tensor(t.name, q, raw_shape=q.shape, raw_dtype=target)
    print(f"{t.name}: {t.tensor_type.name} -> {target.name}", file=sys.stderr)
writer.write_header_to_file()
writer.write_kv_data_to_file()
writer.write_tensors_to_file()
writer.close()
