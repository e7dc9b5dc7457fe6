// Weight format IQ4_NL (GGUF blocks of 32 weights kept as they are, repacked): w = d *
// IQ4[q], q a nibble indexing sixteen fixed levels (`levels4`: iq4_levels.wgsl). Same
// functions as weights_f16.wgsl, the block walk in nibble_blocks.wgsl (both appended). Layout
// of one chunk, in u32s:
//   quants: (N, K / 8), as nibble_blocks.wgsl says;
//   scales from `so`: (N * K / 32) f16 values d, two per u32, low half first.

@group(0) @binding(3) var<storage, read> w: array<u32>;

fn scale(b: u32, so: u32) -> f32 {
    return unpack2x16float(w[so + b / 2u])[b % 2u];
}
