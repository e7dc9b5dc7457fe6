// Weight format F16 for kernels that read whole octets (matvec_subgroup.wgsl), appended by the
// kernel loader in place of weights_f16.wgsl where a row is a whole number of 16-byte words
// (K a multiple of 8): one 16-byte load per octet instead of four 4-byte ones, which the
// driver cannot merge once each carries its own bounds check. Same functions as every format
// file (see weights_f16.wgsl).
// Layout: (N, K / 8) vec4<u32>, two f16 per u32, low half first.

@group(0) @binding(3) var<storage, read> w: array<vec4<u32>>;

fn w_pair(n: u32, i: u32, k: u32, so: u32) -> vec2<f32> {
    let j = n * (k / 2u) + i;
    return unpack2x16float(w[j / 4u][j % 4u]);
}

fn w_octet(n: u32, c: u32, k: u32, so: u32) -> Octet {
    let q = w[n * (k / 8u) + c];
    return Octet(
        vec4<f32>(unpack2x16float(q.x), unpack2x16float(q.y)),
        vec4<f32>(unpack2x16float(q.z), unpack2x16float(q.w)),
    );
}
