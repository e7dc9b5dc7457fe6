// Sampling, one workgroup per sampled row of logits, returning only token ids (and log-probs):
//  0. in raw log-prob mode, the log-probabilities of the model's own logits (before penalties,
//     temperature and mask), as vLLM reports by default;
//  1. penalties on the row's history: repetition (divide positive logits, multiply negative
//     ones, for tokens seen in prompt or output), presence and frequency (output counts); the
//     row's penalty list (kept between steps in pages of a pool, entry i in page
//     page_table[i / PAGE]) holds the history the host knows, and the step's input tokens
//     token_ids[unlisted .. unlisted + unlisted_count] are output tokens the list lacks
//     (the row's input when it came from the previous step on the GPU, in overlapped steps;
//     the guesses before a speculative row): one more output occurrence each;
//     then each listed token's bias (the request's `logit_bias`) is added;
//  2. temperature and exclusion: a token is left out (as if its probability were 0) when the
//     row's allowed-token mask clears its bit or its logit is not finite (-inf, +inf, NaN;
//     tested on the bits, since WGSL may assume floats are finite); greedy (argmax) when it is 0 or top_k is 1;
//     a greedy row asking for no log-probs stops at the argmax (nothing stored back, no
//     normaliser);
//  3. filtering by thresholds found by bisection, so no sort is needed: top-k (largest
//     threshold keeping at least k tokens), top-p (largest threshold keeping at least top_p of
//     the top-k mass), min-p (probability at least min_p times the top token's);
//  4. a Gumbel-max draw over the kept tokens, with noise hashed from (seed, draw index, token),
//     so the same seed gives the same token whatever else shares the batch;
//  5. the chosen token's log-probability and the top-n log-probabilities if asked (processed
//     mode: over the kept-or-masked distribution after penalties and temperature, excluded
//     tokens never listed).
// A row with no token left writes id 0xffffffff.
// A scored row (prompt logprobs) has its token forced: steps 3 and 4 are skipped and step 5
// reports the forced token and its rank (1 + the tokens with a larger logit) in the last word
// of the row's output (the host gives such rows temperature 1, no penalties and no mask).
// Masks: `mask_row` selects `p.mask_words` words of `masks`; bit i % 32 of word i / 32 allows
// token i; NO_MASK (0xffffffff) allows every token.
// Grid: (num_samples, 1, 1), 256 invocations per row.

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, pad: u32 }
struct Params { vocab: u32, out_stride: u32, mask_words: u32, pool_base: u32 }
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
    penalty_start: u32, // word of `penalties` where the row's page table starts
    penalty_count: u32, // entries of the row's penalty list
    mask_row: u32,
    raw_logprobs: u32,
    forced: u32,  // NONE, or the token a scored row reports
    unlisted: u32,       // index in token_ids of the first output token not in the penalty list
    unlisted_count: u32, // how many follow it there (at most MAX_UNLISTED)
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> sampling: array<Sampling>;  // (S)
@group(0) @binding(3) var<storage, read> penalties: array<u32>;      // page tables, then from pool_base (E, 3): token, count | seen << 31, bias bits
@group(0) @binding(4) var<storage, read_write> logits: array<f32>;   // (S, V), modified in place
@group(0) @binding(5) var<storage, read_write> out: array<u32>;      // (S, out_stride): id, logprob, (id, logprob) * 20, rank
@group(0) @binding(6) var<storage, read> masks: array<u32>;          // (M, mask_words)
@group(0) @binding(7) var<storage, read_write> penalty_raw: array<f32>; // (E): logits before penalties
@group(0) @binding(8) var<storage, read> token_ids: array<u32>;      // (T): the step's input tokens

const WG: u32 = 256u;
const NEG: f32 = -3.0e38;
const BISECT_STEPS: u32 = 32u;
const NO_MASK: u32 = 0xffffffffu;
const NONE: u32 = 0xffffffffu;
const PAGE: u32 = 128u; // entries per page of the penalty pool (kiln_core::PENALTY_PAGE)
const MAX_UNLISTED: u32 = 16u; // kiln_gpu::ops::MAX_UNLISTED

var<workgroup> found: f32;
var<workgroup> unlisted_found: array<u32, MAX_UNLISTED>; // 1 where the list holds unlisted token j
var<workgroup> unlisted_raw: array<f32, MAX_UNLISTED>;   // unlisted token j's logit before penalties

var<workgroup> red_v: array<f32, 256>;
var<workgroup> red_i: array<u32, 256>;

fn pcg(v: u32) -> u32 {
    let state = v * 747796405u + 2891336453u;
    let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

// An exponential variable of rate 1, a pure function of (seed, draw, token): -log(1 - v), v
// uniform over the 2^23 midpoints (2k + 1) / 2^24 of (0, 1), so 1 - v is exact and never 1.
// Where v is small its series stands in for log, whose absolute error (2^-21 near 1) would
// swamp it. The Gumbel noise -log(E) is then finite, at most 16.6.
fn exponential(seed_lo: u32, seed_hi: u32, draw: u32, token: u32) -> f32 {
    let h = pcg(seed_lo ^ pcg(seed_hi ^ pcg(draw ^ pcg(token))));
    let v = (f32(h >> 9u) + 0.5) / 8388608.0;
    if (v < 0.0009765625) {
        return v * (1.0 + v * (0.5 + v / 3.0));
    }
    return -log(1.0 - v);
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

fn is_finite(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7fffffffu) < 0x7f800000u;
}

fn allowed(mask_row: u32, i: u32) -> bool {
    if (mask_row == NO_MASK) {
        return true;
    }
    return ((masks[mask_row * p.mask_words + i / 32u] >> (i % 32u)) & 1u) != 0u;
}

// Writes the top-n (value desc, index asc) of the row's current values into out[o + 2..], each
// pass taking the best token ranked after the previous one. Excluded tokens (not finite, or
// NEG after step 2) are never listed; slots past the last candidate get id NONE.
fn top_n(lid: u32, base: u32, o: u32, n_top: u32, lse: f32) {
    var prev_v = 3.0e38;
    var prev_i = 0u;
    var prev_valid = true;
    for (var n = 0u; n < n_top; n++) {
        var bv = NEG;
        var bi = NONE;
        if (prev_valid) {
            for (var i = lid; i < p.vocab; i += WG) {
                let l = logits[base + i];
                let after = l < prev_v || (l == prev_v && i > prev_i);
                if (is_finite(l) && l > NEG && after && (bi == NONE || l > bv || (l == bv && i < bi))) {
                    bv = l;
                    bi = i;
                }
            }
        }
        // Invocations without a candidate carry (NEG, NONE), which loses every comparison.
        let r = reduce_argmax(lid, bv, bi);
        prev_valid = r.y != NONE;
        prev_v = bitcast<f32>(r.x);
        prev_i = r.y;
        if (lid == 0u) {
            out[o + 2u + 2u * n] = prev_i;
            out[o + 3u + 2u * n] = bitcast<u32>(select(NEG, prev_v - lse, prev_valid));
        }
    }
}

// log-sum-exp over the finite raw logits of the row.
fn raw_lse(lid: u32, base: u32) -> f32 {
    var mx = NEG;
    for (var i = lid; i < p.vocab; i += WG) {
        let l = logits[base + i];
        if (is_finite(l)) {
            mx = max(mx, l);
        }
    }
    let m = reduce_argmax(lid, mx, 0u);
    let mv = bitcast<f32>(m.x);
    var z = 0.0;
    for (var i = lid; i < p.vocab; i += WG) {
        let l = logits[base + i];
        if (is_finite(l)) {
            z += exp(l - mv);
        }
    }
    return mv + log(reduce_sum(lid, z));
}

// The pool entry holding entry `e` of the row's penalty list.
fn pool_entry(sp: Sampling, e: u32) -> u32 {
    return penalties[sp.penalty_start + e / PAGE] * PAGE + e % PAGE;
}

// The first word of pool entry `entry`.
fn entry_word(entry: u32) -> u32 {
    return p.pool_base + 3u * entry;
}

// A logit after the penalties of a token `seen` in the history and `count` times in the output.
fn penalized(sp: Sampling, logit: f32, seen: bool, count: u32) -> f32 {
    var l = logit;
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
    return l;
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
    let o = row * p.out_stride;
    let raw = sp.raw_logprobs != 0u;

    // 0. Raw log-probs: normaliser and top-n of the model's logits, before anything changes them.
    var lse_raw = 0.0;
    if (raw && sp.top_logprobs > 0u) {
        lse_raw = raw_lse(lid, base);
        top_n(lid, base, o, sp.top_logprobs, lse_raw);
    }

    // 1. Penalties: each history token appears once in the list, so no two invocations race.
    // A listed token that is also among the unlisted output tokens counts them too. The raw
    // value is kept for the raw log-prob of the chosen token (rows of one request that
    // share a list never both read it: the host guesses for no such row).
    let n_unlisted = min(sp.unlisted_count, MAX_UNLISTED);
    if (lid < MAX_UNLISTED) {
        unlisted_found[lid] = 0u;
    }
    workgroupBarrier();
    let keep_raw = raw && sp.top_logprobs > 0u;
    for (var e = lid; e < sp.penalty_count; e += WG) {
        let entry = pool_entry(sp, e);
        let w = entry_word(entry);
        let tok = penalties[w];
        if (tok >= v_count) {
            continue; // the host checks ids; never write outside the row
        }
        let packed = penalties[w + 1u];
        let bias = bitcast<f32>(penalties[w + 2u]);
        let l = logits[base + tok];
        var seen = (packed >> 31u) != 0u;
        var count = packed & 0x7fffffffu;
        for (var j = 0u; j < n_unlisted; j++) {
            if (token_ids[sp.unlisted + j] == tok) {
                unlisted_found[j] = 1u;
                unlisted_raw[j] = l;
                seen = true;
                count += 1u;
            }
        }
        if (keep_raw) {
            penalty_raw[entry] = l;
        }
        logits[base + tok] = penalized(sp, l, seen, count) + bias;
    }
    workgroupBarrier();
    // Unlisted tokens the list lacks: penalised as seen, once per occurrence among them.
    if (lid == 0u) {
        for (var j = 0u; j < n_unlisted; j++) {
            let tok = token_ids[sp.unlisted + j];
            if (tok >= v_count || unlisted_found[j] != 0u) {
                continue;
            }
            let l = logits[base + tok];
            var count = 0u;
            for (var i = j; i < n_unlisted; i++) {
                if (token_ids[sp.unlisted + i] == tok) {
                    unlisted_found[i] = 1u;
                    unlisted_raw[i] = l;
                    count += 1u;
                }
            }
            logits[base + tok] = penalized(sp, l, true, count);
        }
    }
    storageBarrier();
    workgroupBarrier();

    // 2. Temperature and exclusion (excluded tokens hold NEG, below every threshold), the
    // row's maximum and log-sum-exp over the kept tokens.
    // top_k == 1 is greedy too, but its log-probs are still under the temperature.
    let greedy = sp.temperature <= 0.0 || sp.top_k == 1u;
    var inv_t = 1.0;
    if (sp.temperature > 0.0) {
        inv_t = 1.0 / sp.temperature;
    }
    // A greedy row reporting no log-probabilities needs only the argmax: the processed values
    // are not stored and the log-sum-exp pass is skipped (its log-prob word is left at 0).
    let argmax_only = greedy && sp.top_logprobs == 0u && sp.forced == NONE;
    var best_v = NEG;
    var best_i = NONE;
    var lowest = 3.0e38;
    for (var i = lid; i < v_count; i += WG) {
        var l = logits[base + i] * inv_t;
        let ok = is_finite(l) && allowed(sp.mask_row, i);
        if (!ok) {
            l = NEG;
        }
        if (!argmax_only) {
            logits[base + i] = l;
        }
        if (ok) {
            if (best_i == NONE || l > best_v) {
                best_v = l;
                best_i = i;
            }
            lowest = min(lowest, l);
        }
    }
    storageBarrier();
    let top = reduce_argmax(lid, best_v, best_i);
    // No token left: the rest runs on NEG values (harmless) and the id written is NONE.
    let empty = top.y == NONE;
    let m = bitcast<f32>(top.x);
    var lse = m;
    if (!argmax_only) {
        var z_part = 0.0;
        for (var i = lid; i < v_count; i += WG) {
            let l = logits[base + i];
            if (l > NEG) {
                z_part += exp(l - m);
            }
        }
        lse = m + log(reduce_sum(lid, z_part));
    }

    var chosen = top.y;
    if (sp.forced != NONE) {
        chosen = sp.forced;
    } else if (!greedy) {
        // 3. Thresholds, searched between the lowest and highest kept values.
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
                let g = l - log(exponential(sp.seed_lo, sp.seed_hi, sp.draw_index, i));
                if (g > gv) {
                    gv = g;
                    gi = i;
                }
            }
        }
        chosen = reduce_argmax(lid, gv, gi).y;
    }

    // 5. Outputs.
    var chosen_lp = select(logits[base + chosen] - lse, 0.0, argmax_only);
    if (raw && sp.top_logprobs > 0u) {
        // The chosen token's raw logit: the penalty list's copy if it was penalised.
        if (lid == 0u && !empty) {
            found = logits[base + chosen] / inv_t;
        }
        workgroupBarrier();
        for (var e = lid; e < sp.penalty_count; e += WG) {
            let entry = pool_entry(sp, e);
            if (penalties[entry_word(entry)] == chosen) {
                found = penalty_raw[entry];
            }
        }
        if (lid == 0u) {
            for (var j = 0u; j < n_unlisted; j++) {
                if (token_ids[sp.unlisted + j] == chosen) {
                    found = unlisted_raw[j];
                }
            }
        }
        workgroupBarrier();
        chosen_lp = found - lse_raw;
    }
    if (lid == 0u) {
        out[o] = select(chosen, NONE, empty);
        out[o + 1u] = bitcast<u32>(select(chosen_lp, NEG, empty));
    }
    if (!raw) {
        top_n(lid, base, o, sp.top_logprobs, lse);
    }
    if (sp.forced != NONE) {
        let v = logits[base + chosen];
        var above = 0.0;
        for (var i = lid; i < v_count; i += WG) {
            above += select(0.0, 1.0, logits[base + i] > v);
        }
        let rank = u32(reduce_sum(lid, above)) + 1u;
        if (lid == 0u) {
            out[o + p.out_stride - 1u] = rank;
        }
    }
}
