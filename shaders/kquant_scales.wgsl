// The sub-block scales of the Q4_K and Q5_K blocks, shared by their format files
// (weights_q4_k.wgsl, weights_q4_kx4.wgsl, weights_q5_k.wgsl): the loader appends this file
// after any of them. A block's first 16 bytes, `head`, hold d and dmin (an f16 pair, word 0)
// and 12 bytes of packed 6-bit scales and mins (words 1 to 3).

// Byte j (0..12) of the scale bytes.
fn k_scale_byte(head: vec4<u32>, j: u32) -> u32 {
    let q = j / 4u;
    let word = select(select(head.y, head.z, q == 1u), head.w, q == 2u);
    return (word >> (8u * (j % 4u))) & 255u;
}

// (d * scale, dmin * min) of sub-block s (0..8).
fn k_sub_scale(head: vec4<u32>, s: u32) -> vec2<f32> {
    var sc: u32;
    var mn: u32;
    if (s < 4u) {
        sc = k_scale_byte(head, s) & 63u;
        mn = k_scale_byte(head, s + 4u) & 63u;
    } else {
        sc = (k_scale_byte(head, s + 4u) & 15u) | ((k_scale_byte(head, s - 4u) >> 6u) << 4u);
        mn = (k_scale_byte(head, s + 4u) >> 4u) | ((k_scale_byte(head, s) >> 6u) << 4u);
    }
    return unpack2x16float(head.x) * vec2<f32>(f32(sc), f32(mn));
}
