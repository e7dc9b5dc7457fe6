// Paged attention with one invocation per (query token, head), for CPU-backed adapters: the
// same contract as attention.wgsl (causal over keys 0..=positions[t] of the token's sequence,
// read through its block table), without workgroup memory or barriers. Each invocation keeps
// its query and output row in registers and runs the online softmax over its keys; query heads
// that share a KV head sit in neighbouring lanes and read the same cache lines.
// The cache holds elements of type KV_TYPE (kv_codec.wgsl; kv_layout.rs owns the layout),
// read 4 at a time. Needs head_dim % 4 == 0 and head_dim <= 256.
// Grid: (ceil(num_tokens * num_heads / 64), 1, 1).

override KV_TYPE: u32 = 1u; // kv_codec.wgsl
override SOFTCAP: f32 = 0.0; // Gemma 2: scores soft-capped (soft_cap.wgsl); 0: none
override ALIBI: f32 = 0.0;   // BLOOM, MPT: ALiBi's biases (alibi.wgsl); 0: none

// Step, Params (bindings 0 and 1): attention_params.wgsl, appended.

@group(0) @binding(2) var<storage, read> positions: array<u32>;     // (T)
@group(0) @binding(3) var<storage, read> token_seq: array<u32>;     // (T) sequence of each token
@group(0) @binding(4) var<storage, read> seq_info: array<u32>;      // (S, 4): q_start, q_len, ctx_len, table offset
@group(0) @binding(5) var<storage, read> block_tables: array<u32>;  // concatenated tables
@group(0) @binding(6) var<storage, read> qkv: array<vec4<f32>>;     // (T, qkv_stride / 4), q first
@group(0) @binding(7) var<storage, read> k_cache: array<vec2<u32>>; // (slots, KVH, D) packed
@group(0) @binding(8) var<storage, read> v_cache: array<vec2<u32>>; // (slots, KVH, D) packed
@group(0) @binding(9) var<storage, read_write> out: array<vec4<f32>>; // (T, H * D / 4)

// Pair i of words of the K cache, or of the V cache with `v` (a constant where called).
fn cache_pair(v: bool, i: u32) -> vec2<u32> {
    if (v) {
        return v_cache[i];
    }
    return k_cache[i];
}

// Word i of the K (V) cache.
fn cache_word(v: bool, i: u32) -> u32 {
    return cache_pair(v, i >> 1u)[i & 1u];
}

// Elements 4c..4c+4 of slot `slot`'s row of the K (V) cache as f32: one vec2<u32> of halves,
// two of f32 bits, or one word of fp8 or q8_0.
fn kv4(v: bool, slot: u32, c: u32) -> vec4<f32> {
    let w4 = p.num_kv_heads * p.head_dim / 4u;
    if (KV_TYPE == KV_Q8) {
        let s = unpack2x16float(cache_word(v, q8_scale_word(slot, c / 8u, w4)))[(c / 8u) & 1u];
        return q8x4_unpack(cache_word(v, q8_row(slot) * w4 + c), s);
    }
    let i = slot * w4 + c;
    if (KV_TYPE == KV_FP8) {
        return fp8x4_unpack(cache_word(v, i));
    }
    if (KV_TYPE == KV_F16) {
        let w = cache_pair(v, i);
        return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
    }
    return bitcast<vec4<f32>>(vec4<u32>(cache_pair(v, 2u * i), cache_pair(v, 2u * i + 1u)));
}

fn k4(slot: u32, c: u32) -> vec4<f32> {
    return kv4(false, slot, c);
}

fn v4(slot: u32, c: u32) -> vec4<f32> {
    return kv4(true, slot, c);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.x / p.num_heads;
    let h = gid.x % p.num_heads;
    if (t >= step.num_tokens) {
        return;
    }
    let d4 = p.head_dim / 4u;
    let kvh = h / (p.num_heads / p.num_kv_heads);
    let n_keys = positions[t] + 1u;
    let table = seq_info[token_seq[t] * 4u + 3u];

    var q: array<vec4<f32>, 64>;
    var acc: array<vec4<f32>, 64>;
    let qb = t * (p.qkv_stride / 4u) + h * d4;
    for (var c = 0u; c < d4; c++) {
        q[c] = qkv[qb + c] * p.scale;
        acc[c] = vec4<f32>(0.0);
    }
    // The softmax starts from the sink (its exponential's share 1 at its own max).
    var m = sink(h);
    var l = 1.0;
    var first = 0u;
    if (p.window > 0u && n_keys > p.window) {
        first = n_keys - p.window;
    }
    for (var j = first; j < n_keys; j++) {
        let slot = block_tables[table + j / p.block_size] * p.block_size + j % p.block_size;
        let kb = kvh * d4;
        var s = 0.0;
        for (var c = 0u; c < d4; c++) {
            s += dot(q[c], k4(slot, kb + c));
        }
        s = with_alibi(soft_capped(s, SOFTCAP), h, j, n_keys - 1u);
        let m_new = max(m, s);
        let a = exp(m - m_new);
        let e = exp(s - m_new);
        l = l * a + e;
        for (var c = 0u; c < d4; c++) {
            acc[c] = acc[c] * a + e * v4(slot, kb + c);
        }
        m = m_new;
    }
    let ob = t * p.num_heads * d4 + h * d4;
    for (var c = 0u; c < d4; c++) {
        out[ob + c] = acc[c] / l;
    }
}
