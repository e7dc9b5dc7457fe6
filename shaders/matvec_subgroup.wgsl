// Matrix-vector product for decode batches, on adapters with subgroups: the same contract as
// matmul.wgsl,
//   y[t, off + n] (+)= s[t] * sum_k x[t, k] * w[n, k] + bias[n],
// for up to MAX_ROWS rows (an override constant, default 64). Each workgroup of WG invocations (an
// override constant: 64, or 256 where subgroups are at least 16 wide, so that a matrix of a few
// thousand rows still keeps every multiprocessor's loads in flight) owns 4 outputs and
// walks their weight rows once per block of 8 input rows: the weights come from memory once per
// step and the later blocks find them in cache, so the cost grows with the rows only as far as
// the arithmetic does. Weights are read as octets (16-byte loads for f16), x as vec4s, the gain
// of a fused RMSNorm multiplies the weights in registers, and the partial sums are reduced with
// subgroupAdd, then across the workgroup's subgroups in workgroup memory. K must be a multiple
// of 8 (matmul.rs picks matvec.wgsl otherwise).
// Grid: (ceil(N / 4), 1, 1).

// (naga takes the subgroup built-ins without `enable subgroups;`, which it does not parse yet; the
// device must have been opened with wgpu's SUBGROUP feature, as context.rs does where it can.)

// bindings 0, 1, 4, 5 (step, p, bias, y) and their structs: matmul_epilogue.wgsl, appended
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;    // (rows, K)
// binding 3: the weights `w` (N, K), declared by the format file the loader appends
@group(0) @binding(6) var<storage, read> gain: array<vec4<f32>>; // (K) RMSNorm gain, or a dummy

override MAX_ROWS: u32 = 64u;
const BLOCK: u32 = 8u;   // input rows per pass over the weights
const OUTS: u32 = 4u;    // outputs per workgroup
override WG: u32 = 64u;  // at most MAX_SUBGROUPS times the subgroup size
const SLOTS: u32 = 10u;  // vec4s reduced per block: 8 rows' dot products, 2 x 4 sums of squares
const MAX_SUBGROUPS: u32 = 16u; // WG / the subgroup size: 64 / 4, or 256 / 16

var<workgroup> partial: array<vec4<f32>, 160>; // (MAX_SUBGROUPS, SLOTS)

// One input row against the workgroup's 4 weight rows over one octet of K: the 4 dot products
// (x as a row vector times the matrices whose columns are the weight rows) and x's sum of
// squares.
struct Part { d: vec4<f32>, s: f32 }

fn part(t: u32, c: u32, wa: mat4x4<f32>, wb: mat4x4<f32>) -> Part {
    let xi = t * (p.k / 4u) + 2u * c;
    let xa = x[xi];
    let xb = x[xi + 1u];
    return Part(xa * wa + xb * wb, dot(xa, xa) + dot(xb, xb));
}

// Sums `v` over the workgroup's invocations into partial[.., slot] (lane 0 of each subgroup).
fn reduce(slot: u32, sg: u32, lane: u32, v: vec4<f32>) {
    let sum = subgroupAdd(v);
    if (lane == 0u) {
        partial[sg * SLOTS + slot] = sum;
    }
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_invocation_id) lane: u32,
    @builtin(num_subgroups) nsg: u32,
) {
    var rows = step.num_tokens;
    if ((p.flags & 8u) != 0u) {
        rows = step.num_samples;
    }
    rows = min(rows, MAX_ROWS);
    let n0 = wg.x * OUTS;
    let octets = p.k / 8u;
    let norm = (p.flags & 1u) != 0u;

    for (var t0 = 0u; t0 < rows; t0 += BLOCK) {
        let block = min(rows - t0, BLOCK);
        // Named accumulators, never an indexed array: drivers keep these in registers.
        var d0 = vec4<f32>(0.0);
        var d1 = vec4<f32>(0.0);
        var d2 = vec4<f32>(0.0);
        var d3 = vec4<f32>(0.0);
        var d4 = vec4<f32>(0.0);
        var d5 = vec4<f32>(0.0);
        var d6 = vec4<f32>(0.0);
        var d7 = vec4<f32>(0.0);
        var s0 = vec4<f32>(0.0); // sums of squares of rows 0..3
        var s1 = vec4<f32>(0.0); // and 4..7
        for (var c = lid; c < octets; c += WG) {
            var ga = vec4<f32>(1.0);
            var gb = vec4<f32>(1.0);
            if (norm) {
                ga = gain[2u * c];
                gb = gain[2u * c + 1u];
            }
            // Past the last output: a real row, read but never written.
            let q0 = w_octet(min(n0, p.n - 1u), c, p.k, p.so);
            let q1 = w_octet(min(n0 + 1u, p.n - 1u), c, p.k, p.so);
            let q2 = w_octet(min(n0 + 2u, p.n - 1u), c, p.k, p.so);
            let q3 = w_octet(min(n0 + 3u, p.n - 1u), c, p.k, p.so);
            let wa = mat4x4<f32>(q0.a * ga, q1.a * ga, q2.a * ga, q3.a * ga);
            let wb = mat4x4<f32>(q0.b * gb, q1.b * gb, q2.b * gb, q3.b * gb);
            var e = part(t0, c, wa, wb);
            d0 += e.d;
            s0.x += e.s;
            if (block > 1u) {
                e = part(t0 + 1u, c, wa, wb);
                d1 += e.d;
                s0.y += e.s;
            }
            if (block > 2u) {
                e = part(t0 + 2u, c, wa, wb);
                d2 += e.d;
                s0.z += e.s;
            }
            if (block > 3u) {
                e = part(t0 + 3u, c, wa, wb);
                d3 += e.d;
                s0.w += e.s;
            }
            if (block > 4u) {
                e = part(t0 + 4u, c, wa, wb);
                d4 += e.d;
                s1.x += e.s;
            }
            if (block > 5u) {
                e = part(t0 + 5u, c, wa, wb);
                d5 += e.d;
                s1.y += e.s;
            }
            if (block > 6u) {
                e = part(t0 + 6u, c, wa, wb);
                d6 += e.d;
                s1.z += e.s;
            }
            if (block > 7u) {
                e = part(t0 + 7u, c, wa, wb);
                d7 += e.d;
                s1.w += e.s;
            }
        }
        // Sum over each subgroup, then over the subgroups. `block` is uniform.
        reduce(0u, sg, lane, d0);
        if (block > 1u) { reduce(1u, sg, lane, d1); }
        if (block > 2u) { reduce(2u, sg, lane, d2); }
        if (block > 3u) { reduce(3u, sg, lane, d3); }
        if (block > 4u) { reduce(4u, sg, lane, d4); }
        if (block > 5u) { reduce(5u, sg, lane, d5); }
        if (block > 6u) { reduce(6u, sg, lane, d6); }
        if (block > 7u) { reduce(7u, sg, lane, d7); }
        if (norm) {
            reduce(8u, sg, lane, s0);
            if (block > 4u) { reduce(9u, sg, lane, s1); }
        }
        workgroupBarrier();
        if (lid < block * OUTS) {
            let t = lid / OUTS;
            let o = lid % OUTS;
            let n = n0 + o;
            // With paired outputs the even output takes its pair's odd one along.
            let pair = paired();
            if (n < p.n && !(pair && o % 2u == 1u)) {
                var v = vec4<f32>(0.0);
                var ss = 0.0;
                for (var s = 0u; s < nsg; s++) {
                    v += partial[s * SLOTS + t];
                    if (norm) {
                        ss += partial[s * SLOTS + 8u + t / 4u][t % 4u];
                    }
                }
                if (norm) {
                    v *= inverseSqrt(ss / f32(p.k) + p.eps);
                }
                if (pair) {
                    store_pair(t0 + t, n, v[o], v[o + 1u]);
                } else {
                    store(t0 + t, n, v[o]);
                }
            }
        }
        workgroupBarrier();
    }
}
