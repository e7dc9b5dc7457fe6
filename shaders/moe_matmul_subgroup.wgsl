// Products with a mixture's experts for steps of many tokens, on adapters with subgroups of
// at least 8, in either kernel family (the tile of matmul_rowwise_subgroup.wgsl, shaped for
// lavapipe, over one expert's tokens; lanes past the 8th load what lanes 0-7 do): each
// workgroup takes one tile of moe_group.wgsl's listing, up to ROWS tokens that chose the same
// expert in the same slot s, and WORKGROUP * OUTS of that expert's outputs, so
// each weight is dequantized once for all the tile's tokens, where moe_matvec.wgsl reads it
// once a token.
//   route.summed 0 (gate/up, grid z = slot): y[t * slots + s, n] = norm * sum_k x[t, k] *
//     w[e * p.n + n, k], each token's chosen expert's outputs in a row of their own;
//   route.summed 1 (down, a launch for slot route.slot): y[t, n] (+)= weights[t * slots + s] *
//     sum_k x[t * slots + s, k] * w[e * p.n + n, k], added into the token's row (a launch
//     per slot, so that no two workgroups add into one row at once).
// The K dimension is walked an octet at a time as in matmul_rowwise_subgroup.wgsl: each lane
// dequantizes its outputs' octets once for the tile's rows, and loads its element of each
// row's octet, which subgroupBroadcast hands to the other lanes. Rows past the tile's last
// repeat it and outputs past p.n the last one, not stored; no lane leaves early.
// A stack larger than a storage binding is split into chunks at multiples of 64 rows, a launch
// each, as for moe_matvec.wgsl: an invocation whose outputs' rows another chunk holds computes
// on this chunk's first row and stores nothing. Needs K % 8 == 0 and p.n % OUTS == 0.
// Grid: (ceil(p.n / (WORKGROUP * OUTS)), the slot's most tiles, slots or 1 when summed).

// bindings 1, 4, 5 (p, bias, y) and their structs: matmul_epilogue.wgsl, appended (its step,
// binding 0, is not read: moe_group.wgsl's tiles say which rows there are)
@group(0) @binding(2) var<storage, read> x: array<f32>;          // (rows, K)
// binding 3: the weights `w` (experts * p.n, K), declared by the format file the loader appends
@group(0) @binding(6) var<storage, read> gain: array<f32>;       // (K) RMSNorm gain, or a dummy

struct Route { slots: u32, summed: u32, row0: u32, rows: u32, slot: u32, cap: u32, stride: u32, pad: u32 }
@group(0) @binding(7) var<uniform> route: Route;
@group(0) @binding(8) var<storage, read> order: array<u32>;          // moe_group.wgsl's
@group(0) @binding(9) var<storage, read> tiles: array<vec4<u32>>;    // moe_group.wgsl's
@group(0) @binding(10) var<storage, read> expert_weights: array<f32>; // (tokens, slots)

override ROWS: u32 = 16u;
override OUTS: u32 = 4u;
override WORKGROUP: u32 = 16u;
const MAX_ROWS: u32 = 16u;
const MAX_OUTS: u32 = 8u;
const LANES: u32 = 8u;

@compute @workgroup_size(WORKGROUP)
fn main(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(subgroup_invocation_id) sub_lane: u32,
) {
    let summed = route.summed != 0u;
    let s = select(wg.z, route.slot, summed);
    if (wg.y >= tiles[s * route.stride].x) {
        return; // the whole workgroup
    }
    let tile = tiles[s * route.stride + 1u + wg.y];
    let e = tile.x;
    let lane = sub_lane % LANES;
    let n0 = gid.x * OUTS;
    // This invocation's outputs' rows of the stack, in this chunk or (all of them) not.
    let first = e * p.n + min(n0, p.n - 1u);
    let here = first >= route.row0 && first < route.row0 + route.rows;
    var wrow: array<u32, MAX_OUTS>;
    for (var o = 0u; o < OUTS; o++) {
        wrow[o] = select(0u, e * p.n + min(n0 + o, p.n - 1u) - route.row0, here);
    }
    // Each row's token, where its x row's element for this lane starts, and its output row.
    var xrow: array<u32, MAX_ROWS>;
    var yrow: array<u32, MAX_ROWS>;
    var scale: array<f32, MAX_ROWS>;
    var acc: array<array<f32, MAX_OUTS>, MAX_ROWS>;
    var ss: array<f32, MAX_ROWS>;
    for (var r = 0u; r < ROWS; r++) {
        let t = order[s * route.cap + tile.y + min(r, tile.z - 1u)];
        let pair = t * route.slots + s;
        xrow[r] = select(t, pair, summed) * p.k + lane;
        yrow[r] = select(pair, t, summed);
        scale[r] = select(1.0, expert_weights[pair], summed);
        for (var o = 0u; o < OUTS; o++) {
            acc[r][o] = 0.0;
        }
        ss[r] = 0.0;
    }
    let norm = (p.flags & 1u) != 0u;
    for (var c = 0u; c < p.k / 8u; c++) {
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
        for (var r = 0u; r < ROWS; r++) {
            let xl = x[xrow[r] + 8u * c];
            ss[r] += xl * xl;
            let xo = lane_octet(xl * g); // lane_octet.wgsl, appended
            for (var o = 0u; o < OUTS; o++) {
                acc[r][o] += dot(xo.a, wa[o]) + dot(xo.b, wb[o]);
            }
        }
    }
    for (var r = 0u; r < ROWS; r++) {
        // Lanes past the 8th (a wider subgroup) hold copies of lanes 0-7's sums.
        let total = subgroupAdd(select(0.0, ss[r], sub_lane < LANES));
        var f = scale[r];
        if (norm) {
            f *= inverseSqrt(total / f32(p.k) + p.eps);
        }
        if (r >= tile.z || !here) {
            continue;
        }
        // Each output with its expert's bias (flag 1024), both weighted by the router.
        if (paired()) {
            // p.n is even, so a pair is whole when its first output is in range.
            for (var o = 0u; o < OUTS; o += 2u) {
                if (n0 + o < p.n) {
                    let g = acc[r][o] * f + expert_bias(e, n0 + o) * scale[r];
                    let u = acc[r][o + 1u] * f + expert_bias(e, n0 + o + 1u) * scale[r];
                    store_pair(yrow[r], n0 + o, g, u);
                }
            }
            continue;
        }
        for (var o = 0u; o < OUTS; o++) {
            if (n0 + o < p.n) {
                store(yrow[r], n0 + o, acc[r][o] * f + expert_bias(e, n0 + o) * scale[r]);
            }
        }
    }
}
