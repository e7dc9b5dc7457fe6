// Weight format Q4_1 (GGUF blocks of 32 weights kept as they are, repacked): w = d * q + m.
// Same functions as weights_f16.wgsl. Layout of one chunk, in u32s:
//   quants: (N, K / 8), each block's 16 bytes in file order (byte j: element j in the low
//           nibble, element j + 16 in the high one);
//   scales from `so`: (N, K / 32), d in the low f16 half and m in the high one.

@group(0) @binding(3) var<storage, read> w: array<u32>;

// Four nibbles at bit `sh` of each byte of `word`.
fn nibbles4(word: u32, sh: u32) -> vec4<f32> {
    return vec4<f32>((vec4<u32>(word) >> vec4<u32>(sh, sh + 8u, sh + 16u, sh + 24u)) & vec4<u32>(15u));
}

fn w_pair(n: u32, i: u32, k: u32, so: u32) -> vec2<f32> {
    let b = n * (k / 32u) + i / 16u;
    let j = (2u * i) % 32u; // first element within the block
    let word = w[4u * b + (j % 16u) / 4u];
    let sh = 8u * (j % 4u) + 4u * (j / 16u);
    let q = vec2<f32>(vec2<u32>(word >> sh, word >> (sh + 8u)) & vec2<u32>(15u));
    let dm = unpack2x16float(w[so + b]);
    return q * dm.x + dm.y;
}

fn w_octet(n: u32, c: u32, k: u32, so: u32) -> Octet {
    let b = n * (k / 32u) + c / 4u;
    let o = c % 4u; // octets 0, 1: low nibbles of bytes 0..16; 2, 3: high nibbles
    let base = 4u * b + 2u * (o % 2u);
    let sh = 4u * (o / 2u);
    let dm = unpack2x16float(w[so + b]);
    return Octet(nibbles4(w[base], sh) * dm.x + dm.y, nibbles4(w[base + 1u], sh) * dm.x + dm.y);
}
