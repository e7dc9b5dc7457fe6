// The QKV product's outputs rotated and the KV cache written (a pair epilogue, see
// matmul_epilogue.wgsl): rope_kv.wgsl's work without its launch, for layers with no per-head
// q/k norm. The output columns are [q heads | k heads | v heads] of HEAD_DIM each, the rows of
// q and k in the rotary pair layout (each head's pairs (i, i + D/2) adjacent, rope_kv.rs), so
// outputs (2i, 2i + 1) of a head are one rotation pair (cos, sin = rope[pos, i]) and, for the
// cache, one packed f16 word (half an fp8 one). q goes to y (the bias added first, as `store` does); k (rotated)
// and v go only to the cache slot of row t, slot_mapping[t]. The chunk's columns start at
// p.out_offset (even).

override HEAD_DIM: u32;
override Q_WIDTH: u32;       // query heads * HEAD_DIM
override KV_WIDTH: u32;      // KV heads * HEAD_DIM
override MAX_POSITIONS: u32; // rows of the rotary table
override KV_TYPE: u32 = 1u; // the cache's elements (kv_codec.wgsl), f32, f16 or fp8

@group(0) @binding(7) var<storage, read> positions: array<u32>;     // (T)
@group(0) @binding(8) var<storage, read> slot_mapping: array<u32>;  // (T)
@group(0) @binding(9) var<storage, read> rope: array<vec2<f32>>;    // (MAX_POSITIONS, D / 2)
// Atomic so that an fp8 pair can write its half of a word (the other half is another
// invocation's pair).
@group(0) @binding(10) var<storage, read_write> k_cache: array<atomic<u32>>; // (slots, KVH, D) packed
@group(0) @binding(11) var<storage, read_write> v_cache: array<atomic<u32>>; // (slots, KVH, D) packed

// Outputs n (even) and n + 1 of row t, already scaled.
fn store_pair(t: u32, n: u32, a: f32, b: f32) {
    var v = vec2<f32>(a, b);
    if ((p.flags & 2u) != 0u) {
        v += vec2<f32>(bias[n], bias[n + 1u]);
    }
    let c = p.out_offset + n;
    if (c < Q_WIDTH + KV_WIDTH) {
        // the runner rejects positions past the table
        let pos = min(positions[t], MAX_POSITIONS - 1u);
        let cs = rope[pos * (HEAD_DIM / 2u) + (c % HEAD_DIM) / 2u];
        v = vec2<f32>(v.x * cs.x - v.y * cs.y, v.y * cs.x + v.x * cs.y);
        if (c < Q_WIDTH) {
            let idx = t * p.ldy + c;
            y[idx] = v.x;
            y[idx + 1u] = v.y;
            return;
        }
    }
    let slot = slot_mapping[t];
    let is_k = c < Q_WIDTH + KV_WIDTH;
    let j = c - select(Q_WIDTH + KV_WIDTH, Q_WIDTH, is_k); // column within the cache row
    if (KV_TYPE == KV_FP8) {
        // Half a word: the pair's 16 bits cleared, then set.
        let e = slot * KV_WIDTH + j;
        let shift = (e & 2u) * 8u;
        let bits = fp8x2_pack(v) << shift;
        let keep = ~(0xffffu << shift);
        if (is_k) {
            atomicAnd(&k_cache[e / 4u], keep);
            atomicOr(&k_cache[e / 4u], bits);
        } else {
            atomicAnd(&v_cache[e / 4u], keep);
            atomicOr(&v_cache[e / 4u], bits);
        }
    } else if (KV_TYPE == KV_F16) {
        let w = slot * (KV_WIDTH / 2u) + j / 2u;
        let word = pack2x16float(v);
        if (is_k) {
            atomicStore(&k_cache[w], word);
        } else {
            atomicStore(&v_cache[w], word);
        }
    } else {
        let w = slot * KV_WIDTH + j;
        if (is_k) {
            atomicStore(&k_cache[w], bitcast<u32>(v.x));
            atomicStore(&k_cache[w + 1u], bitcast<u32>(v.y));
        } else {
            atomicStore(&v_cache[w], bitcast<u32>(v.x));
            atomicStore(&v_cache[w + 1u], bitcast<u32>(v.y));
        }
    }
}
