// Weight format Q5_K (GGUF super-blocks of 256 weights kept as they are): 8 sub-blocks of 32,
// each with a 6-bit scale and min, w = d * scale * q - dmin * min, q five bits. Same functions
// as weights_f16.wgsl. Layout: (N, K / 256) blocks of 44 u32s as in the file: d and dmin (one
// f16 pair), 12 bytes of packed scales and mins (as Q4_K), 32 bytes of high bits (byte l: bit
// 2g of element 64g + l, bit 2g + 1 of element 64g + 32 + l), then 128 bytes of nibbles in four
// groups of 32 bytes (group g: elements 64g.. low, 64g + 32.. high). `so` is unused.

@group(0) @binding(3) var<storage, read> w: array<u32>;

// Four fields of `mask` at bit `sh` of each byte of `word`.
fn fields4(word: u32, sh: u32, mask: u32) -> vec4<u32> {
    return (vec4<u32>(word) >> vec4<u32>(sh, sh + 8u, sh + 16u, sh + 24u)) & vec4<u32>(mask);
}

// The block's first 16 bytes: d, dmin and the scale bytes (kquant_scales.wgsl reads them).
fn block_head(base: u32) -> vec4<u32> {
    return vec4<u32>(w[base], w[base + 1u], w[base + 2u], w[base + 3u]);
}

// Element e of row n: the words of its nibble byte and high-bit byte, the shifts within those
// bytes, and its sub-block's (d * scale, dmin * min).
struct Place { ql: u32, qh: u32, sh: u32, bit: u32, dm: vec2<f32> }

fn place(n: u32, e: u32, k: u32) -> Place {
    let base = (n * (k / 256u) + e / 256u) * 44u;
    let i = e % 256u;
    let g = i / 64u;
    let hi = (i % 64u) / 32u;
    let l = i % 32u;
    return Place(
        base + 12u + (32u * g + l) / 4u,
        base + 4u + l / 4u,
        8u * (l % 4u),
        2u * g + hi,
        k_sub_scale(block_head(base), 2u * g + hi),
    );
}

fn w_pair(n: u32, i: u32, k: u32, so: u32) -> vec2<f32> {
    let pl = place(n, 2u * i, k);
    let nsh = pl.sh + 4u * (pl.bit % 2u);
    let lo = vec2<u32>(w[pl.ql] >> nsh, w[pl.ql] >> (nsh + 8u)) & vec2<u32>(15u);
    let hi = vec2<u32>(w[pl.qh] >> (pl.sh + pl.bit), w[pl.qh] >> (pl.sh + 8u + pl.bit)) & vec2<u32>(1u);
    return vec2<f32>(lo | (hi << vec2<u32>(4u))) * pl.dm.x - pl.dm.y;
}

fn w_octet(n: u32, c: u32, k: u32, so: u32) -> Octet {
    let pl = place(n, 8u * c, k); // an octet starts a word in the nibbles and the high bits
    let nsh = 4u * (pl.bit % 2u);
    let a = fields4(w[pl.ql], nsh, 15u) | (fields4(w[pl.qh], pl.bit, 1u) << vec4<u32>(4u));
    let b = fields4(w[pl.ql + 1u], nsh, 15u) | (fields4(w[pl.qh + 1u], pl.bit, 1u) << vec4<u32>(4u));
    return Octet(vec4<f32>(a) * pl.dm.x - pl.dm.y, vec4<f32>(b) * pl.dm.x - pl.dm.y);
}
