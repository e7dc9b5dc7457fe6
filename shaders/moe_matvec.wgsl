// Products with a mixture's experts: each token's rows through the experts its router chose
// (moe_route.wgsl), the experts' matrices stacked by rows, p.n rows an expert (same contract
// as matmul.wgsl otherwise: the RMSNorm gain multiplying x in registers, the shared epilogue).
//   route.summed 0 (gate/up): y[t * slots + j, n] = s * sum_k x[t, k] * w[e * p.n + n, k]
//     (+ b[e * p.n + n] with flag 1024, an expert's bias, as in the summed products),
//     e = ids[t * slots + j]: each chosen expert's outputs in a row of their own;
//   route.summed 1 (down): y[t, n] (+)= sum_j weights[t * slots + j] *
//     sum_k x[t * slots + j, k] * w[e * p.n + n, k]: the chosen experts' outputs weighted and
//     summed into the token's row (a residual adds them).
// Each invocation owns OUTS consecutive outputs and walks their weight rows 8 weights at a
// time (row_dots.wgsl, appended), as matvec_rowwise.wgsl does; every expert's matrix is read only for the tokens that
// chose it. A stack larger than a storage binding is split into chunks (at multiples of 64
// rows), a launch each: this one holds the stack's rows route.row0 .. route.row0 + route.rows
// and computes only the outputs whose rows it holds (the others' chunks compute theirs; a
// summed output adds each chunk's share). Needs K % 8 == 0 and p.n % 4 == 0.
// Grid: (tokens, ceil(p.n / (16 * OUTS)), slots, or 1 when summed), 16 invocations a workgroup.

// bindings 0, 1, 4, 5 (step, p, bias, y) and their structs: matmul_epilogue.wgsl, appended
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;    // (rows, K / 4)
// binding 3: the weights `w` (experts * p.n, K), declared by the format file the loader appends
@group(0) @binding(6) var<storage, read> gain: array<vec4<f32>>; // (K / 4) RMSNorm gain, or a dummy

struct Route { slots: u32, summed: u32, row0: u32, rows: u32 }
@group(0) @binding(7) var<uniform> route: Route;
@group(0) @binding(8) var<storage, read> expert_ids: array<u32>;     // (tokens, slots)
@group(0) @binding(9) var<storage, read> expert_weights: array<f32>; // (tokens, slots)

const OUTS: u32 = 4u;

@compute @workgroup_size(16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let t = wg.x;
    let n0 = (wg.y * 16u + lid.x) * OUTS;
    if (t >= step.num_tokens || n0 >= p.n) {
        return;
    }
    let norm = (p.flags & 1u) != 0u;
    let summed = route.summed != 0u;
    var total: array<f32, OUTS>;
    for (var o = 0u; o < OUTS; o++) {
        total[o] = 0.0;
    }
    for (var i = 0u; i < select(1u, route.slots, summed); i++) {
        let pair = t * route.slots + select(wg.z, i, summed);
        let e = expert_ids[pair];
        // The OUTS outputs' rows lie in this chunk or none do (chunks end at multiples of 64).
        let first = e * p.n + n0;
        if (first < route.row0 || first >= route.row0 + route.rows) {
            if (summed) {
                continue;
            }
            return;
        }
        // Rows past the expert's repeat its last one; their results are not written.
        var wrow: array<u32, OUTS>;
        for (var o = 0u; o < OUTS; o++) {
            wrow[o] = e * p.n + min(n0 + o, p.n - 1u) - route.row0;
        }
        var acc = row_dots(wrow, select(t, pair, summed) * (p.k / 4u), norm);
        let weight = select(1.0, expert_weights[pair], summed);
        for (var o = 0u; o < OUTS; o++) {
            total[o] += (acc[o] + expert_bias(e, min(n0 + o, p.n - 1u))) * weight;
        }
    }
    let row = select(t * route.slots + wg.z, t, summed);
    if (paired()) {
        // p.n is even, so a pair is whole when its first output is in range.
        for (var o = 0u; o < OUTS && n0 + o < p.n; o += 2u) {
            store_pair(row, n0 + o, total[o], total[o + 1u]);
        }
        return;
    }
    for (var o = 0u; o < OUTS && n0 + o < p.n; o++) {
        store(row, n0 + o, total[o]);
    }
}
