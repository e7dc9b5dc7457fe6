// Paged attention for CPU-backed adapters with subgroups of at least 8: the same contract as
// attention.wgsl (causal over keys 0..=positions[t] of the token's sequence, read through its
// block table, each token seeing at most the latest `window` keys), shaped for a device that
// runs a workgroup's invocations as the lanes of SIMD registers, where a per-lane load or an
// array indexed at run time costs a step per lane and a barrier is dear.
//
// A workgroup (one subgroup of 8 invocations) serves ROWS (at most 8) consecutive query rows
// of one segment and one KV head, a row being (token, query head of that KV head) with heads
// fastest. With ROWS = 8: 8 tokens of a prompt with one head per KV head, 2 tokens and 2 more
// rows with 3, one decode row's heads. Steps of decoding tokens take ROWS = G (G < 8 query
// heads per KV head), so no row is worked on twice. All lanes walk the same keys. A key's K
// and V rows are read once for all the rows, each lane loading every 8th octet of 8 elements
// (one 16-byte load from an f16 cache: lavapipe makes a per-lane load a loop over the lanes,
// whatever its width), and passed around with subgroupBroadcast: each lane scores its own
// row against the whole K row (lanes past ROWS repeat the last row), and accumulates its own
// octets of V for every row. Each lane masks the keys outside its row's causal range and
// window. Keys come 8 at a time; the online softmax rescales once per 8 keys.
// The head size is the override D4 (head_dim / 4), so every loop over it unrolls and the
// arrays stay in registers. No workgroup memory, no barriers.
//
// Grid: (tokens, KV heads, ceil(G / ROWS)), G query heads per KV head. A segment's rows are
// cut into blocks of ROWS; block b belongs to the token holding its first row (token
// floor(ROWS b / G) of the segment), and workgroup (t, kvh, z) serves block
// ceil(i G / ROWS) + z of t's segment, i being t's index there, if it belongs to token i,
// and returns otherwise.
// Positions rise by one along a segment. The cache holds elements of type KV_TYPE
// (kv_codec.wgsl; kv_layout.rs owns the layout), read 8 at a time. Needs head_dim % 8 == 0 and
// head_dim <= 256.
// (naga takes the subgroup built-ins without `enable subgroups;`; the device must have been
// opened with wgpu's SUBGROUP feature.)

override KV_TYPE: u32 = 1u; // kv_codec.wgsl
override D4: u32 = 16u; // head_dim / 4, at most 64
override ROWS: u32 = 8u; // query rows a workgroup serves, at most LANES
override SOFTCAP: f32 = 0.0; // Gemma 2: scores soft-capped (soft_cap.wgsl); 0: none
override ALIBI: f32 = 0.0;   // BLOOM, MPT: ALiBi's biases (alibi.wgsl); 0: none

const LANES: u32 = 8u;
const KEYS: u32 = 8u; // keys per rescale

// Step, Params (bindings 0 and 1): attention_params.wgsl, appended.

@group(0) @binding(2) var<storage, read> positions: array<u32>;     // (T)
@group(0) @binding(3) var<storage, read> token_seq: array<u32>;     // (T) sequence of each token
@group(0) @binding(4) var<storage, read> seq_info: array<u32>;      // (S, 4): q_start, q_len, ctx_len, table offset
@group(0) @binding(5) var<storage, read> block_tables: array<u32>;  // concatenated tables
@group(0) @binding(6) var<storage, read> qkv: array<vec4<f32>>;     // (T, qkv_stride / 4), q first
@group(0) @binding(7) var<storage, read> k_cache: array<vec4<u32>>; // (slots, KVH, D) packed
@group(0) @binding(8) var<storage, read> v_cache: array<vec4<u32>>; // (slots, KVH, D) packed
@group(0) @binding(9) var<storage, read_write> out: array<vec4<f32>>; // (T, H * D / 4)

// Elements 8o..8o+8 of slot `slot`'s row of the K (V) cache as f32: one vec4<u32> of halves,
// two of f32 bits, or half of one of fp8 or q8_0 (whose octets lie in one group of 32).
struct Octet { lo: vec4<f32>, hi: vec4<f32> }

fn halves(w: vec4<u32>) -> Octet {
    return Octet(
        vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y)),
        vec4<f32>(unpack2x16float(w.z), unpack2x16float(w.w)),
    );
}

fn quads(w: vec4<u32>, o: u32) -> Octet {
    let pair = select(w.xy, w.zw, (o & 1u) == 1u);
    return Octet(fp8x4_unpack(pair.x), fp8x4_unpack(pair.y));
}

fn q8_quads(w: vec4<u32>, o: u32, scale: f32) -> Octet {
    let pair = select(w.xy, w.zw, (o & 1u) == 1u);
    return Octet(q8x4_unpack(pair.x, scale), q8x4_unpack(pair.y, scale));
}

// The scale word of slot `slot`'s octet o (of a round whose first octet is `first`): where
// a head is one group or whole pairs of them (head_dim 32 or a multiple of 64), a round's 8
// octets share one word, found from values every lane has (`first`), so the device may load
// it once for the subgroup; otherwise each lane finds its own.
fn q8_word_of(slot: u32, o: u32, first: u32, row_words: u32) -> u32 {
    if (D4 == 8u || D4 % 16u == 0u) {
        return q8_scale_word(slot, first / 4u, row_words);
    }
    return q8_scale_word(slot, o / 4u, row_words);
}

// Quad i of words of the K cache, or of the V cache with `v` (a constant where called).
fn cache_quad(v: bool, i: u32) -> vec4<u32> {
    if (v) {
        return v_cache[i];
    }
    return k_cache[i];
}

fn kv8(v: bool, slot: u32, o: u32, first: u32) -> Octet {
    let w8 = p.num_kv_heads * p.head_dim / 8u;
    if (KV_TYPE == KV_Q8) {
        let sw = q8_word_of(slot, o, first, 2u * w8);
        let s = unpack2x16float(cache_quad(v, sw >> 2u)[sw & 3u])[(o / 4u) & 1u];
        let oi = q8_row(slot) * w8 + o;
        return q8_quads(cache_quad(v, oi >> 1u), oi, s);
    }
    let i = slot * w8 + o;
    if (KV_TYPE == KV_FP8) {
        return quads(cache_quad(v, i >> 1u), i);
    }
    if (KV_TYPE == KV_F16) {
        return halves(cache_quad(v, i));
    }
    return Octet(bitcast<vec4<f32>>(cache_quad(v, 2u * i)), bitcast<vec4<f32>>(cache_quad(v, 2u * i + 1u)));
}

fn k8(slot: u32, o: u32, first: u32) -> Octet {
    return kv8(false, slot, o, first);
}

fn v8(slot: u32, o: u32, first: u32) -> Octet {
    return kv8(true, slot, o, first);
}

// The first key a token at `n_keys - 1` sees.
fn window_start(n_keys: u32) -> u32 {
    if (p.window > 0u && n_keys > p.window) {
        return n_keys - p.window;
    }
    return 0u;
}

// Every lane's `v`, in lane order (subgroupBroadcast takes a constant lane).
fn lanes_of(v: f32) -> array<f32, LANES> {
    return array<f32, LANES>(
        subgroupBroadcast(v, 0u),
        subgroupBroadcast(v, 1u),
        subgroupBroadcast(v, 2u),
        subgroupBroadcast(v, 3u),
        subgroupBroadcast(v, 4u),
        subgroupBroadcast(v, 5u),
        subgroupBroadcast(v, 6u),
        subgroupBroadcast(v, 7u),
    );
}

@compute @workgroup_size(8)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let t = wg.x;
    if (t >= step.num_tokens) {
        return;
    }
    let kvh = wg.y;
    let group = p.num_heads / p.num_kv_heads;
    let seq = token_seq[t];
    let q_start = seq_info[seq * 4u];
    let rows = seq_info[seq * 4u + 1u] * group;
    let table = seq_info[seq * 4u + 3u];
    let i = t - q_start;
    let block = (i * group + ROWS - 1u) / ROWS + wg.z;
    if (block * ROWS >= (i + 1u) * group) {
        return; // the block's first row is a later token's
    }
    let first_row = block * ROWS;
    let last_row = min(first_row + ROWS, rows) - 1u;
    // The keys some row of the block sees: from the first row's window to the last row.
    let keys_begin = window_start(positions[t] + 1u);
    let keys_end = positions[q_start + last_row / group] + 1u;

    // This lane's row; lanes past the segment's last row repeat it and store nothing.
    let row = min(first_row + lane, last_row);
    let rt = q_start + row / group;
    let h = kvh * group + row % group;
    let n_keys = positions[rt] + 1u;
    let first = window_start(n_keys);

    // Octets of 8 elements, in rounds of 8: lane L holds octet 8 r + L of a K or V row. q is
    // this lane's row in chunks of 4, zero past head_dim; acc[2 (8 r + R)] and the next hold
    // the output of row R, octet 8 r + L.
    let d4 = D4;
    let d8 = d4 / 2u;
    let rounds = (d8 + LANES - 1u) / LANES;
    var q: array<vec4<f32>, 64>;
    var acc: array<vec4<f32>, 64>;
    let qb = rt * (p.qkv_stride / 4u) + h * d4;
    for (var c = 0u; c < 2u * rounds * LANES; c++) {
        q[c] = select(vec4<f32>(0.0), qkv[qb + min(c, d4 - 1u)] * p.scale, c < d4);
        acc[c] = vec4<f32>(0.0);
    }
    // The softmax starts from the row's head's sink (its exponential's share 1 at its own max).
    var m = sink(h);
    var l = 1.0;
    // Keys in groups of 8 from a multiple of 8 (the keys before a row's first are masked), so
    // that a group lies in one cache block (block_size is a multiple of 8): one block-table
    // load a group.
    for (var j0 = keys_begin - keys_begin % KEYS; j0 < keys_end; j0 += KEYS) {
        var s: array<f32, KEYS>;
        var slots: array<u32, KEYS>;
        var m_new = m;
        let block_start = block_tables[table + j0 / p.block_size] * p.block_size;
        for (var k = 0u; k < KEYS; k++) {
            let j = min(j0 + k, keys_end - 1u);
            let slot = block_start + j % p.block_size;
            slots[k] = slot;
            var dot4 = vec4<f32>(0.0);
            for (var r = 0u; r < rounds; r++) {
                let c = 2u * r * LANES;
                let kc = k8(slot, kvh * d8 + min(r * LANES + lane, d8 - 1u), kvh * d8 + r * LANES);
                dot4 += q[c] * subgroupBroadcast(kc.lo, 0u) + q[c + 1u] * subgroupBroadcast(kc.hi, 0u);
                dot4 += q[c + 2u] * subgroupBroadcast(kc.lo, 1u) + q[c + 3u] * subgroupBroadcast(kc.hi, 1u);
                dot4 += q[c + 4u] * subgroupBroadcast(kc.lo, 2u) + q[c + 5u] * subgroupBroadcast(kc.hi, 2u);
                dot4 += q[c + 6u] * subgroupBroadcast(kc.lo, 3u) + q[c + 7u] * subgroupBroadcast(kc.hi, 3u);
                dot4 += q[c + 8u] * subgroupBroadcast(kc.lo, 4u) + q[c + 9u] * subgroupBroadcast(kc.hi, 4u);
                dot4 += q[c + 10u] * subgroupBroadcast(kc.lo, 5u) + q[c + 11u] * subgroupBroadcast(kc.hi, 5u);
                dot4 += q[c + 12u] * subgroupBroadcast(kc.lo, 6u) + q[c + 13u] * subgroupBroadcast(kc.hi, 6u);
                dot4 += q[c + 14u] * subgroupBroadcast(kc.lo, 7u) + q[c + 15u] * subgroupBroadcast(kc.hi, 7u);
            }
            let seen = j0 + k >= first && j0 + k < n_keys;
            let score = soft_capped(dot4.x + dot4.y + dot4.z + dot4.w, SOFTCAP);
            s[k] = select(-3.0e38, with_alibi(score, h, j0 + k, n_keys - 1u), seen);
            m_new = max(m_new, s[k]);
        }
        let a = exp(m - m_new);
        l *= a;
        let ar = lanes_of(a);
        for (var r = 0u; r < rounds; r++) {
            for (var row = 0u; row < ROWS; row++) {
                let i = 2u * (r * LANES + row);
                acc[i] *= ar[row];
                acc[i + 1u] *= ar[row];
            }
        }
        for (var k = 0u; k < KEYS; k++) {
            let e = exp(s[k] - m_new);
            l += e;
            let er = lanes_of(e);
            for (var r = 0u; r < rounds; r++) {
                let vc = v8(slots[k], kvh * d8 + min(r * LANES + lane, d8 - 1u), kvh * d8 + r * LANES);
                for (var row = 0u; row < ROWS; row++) {
                    let i = 2u * (r * LANES + row);
                    acc[i] += er[row] * vc.lo;
                    acc[i + 1u] += er[row] * vc.hi;
                }
            }
        }
        m = m_new;
    }
    // Row R's output, octet 8 r + L, from lane L; the rows' sums from their own lanes.
    let lr = lanes_of(l);
    for (var row = 0u; row < ROWS; row++) {
        let r_row = first_row + row;
        if (r_row > last_row) {
            break;
        }
        let ot = q_start + r_row / group;
        let ob = ot * p.num_heads * d4 + (kvh * group + r_row % group) * d4;
        for (var r = 0u; r < rounds; r++) {
            let o = r * LANES + lane;
            if (o < d8) {
                let i = 2u * (r * LANES + row);
                out[ob + 2u * o] = acc[i] / lr[row];
                out[ob + 2u * o + 1u] = acc[i + 1u] / lr[row];
            }
        }
    }
}
