// Input tokens taken from the previous step's sampler output, for a step scheduled while the
// one before it ran: token_ids[prev[2i]] = sample_out[prev[2i + 1] * out_stride] (the sampled
// id is the first word of a sampler row). Runs first in the forward pass, before the embedding
// gather reads token_ids.
// Grid: (1, 1, 1), 64 invocations striding over the step's `num_prev` pairs.

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, num_prev: u32 }
struct Params { out_stride: u32, pad0: u32, pad1: u32, pad2: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> prev: array<u32>;            // (num_prev, 2)
@group(0) @binding(3) var<storage, read> sample_out: array<u32>;      // (rows, out_stride)
@group(0) @binding(4) var<storage, read_write> token_ids: array<u32>; // (T)

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
    for (var i = lid.x; i < step.num_prev; i += 64u) {
        token_ids[prev[2u * i]] = sample_out[prev[2u * i + 1u] * p.out_stride];
    }
}
