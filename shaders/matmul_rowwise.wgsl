// Matrix product for many rows on CPU-backed adapters (prefill):
//   y[t, off + n] (+)= s[t] * sum_k x[t, k] * w[n, k] + bias[n]   (same contract as matmul.wgsl)
// Like matvec_rowwise.wgsl, without workgroup memory or barriers, but each invocation owns a
// tile of 8 outputs x BLOCK rows, so every 16-byte load of x feeds 32 multiply-adds and every
// weight, dequantized once, BLOCK of them. On lavapipe the loads of x, not the arithmetic, set
// the pace: 8 outputs ran 1.3x faster than 4 (16 were slower: the tile no longer fits in
// registers), and 16 or 32 rows per tile another 1.2x over 8 (BENCHMARKS.md).
// Needs K % 8 == 0. Grid: (ceil(N / 512), ceil(rows / BLOCK), 1).

// bindings 0, 1, 4, 5 (step, p, bias, y) and their structs: matmul_epilogue.wgsl, appended
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;    // (rows, K / 4)
// binding 3: the weights `w` (N, K), declared by the format file the loader appends
@group(0) @binding(6) var<storage, read> gain: array<vec4<f32>>; // (K / 4) RMSNorm gain, or a dummy

const BLOCK: u32 = 32u;
const OUTS: u32 = 8u;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    var rows = step.num_tokens;
    if ((p.flags & 8u) != 0u) {
        rows = step.num_samples;
    }
    let n0 = gid.x * OUTS;
    let t0 = gid.y * BLOCK;
    if (n0 >= p.n || t0 >= rows) {
        return;
    }
    let count = min(BLOCK, rows - t0);
    let k8 = p.k / 8u;
    let k4 = p.k / 4u;
    // (row, outputs 0-3) and (row, outputs 4-7)
    var lo: array<vec4<f32>, BLOCK>;
    var hi: array<vec4<f32>, BLOCK>;
    var ss: array<f32, BLOCK>;
    for (var t = 0u; t < BLOCK; t++) {
        lo[t] = vec4<f32>(0.0);
        hi[t] = vec4<f32>(0.0);
        ss[t] = 0.0;
    }
    // Rows past N repeat the last one; their results are not written.
    var wrow: array<u32, OUTS>;
    for (var o = 0u; o < OUTS; o++) {
        wrow[o] = min(n0 + o, p.n - 1u);
    }
    let norm = (p.flags & 1u) != 0u;
    for (var c = 0u; c < k8; c++) {
        // The octet c of each output's weight row, times the norm's gain.
        var w0: array<vec4<f32>, OUTS>;
        var w1: array<vec4<f32>, OUTS>;
        var g0 = vec4<f32>(1.0);
        var g1 = vec4<f32>(1.0);
        if (norm) {
            g0 = gain[2u * c];
            g1 = gain[2u * c + 1u];
        }
        for (var o = 0u; o < OUTS; o++) {
            let q = w_octet(wrow[o], c, p.k, p.so);
            w0[o] = q.a * g0;
            w1[o] = q.b * g1;
        }
        for (var t = 0u; t < count; t++) {
            let base = (t0 + t) * k4 + 2u * c;
            let x0 = x[base];
            let x1 = x[base + 1u];
            lo[t] += vec4<f32>(
                dot(x0, w0[0]) + dot(x1, w1[0]),
                dot(x0, w0[1]) + dot(x1, w1[1]),
                dot(x0, w0[2]) + dot(x1, w1[2]),
                dot(x0, w0[3]) + dot(x1, w1[3]),
            );
            hi[t] += vec4<f32>(
                dot(x0, w0[4]) + dot(x1, w1[4]),
                dot(x0, w0[5]) + dot(x1, w1[5]),
                dot(x0, w0[6]) + dot(x1, w1[6]),
                dot(x0, w0[7]) + dot(x1, w1[7]),
            );
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
        let a = lo[t] * s;
        let b = hi[t] * s;
        var v = array<f32, OUTS>(a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w);
        if (paired()) {
            // N is even, so a pair is whole when its first output is in range.
            for (var o = 0u; o < OUTS && n0 + o < p.n; o += 2u) {
                store_pair(t0 + t, n0 + o, v[o], v[o + 1u]);
            }
            continue;
        }
        for (var o = 0u; o < OUTS && n0 + o < p.n; o++) {
            store(t0 + t, n0 + o, v[o]);
        }
    }
}
