// Weight format IQ4_XS (GGUF super-blocks of 256 weights, repacked): 8 sub-blocks of 32 with
// a signed 6-bit scale each, w = d * scale * IQ4[q], q a nibble indexing IQ4_NL's sixteen
// levels. Same functions as weights_f16.wgsl. Layout of one chunk, in u32s:
//   quants: (N, K / 256) blocks of 32 words as in the file: each sub-block's 16 bytes (byte j:
//           element j in the low nibble, element j + 16 in the high one);
//   scales from `so`: (N, K / 256) blocks of 2 words: d (low f16 half) and scales_h (high
//           half: bits 2ib, 2ib + 1 are sub-block ib's top two), then scales_l (nibble ib:
//           sub-block ib's low four bits).

@group(0) @binding(3) var<storage, read> w: array<u32>;

// The levels of four nibbles at bit `sh` of each byte of `word`: iq4_levels.wgsl, appended.

// Where element e of row n lies: the word of its byte, the nibble's bit, and its step.
struct Place { word: u32, sh: u32, step: f32 }

fn place(n: u32, e: u32, k: u32, so: u32) -> Place {
    let b = n * (k / 256u) + e / 256u;
    let i = e % 256u;
    let ib = i / 32u;
    let j = i % 32u;
    let head = w[so + 2u * b];
    let lo = (w[so + 2u * b + 1u] >> (4u * ib)) & 15u;
    let hi = (head >> (16u + 2u * ib)) & 3u;
    let step = unpack2x16float(head).x * f32(i32(lo | (hi << 4u)) - 32);
    return Place(32u * b + 4u * ib + (j % 16u) / 4u, 8u * (j % 4u) + 4u * (j / 16u), step);
}

fn w_pair(n: u32, i: u32, k: u32, so: u32) -> vec2<f32> {
    let pl = place(n, 2u * i, k, so);
    return levels4(w[pl.word] >> pl.sh, 0u).xy * pl.step;
}

fn w_octet(n: u32, c: u32, k: u32, so: u32) -> Octet {
    let pl = place(n, 8u * c, k, so); // an octet starts a word: sh is 0 or 4
    return Octet(levels4(w[pl.word], pl.sh) * pl.step, levels4(w[pl.word + 1u], pl.sh) * pl.step);
}
