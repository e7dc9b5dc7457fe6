// The fp8 KV cache's elements (KV_BITS = 8): E4M3 bytes, four to a u32, element 4i in the
// lowest byte; encoded and decoded bit for bit as kiln-gpu's fp8.rs does (ties to even,
// magnitudes beyond 448 saturated, never the NaN code; a NaN input is
// left to the device's min()). Appended to the kernels that read or
// write the cache.

// The four elements of a cache word as f32.
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
