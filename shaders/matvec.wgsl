// Matrix-vector product for a few rows (decode): the same contract as matmul.wgsl,
//   y[t, off + n] (+)= s[t] * sum_k x[t, k] * w[n, k] + bias[n],
// for at most 8 rows (the RMSNorm gain multiplies the weights in registers, as there). Each weight row is read once and applied to every row of x, which is
// what makes decode bandwidth-bound rather than latency-bound.
// 64 invocations own 4 outputs; each walks K in f16 pairs, then a tree reduction sums them.
// Grid: (ceil(N / 4), 1, 1).

// bindings 0, 1, 4, 5 (step, p, bias, y) and their structs: matmul_epilogue.wgsl, appended
@group(0) @binding(2) var<storage, read> x: array<f32>;          // (rows, K)
// binding 3: the weights `w` (N, K), declared by the format file the loader appends
@group(0) @binding(6) var<storage, read> gain: array<f32>;      // (K) RMSNorm gain, or a dummy

const MAX_ROWS: u32 = 8u;
const OUTS: u32 = 4u;
const WG: u32 = 64u;
const SLOTS: u32 = 40u; // MAX_ROWS * OUTS partial dot products + MAX_ROWS sums of squares

var<workgroup> red: array<f32, 2560>; // (SLOTS, WG): slot-major, only the used slots are reduced

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var rows = step.num_tokens;
    if ((p.flags & 8u) != 0u) {
        rows = step.num_samples;
    }
    rows = min(rows, MAX_ROWS);
    let n0 = wg.x * OUTS;
    let kp = p.k / 2u;

    var acc: array<f32, 40>;
    for (var i = 0u; i < SLOTS; i++) {
        acc[i] = 0.0;
    }
    for (var c = lid; c < kp; c += WG) {
        var wv: array<vec2<f32>, 4>;
        var g = vec2<f32>(1.0, 1.0);
        if ((p.flags & 1u) != 0u) {
            g = vec2<f32>(gain[2u * c], gain[2u * c + 1u]);
        }
        for (var o = 0u; o < OUTS; o++) {
            let n = n0 + o;
            if (n < p.n) {
                wv[o] = w_pair(n, c, p.k, p.so) * g;
            } else {
                wv[o] = vec2<f32>(0.0, 0.0);
            }
        }
        for (var t = 0u; t < rows; t++) {
            let xv = vec2<f32>(x[t * p.k + 2u * c], x[t * p.k + 2u * c + 1u]);
            for (var o = 0u; o < OUTS; o++) {
                acc[t * OUTS + o] += dot(xv, wv[o]);
            }
            acc[MAX_ROWS * OUTS + t] += dot(xv, xv);
        }
    }
    // Slots in use: rows * OUTS dot products, then rows sums of squares.
    let used = rows * (OUTS + 1u);
    for (var i = 0u; i < rows * OUTS; i++) {
        red[i * WG + lid] = acc[i];
    }
    for (var t = 0u; t < rows; t++) {
        red[(rows * OUTS + t) * WG + lid] = acc[MAX_ROWS * OUTS + t];
    }
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if (lid < s) {
            for (var i = 0u; i < used; i++) {
                red[i * WG + lid] += red[i * WG + lid + s];
            }
        }
        workgroupBarrier();
    }
    if (lid < rows * OUTS) {
        let t = lid / OUTS;
        let o = lid % OUTS;
        let n = n0 + o;
        // With paired outputs the even output takes its pair's odd one along.
        let pair = paired();
        if (n < p.n && !(pair && o % 2u == 1u)) {
            var s = 1.0;
            if ((p.flags & 1u) != 0u) {
                s = inverseSqrt(red[(rows * OUTS + t) * WG] / f32(p.k) + p.eps);
            }
            let v = red[(t * OUTS + o) * WG] * s;
            if (pair) {
                store_pair(t, n, v, red[(t * OUTS + o + 1u) * WG] * s);
            } else {
                store(t, n, v);
            }
        }
    }
}
