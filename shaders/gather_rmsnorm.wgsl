// Final RMSNorm, only for the rows that are sampled:
//   out[s, :] = x[rows[s], :] / rms(x[rows[s], :]) * gain
// or, with `centered`, a LayerNorm: the row's mean subtracted first, so that rms is the
// standard deviation, and `bias` added where `has_bias` (StableLM's; Cohere's has none).
// Grid: (num_samples, 1, 1), 64 invocations per row.

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, pad: u32 }
struct Params { hidden: u32, eps: f32, centered: u32, has_bias: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> rows: array<u32>;       // (S) token index of each sampled row
@group(0) @binding(3) var<storage, read> x: array<f32>;          // (T, hidden)
@group(0) @binding(4) var<storage, read> gain: array<f32>;       // (hidden)
@group(0) @binding(5) var<storage, read_write> out: array<f32>;  // (S, hidden)
@group(0) @binding(6) var<storage, read> bias: array<f32>;       // (hidden), or a placeholder

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let s = wg.x;
    if (s >= step.num_samples) {
        return;
    }
    let src = rows[s] * p.hidden;
    var mean = 0.0;
    if (p.centered != 0u) {
        var sum = 0.0;
        for (var i = lid; i < p.hidden; i += 64u) {
            sum += x[src + i];
        }
        mean = workgroup_sum(lid, sum) / f32(p.hidden);
    }
    var ss = 0.0;
    for (var i = lid; i < p.hidden; i += 64u) {
        let v = x[src + i] - mean;
        ss += v * v;
    }
    let inv = inverseSqrt(workgroup_sum(lid, ss) / f32(p.hidden) + p.eps);
    for (var i = lid; i < p.hidden; i += 64u) {
        var b = 0.0;
        if (p.has_bias != 0u) {
            b = bias[i];
        }
        out[s * p.hidden + i] = (x[src + i] - mean) * inv * gain[i] + b;
    }
}
