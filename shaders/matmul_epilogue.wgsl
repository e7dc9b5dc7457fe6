// The epilogue every matrix kernel shares (matmul, matvec, matvec_subgroup, matmul_rowwise,
// matvec_rowwise): the loader appends this file to each, after the weight format's, so an
// output is finished the same way whichever kernel computed it. It reads the kernel's `p`,
// `bias` and `y`. Flags: 2 adds bias[n]; 4 adds into y (a residual); 16 pairs the outputs into a
// gated activation: outputs (2j, 2j + 1) are (gate j, up j), the matrix's rows interleaved at
// load, and y[t, off + j] = act(gate) * up, act SiLU or, with 32, GELU (tanh approximation), as
// glu.wgsl computes it.

// sqrt(2 / pi)
const GELU_C: f32 = 0.7978845608028654;

// Whether the outputs pair up into a gated activation.
fn glu() -> bool {
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

// Outputs n (even: a gate) and n + 1 (its up) of row t, already scaled: one activation.
fn store_pair(t: u32, n: u32, gate: f32, up: f32) {
    var a: f32;
    if ((p.flags & 32u) != 0u) {
        // tanh(z) = 1 - 2 / (exp(2z) + 1), z clamped where tanh is already +-1 in f32.
        let z = clamp(GELU_C * (gate + 0.044715 * gate * gate * gate), -15.0, 15.0);
        let th = 1.0 - 2.0 / (exp(2.0 * z) + 1.0);
        a = 0.5 * gate * (1.0 + th);
    } else {
        a = gate / (1.0 + exp(-gate));
    }
    y[t * p.ldy + p.out_offset + n / 2u] = a * up;
}
