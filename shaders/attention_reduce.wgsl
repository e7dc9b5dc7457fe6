// The second pass of split-context attention (attention.wgsl with SPLITS > 1): for each token
// and query head, the runs' unnormalized outputs rescaled to their common max and divided by
// the total sum:  out = sum_z e^(m_z - m) acc_z / (e^(sink - m) + sum_z e^(m_z - m) l_z),
// m = the max of the head's sink and m_z over the runs that had keys (l_z > 0).
// Grid: (num_tokens, num_heads, 1).

override SPLITS: u32 = 2u;

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, pad: u32 }
struct Params {
    num_heads: u32,
    num_kv_heads: u32,
    head_dim: u32,
    qkv_stride: u32,
    scale: f32,
    block_size: u32,
    window: u32,      // sliding window: the latest keys each token sees (0: all)
    pad1: u32,
    sinks: array<vec4<f32>, 32>, // each query head's sink logit (ops/attention.rs: -1e30 without)
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;

@group(0) @binding(2) var<storage, read> partial: array<f32>;   // (T, H, SPLITS, D + 2)
@group(0) @binding(3) var<storage, read_write> out: array<f32>; // (T, H * D)

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = wg.x;
    if (t >= step.num_tokens) {
        return;
    }
    let h = wg.y;
    let d = p.head_dim;
    let base = (t * p.num_heads + h) * SPLITS * (d + 2u);
    // The head's sink joins the runs' softmax here, once.
    var m = sink(h);
    for (var z = 0u; z < SPLITS; z++) {
        let run = base + z * (d + 2u);
        if (partial[run + d + 1u] > 0.0) {
            m = max(m, partial[run + d]);
        }
    }
    var total = exp(sink(h) - m);
    for (var z = 0u; z < SPLITS; z++) {
        let run = base + z * (d + 2u);
        let l = partial[run + d + 1u];
        if (l > 0.0) {
            total += exp(partial[run + d] - m) * l;
        }
    }
    for (var i = lid; i < d; i += 64u) {
        var v = 0.0;
        for (var z = 0u; z < SPLITS; z++) {
            let run = base + z * (d + 2u);
            if (partial[run + d + 1u] > 0.0) {
                v += exp(partial[run + d] - m) * partial[run + i];
            }
        }
        out[t * p.num_heads * d + h * d + i] = v / total;
    }
}
