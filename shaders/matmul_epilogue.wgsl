// The epilogue every matrix kernel shares (matmul, matmul_coop, matvec, matvec_subgroup,
// matmul_rowwise, matmul_rowwise_subgroup, matvec_rowwise): the loader appends this file to
// each, after the weight format's, and then
// one pair epilogue, which defines `store_pair`: epilogue_glu.wgsl (a gated activation) or
// epilogue_rotary.wgsl (rotary embedding and the KV cache write). So an output is finished the
// same way whichever kernel computed it. It declares what every matrix kernel binds alike
// (the step's counts, the parameters, the bias and the output; each kernel declares its x and
// gain, whose element types differ, and the format file its weights). Flags:
// 2 adds bias[n]; 4 adds into y (a residual); 16 hands outputs (2j, 2j + 1) of a row to
// `store_pair` together, its pair epilogue deciding what becomes of them; after the bias, 64
// soft-caps each output (Gemma 2's logits: f tanh(v / f)), 128 scales it (Granite's
// sub-layer outputs and logits: v f) and 256 squares it where positive and zeroes it elsewhere
// (relu(v)^2: the activation of a MLP without a gate), before a residual adds it. With 16,
// 512 makes the pairs' activation gpt-oss's clamped SwiGLU (epilogue_glu.wgsl). 1024 is the
// experts' kernels' (moe_matvec, moe_matmul_subgroup): each expert's own bias, added before
// the router's weight (`expert_bias`).

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, pad: u32 }
struct Params {
    k: u32,          // input width
    n: u32,          // outputs in this weight chunk
    out_offset: u32, // first output column written by this chunk
    ldy: u32,        // row stride of y
    flags: u32,      // 1: RMSNorm, 8: rows = num_samples; 2, 4, 16, 32, 64, 128, 256, 512, 1024: below
    eps: f32,
    so: u32,         // where the weight scales start, in u32s (quantized formats)
    factor: f32,     // the soft cap (flag 64) or the scale (flag 128)
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(4) var<storage, read> bias: array<f32>;       // (N) or a dummy
@group(0) @binding(5) var<storage, read_write> y: array<f32>;    // (rows, ldy)

// Expert e's bias on its output n (bias: experts x p.n), with flag 1024; else 0.
fn expert_bias(e: u32, n: u32) -> f32 {
    if ((p.flags & 1024u) != 0u) {
        return bias[e * p.n + n];
    }
    return 0.0;
}

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
    if ((p.flags & 64u) != 0u) {
        r = soft_capped(r, p.factor);
    }
    if ((p.flags & 128u) != 0u) {
        r *= p.factor;
    }
    if ((p.flags & 256u) != 0u) {
        let pos = max(r, 0.0);
        r = pos * pos;
    }
    let idx = t * p.ldy + p.out_offset + n;
    if ((p.flags & 4u) != 0u) {
        r += y[idx];
    }
    y[idx] = r;
}
