// Blocks of 32 four-bit codes with one scale each, as Q4_0, IQ4_NL and MXFP4 keep them:
// quants (N, K / 8) in u32s, each block's 16 bytes in file order (byte j: element j in the
// low nibble, element j + 16 in the high one). Each of those format files defines what sets
// it apart, `levels4(word, sh)` (the values of the four codes at bit `sh` of each byte of
// `word`) and `scale(b, so)` (block b's scale); the loader appends this file to theirs.

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
