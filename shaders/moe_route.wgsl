// A mixture of experts' router: for each token, the softmax of its logits over the experts,
// the `slots` most likely experts (the lower index first among equal logits) and their
// probabilities, renormalized over the chosen ones with `normalize`.
//   ids[t * slots + j], weights[t * slots + j]: token t's j-th expert and its weight.
// Grid: (ceil(num_tokens / 64), 1, 1), an invocation a token.

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, pad: u32 }
struct Params { experts: u32, slots: u32, normalize: u32, pad: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> logits: array<f32>;        // (T, experts)
@group(0) @binding(3) var<storage, read_write> ids: array<u32>;     // (T, slots)
@group(0) @binding(4) var<storage, read_write> weights: array<f32>; // (T, slots)

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.x;
    if (t >= step.num_tokens) {
        return;
    }
    let base = t * p.experts;
    var top = logits[base];
    for (var e = 1u; e < p.experts; e++) {
        top = max(top, logits[base + e]);
    }
    var sum = 0.0;
    for (var e = 0u; e < p.experts; e++) {
        sum += exp(logits[base + e] - top);
    }
    // Each pick is the likeliest expert after the one before it in (logit descending, index
    // ascending) order: no list of picks to keep.
    var prev_v = 0.0;
    var prev_e = 0u;
    var chosen = 0.0;
    for (var j = 0u; j < p.slots; j++) {
        var best_v = 0.0;
        var best_e = 0u;
        var found = false;
        for (var e = 0u; e < p.experts; e++) {
            let v = logits[base + e];
            let after = j == 0u || v < prev_v || (v == prev_v && e > prev_e);
            if (after && (!found || v > best_v)) {
                best_v = v;
                best_e = e;
                found = true;
            }
        }
        let prob = exp(best_v - top);
        ids[t * p.slots + j] = best_e;
        weights[t * p.slots + j] = prob;
        chosen += prob;
        prev_v = best_v;
        prev_e = best_e;
    }
    let scale = select(sum, chosen, p.normalize != 0u);
    for (var j = 0u; j < p.slots; j++) {
        weights[t * p.slots + j] /= scale;
    }
}
