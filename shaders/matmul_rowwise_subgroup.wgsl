// Matrix product on CPU-backed adapters with subgroups of at least 8 (lavapipe), for one row
// (decode) or many (prefill, batched decode):
//   y[t, off + n] (+)= s[t] * sum_k x[t, k] * w[n, k] + bias[n]   (same contract as matmul.wgsl)
// Shaped for a device that runs a subgroup as the lanes of one SIMD register. There a load in
// a loop is made lane by lane (about 15 instructions a lane, the bounds check included) even
// when every lane reads the same address, an array indexed at run time lives in memory, and
// lanes exchange values cheaply. So the kernel counts loads, not multiply-adds.
//
// Each invocation owns OUTS consecutive outputs for the ROWS rows of its workgroup: a tile of
// ROWS x OUTS accumulators, every loop over them of a count fixed when the pipeline is built,
// so they unroll and the tile stays in registers (naga's loop guard is off for this kernel, see
// kernels.rs). The K dimension is walked 8 weights (an octet) at a time:
// - each lane dequantizes its own outputs' octets (the format's w_octet) once for all ROWS
//   rows;
// - lane L loads element 8c + L of each row of x, one load for the whole subgroup, and
//   subgroupBroadcast hands every lane the row's 8 elements (8 loads of the same address
//   would cost 8 times as much);
// - with the RMSNorm fused, lane L sums the squares of its own elements of x and multiplies
//   them by its element of the gain, and subgroupAdd completes the sums at the end.
// Rows past the last repeat it and outputs past N repeat the last one; neither is stored, and
// no lane leaves early, so every broadcast sees all 8 lanes. Output pairs (the pair
// epilogues) fall inside one invocation, OUTS being even.
// With UNIFORM_X, x is read through uniform bindings of the same buffer: rows 0-7 through
// `x_head`, its first 64 KiB, and rows 8-15 through `x_head_hi`, 64 KiB from row 8 (the step's
// rows must lie in them): lavapipe makes a uniform load at a per-lane address a gather without
// branches, where a storage load is the loop over lanes above.
// Needs K % 8 == 0. Grid: (ceil(N / (WORKGROUP * OUTS)), ceil(rows / ROWS), 1).
// (naga takes the subgroup built-ins without `enable subgroups;`; the device must have been
// opened with wgpu's SUBGROUP feature.)

// bindings 0, 1, 4, 5 (step, p, bias, y) and their structs: matmul_epilogue.wgsl, appended
@group(0) @binding(2) var<storage, read> x: array<f32>;          // (rows, K)
// binding 3: the weights `w` (N, K), declared by the format file the loader appends
@group(0) @binding(6) var<storage, read> gain: array<f32>;       // (K) RMSNorm gain, or a dummy
// (bindings 7-11: the rotary epilogue's)
@group(0) @binding(12) var<uniform> x_head: array<vec4<f32>, 4096>;    // x's first 64 KiB
@group(0) @binding(13) var<uniform> x_head_hi: array<vec4<f32>, 4096>; // 64 KiB from row 8

// The tile and workgroup, set per pipeline (ops/matmul.rs picks them by the step's rows): at
// most MAX_ROWS rows and MAX_OUTS outputs, OUTS even.
override ROWS: u32 = 16u;
override OUTS: u32 = 2u;
override WORKGROUP: u32 = 64u;
override UNIFORM_X: bool = false;
const MAX_ROWS: u32 = 16u;
const MAX_OUTS: u32 = 8u;
const LANES: u32 = 8u;

@compute @workgroup_size(WORKGROUP)
fn main(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(subgroup_invocation_id) sub_lane: u32,
) {
    var rows = step.num_tokens;
    if ((p.flags & 8u) != 0u) {
        rows = step.num_samples;
    }
    let t0 = wg.y * ROWS;
    if (t0 >= rows) {
        return; // the whole workgroup
    }
    let lane = sub_lane % LANES;
    let n0 = gid.x * OUTS;
    var wrow: array<u32, MAX_OUTS>;
    for (var o = 0u; o < OUTS; o++) {
        wrow[o] = min(n0 + o, p.n - 1u);
    }
    // Where this lane's element of each row's octet 0 is.
    var xrow: array<u32, MAX_ROWS>;
    var acc: array<array<f32, MAX_OUTS>, MAX_ROWS>;
    var ss: array<f32, MAX_ROWS>;
    for (var r = 0u; r < ROWS; r++) {
        xrow[r] = min(t0 + r, rows - 1u) * p.k + lane;
        for (var o = 0u; o < OUTS; o++) {
            acc[r][o] = 0.0;
        }
        ss[r] = 0.0;
    }
    let norm = (p.flags & 1u) != 0u;
    let k8 = p.k / 8u;
    for (var c = 0u; c < k8; c++) {
        var wa: array<vec4<f32>, MAX_OUTS>;
        var wb: array<vec4<f32>, MAX_OUTS>;
        for (var o = 0u; o < OUTS; o++) {
            let q = w_octet(wrow[o], c, p.k, p.so);
            wa[o] = q.a;
            wb[o] = q.b;
        }
        var g = 1.0;
        if (norm) {
            g = gain[8u * c + lane];
        }
        // Two loops of at most 8 rows, one a binding of x's head: lavapipe's shader compiler
        // unrolls a loop only while its unrolled size stays under a limit, and one loop of 16
        // rows through x_head passed it (then the accumulators live in memory, indexed at run
        // time, and the tile ran 1.3x slower than through storage).
        for (var r = 0u; r < min(ROWS, 8u); r++) {
            let xo = x_octet(xrow[r] + 8u * c, g, false);
            ss[r] += xo.sq;
            for (var o = 0u; o < OUTS; o++) {
                acc[r][o] += dot(xo.a, wa[o]) + dot(xo.b, wb[o]);
            }
        }
        for (var r = 8u; r < ROWS; r++) {
            let xo = x_octet(xrow[r] + 8u * c, g, true);
            ss[r] += xo.sq;
            for (var o = 0u; o < OUTS; o++) {
                acc[r][o] += dot(xo.a, wa[o]) + dot(xo.b, wb[o]);
            }
        }
    }
    for (var r = 0u; r < ROWS; r++) {
        // Lanes past the 8th (a wider subgroup) hold copies of lanes 0-7's sums.
        let total = subgroupAdd(select(0.0, ss[r], sub_lane < LANES));
        var s = 1.0;
        if (norm) {
            s = inverseSqrt(total / f32(p.k) + p.eps);
        }
        let t = t0 + r;
        if (t >= rows) {
            break;
        }
        if (paired()) {
            // N is even, so a pair is whole when its first output is in range.
            for (var o = 0u; o < OUTS; o += 2u) {
                if (n0 + o < p.n) {
                    store_pair(t, n0 + o, acc[r][o] * s, acc[r][o + 1u] * s);
                }
            }
            continue;
        }
        for (var o = 0u; o < OUTS; o++) {
            if (n0 + o < p.n) {
                store(t, n0 + o, acc[r][o] * s);
            }
        }
    }
}

// A row's octet of x at element i (this lane's), times the gain `g`, in every lane; `sq`: the
// square of this lane's element, before the gain. `hi`: the row is the tile's 9th or later.
struct XOctet { a: vec4<f32>, b: vec4<f32>, sq: f32 }

fn x_octet(i: u32, g: f32, hi: bool) -> XOctet {
    let xl = x_at(i, hi);
    let o = lane_octet(xl * g); // lane_octet.wgsl, appended
    return XOctet(o.a, o.b, xl * xl);
}

fn x_at(i: u32, hi: bool) -> f32 {
    if (!UNIFORM_X) {
        return x[i];
    }
    if (hi) {
        let j = i - 8u * p.k;
        return x_head_hi[j / 4u][j % 4u];
    }
    return x_head[i / 4u][i % 4u];
}
