// A gated shared expert's gate, in place on its activations: each token's row times the
// sigmoid of its gate logit, which the router's product computes after the experts' logits.
//   act[t, i] *= sigmoid(logits[t * stride + column])
// Grid: (ceil(num_tokens * width / 256), 1, 1), folded.

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, pad: u32 }
struct Params { width: u32, stride: u32, column: u32, pad: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> logits: array<f32>;    // (T, stride)
@group(0) @binding(3) var<storage, read_write> act: array<f32>; // (T, width)

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * 256u;
    if (idx >= step.num_tokens * p.width) {
        return;
    }
    let g = logits[(idx / p.width) * p.stride + p.column];
    act[idx] = act[idx] / (1.0 + exp(-g));
}
