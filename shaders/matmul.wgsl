// Tiled matrix multiply for many rows (prefill):
//   y[t, off + n] (+)= s[t] * sum_k x[t, k] * w[n, k] + bias[n]
// with s[t] = 1 / rms(x[t, :]) when the RMSNorm flag is set (the norm's gain g[k] then multiplies
// w[n, k] as the weights are loaded into registers, never in memory, so quantized weights need
// no requantizing), and `+=` when the accumulate flag is set (residual add).
// w is rows of K in any weight format (dequantized by the format's w_pair as tiles load). Rows are tokens (or sampled rows, see ROWS_FROM_SAMPLES).
// Tile: 32 rows x 64 outputs x 32 k; 128 invocations, each owning 4 x 4 outputs.
// Grid: (ceil(N / 64), ceil(rows / 32), 1).

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, pad: u32 }
struct Params {
    k: u32,          // input width
    n: u32,          // outputs in this weight chunk
    out_offset: u32, // first output column written by this chunk
    ldy: u32,        // row stride of y
    flags: u32,      // 1: RMSNorm, 2: bias, 4: accumulate into y, 8: rows = num_samples
    eps: f32,
    so: u32,         // where the weight scales start, in u32s (quantized formats)
    pad1: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<f32>;          // (rows, K)
// binding 3: the weights `w` (N, K), declared by the format file the loader appends
@group(0) @binding(4) var<storage, read> bias: array<f32>;       // (N) or a dummy
@group(0) @binding(5) var<storage, read_write> y: array<f32>;    // (rows, ldy)
@group(0) @binding(6) var<storage, read> gain: array<f32>;      // (K) RMSNorm gain, or a dummy

const BT: u32 = 32u;
const BN: u32 = 64u;
const BK: u32 = 32u;

var<workgroup> xs: array<f32, 1024>;  // BT * BK
var<workgroup> ws: array<f32, 2048>;  // BN * BK
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
    var acc: array<f32, 16>;
    for (var i = 0u; i < 16u; i++) {
        acc[i] = 0.0;
    }

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
            xs[i] = v;
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
            ws[r * BK + 2u * c] = v.x;
            ws[r * BK + 2u * c + 1u] = v.y;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < BK; kk++) {
            var a: array<f32, 4>;
            var b: array<f32, 4>;
            for (var i = 0u; i < 4u; i++) {
                a[i] = xs[(ty * 4u + i) * BK + kk];
                b[i] = ws[(tx * 4u + i) * BK + kk];
            }
            for (var i = 0u; i < 4u; i++) {
                for (var j = 0u; j < 4u; j++) {
                    acc[i * 4u + j] = fma(a[i], b[j], acc[i * 4u + j]);
                }
            }
        }
        workgroupBarrier();
    }

    for (var i = 0u; i < 4u; i++) {
        let r = ty * 4u + i;
        let t = t0 + r;
        if (t >= rows) {
            continue;
        }
        var s = 1.0;
        if ((p.flags & 1u) != 0u) {
            let ss = rms[r * 4u] + rms[r * 4u + 1u] + rms[r * 4u + 2u] + rms[r * 4u + 3u];
            s = inverseSqrt(ss / f32(p.k) + p.eps);
        }
        for (var j = 0u; j < 4u; j++) {
            let n = n0 + tx * 4u + j;
            if (n >= p.n) {
                continue;
            }
            var v = acc[i * 4u + j] * s;
            if ((p.flags & 2u) != 0u) {
                v += bias[n];
            }
            let idx = t * p.ldy + p.out_offset + n;
            if ((p.flags & 4u) != 0u) {
                v += y[idx];
            }
            y[idx] = v;
        }
    }
}
