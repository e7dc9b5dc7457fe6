// The KV cache's element types (KV_TYPE, an override constant of each kernel that reads or
// writes the cache; kiln-gpu's kv_layout.rs owns the layout): f32 bits, f16 pairs, fp8
// (E4M3) and q8_0 (signed bytes with an f16 scale per 32) quadruples, element 4i in the
// lowest byte. Appended to those kernels. Encoded and decoded as fp8.rs and q8.rs do.

const KV_F32: u32 = 0u;
const KV_F16: u32 = 1u;
const KV_FP8: u32 = 2u;
const KV_Q8: u32 = 3u;

// fp8 (E4M3): ties to even, magnitudes beyond 448 saturated, never the NaN code (a NaN input
// is left to the device's min()).

// The four elements of an fp8 word as f32.
fn fp8x4_unpack(w: u32) -> vec4<f32> {
    let b = (vec4<u32>(w) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xffu);
    let mag = b & vec4<u32>(0x7fu);
    // Normal codes: exponent and mantissa moved into an f32's, the bias 7 raised to 127.
    let normal = bitcast<vec4<f32>>((mag << vec4<u32>(20u)) + vec4<u32>(120u << 23u));
    // Subnormal codes: multiples of 2^-9.
    let v = select(normal, vec4<f32>(mag) * (1.0 / 512.0), mag < vec4<u32>(8u));
    return select(v, -v, b >= vec4<u32>(0x80u));
}

// The code of one value, in the low byte.
fn fp8_code(x: f32) -> u32 {
    let sign = (bitcast<u32>(x) >> 24u) & 0x80u;
    let a = min(abs(x), 448.0);
    if (a < 0.015625) {
        return sign | u32(round(a * 512.0));
    }
    let bits = bitcast<u32>(a);
    let rounded = (bits + 0x7ffffu + ((bits >> 20u) & 1u)) >> 20u;
    return sign | (rounded - (120u << 3u));
}

// Two values as the low 16 bits of a word (the first in the low byte).
fn fp8x2_pack(v: vec2<f32>) -> u32 {
    return fp8_code(v.x) | (fp8_code(v.y) << 8u);
}

// Four values as one cache word.
fn fp8x4_pack(v: vec4<f32>) -> u32 {
    return fp8x2_pack(v.xy) | (fp8x2_pack(v.zw) << 16u);
}

// q8_0: a block is 16 slot rows of bytes, then one row (as many bytes) of the slots' scales,
// slot i's row_words / 4 scale words at i * row_words / 16 of it (row_words: a row's words,
// a multiple of 16).

// The cache row holding slot `slot`'s bytes.
fn q8_row(slot: u32) -> u32 {
    return slot + slot / 16u;
}

// The word holding the scale of group g (32 elements) of slot `slot`, which is half g % 2.
fn q8_scale_word(slot: u32, g: u32, row_words: u32) -> u32 {
    return (17u * (slot / 16u) + 16u) * row_words + (slot % 16u) * (row_words / 16u) + g / 2u;
}

// The four elements of a q8_0 word, times their group's scale.
fn q8x4_unpack(w: u32, scale: f32) -> vec4<f32> {
    let b = bitcast<vec4<i32>>(vec4<u32>(w) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u);
    return vec4<f32>(b) * scale;
}

// The scales of two groups as the word the cache holds: their largest magnitudes times 1 / 127
// (as q8.rs computes them), as f16.
fn q8_scales(max_abs: vec2<f32>) -> u32 {
    return pack2x16float(max_abs * (1.0 / 127.0));
}

// The f16 at bits 16 i of `w`, decoded with integer operations: a compiler may fold
// unpack2x16float(pack2x16float(x)) into x (lavapipe does), and the values must be quantized
// with the scale the cache keeps.
fn q8_scale_of(w: u32, i: u32) -> f32 {
    let h = (w >> (16u * i)) & 0xffffu;
    let mag = h & 0x7fffu;
    var v = f32(mag) * (1.0 / 16777216.0); // subnormal: a multiple of 2^-24
    if (mag >= 0x400u) {
        v = bitcast<f32>((mag << 13u) + (112u << 23u));
    }
    return select(v, -v, h >= 0x8000u);
}

// Four values in steps of `scale` (ties to even, within +-127) as one word.
fn q8x4_pack(v: vec4<f32>, scale: f32) -> u32 {
    if (scale == 0.0) {
        return 0u;
    }
    let q = vec4<i32>(clamp(round(v / scale), vec4<f32>(-127.0), vec4<f32>(127.0)));
    let b = bitcast<vec4<u32>>(q) & vec4<u32>(0xffu);
    return b.x | (b.y << 8u) | (b.z << 16u) | (b.w << 24u);
}
