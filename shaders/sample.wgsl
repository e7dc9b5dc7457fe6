// Sampling, one workgroup per sampled row of logits, returning only token ids (and log-probs):
//  1. penalties on the row's history: repetition (divide positive logits, multiply negative
//     ones, for tokens seen in prompt or output), presence and frequency (output counts);
//  2. temperature; greedy (argmax) when it is 0 or top_k is 1;
//  3. filtering by thresholds found by bisection, so no sort is needed: top-k (largest
//     threshold keeping at least k tokens), top-p (largest threshold keeping at least top_p of
//     the top-k mass), min-p (probability at least min_p times the top token's);
//  4. a Gumbel-max draw over the kept tokens, with noise hashed from (seed, draw index, token),
//     so the same seed gives the same token whatever else shares the batch;
//  5. the chosen token's log-probability and the top-n log-probabilities if asked.
// Grid: (num_samples, 1, 1), 256 invocations per row.

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, pad: u32 }
struct Params { vocab: u32, out_stride: u32, pad0: u32, pad1: u32 }
struct Sampling {
    temperature: f32,
    top_k: u32,
    top_p: f32,
    min_p: f32,
    repetition_penalty: f32,
    presence_penalty: f32,
    frequency_penalty: f32,
    top_logprobs: u32,
    seed_lo: u32,
    seed_hi: u32,
    draw_index: u32,
    penalty_start: u32,
    penalty_count: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> sampling: array<Sampling>;  // (S)
@group(0) @binding(3) var<storage, read> penalties: array<u32>;      // (P, 2): token, count | seen << 31
@group(0) @binding(4) var<storage, read_write> logits: array<f32>;   // (S, V), modified in place
@group(0) @binding(5) var<storage, read_write> out: array<u32>;      // (S, out_stride): id, logprob, (id, logprob) * n

const WG: u32 = 256u;
const NEG: f32 = -3.0e38;
const BISECT_STEPS: u32 = 32u;

var<workgroup> red_v: array<f32, 256>;
var<workgroup> red_i: array<u32, 256>;

fn pcg(v: u32) -> u32 {
    let state = v * 747796405u + 2891336453u;
    let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

// Uniform in (0, 1), a pure function of (seed, draw, token).
fn uniform01(seed_lo: u32, seed_hi: u32, draw: u32, token: u32) -> f32 {
    let h = pcg(seed_lo ^ pcg(seed_hi ^ pcg(draw ^ pcg(token))));
    return (f32(h >> 8u) + 0.5) / 16777216.0;
}

fn reduce_sum(lid: u32, v: f32) -> f32 {
    red_v[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if (lid < s) {
            red_v[lid] += red_v[lid + s];
        }
        workgroupBarrier();
    }
    let total = red_v[0];
    workgroupBarrier();
    return total;
}

// Max by value, lowest index among equals.
fn reduce_argmax(lid: u32, v: f32, i: u32) -> vec2<u32> {
    red_v[lid] = v;
    red_i[lid] = i;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if (lid < s) {
            let ov = red_v[lid + s];
            let oi = red_i[lid + s];
            if (ov > red_v[lid] || (ov == red_v[lid] && oi < red_i[lid])) {
                red_v[lid] = ov;
                red_i[lid] = oi;
            }
        }
        workgroupBarrier();
    }
    let r = vec2<u32>(bitcast<u32>(red_v[0]), red_i[0]);
    workgroupBarrier();
    return r;
}

fn reduce_min(lid: u32, v: f32) -> f32 {
    red_v[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if (lid < s) {
            red_v[lid] = min(red_v[lid], red_v[lid + s]);
        }
        workgroupBarrier();
    }
    let r = red_v[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = wg.x;
    if (row >= step.num_samples) {
        return;
    }
    let sp = sampling[row];
    let base = row * p.vocab;
    let v_count = p.vocab;

    // 1. Penalties: each history token appears once in the list, so no two invocations race.
    for (var e = lid; e < sp.penalty_count; e += WG) {
        let entry = sp.penalty_start + e;
        let tok = penalties[2u * entry];
        let packed = penalties[2u * entry + 1u];
        let count = packed & 0x7fffffffu;
        let seen = (packed >> 31u) != 0u;
        var l = logits[base + tok];
        if (seen) {
            if (l > 0.0) {
                l = l / sp.repetition_penalty;
            } else {
                l = l * sp.repetition_penalty;
            }
        }
        if (count > 0u) {
            l -= sp.presence_penalty + sp.frequency_penalty * f32(count);
        }
        logits[base + tok] = l;
    }
    storageBarrier();
    workgroupBarrier();

    // 2. Temperature, the row's maximum and log-sum-exp.
    // top_k == 1 is greedy too, but its log-probs are still under the temperature.
    let greedy = sp.temperature <= 0.0 || sp.top_k == 1u;
    var inv_t = 1.0;
    if (sp.temperature > 0.0) {
        inv_t = 1.0 / sp.temperature;
    }
    var best_v = NEG;
    var best_i = 0u;
    var lowest = 3.0e38;
    for (var i = lid; i < v_count; i += WG) {
        let l = logits[base + i] * inv_t;
        logits[base + i] = l;
        if (l > best_v) {
            best_v = l;
            best_i = i;
        }
        lowest = min(lowest, l);
    }
    storageBarrier();
    let top = reduce_argmax(lid, best_v, best_i);
    let m = bitcast<f32>(top.x);
    var z_part = 0.0;
    for (var i = lid; i < v_count; i += WG) {
        z_part += exp(logits[base + i] - m);
    }
    let lse = m + log(reduce_sum(lid, z_part));

    var chosen = top.y;
    if (!greedy) {
        // 3. Thresholds.
        var thr = reduce_min(lid, lowest);
        if (sp.top_k > 0u && sp.top_k < v_count) {
            var lo = thr;
            var hi = m;
            for (var it = 0u; it < BISECT_STEPS; it++) {
                let mid = lo + (hi - lo) * 0.5;
                var c = 0.0;
                for (var i = lid; i < v_count; i += WG) {
                    c += select(0.0, 1.0, logits[base + i] >= mid);
                }
                if (reduce_sum(lid, c) >= f32(sp.top_k)) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            thr = lo;
        }
        if (sp.top_p < 1.0) {
            var mass_part = 0.0;
            for (var i = lid; i < v_count; i += WG) {
                let l = logits[base + i];
                mass_part += select(0.0, exp(l - m), l >= thr);
            }
            let wanted = reduce_sum(lid, mass_part) * sp.top_p;
            var lo = thr;
            var hi = m;
            for (var it = 0u; it < BISECT_STEPS; it++) {
                let mid = lo + (hi - lo) * 0.5;
                var part = 0.0;
                for (var i = lid; i < v_count; i += WG) {
                    let l = logits[base + i];
                    part += select(0.0, exp(l - m), l >= mid);
                }
                if (reduce_sum(lid, part) >= wanted) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            thr = lo;
        }
        if (sp.min_p > 0.0) {
            thr = max(thr, m + log(sp.min_p));
        }
        // 4. Gumbel-max over the kept tokens.
        var gv = NEG;
        var gi = top.y;
        for (var i = lid; i < v_count; i += WG) {
            let l = logits[base + i];
            if (l >= thr) {
                let u = uniform01(sp.seed_lo, sp.seed_hi, sp.draw_index, i);
                let g = l - log(-log(u));
                if (g > gv) {
                    gv = g;
                    gi = i;
                }
            }
        }
        chosen = reduce_argmax(lid, gv, gi).y;
    }

    // 5. Outputs.
    let o = row * p.out_stride;
    if (lid == 0u) {
        out[o] = chosen;
        out[o + 1u] = bitcast<u32>(logits[base + chosen] - lse);
    }
    // Top-n: each pass takes the best token ranked after the previous one (value desc, index asc).
    var prev_v = 3.0e38;
    var prev_i = 0u;
    for (var n = 0u; n < sp.top_logprobs; n++) {
        var bv = NEG;
        var bi = 0xffffffffu;
        for (var i = lid; i < v_count; i += WG) {
            let l = logits[base + i];
            let after = l < prev_v || (l == prev_v && i > prev_i);
            if (after && (l > bv || (l == bv && i < bi))) {
                bv = l;
                bi = i;
            }
        }
        let r = reduce_argmax(lid, bv, bi);
        prev_v = bitcast<f32>(r.x);
        prev_i = r.y;
        if (lid == 0u) {
            out[o + 2u + 2u * n] = prev_i;
            out[o + 3u + 2u * n] = bitcast<u32>(prev_v - lse);
        }
    }
}
