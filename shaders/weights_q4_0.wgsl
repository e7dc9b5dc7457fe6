// Weight format Q4_0 (GGUF blocks of 32 weights kept as they are, repacked): w = d * (q - 8).
// Same functions as weights_f16.wgsl, the block walk in nibble_blocks.wgsl (appended). Layout
// of one chunk, in u32s:
//   quants: (N, K / 8), as nibble_blocks.wgsl says;
//   scales from `so`: (N * K / 32) f16 values d, two per u32, low half first.

@group(0) @binding(3) var<storage, read> w: array<u32>;

// Four nibbles at bit `sh` of each byte of `word`, minus 8.
fn levels4(word: u32, sh: u32) -> vec4<f32> {
    return vec4<f32>((vec4<u32>(word) >> vec4<u32>(sh, sh + 8u, sh + 16u, sh + 24u)) & vec4<u32>(15u)) - 8.0;
}

fn scale(b: u32, so: u32) -> f32 {
    return unpack2x16float(w[so + b / 2u])[b % 2u];
}
