// Weight format Q5_0 (GGUF blocks of 32 weights kept as they are, repacked): w = d * (q - 16),
// q five bits. Same functions as weights_f16.wgsl. Layout of one chunk, in u32s:
//   quants: (N, K / 32) blocks of 5 words: the 32 high bits (bit e: element e), then the 16
//           bytes of low nibbles in file order (byte j: element j low, element j + 16 high);
//   scales from `so`: (N * K / 32) f16 values d, two per u32, low half first.

@group(0) @binding(3) var<storage, read> w: array<u32>;

fn scale(b: u32, so: u32) -> f32 {
    return unpack2x16float(w[so + b / 2u])[b % 2u];
}

// Four 5-bit values minus 16: nibbles at bit `sh` of each byte of `word`, high bits from the
// low four bits of `hb`.
fn fives4(word: u32, sh: u32, hb: u32) -> vec4<f32> {
    let lo = (vec4<u32>(word) >> vec4<u32>(sh, sh + 8u, sh + 16u, sh + 24u)) & vec4<u32>(15u);
    let hi = (vec4<u32>(hb) >> vec4<u32>(0u, 1u, 2u, 3u)) & vec4<u32>(1u);
    return vec4<f32>(lo | (hi << vec4<u32>(4u))) - 16.0;
}

fn w_pair(n: u32, i: u32, k: u32, so: u32) -> vec2<f32> {
    let b = n * (k / 32u) + i / 16u;
    let e = (2u * i) % 32u; // first element within the block
    let qh = w[5u * b];
    let word = w[5u * b + 1u + (e % 16u) / 4u];
    let sh = 8u * (e % 4u) + 4u * (e / 16u);
    let lo = vec2<u32>(word >> sh, word >> (sh + 8u)) & vec2<u32>(15u);
    let hi = vec2<u32>(qh >> e, qh >> (e + 1u)) & vec2<u32>(1u);
    return (vec2<f32>(lo | (hi << vec2<u32>(4u))) - 16.0) * scale(b, so);
}

fn w_octet(n: u32, c: u32, k: u32, so: u32) -> Octet {
    let b = n * (k / 32u) + c / 4u;
    let o = c % 4u; // octets 0, 1: low nibbles of bytes 0..16; 2, 3: high nibbles
    let base = 5u * b + 1u + 2u * (o % 2u);
    let sh = 4u * (o / 2u);
    let hb = w[5u * b] >> (8u * o);
    let d = scale(b, so);
    return Octet(fives4(w[base], sh, hb) * d, fives4(w[base + 1u], sh, hb >> 4u) * d);
}
