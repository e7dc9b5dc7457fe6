// Gated MLP activation: out[t, i] = act(gu[t, i]) * gu[t, I + i], gate and up side by side.
// act(gate) * up is activation.wgsl's `gated` (appended by the loader). Used where the activation cannot be in the
// gate/up product's epilogue (gate and up stored in different formats).
// Grid: (ceil(num_tokens * I / 256), 1, 1).

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, pad: u32 }
struct Params { inter: u32, kind: u32, pad1: u32, pad2: u32 } // kind: activation.wgsl's

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> gu: array<f32>;         // (T, 2 * I)
@group(0) @binding(3) var<storage, read_write> out: array<f32>;  // (T, I)

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * 256u;
    if (idx >= step.num_tokens * p.inter) {
        return;
    }
    let t = idx / p.inter;
    let i = idx % p.inter;
    let g = gu[t * 2u * p.inter + i];
    let u = gu[t * 2u * p.inter + p.inter + i];
    out[idx] = gated(g, u, p.kind);
}
