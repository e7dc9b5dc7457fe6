// Weight format Q3_K (GGUF super-blocks of 256 weights, repacked): 16 sub-blocks of 16 with a
// signed 6-bit scale each, w = d * scale * (q - 4), q three bits. Same functions as
// weights_f16.wgsl. Layout of one chunk, in u32s:
//   quants: (N, K / 256) blocks of 24 words as in the file: 32 bytes of high bits (`hmask`),
//           then 64 bytes of low bit pairs (`qs`);
//   scales from `so`: (N, K / 256) blocks in pairs of 7 words: the first block's 12 bytes of
//           packed scales, the second's, then both blocks' d (an f16 pair, the first low).
// Element i of a block: half h = i / 128, quarter j = (i % 128) / 32, l = i % 32: its low pair
// is at bit 2j of qs[32h + l], its high bit at bit 4h + j of hmask[l], its scale is sub-block
// s = 8h + 2j + l / 16's: low nibble at bit 4 * (s / 8) of scale byte s % 8, high pair at bit
// 2 * (s / 4) of scale byte 8 + s % 4, minus 32.

@group(0) @binding(3) var<storage, read> w: array<u32>;

// Four fields of `mask` at bit `sh` of each byte of `word`.
fn fields4(word: u32, sh: u32, mask: u32) -> vec4<u32> {
    return (vec4<u32>(word) >> vec4<u32>(sh, sh + 8u, sh + 16u, sh + 24u)) & vec4<u32>(mask);
}

// Where element e of row n lies: its words of hmask and qs, its bits there, and its scale.
struct Place { hm: u32, qs: u32, hbit: u32, qbit: u32, l: u32, scale: f32 }

fn place(n: u32, e: u32, k: u32, so: u32) -> Place {
    let b = n * (k / 256u) + e / 256u;
    let i = e % 256u;
    let h = i / 128u;
    let j = (i % 128u) / 32u;
    let l = i % 32u;
    let s = 8u * h + 2u * j + l / 16u;
    let pair = so + 7u * (b / 2u);
    let sw = pair + 3u * (b % 2u); // the block's first word of scales
    let lo = (w[sw + (s % 8u) / 4u] >> (8u * (s % 4u) + 4u * (s / 8u))) & 15u;
    let hi = (w[sw + 2u] >> (8u * (s % 4u) + 2u * (s / 4u))) & 3u;
    let d = unpack2x16float(w[pair + 6u])[b % 2u];
    let sc = f32(i32(lo | (hi << 4u)) - 32);
    return Place(24u * b + l / 4u, 24u * b + 8u + (32u * h + l) / 4u, 4u * h + j, 2u * j, l, d * sc);
}

// q - 4 of four elements from a word of qs and one of hmask.
fn threes4(qs: u32, hm: u32, pl: Place) -> vec4<f32> {
    let q = fields4(qs, pl.qbit, 3u) | (fields4(hm, pl.hbit, 1u) << vec4<u32>(2u));
    return vec4<f32>(q) - 4.0;
}

fn w_pair(n: u32, i: u32, k: u32, so: u32) -> vec2<f32> {
    let pl = place(n, 2u * i, k, so);
    let sh = 8u * (pl.l % 4u); // the pair's two bytes are in one word
    let q = threes4(w[pl.qs] >> sh, w[pl.hm] >> sh, pl);
    return q.xy * pl.scale;
}

fn w_octet(n: u32, c: u32, k: u32, so: u32) -> Octet {
    let pl = place(n, 8u * c, k, so); // an octet starts a word in hmask and in qs
    let a = threes4(w[pl.qs], w[pl.hm], pl);
    let b = threes4(w[pl.qs + 1u], w[pl.hm + 1u], pl);
    return Octet(a * pl.scale, b * pl.scale);
}
