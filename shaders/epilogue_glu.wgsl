// Output pairs as a gated activation (a pair epilogue, see matmul_epilogue.wgsl; appended with
// activation.wgsl): outputs (2j, 2j + 1) are (gate j, up j), the matrix's rows interleaved at
// load, and y[t, off + j] = act(gate) * up, act SiLU, or with flag 32 GELU (tanh), or with
// flag 512 gpt-oss's clamped SwiGLU, or with flag 2048 exact GELU (activation.wgsl's kinds 0,
// 1, 2, 3).

// Outputs n (even: a gate) and n + 1 (its up) of row t, already scaled: one activation.
fn store_pair(t: u32, n: u32, gate: f32, up: f32) {
    var kind = select(select(0u, 1u, (p.flags & 32u) != 0u), 2u, (p.flags & 512u) != 0u);
    kind = select(kind, 3u, (p.flags & 2048u) != 0u);
    y[t * p.ldy + p.out_offset + n / 2u] = gated(gate, up, kind);
}
