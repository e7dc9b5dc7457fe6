// Tiled matrix multiply for many rows (prefill):
//   y[t, off + n] (+)= s[t] * sum_k x[t, k] * w[n, k] + bias[n]
// with s[t] = 1 / rms(x[t, :]) when the RMSNorm flag is set (the norm's gain g[k] then multiplies
// w[n, k] as the weights are loaded into registers, never in memory, so quantized weights need
// no requantizing), and `+=` when the accumulate flag is set (residual add).
// w is rows of K in any weight format (dequantized by the format's w_pair as tiles load). Rows are tokens (or sampled rows, see ROWS_FROM_SAMPLES).
// Tile: 32 rows x 64 outputs x 32 k; 128 invocations, each owning 4 x 4 outputs.
// Grid: (ceil(N / 64), ceil(rows / 32), 1).

// bindings 0, 1, 4, 5 (step, p, bias, y) and their structs: matmul_epilogue.wgsl, appended
@group(0) @binding(2) var<storage, read> x: array<f32>;          // (rows, K)
// binding 3: the weights `w` (N, K), declared by the format file the loader appends
@group(0) @binding(6) var<storage, read> gain: array<f32>;      // (K) RMSNorm gain, or a dummy

const BT: u32 = 32u;
const BN: u32 = 64u;
const BK: u32 = 32u;
const LD: u32 = 33u; // row stride of the tiles: BK + 1, so the 16 invocations reading one k of
                     // 16 different weight rows hit 16 different banks

var<workgroup> xs: array<f32, 1056>;  // BT * LD
var<workgroup> ws: array<f32, 2112>;  // BN * LD
var<workgroup> rms: array<f32, 128>;  // partial sums of squares: BT rows x 4

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var rows = step.num_tokens;
    if ((p.flags & 8u) != 0u) {
        rows = step.num_samples;
    }
    let n0 = wg.x * BN;
    let t0 = wg.y * BT;

    // Per-row scale: 4 invocations per row sum squares over a quarter of K each.
    var scale_part = 0.0;
    if ((p.flags & 1u) != 0u) {
        let r = lid / 4u;
        let t = t0 + r;
        if (t < rows) {
            for (var k = lid % 4u; k < p.k; k += 4u) {
                let v = x[t * p.k + k];
                scale_part += v * v;
            }
        }
    }
    rms[lid] = scale_part;

    let tx = lid % 16u; // 4 outputs each
    let ty = lid / 16u; // 4 rows each
    // The 4 x 4 outputs in four vectors, never an indexed array: drivers keep these in
    // registers, while an array indexed in loops can end up in local memory.
    var c0 = vec4<f32>(0.0);
    var c1 = vec4<f32>(0.0);
    var c2 = vec4<f32>(0.0);
    var c3 = vec4<f32>(0.0);

    for (var k0 = 0u; k0 < p.k; k0 += BK) {
        for (var i = lid; i < BT * BK; i += 128u) {
            let r = i / BK;
            let c = i % BK;
            let t = t0 + r;
            let k = k0 + c;
            var v = 0.0;
            if (t < rows && k < p.k) {
                v = x[t * p.k + k];
            }
            xs[r * LD + c] = v;
        }
        for (var i = lid; i < BN * BK / 2u; i += 128u) {
            let r = i / (BK / 2u);
            let c = i % (BK / 2u);
            let n = n0 + r;
            let k = k0 + 2u * c;
            var v = vec2<f32>(0.0, 0.0);
            if (n < p.n && k < p.k) {
                v = w_pair(n, k / 2u, p.k, p.so);
                if ((p.flags & 1u) != 0u) {
                    v *= vec2<f32>(gain[k], gain[k + 1u]);
                }
            }
            ws[r * LD + 2u * c] = v.x;
            ws[r * LD + 2u * c + 1u] = v.y;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < BK; kk++) {
            let xr = ty * 4u * LD + kk;
            let wr = tx * 4u * LD + kk;
            let a = vec4<f32>(xs[xr], xs[xr + LD], xs[xr + 2u * LD], xs[xr + 3u * LD]);
            let b = vec4<f32>(ws[wr], ws[wr + LD], ws[wr + 2u * LD], ws[wr + 3u * LD]);
            c0 = fma(vec4<f32>(a.x), b, c0);
            c1 = fma(vec4<f32>(a.y), b, c1);
            c2 = fma(vec4<f32>(a.z), b, c2);
            c3 = fma(vec4<f32>(a.w), b, c3);
        }
        workgroupBarrier();
    }

    store_row(ty * 4u, t0, n0 + tx * 4u, rows, c0);
    store_row(ty * 4u + 1u, t0, n0 + tx * 4u, rows, c1);
    store_row(ty * 4u + 2u, t0, n0 + tx * 4u, rows, c2);
    store_row(ty * 4u + 3u, t0, n0 + tx * 4u, rows, c3);
}

// Tile row r's four outputs from column n, scaled by the row's norm (or two output pairs).
fn store_row(r: u32, t0: u32, n: u32, rows: u32, acc: vec4<f32>) {
    let t = t0 + r;
    if (t >= rows) {
        return;
    }
    var s = 1.0;
    if ((p.flags & 1u) != 0u) {
        let ss = rms[r * 4u] + rms[r * 4u + 1u] + rms[r * 4u + 2u] + rms[r * 4u + 3u];
        s = inverseSqrt(ss / f32(p.k) + p.eps);
    }
    let v = acc * s;
    if (paired()) {
        // N is even, so a pair is whole when its first output is in range.
        if (n < p.n) {
            store_pair(t, n, v.x, v.y);
        }
        if (n + 2u < p.n) {
            store_pair(t, n + 2u, v.z, v.w);
        }
        return;
    }
    for (var j = 0u; j < 4u; j++) {
        if (n + j >= p.n) {
            return;
        }
        store(t, n + j, v[j]);
    }
}
