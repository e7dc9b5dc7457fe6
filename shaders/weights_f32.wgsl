// Weight format F32, for the rare matrix with values beyond f16's range (|w| > 65504), which
// would become infinities as f16 (weight_format.rs picks it). Same functions as
// weights_f16.wgsl. Layout: (N, K) f32, row-major. `so` is unused.

@group(0) @binding(3) var<storage, read> w: array<f32>;

fn w_pair(n: u32, i: u32, k: u32, so: u32) -> vec2<f32> {
    let j = n * k + 2u * i;
    return vec2<f32>(w[j], w[j + 1u]);
}

fn w_octet(n: u32, c: u32, k: u32, so: u32) -> Octet {
    let j = n * k + 8u * c;
    return Octet(
        vec4<f32>(w[j], w[j + 1u], w[j + 2u], w[j + 3u]),
        vec4<f32>(w[j + 4u], w[j + 5u], w[j + 6u], w[j + 7u]),
    );
}
