// Gated MLP activation: out[t, i] = act(gu[t, i]) * gu[t, I + i], gate and up side by side.
// act is SiLU (SwiGLU: Llama, Qwen) or GELU with the tanh approximation (GeGLU: Gemma).
// Grid: (ceil(num_tokens * I / 256), 1, 1).

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, pad: u32 }
struct Params { inter: u32, gelu: u32, pad1: u32, pad2: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> gu: array<f32>;         // (T, 2 * I)
@group(0) @binding(3) var<storage, read_write> out: array<f32>;  // (T, I)

// sqrt(2 / pi)
const GELU_C: f32 = 0.7978845608028654;

fn gelu_tanh(x: f32) -> f32 {
    // tanh(z) = 1 - 2 / (exp(2z) + 1), with z clamped where tanh is already +-1 in f32 so
    // that exp cannot overflow.
    let z = clamp(GELU_C * (x + 0.044715 * x * x * x), -15.0, 15.0);
    let t = 1.0 - 2.0 / (exp(2.0 * z) + 1.0);
    return 0.5 * x * (1.0 + t);
}

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
    var a: f32;
    if (p.gelu != 0u) {
        a = gelu_tanh(g);
    } else {
        a = g / (1.0 + exp(-g));
    }
    out[idx] = a * u;
}
