// The residual stream through a LayerNorm, into a buffer of its own that the sub-layers'
// products read:
//   out[t, :] = (x[t, :] - mean) / sqrt(var + eps) * gain + bias
// (`has_bias` 0: no bias, Cohere's; StableLM's has one)
// with the mean and the variance over the row's `hidden` values, the variance taken about the
// mean (a second pass, not E[x^2] - mean^2, which cancels badly).
// Grid: (num_tokens, 1, 1), 64 invocations per token.

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, pad: u32 }
struct Params { hidden: u32, eps: f32, has_bias: u32, pad1: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<f32>;          // (T, hidden)
@group(0) @binding(3) var<storage, read> gain: array<f32>;       // (hidden)
@group(0) @binding(4) var<storage, read_write> out: array<f32>;  // (T, hidden)
@group(0) @binding(5) var<storage, read> bias: array<f32>;       // (hidden), or a placeholder

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = wg.x;
    if (t >= step.num_tokens) {
        return;
    }
    let row = t * p.hidden;
    var s = 0.0;
    for (var i = lid; i < p.hidden; i += 64u) {
        s += x[row + i];
    }
    let mean = workgroup_sum(lid, s) / f32(p.hidden);
    var ss = 0.0;
    for (var i = lid; i < p.hidden; i += 64u) {
        let d = x[row + i] - mean;
        ss += d * d;
    }
    let inv = inverseSqrt(workgroup_sum(lid, ss) / f32(p.hidden) + p.eps);
    for (var i = lid; i < p.hidden; i += 64u) {
        var b = 0.0;
        if (p.has_bias != 0u) {
            b = bias[i];
        }
        out[row + i] = (x[row + i] - mean) * inv * gain[i] + b;
    }
}
