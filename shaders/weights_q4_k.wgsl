// Weight format Q4_K (GGUF super-blocks of 256 weights kept as they are): 8 sub-blocks of 32,
// each with a 6-bit scale and min, w = d * scale * q - dmin * min. Same functions as
// weights_f16.wgsl. Layout: (N, K / 256) blocks of 36 u32s as in the file: d and dmin (one f16
// pair), 12 bytes of packed scales and mins, then 128 bytes of nibbles in four groups of 32
// bytes (group g: elements 64g.. in the low nibbles, 64g + 32.. in the high ones). `so` is unused.

@group(0) @binding(3) var<storage, read> w: array<u32>;

fn nibbles4(word: u32, sh: u32) -> vec4<f32> {
    return vec4<f32>((vec4<u32>(word) >> vec4<u32>(sh, sh + 8u, sh + 16u, sh + 24u)) & vec4<u32>(15u));
}

// The block's first 16 bytes: d, dmin and the scale bytes (kquant_scales.wgsl reads them).
fn block_head(base: u32) -> vec4<u32> {
    return vec4<u32>(w[base], w[base + 1u], w[base + 2u], w[base + 3u]);
}

// Where element e of row n lives: the block's first word, the word of its nibble byte, and
// the nibble's shift within that byte; and its sub-block's (d * scale, dmin * min).
struct Place { word: u32, sh: u32, dm: vec2<f32> }

fn place(n: u32, e: u32, k: u32) -> Place {
    let base = (n * (k / 256u) + e / 256u) * 36u;
    let i = e % 256u;
    let g = i / 64u;
    let hi = (i % 64u) / 32u;
    let byte = 32u * g + i % 32u;
    return Place(base + 4u + byte / 4u, 8u * (byte % 4u) + 4u * hi, k_sub_scale(block_head(base), 2u * g + hi));
}

fn w_pair(n: u32, i: u32, k: u32, so: u32) -> vec2<f32> {
    let pl = place(n, 2u * i, k);
    let word = w[pl.word];
    let q = vec2<f32>(vec2<u32>(word >> pl.sh, word >> (pl.sh + 8u)) & vec2<u32>(15u));
    return q * pl.dm.x - pl.dm.y;
}

fn w_octet(n: u32, c: u32, k: u32, so: u32) -> Octet {
    let pl = place(n, 8u * c, k); // an octet starts a word: pl.sh is 0 or 4
    return Octet(
        nibbles4(w[pl.word], pl.sh) * pl.dm.x - pl.dm.y,
        nibbles4(w[pl.word + 1u], pl.sh) * pl.dm.x - pl.dm.y,
    );
}
