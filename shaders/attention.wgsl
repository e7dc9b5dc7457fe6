// Paged attention over a flattened batch of query segments (prefill chunks and decode rows in
// one dispatch). Token t of sequence s sits at position positions[t] and attends causally to
// keys 0..=positions[t] of its own sequence, read from the paged cache through s's block table.
// Grouped-query attention: one workgroup serves the G = H / KVH query heads that share a KV
// head, so each key and value is read once for all of them.
// Online softmax over tiles of 64 keys: invocation j scores key j of the tile for every head,
// then each invocation updates the outputs (head, dim) it owns.
// The cache holds f16 pairs packed in u32 (KV_F16) or f32 bits (see kv_layout.rs).
// Split context (flash-decoding), when SPLITS > 1: workgroup z takes the z-th of SPLITS equal
// runs of the keys (whole tiles), and writes its unnormalized outputs with its running max and
// sum to `partial` instead of `out`; attention_reduce.wgsl combines them. A few decoding
// sequences then fill the GPU instead of num_kv_heads workgroups each.
// Grid: (num_tokens, num_kv_heads, SPLITS).

override KV_F16: bool = true;
override SPLITS: u32 = 1u;

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, pad: u32 }
struct Params {
    num_heads: u32,
    num_kv_heads: u32,
    head_dim: u32,
    qkv_stride: u32,  // row width of qkv
    scale: f32,       // 1 / sqrt(head_dim)
    block_size: u32,
    window: u32,      // sliding window: the latest keys each token sees (0: all)
    pad1: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> positions: array<u32>;     // (T)
@group(0) @binding(3) var<storage, read> token_seq: array<u32>;     // (T) sequence of each token
@group(0) @binding(4) var<storage, read> seq_info: array<u32>;      // (S, 4): q_start, q_len, ctx_len, table offset
@group(0) @binding(5) var<storage, read> block_tables: array<u32>;  // concatenated tables
@group(0) @binding(6) var<storage, read> qkv: array<f32>;           // (T, qkv_stride), q first
@group(0) @binding(7) var<storage, read> k_cache: array<u32>;       // (slots, KVH, D) packed
@group(0) @binding(8) var<storage, read> v_cache: array<u32>;       // (slots, KVH, D) packed
@group(0) @binding(9) var<storage, read_write> out: array<f32>;     // (T, H * D)
@group(0) @binding(10) var<storage, read_write> partial: array<f32>; // (T, H, SPLITS, D + 2)

const WG: u32 = 64u;
const MAX_GD: u32 = 1024u; // G * D: up to 8 heads of 128, or 4 of 256
const MAX_G: u32 = 16u;
const NEG: f32 = -1.0e30;

var<workgroup> qs: array<f32, 1024>;     // (G, D) scaled queries
var<workgroup> probs: array<f32, 1024>;  // (G, WG) scores, then probabilities
var<workgroup> slots: array<u32, 64>;    // cache slot of each key in the tile
var<workgroup> run_max: array<f32, 16>;
var<workgroup> run_sum: array<f32, 16>;
var<workgroup> alpha: array<f32, 16>;

// Element `i` of the K (V) cache as f32.
fn k_at(i: u32) -> f32 {
    if (KV_F16) {
        return unpack2x16float(k_cache[i >> 1u])[i & 1u];
    }
    return bitcast<f32>(k_cache[i]);
}

fn v_at(i: u32) -> f32 {
    if (KV_F16) {
        return unpack2x16float(v_cache[i >> 1u])[i & 1u];
    }
    return bitcast<f32>(v_cache[i]);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = wg.x;
    if (t >= step.num_tokens) {
        return;
    }
    let kvh = wg.y;
    let d = p.head_dim;
    let g_count = p.num_heads / p.num_kv_heads;
    let gd = g_count * d;
    let kv_width = p.num_kv_heads * d;
    let n_keys = positions[t] + 1u;
    let table = seq_info[token_seq[t] * 4u + 3u];
    // This workgroup's keys: all it sees (the latest `window` with a sliding window), or its
    // run of whole tiles of them.
    var lo = 0u;
    if (p.window > 0u && n_keys > p.window) {
        lo = n_keys - p.window;
    }
    var hi = n_keys;
    if (SPLITS > 1u) {
        let run = (n_keys - lo + SPLITS - 1u) / SPLITS;
        let per = (run + WG - 1u) / WG * WG;
        lo = min(lo + wg.z * per, n_keys);
        hi = min(lo + per, n_keys);
    }

    for (var e = lid; e < gd; e += WG) {
        let h = kvh * g_count + e / d;
        qs[e] = qkv[t * p.qkv_stride + h * d + e % d] * p.scale;
    }
    if (lid < g_count) {
        run_max[lid] = NEG;
        run_sum[lid] = 0.0;
    }
    // Outputs e = lid + WG * r for r < 16, component r % 4 of acc[r / 4]: named vectors, never
    // an array indexed in a loop, which drivers may keep in local memory.
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    let vb = kvh * d; // this KV head's offset in a cache row
    workgroupBarrier();

    for (var j0 = lo; j0 < hi; j0 += WG) {
        let j = j0 + lid;
        if (j < hi) {
            let slot = block_tables[table + j / p.block_size] * p.block_size + j % p.block_size;
            slots[lid] = slot;
            let kb = slot * kv_width + kvh * d;
            for (var g = 0u; g < g_count; g++) {
                var s = 0.0;
                for (var i = 0u; i < d; i++) {
                    s = fma(qs[g * d + i], k_at(kb + i), s);
                }
                probs[g * WG + lid] = s;
            }
        } else {
            for (var g = 0u; g < g_count; g++) {
                probs[g * WG + lid] = NEG;
            }
        }
        workgroupBarrier();
        if (lid < g_count) {
            let g = lid;
            var m = run_max[g];
            for (var i = 0u; i < WG; i++) {
                m = max(m, probs[g * WG + i]);
            }
            let a = exp(run_max[g] - m);
            var sum = 0.0;
            for (var i = 0u; i < WG; i++) {
                let e = exp(probs[g * WG + i] - m);
                probs[g * WG + i] = e;
                sum += e;
            }
            run_sum[g] = run_sum[g] * a + sum;
            run_max[g] = m;
            alpha[g] = a;
        }
        workgroupBarrier();
        let tile = min(WG, hi - j0);
        acc0 = pv4(lid, acc0, tile, kv_width, vb, gd);
        acc1 = pv4(lid + 4u * WG, acc1, tile, kv_width, vb, gd);
        acc2 = pv4(lid + 8u * WG, acc2, tile, kv_width, vb, gd);
        acc3 = pv4(lid + 12u * WG, acc3, tile, kv_width, vb, gd);
        workgroupBarrier();
    }

    let at = vec3<u32>(t, kvh, wg.z);
    store4(lid, acc0, at, gd);
    store4(lid + 4u * WG, acc1, at, gd);
    store4(lid + 8u * WG, acc2, at, gd);
    store4(lid + 12u * WG, acc3, at, gd);
}

// Output e's accumulator after a tile: rescaled by its head's alpha, plus the tile's
// probabilities times the values. Outputs past the group's (e >= gd) stay as they are.
fn pv(e: u32, acc: f32, tile: u32, kv_width: u32, vb: u32, gd: u32) -> f32 {
    if (e >= gd) {
        return acc;
    }
    let d = p.head_dim;
    let g = e / d;
    var v = acc * alpha[g];
    for (var jj = 0u; jj < tile; jj++) {
        v = fma(probs[g * WG + jj], v_at(slots[jj] * kv_width + vb + e % d), v);
    }
    return v;
}

// pv for outputs e0, e0 + WG, e0 + 2 WG, e0 + 3 WG.
fn pv4(e0: u32, acc: vec4<f32>, tile: u32, kv_width: u32, vb: u32, gd: u32) -> vec4<f32> {
    return vec4<f32>(
        pv(e0, acc.x, tile, kv_width, vb, gd),
        pv(e0 + WG, acc.y, tile, kv_width, vb, gd),
        pv(e0 + 2u * WG, acc.z, tile, kv_width, vb, gd),
        pv(e0 + 3u * WG, acc.w, tile, kv_width, vb, gd),
    );
}

// Writes output e of (token, KV head, run) `at`: normalized into `out`, or, split, as it is
// with the run's max and sum (a sum of 0: no keys in this run) into `partial`.
fn store(e: u32, v: f32, at: vec3<u32>, gd: u32) {
    if (e >= gd) {
        return;
    }
    let d = p.head_dim;
    let g = e / d;
    let h = at.y * (p.num_heads / p.num_kv_heads) + g;
    if (SPLITS > 1u) {
        let base = ((at.x * p.num_heads + h) * SPLITS + at.z) * (d + 2u);
        partial[base + e % d] = v;
        if (e % d == 0u) {
            partial[base + d] = run_max[g];
            partial[base + d + 1u] = run_sum[g];
        }
    } else {
        out[at.x * p.num_heads * d + h * d + e % d] = v / run_sum[g];
    }
}

fn store4(e0: u32, acc: vec4<f32>, at: vec3<u32>, gd: u32) {
    store(e0, acc.x, at, gd);
    store(e0 + WG, acc.y, at, gd);
    store(e0 + 2u * WG, acc.z, at, gd);
    store(e0 + 3u * WG, acc.w, at, gd);
}
