// Weight format F16, appended by the kernel loader to every kernel that reads a weight matrix
// (see weight_format.rs). Each format file defines the same binding and functions:
//   w_pair(n, i, k, so)  -> elements 2i, 2i+1 of row n (rows of k elements)
//   w_octet(n, c, k, so) -> elements 8c..8c+8 of row n, an `Octet` (octet.wgsl, appended after)
// `so` is where the block scales start in `w`, in u32s (unused here).
// Layout: (N, K / 2) u32, two f16 per word, low half first.

@group(0) @binding(3) var<storage, read> w: array<u32>;

fn w_pair(n: u32, i: u32, k: u32, so: u32) -> vec2<f32> {
    return unpack2x16float(w[n * (k / 2u) + i]);
}

fn w_octet(n: u32, c: u32, k: u32, so: u32) -> Octet {
    let i = n * (k / 2u) + 4u * c;
    return Octet(
        vec4<f32>(unpack2x16float(w[i]), unpack2x16float(w[i + 1u])),
        vec4<f32>(unpack2x16float(w[i + 2u]), unpack2x16float(w[i + 3u])),
    );
}
