enable f16;
enable wgpu_cooperative_matrix;

// Matrix multiply for many rows on cooperative matrices (tensor cores, simdgroup matrices):
//   y[t, off + n] (+)= s[t] * sum_k x[t, k] * w[n, k] + bias[n]
// the same product, flags and epilogue as matmul.wgsl, with f16 inputs and f32 accumulation.
// Each K step stages a tile of x (normalized: times the row's 1 / rms and the norm's gain, so
// that f16 holds normalized values) and a tile of w (dequantized by the format's w_octet, so
// f16 weights stay exact) in workgroup memory as f16; each of the workgroup's four subgroups
// multiplies its quarter of the tile as 2 x 2 matrices of CM x CM. The accumulators go
// through workgroup memory to the shared epilogue.
// The loader appends, after the format and epilogue files, the matrix size the adapter offers:
//   alias CoopA = coop_matCMxCM<f16, A>; alias CoopB = ...<f16, B>; alias CoopC = ...<f32, C>;
//   const CM: u32 = 8u or 16u;
// Needs K % 8 == 0, and WG = 4 x the subgroup size (a size that does not vary): four subgroups.
// Tile: 4 CM rows x 4 CM outputs x 32 k. Grid: (ceil(N / (4 CM)), ceil(rows / (4 CM)), 1).

// bindings 0, 1, 4, 5 (step, p, bias, y) and their structs: matmul_epilogue.wgsl, appended
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;    // (rows, K)
// binding 3: the weights `w` (N, K), declared by the format file the loader appends
@group(0) @binding(6) var<storage, read> gain: array<vec4<f32>>; // (K / 4) RMSNorm gain, or a dummy

override WG: u32 = 128u; // four subgroups

const BK: u32 = 32u;
const TM: u32 = 4u * CM;
const TN: u32 = 4u * CM;
const LDS: u32 = BK + 8u; // row stride of the staged tiles: 80 bytes, rows 16-byte aligned

var<workgroup> xs: array<f16, TM * LDS>;  // (TM rows, BK k)
var<workgroup> ws: array<f16, TN * LDS>;  // (TN outputs, BK k): B column-major
var<workgroup> cs: array<f32, TM * TN>;   // the accumulators, row-major; first the norm's sums
var<workgroup> row_scale: array<f32, TM>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_id) sg: u32,
) {
    var rows = step.num_tokens;
    if ((p.flags & 8u) != 0u) {
        rows = step.num_samples;
    }
    let n0 = wg.x * TN;
    let t0 = wg.y * TM;
    let norm = (p.flags & 1u) != 0u;
    let k4 = p.k / 4u;

    // Each row's 1 / rms: `per` invocations a row (one where WG < TM), partial sums in cs.
    let per = max(WG / TM, 1u);
    for (var r = lid / per; r < TM; r += WG / per) {
        var part = 0.0;
        let t = t0 + r;
        if (norm && t < rows) {
            for (var c = lid % per; c < k4; c += per) {
                let v = x[t * k4 + c];
                part += dot(v, v);
            }
        }
        cs[r * per + lid % per] = part;
    }
    workgroupBarrier();
    for (var r = lid; r < TM; r += WG) {
        var s = 1.0;
        if (norm) {
            var ss = 0.0;
            for (var j = 0u; j < per; j++) {
                ss += cs[r * per + j];
            }
            s = inverseSqrt(ss / f32(p.k) + p.eps);
        }
        row_scale[r] = s;
    }
    workgroupBarrier();

    // This subgroup's quarter of the tile: rows sr.., outputs sc.., 2 CM of each.
    let sr = (sg / 2u) * 2u * CM;
    let sc = (sg % 2u) * 2u * CM;
    var c00 = CoopC();
    var c01 = CoopC();
    var c10 = CoopC();
    var c11 = CoopC();

    for (var k0 = 0u; k0 < p.k; k0 += BK) {
        // x: TM rows of BK, an octet per iteration, scaled and made f16.
        for (var i = lid; i < TM * (BK / 8u); i += WG) {
            let r = i / (BK / 8u);
            let c = i % (BK / 8u);
            let t = t0 + r;
            let k = k0 + 8u * c;
            var a = vec4<f32>(0.0);
            var b = vec4<f32>(0.0);
            if (t < rows && k < p.k) {
                let at = (t * p.k + k) / 4u;
                a = x[at] * row_scale[r];
                b = x[at + 1u] * row_scale[r];
                if (norm) {
                    a *= gain[k / 4u];
                    b *= gain[k / 4u + 1u];
                }
            }
            put_x(r * LDS + 8u * c, vec4<f16>(a), vec4<f16>(b));
        }
        // w: TN outputs of BK, dequantized an octet at a time.
        for (var i = lid; i < TN * (BK / 8u); i += WG) {
            let r = i / (BK / 8u);
            let c = i % (BK / 8u);
            let n = n0 + r;
            let k = k0 + 8u * c;
            var o = Octet(vec4<f32>(0.0), vec4<f32>(0.0));
            if (n < p.n && k < p.k) {
                o = w_octet(n, k / 8u, p.k, p.so);
            }
            put_w(r * LDS + 8u * c, vec4<f16>(o.a), vec4<f16>(o.b));
        }
        workgroupBarrier();
        for (var kk = 0u; kk < BK; kk += CM) {
            let a0 = coopLoadT<CoopA>(&xs[sr * LDS + kk], LDS);
            let a1 = coopLoadT<CoopA>(&xs[(sr + CM) * LDS + kk], LDS);
            let b0 = coopLoad<CoopB>(&ws[sc * LDS + kk], LDS);
            let b1 = coopLoad<CoopB>(&ws[(sc + CM) * LDS + kk], LDS);
            c00 = coopMultiplyAdd(a0, b0, c00);
            c01 = coopMultiplyAdd(a0, b1, c01);
            c10 = coopMultiplyAdd(a1, b0, c10);
            c11 = coopMultiplyAdd(a1, b1, c11);
        }
        workgroupBarrier();
    }

    coopStoreT(c00, &cs[sr * TN + sc], TN);
    coopStoreT(c01, &cs[sr * TN + sc + CM], TN);
    coopStoreT(c10, &cs[(sr + CM) * TN + sc], TN);
    coopStoreT(c11, &cs[(sr + CM) * TN + sc + CM], TN);
    workgroupBarrier();

    // The epilogue, an output pair per iteration (N is even where outputs are paired).
    for (var i = lid; i < TM * TN / 2u; i += WG) {
        let r = i / (TN / 2u);
        let c = 2u * (i % (TN / 2u));
        let t = t0 + r;
        let n = n0 + c;
        if (t >= rows || n >= p.n) {
            continue;
        }
        let v = vec2<f32>(cs[r * TN + c], cs[r * TN + c + 1u]);
        if (paired()) {
            store_pair(t, n, v.x, v.y);
        } else {
            store(t, n, v.x);
            if (n + 1u < p.n) {
                store(t, n + 1u, v.y);
            }
        }
    }
}

// Eight values into the staged tiles from `at` (WGSL passes no workgroup pointers).
fn put_x(at: u32, a: vec4<f16>, b: vec4<f16>) {
    for (var j = 0u; j < 4u; j++) {
        xs[at + j] = a[j];
        xs[at + 4u + j] = b[j];
    }
}

fn put_w(at: u32, a: vec4<f16>, b: vec4<f16>) {
    for (var j = 0u; j < 4u; j++) {
        ws[at + j] = a[j];
        ws[at + 4u + j] = b[j];
    }
}
