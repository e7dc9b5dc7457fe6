// Matrix product with one invocation per output, for CPU-backed adapters (lavapipe, SwiftShader):
//   y[t, off + n] (+)= s[t] * sum_k x[t, k] * w[n, k] + bias[n]   (same contract as matmul.wgsl,
// the RMSNorm gain multiplying the weights in registers)
// Each invocation walks one weight row 8 weights at a time (dequantized in registers by the
// format's w_octet) and applies it to a block of up
// to 8 rows of x. No workgroup memory and no barriers: on a CPU device a workgroup is a loop
// over SIMD lanes, where barriers are expensive and lanes gain nothing from sharing loads.
// GPUs use matvec.wgsl / matmul.wgsl, whose loads coalesce across invocations.
// With paired outputs (matmul_epilogue.wgsl) each invocation owns an output pair.
// Needs K % 8 == 0. Grid: (ceil(N / 64), ceil(rows / 8), 1), or ceil(N / 128) with pairs.

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, pad: u32 }
struct Params {
    k: u32,
    n: u32,
    out_offset: u32,
    ldy: u32,
    flags: u32,      // 1: RMSNorm, 8: rows = num_samples; 2, 4, 16, 32: the epilogues (matmul_epilogue.wgsl)
    eps: f32,
    so: u32,         // where the weight scales start, in u32s (quantized formats)
    pad1: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;    // (rows, K / 4)
// binding 3: the weights `w` (N, K), declared by the format file the loader appends
@group(0) @binding(4) var<storage, read> bias: array<f32>;       // (N) or a dummy
@group(0) @binding(5) var<storage, read_write> y: array<f32>;    // (rows, ldy)
@group(0) @binding(6) var<storage, read> gain: array<vec4<f32>>; // (K / 4) RMSNorm gain, or a dummy

const BLOCK: u32 = 8u;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    var rows = step.num_tokens;
    if ((p.flags & 8u) != 0u) {
        rows = step.num_samples;
    }
    // With paired outputs an invocation owns a pair (gate and up, or a rotation pair).
    let pair = paired();
    let n = select(gid.x, 2u * gid.x, pair);
    let t0 = gid.y * BLOCK;
    if (n >= p.n || t0 >= rows) {
        return;
    }
    let count = min(BLOCK, rows - t0);
    let k8 = p.k / 8u;
    let k4 = p.k / 4u;
    var acc: array<f32, 8>;
    var acc_up: array<f32, 8>; // the pair's second output
    var ss: array<f32, 8>;
    for (var t = 0u; t < BLOCK; t++) {
        acc[t] = 0.0;
        acc_up[t] = 0.0;
        ss[t] = 0.0;
    }
    let norm = (p.flags & 1u) != 0u;
    for (var c = 0u; c < k8; c++) {
        let q = w_octet(n, c, p.k, p.so);
        var w0 = q.a;
        var w1 = q.b;
        var u0 = vec4<f32>(0.0);
        var u1 = vec4<f32>(0.0);
        if (pair) {
            let qu = w_octet(n + 1u, c, p.k, p.so);
            u0 = qu.a;
            u1 = qu.b;
        }
        if (norm) {
            let g0 = gain[2u * c];
            let g1 = gain[2u * c + 1u];
            w0 *= g0;
            w1 *= g1;
            u0 *= g0;
            u1 *= g1;
        }
        for (var t = 0u; t < count; t++) {
            let base = (t0 + t) * k4 + 2u * c;
            let x0 = x[base];
            let x1 = x[base + 1u];
            acc[t] += dot(x0, w0) + dot(x1, w1);
            if (pair) {
                acc_up[t] += dot(x0, u0) + dot(x1, u1);
            }
            if (norm) {
                ss[t] += dot(x0, x0) + dot(x1, x1);
            }
        }
    }
    for (var t = 0u; t < count; t++) {
        var s = 1.0;
        if (norm) {
            s = inverseSqrt(ss[t] / f32(p.k) + p.eps);
        }
        if (pair) {
            store_pair(t0 + t, n, acc[t] * s, acc_up[t] * s);
        } else {
            store(t0 + t, n, acc[t] * s);
        }
    }
}
