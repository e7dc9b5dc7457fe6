// Weight format Q2_K (GGUF super-blocks of 256 weights, repacked): 16 sub-blocks of 16 with a
// 4-bit scale and a 4-bit minimum each, w = d * scale * q - dmin * min, q two bits. Same
// functions as weights_f16.wgsl. Layout of one chunk, in u32s:
//   quants: (N, K / 256) blocks of 17 words as in the file past its scales: 64 bytes of bit
//           pairs (`qs`), then d and dmin (an f16 pair);
//   scales from `so`: (N, K / 256) blocks of 4 words: the 16 sub-blocks' bytes, scale in the
//           low nibble, minimum in the high one.
// Element i of a block: half h = i / 128, quarter j = (i % 128) / 32, l = i % 32: its pair is
// at bit 2j of qs[32h + l], its sub-block is 8h + 2j + l / 16.

@group(0) @binding(3) var<storage, read> w: array<u32>;

// Four fields of `mask` at bit `sh` of each byte of `word`.
fn fields4(word: u32, sh: u32, mask: u32) -> vec4<u32> {
    return (vec4<u32>(word) >> vec4<u32>(sh, sh + 8u, sh + 16u, sh + 24u)) & vec4<u32>(mask);
}

// Where element e of row n lies: its word of qs and bit there, its step and what it subtracts.
struct Place { qs: u32, bit: u32, l: u32, step: f32, min: f32 }

fn place(n: u32, e: u32, k: u32, so: u32) -> Place {
    let b = n * (k / 256u) + e / 256u;
    let i = e % 256u;
    let h = i / 128u;
    let j = (i % 128u) / 32u;
    let l = i % 32u;
    let s = 8u * h + 2u * j + l / 16u;
    let sc = (w[so + 4u * b + s / 4u] >> (8u * (s % 4u))) & 255u;
    let dm = unpack2x16float(w[17u * b + 16u]);
    return Place(17u * b + (32u * h + l) / 4u, 2u * j, l, dm.x * f32(sc & 15u), dm.y * f32(sc >> 4u));
}

fn w_pair(n: u32, i: u32, k: u32, so: u32) -> vec2<f32> {
    let pl = place(n, 2u * i, k, so);
    let q = fields4(w[pl.qs] >> (8u * (pl.l % 4u)), pl.bit, 3u); // the pair's bytes: one word
    return vec2<f32>(q.xy) * pl.step - pl.min;
}

fn w_octet(n: u32, c: u32, k: u32, so: u32) -> Octet {
    let pl = place(n, 8u * c, k, so); // an octet starts a word of qs
    let a = vec4<f32>(fields4(w[pl.qs], pl.bit, 3u));
    let b = vec4<f32>(fields4(w[pl.qs + 1u], pl.bit, 3u));
    return Octet(a * pl.step - pl.min, b * pl.step - pl.min);
}
