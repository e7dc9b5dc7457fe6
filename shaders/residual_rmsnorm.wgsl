// A sub-layer's output joins the residual stream through its own RMSNorm (Gemma's norms after
// attention and after the MLP):
//   x[t, :] += y[t, :] / rms(y[t, :]) * gain
// Grid: (num_tokens, 1, 1), 64 invocations per token.

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, pad: u32 }
struct Params { hidden: u32, eps: f32, pad0: u32, pad1: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> y: array<f32>;         // (T, hidden)
@group(0) @binding(3) var<storage, read> gain: array<f32>;      // (hidden)
@group(0) @binding(4) var<storage, read_write> x: array<f32>;   // (T, hidden)

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = wg.x;
    if (t >= step.num_tokens) {
        return;
    }
    let row = t * p.hidden;
    var ss = 0.0;
    for (var i = lid; i < p.hidden; i += 64u) {
        let v = y[row + i];
        ss += v * v;
    }
    let inv = inverseSqrt(workgroup_sum(lid, ss) / f32(p.hidden) + p.eps);
    for (var i = lid; i < p.hidden; i += 64u) {
        x[row + i] += y[row + i] * inv * gain[i];
    }
}
