// Weight format Q8_0 (GGUF blocks of 32 weights kept as they are, repacked): w = d * q, q a
// signed byte. Same functions as weights_f16.wgsl. Layout of one chunk, in u32s:
//   quants: (N, K / 4), four signed bytes per word, element order;
//   scales from `so`: (N * K / 32) f16 values d, two per u32, low half first.

@group(0) @binding(3) var<storage, read> w: array<u32>;

// The four signed bytes of `word`, lowest first.
fn bytes4(word: u32) -> vec4<f32> {
    return vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(word) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u));
}

fn scale(b: u32, so: u32) -> f32 {
    return unpack2x16float(w[so + b / 2u])[b % 2u];
}

fn w_pair(n: u32, i: u32, k: u32, so: u32) -> vec2<f32> {
    let e = n * k + 2u * i; // element index; 32 per block
    let word = w[e / 4u];
    let sh = 8u * (e % 4u);
    let q = bitcast<vec2<i32>>(vec2<u32>(word << (24u - sh), word << (16u - sh))) >> vec2<u32>(24u);
    return vec2<f32>(q) * scale(e / 32u, so);
}

fn w_octet(n: u32, c: u32, k: u32, so: u32) -> Octet {
    let e = n * k + 8u * c;
    let d = scale(e / 32u, so);
    return Octet(bytes4(w[e / 4u]) * d, bytes4(w[e / 4u + 1u]) * d);
}
