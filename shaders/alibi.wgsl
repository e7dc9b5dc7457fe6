// ALiBi (BLOOM, MPT): instead of a rotary embedding, each score gains a bias of
// slope(h) * (key - query), falling linearly with the key's distance, each query head at its
// own slope. With n heads and m the largest power of two at most n, head h < m has slope
// 2^(-ALIBI (h + 1) / m) and the others 2^(-ALIBI (2 (h - m) + 1) / (2 m)): a second
// geometric series between the first's steps. ALIBI is the bias's maximum (8 in every
// released model; 0: no ALiBi), an override constant of the attention kernels. Appended to
// them (after attention_params.wgsl, whose `p.num_heads` it reads).

fn alibi_slope(h: u32) -> f32 {
    let m = 1u << firstLeadingBit(p.num_heads);
    if (h < m) {
        return exp2(-ALIBI * f32(h + 1u) / f32(m));
    }
    return exp2(-ALIBI * f32(2u * (h - m) + 1u) / f32(2u * m));
}

// Score `s` of query head h at position `query` for the key at position `key`, biased.
fn with_alibi(s: f32, h: u32, key: u32, query: u32) -> f32 {
    if (ALIBI == 0.0) {
        return s;
    }
    return s - alibi_slope(h) * f32(query - key);
}
