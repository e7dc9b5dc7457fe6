// Paged attention over a flattened batch of query segments (prefill chunks and decode rows in
// one dispatch). Token t of sequence s sits at position positions[t] and attends causally to
// keys 0..=positions[t] of its own sequence (its latest `window` with a sliding window), read
// from the paged cache through s's block table.
// Query tiles: a workgroup serves p.tq consecutive tokens of one sequence (fewer where its
// segment ends; a decode row is a tile of one) and the G = H / KVH query heads that share a KV
// head: R = n x G query rows, row r being token r / G and head r % G. Each key and value is
// read once for all R rows.
// Keys come in tiles of 64. K is staged in workgroup memory 16 dimensions at a time, loaded
// coalesced (consecutive invocations read consecutive dimensions of a key); invocation j then
// scores key j of the tile against every row, the rows' queries read four at a time from a
// transposed copy (qv). An online softmax per row follows, over the keys of the tile that
// row's token sees (its causal range and window); then each invocation updates the outputs
// (row, dim) it owns, reading V along the dimension (coalesced).
// The cache holds elements of type KV_TYPE (kv_codec.wgsl; kv_layout.rs owns the layout).
// Split context (flash-decoding), when SPLITS > 1: workgroup z takes the z-th of SPLITS equal
// runs of the tile's keys (whole tiles), and writes its unnormalized outputs with its running
// max and sum to `partial` instead of `out`; attention_reduce.wgsl combines them. A few
// decoding sequences then fill the GPU instead of num_kv_heads workgroups each.
// Bounds (ops/attention.rs picks the tile, p.tq): R <= 16 and 4 ceil(R / 4) x D <= 1024.
// Grid: (num_tokens, num_kv_heads, SPLITS); the workgroup of a token that does not start a
// tile returns at once.

override KV_TYPE: u32 = 1u; // kv_codec.wgsl
override SPLITS: u32 = 1u;
override SOFTCAP: f32 = 0.0; // Gemma 2: scores soft-capped (soft_cap.wgsl); 0: none
override ALIBI: f32 = 0.0;   // BLOOM, MPT: ALiBi's biases (alibi.wgsl); 0: none

// Step, Params (bindings 0 and 1): attention_params.wgsl, appended.

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
const CH: u32 = 16u;          // dimensions of the key tile staged at a time
const KST: u32 = 17u;         // CH + 1: a staged key's stride, so key j's reads miss no bank
const NEG: f32 = -1.0e30;     // the running max of a row that has seen no key

var<workgroup> qv: array<vec4<f32>, 256>; // (D, ceil(R / 4)) scaled queries of rows 4v..4v+3
var<workgroup> kst: array<f32, 1088>;     // (WG, KST) 16 dimensions of the key tile
var<workgroup> probs: array<f32, 1024>;   // (R, WG) scores, then probabilities
var<workgroup> slots: array<u32, 64>;     // cache slot of each key in the tile
var<workgroup> run_max: array<f32, 16>;
var<workgroup> run_sum: array<f32, 16>;
var<workgroup> alpha: array<f32, 16>;

// Word i of the K cache, or of the V cache with `v` (a constant where called).
fn cache_word(v: bool, i: u32) -> u32 {
    if (v) {
        return v_cache[i];
    }
    return k_cache[i];
}

// Element e of slot `slot`'s row of the K (V) cache as f32.
fn kv_at(v: bool, slot: u32, e: u32) -> f32 {
    let width = p.num_kv_heads * p.head_dim;
    if (KV_TYPE == KV_Q8) {
        let g = e / 32u;
        let s = unpack2x16float(cache_word(v, q8_scale_word(slot, g, width / 4u)))[g & 1u];
        return q8x4_unpack(cache_word(v, (q8_row(slot) * width + e) >> 2u), s)[e & 3u];
    }
    let i = slot * width + e;
    if (KV_TYPE == KV_FP8) {
        return fp8x4_unpack(cache_word(v, i >> 2u))[i & 3u];
    }
    if (KV_TYPE == KV_F16) {
        return unpack2x16float(cache_word(v, i >> 1u))[i & 1u];
    }
    return bitcast<f32>(cache_word(v, i));
}

fn k_at(slot: u32, e: u32) -> f32 {
    return kv_at(false, slot, e);
}

fn v_at(slot: u32, e: u32) -> f32 {
    return kv_at(true, slot, e);
}

// What one workgroup serves: tokens t0 .. t0 + n of one sequence with the query heads of KV
// head kvh, R = n x G rows; keys lo..hi.
struct Tile {
    t0: u32,
    kvh: u32,
    rows: u32,
    lo: u32,
    hi: u32,
}

// The first key token t sees.
fn first_key(t: u32) -> u32 {
    let n_keys = positions[t] + 1u;
    if (p.window > 0u && n_keys > p.window) {
        return n_keys - p.window;
    }
    return 0u;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t0 = wg.x;
    if (t0 >= step.num_tokens) {
        return;
    }
    let s = token_seq[t0];
    let q_start = seq_info[s * 4u];
    if ((t0 - q_start) % p.tq != 0u) {
        return;
    }
    let kvh = wg.y;
    let d = p.head_dim;
    let g_count = p.num_heads / p.num_kv_heads;
    let n = min(p.tq, q_start + seq_info[s * 4u + 1u] - t0);
    var tile = Tile(t0, kvh, n * g_count, first_key(t0), positions[t0 + n - 1u] + 1u);
    // This workgroup's keys: all the tile's rows see, or its run of whole tiles of them.
    if (SPLITS > 1u) {
        let run = (tile.hi - tile.lo + SPLITS - 1u) / SPLITS;
        let per = (run + WG - 1u) / WG * WG;
        tile.lo = min(tile.lo + wg.z * per, tile.hi);
        tile.hi = min(tile.lo + per, tile.hi);
    }
    let rv = (tile.rows + 3u) / 4u;
    let table = seq_info[s * 4u + 3u];
    let kv_width = p.num_kv_heads * d;
    let kb = kvh * d; // this KV head's offset in a cache row

    for (var e = lid; e < d * rv; e += WG) {
        let i = e / rv;
        let r0 = (e % rv) * 4u;
        qv[e] = vec4<f32>(
            query(tile, r0, i),
            query(tile, r0 + 1u, i),
            query(tile, r0 + 2u, i),
            query(tile, r0 + 3u, i),
        );
    }
    // Each row's softmax starts from its head's sink, where the run is the whole context
    // (the second pass adds it to split runs).
    if (lid < tile.rows) {
        let whole = SPLITS == 1u;
        run_max[lid] = select(NEG, sink(kvh * g_count + lid % g_count), whole);
        run_sum[lid] = select(0.0, 1.0, whole);
    }
    // Outputs e = lid + WG * r for r < 16, component r % 4 of acc[r / 4]: named vectors, never
    // an array indexed in a loop, which drivers may keep in local memory.
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    workgroupBarrier();

    for (var j0 = tile.lo; j0 < tile.hi; j0 += WG) {
        let count = min(WG, tile.hi - j0);
        let j = j0 + lid;
        if (lid < count) {
            slots[lid] = block_tables[table + j / p.block_size] * p.block_size + j % p.block_size;
        }
        workgroupBarrier();
        // Scores of key j for rows 4v..4v+3 in s_v.
        var s0 = vec4<f32>(0.0);
        var s1 = vec4<f32>(0.0);
        var s2 = vec4<f32>(0.0);
        var s3 = vec4<f32>(0.0);
        for (var i0 = 0u; i0 < d; i0 += CH) {
            // Dimensions i0..i0+CH of the tile's keys, invocations in order along a key's.
            for (var m = 0u; m < CH; m++) {
                let e = lid + m * WG;
                let jj = e / CH;
                let ii = i0 + e % CH;
                var k = 0.0;
                if (jj < count && ii < d) {
                    k = k_at(slots[jj], kb + ii);
                }
                kst[jj * KST + e % CH] = k;
            }
            workgroupBarrier();
            let chunk = min(CH, d - i0);
            for (var ii = 0u; ii < chunk; ii++) {
                let k = vec4<f32>(kst[lid * KST + ii]);
                let q = (i0 + ii) * rv;
                s0 = fma(qv[q], k, s0);
                if (rv > 1u) {
                    s1 = fma(qv[q + 1u], k, s1);
                }
                if (rv > 2u) {
                    s2 = fma(qv[q + 2u], k, s2);
                }
                if (rv > 3u) {
                    s3 = fma(qv[q + 3u], k, s3);
                }
            }
            workgroupBarrier();
        }
        put_scores(tile, 0u, s0, lid, j);
        put_scores(tile, 4u, s1, lid, j);
        put_scores(tile, 8u, s2, lid, j);
        put_scores(tile, 12u, s3, lid, j);
        workgroupBarrier();
        if (lid < tile.rows) {
            // Row r's token sees keys lo_r..hi_r of this tile (relative to j0).
            let r = lid;
            let t = tile.t0 + r / g_count;
            let lo_r = max(first_key(t), j0) - j0;
            let hi_r = max(min(positions[t] + 1u, j0 + count), j0) - j0;
            var m = run_max[r];
            for (var i = lo_r; i < hi_r; i++) {
                m = max(m, probs[r * WG + i]);
            }
            let a = exp(run_max[r] - m);
            var sum = 0.0;
            for (var i = 0u; i < WG; i++) {
                var e = 0.0;
                if (i >= lo_r && i < hi_r) {
                    e = exp(probs[r * WG + i] - m);
                }
                probs[r * WG + i] = e;
                sum += e;
            }
            run_sum[r] = run_sum[r] * a + sum;
            run_max[r] = m;
            alpha[r] = a;
        }
        workgroupBarrier();
        let gd = tile.rows * d;
        acc0 = pv4(lid, acc0, count, kv_width, kb, gd);
        acc1 = pv4(lid + 4u * WG, acc1, count, kv_width, kb, gd);
        acc2 = pv4(lid + 8u * WG, acc2, count, kv_width, kb, gd);
        acc3 = pv4(lid + 12u * WG, acc3, count, kv_width, kb, gd);
        workgroupBarrier();
    }

    let at = vec3<u32>(t0, kvh, wg.z);
    let gd = tile.rows * d;
    store4(lid, acc0, at, gd);
    store4(lid + 4u * WG, acc1, at, gd);
    store4(lid + 8u * WG, acc2, at, gd);
    store4(lid + 12u * WG, acc3, at, gd);
}

// Dimension i of row r's scaled query (0 past the tile's rows).
fn query(tile: Tile, r: u32, i: u32) -> f32 {
    if (r >= tile.rows) {
        return 0.0;
    }
    let g_count = p.num_heads / p.num_kv_heads;
    let h = tile.kvh * g_count + r % g_count;
    return qkv[(tile.t0 + r / g_count) * p.qkv_stride + h * p.head_dim + i] * p.scale;
}

// Writes the scores of invocation lid's key, key j, for rows r0..r0+3 (those of the tile).
fn put_scores(tile: Tile, r0: u32, s: vec4<f32>, lid: u32, j: u32) {
    let g_count = p.num_heads / p.num_kv_heads;
    for (var c = 0u; c < 4u; c++) {
        let r = r0 + c;
        if (r < tile.rows) {
            let h = tile.kvh * g_count + r % g_count;
            let query = positions[tile.t0 + r / g_count];
            // (A key past the row's own is masked after; its bias is never read.)
            let score = with_alibi(soft_capped(s[c], SOFTCAP), h, min(j, query), query);
            probs[r * WG + lid] = score;
        }
    }
}

// Outputs e0, e0 + WG, e0 + 2 WG, e0 + 3 WG after a key tile: rescaled by their rows' alpha,
// plus the tile's probabilities times the values. One pass over the keys loads the four
// outputs' values together, so the loads of a key are in flight at once rather than each
// waiting on the one before. Outputs past the tile's rows (e >= gd) stay as they are.
fn pv4(e0: u32, acc: vec4<f32>, count: u32, kv_width: u32, kb: u32, gd: u32) -> vec4<f32> {
    if (e0 >= gd) {
        return acc;
    }
    let d = p.head_dim;
    let e = vec4<u32>(e0, e0 + WG, e0 + 2u * WG, e0 + 3u * WG);
    let live = e < vec4<u32>(gd);
    // A dead output reads row 0 and dimension 0 and keeps its value (alpha 1, no products).
    let ev = select(vec4<u32>(0u), e, live);
    let r = ev / d;
    let col = kb + ev % d;
    let a = select(vec4<f32>(1.0), vec4<f32>(alpha[r.x], alpha[r.y], alpha[r.z], alpha[r.w]), live);
    let keep = select(vec4<f32>(0.0), vec4<f32>(1.0), live);
    var v = acc * a;
    for (var jj = 0u; jj < count; jj++) {
        let slot = slots[jj];
        let vals = vec4<f32>(v_at(slot, col.x), v_at(slot, col.y), v_at(slot, col.z), v_at(slot, col.w));
        let pr = vec4<f32>(probs[r.x * WG + jj], probs[r.y * WG + jj], probs[r.z * WG + jj], probs[r.w * WG + jj]);
        v = fma(pr * keep, vals, v);
    }
    return v;
}

// Writes output e (row e / D, dimension e % D) of the tile whose first token, KV head and run
// are `at`: normalized into `out`, or, split, as it is with the run's max and sum (a sum of 0:
// no keys of this row in this run) into `partial`.
fn store(e: u32, v: f32, at: vec3<u32>, gd: u32) {
    if (e >= gd) {
        return;
    }
    let d = p.head_dim;
    let g_count = p.num_heads / p.num_kv_heads;
    let r = e / d;
    let t = at.x + r / g_count;
    let h = at.y * g_count + r % g_count;
    if (SPLITS > 1u) {
        let base = ((t * p.num_heads + h) * SPLITS + at.z) * (d + 2u);
        partial[base + e % d] = v;
        if (e % d == 0u) {
            partial[base + d] = run_max[r];
            partial[base + d + 1u] = run_sum[r];
        }
    } else {
        out[t * p.num_heads * d + h * d + e % d] = v / run_sum[r];
    }
}

fn store4(e0: u32, acc: vec4<f32>, at: vec3<u32>, gd: u32) {
    store(e0, acc.x, at, gd);
    store(e0 + WG, acc.y, at, gd);
    store(e0 + 2u * WG, acc.z, at, gd);
    store(e0 + 3u * WG, acc.w, at, gd);
}
