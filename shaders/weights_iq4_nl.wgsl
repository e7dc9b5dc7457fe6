// Weight format IQ4_NL (GGUF blocks of 32 weights kept as they are, repacked): w = d *
// IQ4[q], q a nibble indexing sixteen fixed levels (iq4_levels.wgsl). Same functions as
// weights_f16.wgsl. Layout of one chunk, in u32s:
//   quants: (N, K / 8), each block's 16 bytes in file order (byte j: element j in the low
//           nibble, element j + 16 in the high one);
//   scales from `so`: (N * K / 32) f16 values d, two per u32, low half first.

@group(0) @binding(3) var<storage, read> w: array<u32>;

struct Octet { a: vec4<f32>, b: vec4<f32> }

// The levels of four nibbles at bit `sh` of each byte of `word`: iq4_levels.wgsl, appended.

fn scale(b: u32, so: u32) -> f32 {
    return unpack2x16float(w[so + b / 2u])[b % 2u];
}

fn w_pair(n: u32, i: u32, k: u32, so: u32) -> vec2<f32> {
    let b = n * (k / 32u) + i / 16u;
    let j = (2u * i) % 32u; // first element within the block
    let word = w[4u * b + (j % 16u) / 4u];
    let sh = 8u * (j % 4u) + 4u * (j / 16u);
    return levels4(word >> sh, 0u).xy * scale(b, so);
}

fn w_octet(n: u32, c: u32, k: u32, so: u32) -> Octet {
    let b = n * (k / 32u) + c / 4u;
    let o = c % 4u; // octets 0, 1: low nibbles of bytes 0..16; 2, 3: high nibbles
    let base = 4u * b + 2u * (o % 2u);
    let sh = 4u * (o / 2u);
    let d = scale(b, so);
    return Octet(levels4(w[base], sh) * d, levels4(w[base + 1u], sh) * d);
}
