// The activation of a MLP without a gate, in place: y[t, i] = act(y[t, i]), act relu(v)^2
// (kind 0: Arcee's, Nemotron's), or one of activation.wgsl's (appended) with up 1: GELU with
// the tanh approximation (kind 1: StarCoder2's, Phi-2's) or exact GELU (kind 3: GPT-NeoX's).
// Used where it cannot be in the up product's epilogue: a LoRA adapter adds to that product
// after it, or the epilogue has no such activation (GELU).
// Grid: (ceil(num_tokens * width / 256), 1, 1).

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, pad: u32 }
struct Params { width: u32, kind: u32, pad1: u32, pad2: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;  // (T, width)

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * 256u;
    if (idx >= step.num_tokens * p.width) {
        return;
    }
    if (p.kind != 0u) {
        y[idx] = gated(y[idx], 1.0, p.kind);
        return;
    }
    let v = max(y[idx], 0.0);
    y[idx] = v * v;
}
