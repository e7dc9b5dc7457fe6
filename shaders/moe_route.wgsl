// A mixture of experts' router: for each token, a score of each expert from its logit (the
// softmax over the experts, or with `sigmoid` each logit's sigmoid), the `slots` best experts
// (by the score, or with `biased` by the score plus the expert's `bias`; the lower index
// first among equals) and their weights: their scores, renormalized over the chosen ones with
// `normalize`, times `scale`.
//   ids[t * slots + j], weights[t * slots + j]: token t's j-th expert and its weight.
// A token's logits are `stride` apart (a shared expert's gate may follow the experts').
// Grid: (ceil(num_tokens / 64), 1, 1), an invocation a token.

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, pad: u32 }
struct Params {
    experts: u32, slots: u32, normalize: u32, stride: u32,
    sigmoid: u32, scale: f32, biased: u32, pad: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> logits: array<f32>;        // (T, stride)
@group(0) @binding(3) var<storage, read_write> ids: array<u32>;     // (T, slots)
@group(0) @binding(4) var<storage, read_write> weights: array<f32>; // (T, slots)
@group(0) @binding(5) var<storage, read> bias: array<f32>;          // (experts), with biased

fn sigmoid(x: f32) -> f32 {
    return 1.0 / (1.0 + exp(-x));
}

// Expert `e`'s score from its logit `l` (`top` and `sum`: the softmax's maximum and sum).
fn score(l: f32, top: f32, sum: f32) -> f32 {
    return select(exp(l - top) / sum, sigmoid(l), p.sigmoid != 0u);
}

// What expert `e` is chosen by: its logit (the scores' order) or its score plus its bias.
fn choice(base: u32, e: u32, top: f32, sum: f32) -> f32 {
    let l = logits[base + e];
    if (p.biased != 0u) {
        return score(l, top, sum) + bias[e];
    }
    return l;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.x;
    if (t >= step.num_tokens) {
        return;
    }
    let base = t * p.stride;
    var top = logits[base];
    for (var e = 1u; e < p.experts; e++) {
        top = max(top, logits[base + e]);
    }
    var sum = 0.0;
    for (var e = 0u; e < p.experts; e++) {
        sum += exp(logits[base + e] - top);
    }
    // Each pick is the best expert after the one before it in (choice descending, index
    // ascending) order: no list of picks to keep.
    var prev_v = 0.0;
    var prev_e = 0u;
    var chosen = 0.0;
    for (var j = 0u; j < p.slots; j++) {
        var best_v = 0.0;
        var best_e = 0u;
        var found = false;
        for (var e = 0u; e < p.experts; e++) {
            let v = choice(base, e, top, sum);
            let after = j == 0u || v < prev_v || (v == prev_v && e > prev_e);
            if (after && (!found || v > best_v)) {
                best_v = v;
                best_e = e;
                found = true;
            }
        }
        let s = score(logits[base + best_e], top, sum);
        ids[t * p.slots + j] = best_e;
        weights[t * p.slots + j] = s;
        chosen += s;
        prev_v = best_v;
        prev_e = best_e;
    }
    // Scores are weights as they are, or renormalized over the chosen.
    var total = 1.0;
    if (p.normalize != 0u) {
        total = chosen + 1e-20;
    }
    for (var j = 0u; j < p.slots; j++) {
        weights[t * p.slots + j] = weights[t * p.slots + j] / total * p.scale;
    }
}
