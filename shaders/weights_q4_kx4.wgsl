// Weight format Q4_K for kernels that read whole octets (matvec_subgroup.wgsl), appended by the
// kernel loader in place of weights_q4_k.wgsl: the same blocks (see there), read as 16-byte
// words. A 144-byte block is nine of them: the first holds d, dmin and all 12 scale bytes, so
// an octet takes two loads (that word and the half word of its nibbles) where the 4-byte
// reader takes five to seven, each with its own bounds check. Same functions as every format
// file (see weights_f16.wgsl).

@group(0) @binding(3) var<storage, read> w: array<vec4<u32>>;

fn nibbles4(word: u32, sh: u32) -> vec4<f32> {
    return vec4<f32>((vec4<u32>(word) >> vec4<u32>(sh, sh + 8u, sh + 16u, sh + 24u)) & vec4<u32>(15u));
}

// Element e of row n's block: its first word, the nibble byte's offset in the nibbles, the
// nibble's shift (0 or 4) and its sub-block.
struct Place { block: u32, byte: u32, sh: u32, sub: u32 }

fn place(n: u32, e: u32, k: u32) -> Place {
    let i = e % 256u;
    let g = i / 64u;
    let hi = (i % 64u) / 32u;
    return Place((n * (k / 256u) + e / 256u) * 9u, 32u * g + i % 32u, 4u * hi, 2u * g + hi);
}

fn w_pair(n: u32, i: u32, k: u32, so: u32) -> vec2<f32> {
    let pl = place(n, 2u * i, k);
    let dm = k_sub_scale(w[pl.block], pl.sub);
    let word = w[pl.block + 1u + pl.byte / 16u][(pl.byte % 16u) / 4u];
    let sh = 8u * (pl.byte % 4u) + pl.sh;
    let q = vec2<f32>(vec2<u32>(word >> sh, word >> (sh + 8u)) & vec2<u32>(15u));
    return q * dm.x - dm.y;
}

fn w_octet(n: u32, c: u32, k: u32, so: u32) -> Octet {
    let pl = place(n, 8u * c, k); // an octet's nibbles are 8 aligned bytes: half a word
    let dm = k_sub_scale(w[pl.block], pl.sub);
    let q = w[pl.block + 1u + pl.byte / 16u];
    var lo = q.xy;
    if (pl.byte % 16u != 0u) {
        lo = q.zw;
    }
    return Octet(
        nibbles4(lo.x, pl.sh) * dm.x - dm.y,
        nibbles4(lo.y, pl.sh) * dm.x - dm.y,
    );
}
