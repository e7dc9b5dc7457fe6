// The epilogue every matrix kernel shares (matmul, matvec, matvec_subgroup, matmul_rowwise,
// matvec_rowwise): the loader appends this file to each, after the weight format's, and then
// one pair epilogue, which defines `store_pair`: epilogue_glu.wgsl (a gated activation) or
// epilogue_rotary.wgsl (rotary embedding and the KV cache write). So an output is finished the
// same way whichever kernel computed it. It reads the kernel's `p`, `bias` and `y`. Flags:
// 2 adds bias[n]; 4 adds into y (a residual); 16 hands outputs (2j, 2j + 1) of a row to
// `store_pair` together, its pair epilogue deciding what becomes of them.

// Whether the outputs go to store_pair two by two.
fn paired() -> bool {
    return (p.flags & 16u) != 0u;
}

// Output n of row t, already scaled by the row's norm: bias, then written or added.
fn store(t: u32, n: u32, v: f32) {
    var r = v;
    if ((p.flags & 2u) != 0u) {
        r += bias[n];
    }
    let idx = t * p.ldy + p.out_offset + n;
    if ((p.flags & 4u) != 0u) {
        r += y[idx];
    }
    y[idx] = r;
}
