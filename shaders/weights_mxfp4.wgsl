// Weight format MXFP4 (GGUF blocks of 32 weights kept as they are, repacked): 4-bit E2M1
// values (sign, two exponent bits, one mantissa bit) times a power of two, the block's E8M0
// exponent e: w = v * 2^(e - 127). Same functions as weights_f16.wgsl, the block walk in
// nibble_blocks.wgsl (appended). Layout of one chunk, in u32s:
//   quants: (N, K / 8), as nibble_blocks.wgsl says;
//   scales from `so`: (N * K / 32) exponent bytes e, four per u32, lowest byte first.

@group(0) @binding(3) var<storage, read> w: array<u32>;

// The E2M1 values of four nibbles (0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives) as f32
// bits: an exponent field x above 0 is f32's exponent x - 1 (x + 126 biased), the mantissa bit
// the top one of f32's; x = 0 is 0 or 0.5 (the mantissa bit times 0.5's bits).
fn fp4x4(q: vec4<u32>) -> vec4<f32> {
    let mag = q & vec4<u32>(7u);
    let half = vec4<u32>(0x3F000000u);
    let bits = select((mag << vec4<u32>(22u)) + half, mag * half, mag < vec4<u32>(2u));
    return bitcast<vec4<f32>>(bits | ((q & vec4<u32>(8u)) << vec4<u32>(28u)));
}

// The values of four nibbles at bit `sh` of each byte of `word`.
fn levels4(word: u32, sh: u32) -> vec4<f32> {
    return fp4x4((vec4<u32>(word) >> vec4<u32>(sh, sh + 8u, sh + 16u, sh + 24u)) & vec4<u32>(15u));
}

// Block b's scale, 2^(e - 127): a normal f32 from e = 1, a subnormal for e = 0.
fn scale(b: u32, so: u32) -> f32 {
    let e = (w[so + b / 4u] >> (8u * (b % 4u))) & 255u;
    return bitcast<f32>(select(0x00400000u, e << 23u, e > 0u));
}
