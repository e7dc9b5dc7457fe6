// Matrix product for one row on CPU-backed adapters (lavapipe, SwiftShader): decode.
//   y[t, off + n] (+)= s[t] * sum_k x[t, k] * w[n, k] + bias[n]   (same contract as matmul.wgsl,
// the RMSNorm gain multiplying x in registers)
// Each invocation owns OUTS consecutive outputs of one row and walks their weight rows 8
// weights at a time (row_dots.wgsl, appended), so every load of x (and of the gain) feeds
// OUTS of them: on lavapipe a load costs the same whichever lanes share its address, and the
// loads of x, not the arithmetic, set the pace. No workgroup memory and no barriers: on a CPU device a workgroup is a loop over SIMD lanes, where barriers are
// expensive. GPUs use matvec.wgsl / matmul.wgsl, whose loads coalesce across invocations.
// Output pairs (matmul_epilogue.wgsl) fall inside one invocation, OUTS being even.
// Needs K % 8 == 0. Grid: (ceil(N / (16 * OUTS)), rows, 1), 16 invocations a workgroup.

// bindings 0, 1, 4, 5 (step, p, bias, y) and their structs: matmul_epilogue.wgsl, appended
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;    // (rows, K / 4)
// binding 3: the weights `w` (N, K), declared by the format file the loader appends
@group(0) @binding(6) var<storage, read> gain: array<vec4<f32>>; // (K / 4) RMSNorm gain, or a dummy

const OUTS: u32 = 4u;

@compute @workgroup_size(16)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    var rows = step.num_tokens;
    if ((p.flags & 8u) != 0u) {
        rows = step.num_samples;
    }
    let n0 = gid.x * OUTS;
    let t = gid.y;
    if (n0 >= p.n || t >= rows) {
        return;
    }
    // Rows past N repeat the last one; their results are not written.
    var wrow: array<u32, OUTS>;
    for (var o = 0u; o < OUTS; o++) {
        wrow[o] = min(n0 + o, p.n - 1u);
    }
    var acc = row_dots(wrow, t * (p.k / 4u), (p.flags & 1u) != 0u);
    if (paired()) {
        // N is even, so a pair is whole when its first output is in range.
        for (var o = 0u; o < OUTS && n0 + o < p.n; o += 2u) {
            store_pair(t, n0 + o, acc[o], acc[o + 1u]);
        }
        return;
    }
    for (var o = 0u; o < OUTS && n0 + o < p.n; o++) {
        store(t, n0 + o, acc[o]);
    }
}
