// Weight format Q6_K (GGUF super-blocks of 256 weights, repacked): 16 sub-blocks of 16 with a
// signed 8-bit scale each, w = d * scale * (q - 32), q six bits. Same functions as
// weights_f16.wgsl. Layout of one chunk, in u32s:
//   quants: (N, K / 256) blocks of 48 words as in the file: 128 bytes of low nibbles (`ql`),
//           then 64 bytes of high bit pairs (`qh`);
//   scales from `so`: (N, K / 256) blocks of 5 words: the 16 scales, then d (low f16 half).
// Element i of a block: half h = i / 128, r = i % 128, quarter q = r / 32, l = r % 32: its low
// nibble is at bit 4 * (q / 2) of ql[64h + 32 * (q % 2) + l], its high pair at bit 2q of
// qh[32h + l], its scale is scales[8h + 2q + l / 16].

@group(0) @binding(3) var<storage, read> w: array<u32>;

// Four fields of `mask` at bit `sh` of each byte of `word`.
fn fields4(word: u32, sh: u32, mask: u32) -> vec4<u32> {
    return (vec4<u32>(word) >> vec4<u32>(sh, sh + 8u, sh + 16u, sh + 24u)) & vec4<u32>(mask);
}

struct Place { ql: u32, qh: u32, q: u32, l: u32, scale: f32 }

fn place(n: u32, e: u32, k: u32, so: u32) -> Place {
    let b = n * (k / 256u) + e / 256u;
    let i = e % 256u;
    let h = i / 128u;
    let q = (i % 128u) / 32u;
    let l = i % 32u;
    let s = 8u * h + 2u * q + l / 16u;
    let sw = w[so + 5u * b + s / 4u];
    let sc = f32(bitcast<i32>(sw << (24u - 8u * (s % 4u))) >> 24u);
    let d = unpack2x16float(w[so + 5u * b + 4u]).x;
    return Place(48u * b + (64u * h + 32u * (q % 2u) + l) / 4u, 48u * b + 32u + (32u * h + l) / 4u, q, l, d * sc);
}

fn w_pair(n: u32, i: u32, k: u32, so: u32) -> vec2<f32> {
    let pl = place(n, 2u * i, k, so);
    let sh = 8u * (pl.l % 4u);
    let lo = vec2<u32>(w[pl.ql] >> (sh + 4u * (pl.q / 2u)), w[pl.ql] >> (sh + 8u + 4u * (pl.q / 2u))) & vec2<u32>(15u);
    let hi = vec2<u32>(w[pl.qh] >> (sh + 2u * pl.q), w[pl.qh] >> (sh + 8u + 2u * pl.q)) & vec2<u32>(3u);
    return (vec2<f32>(lo | (hi << vec2<u32>(4u))) - 32.0) * pl.scale;
}

fn w_octet(n: u32, c: u32, k: u32, so: u32) -> Octet {
    let pl = place(n, 8u * c, k, so); // an octet starts a word in ql and in qh
    let nsh = 4u * (pl.q / 2u);
    let a = fields4(w[pl.ql], nsh, 15u) | (fields4(w[pl.qh], 2u * pl.q, 3u) << vec4<u32>(4u));
    let b = fields4(w[pl.ql + 1u], nsh, 15u) | (fields4(w[pl.qh + 1u], 2u * pl.q, 3u) << vec4<u32>(4u));
    return Octet((vec4<f32>(a) - 32.0) * pl.scale, (vec4<f32>(b) - 32.0) * pl.scale);
}
