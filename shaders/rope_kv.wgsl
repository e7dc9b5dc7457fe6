// Rotary embedding on q and k, then K and V written into the paged cache. With qk_norm 1
// (Qwen3, Gemma 3), each head of q and of k is first RMS-normalized over its head_dim and
// multiplied by its gain (qk_gain: the q gain, then the k gain, head_dim each); with qk_norm 3
// (Hunyuan) the same once the heads have turned; with qk_norm 2 (OLMo 2), all of q and all of
// k first, each as one vector (qk_gain as wide as q, then as k); with qk_norm 4 (Command-R+),
// each head LayerNorm'd first (its mean taken out), each with a gain of its own (qk_gain as
// wide as q, then as k).
//   qkv[t] = [q heads | k heads | v heads], each head_dim wide, q and k heads in the rotary
//   pair layout (rope_kv.rs: the checkpoint's pair (i, i + D/2) at (2i, 2i + 1)):
//   for i < D/2, (cos, sin) = rope[pos, i], precomputed on the CPU in f64 (WGSL's sin and cos
//   are only accurate on [-pi, pi], and pos * inv_freq in f32 loses ~1e-3 rad by pos 8192):
//     x[2i]     = x[2i] * cos - x[2i + 1] * sin
//     x[2i + 1] = x[2i + 1] * cos + x[2i] * sin
//   then k_cache[slot, h, :] = k[h, :], v_cache[slot, h, :] = v[h, :], slot = slot_mapping[t].
// Layers without the q/k norm do this in the QKV product's epilogue (epilogue_rotary.wgsl).
// The cache holds elements of type KV_TYPE (kv_codec.wgsl; kv_layout.rs owns the layout); the rotated
// row is finished in qkv before it is packed (the q/k norm needs the whole head first).
// Grid: (num_tokens, 1, 1), 64 invocations per token.

override KV_TYPE: u32 = 1u; // kv_codec.wgsl

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, pad: u32 }
struct Params {
    num_heads: u32,
    num_kv_heads: u32,
    head_dim: u32,
    max_positions: u32,
    qk_norm: u32, // 0: none, 1: each head, 2: all of q and all of k, 3: each head after turning,
                  // 4: each head LayerNorm'd with its own gain
    eps: f32,
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> positions: array<u32>;     // (T)
@group(0) @binding(3) var<storage, read> slot_mapping: array<u32>;  // (T)
@group(0) @binding(4) var<storage, read> rope: array<vec2<f32>>;    // (max_positions, D / 2) cos, sin
@group(0) @binding(5) var<storage, read_write> qkv: array<f32>;     // (T, (H + 2 * KVH) * D)
@group(0) @binding(6) var<storage, read_write> k_cache: array<u32>; // (slots, KVH, D) packed
@group(0) @binding(7) var<storage, read_write> v_cache: array<u32>; // (slots, KVH, D) packed
@group(0) @binding(8) var<storage, read> qk_gain: array<f32>;       // (2 * D) or ((H + KVH) * D), or a dummy

var<workgroup> sums: array<vec2<f32>, 64>; // the q and k sums of squares of qk_norm 2

// Word `w` of a cache row from the f32 values starting at qkv[src].
fn pack_word(src: u32, w: u32) -> u32 {
    if (KV_TYPE == KV_FP8) {
        let a = src + 4u * w;
        return fp8x4_pack(vec4<f32>(qkv[a], qkv[a + 1u], qkv[a + 2u], qkv[a + 3u]));
    }
    if (KV_TYPE == KV_F16) {
        return pack2x16float(vec2<f32>(qkv[src + 2u * w], qkv[src + 2u * w + 1u]));
    }
    return bitcast<u32>(qkv[src + w]);
}

// q and k heads of the token whose row starts at `row`: RMS-normalize each, or LayerNorm each
// with a gain of its own (`layer`), one head per invocation (`lane` of 64).
fn norm_heads(row: u32, lane: u32, layer: bool) {
    let d = p.head_dim;
    for (var head = lane; head < p.num_heads + p.num_kv_heads; head += 64u) {
        let a = row + head * d;
        var mean = 0.0;
        if (layer) {
            for (var i = 0u; i < d; i++) {
                mean += qkv[a + i];
            }
            mean /= f32(d);
        }
        var ss = 0.0;
        for (var i = 0u; i < d; i++) {
            let x = qkv[a + i] - mean;
            ss += x * x;
        }
        let s = inverseSqrt(ss / f32(d) + p.eps);
        // k heads use the second gain; a gain for each head follows the heads.
        let g = select(select(0u, d, head >= p.num_heads), head * d, layer);
        for (var i = 0u; i < d; i++) {
            qkv[a + i] = (qkv[a + i] - mean) * s * qk_gain[g + i];
        }
    }
    storageBarrier();
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let t = wg.x;
    if (t >= step.num_tokens) {
        return;
    }
    let d = p.head_dim;
    let half_d = d / 2u;
    let width = (p.num_heads + 2u * p.num_kv_heads) * d;
    let row = t * width;
    let pos = min(positions[t], p.max_positions - 1u); // the runner rejects larger positions
    let slot = slot_mapping[t];
    let kv_width = p.num_kv_heads * d;

    // All of q and all of k: RMS-normalize each (OLMo 2), the sums of squares reduced over the
    // workgroup.
    if (p.qk_norm == 2u) {
        let q_width = p.num_heads * d;
        var ss = vec2<f32>(0.0);
        for (var e = lid.x; e < q_width + kv_width; e += 64u) {
            let x = qkv[row + e];
            ss += select(vec2<f32>(0.0, x * x), vec2<f32>(x * x, 0.0), e < q_width);
        }
        sums[lid.x] = ss;
        workgroupBarrier();
        for (var stride = 32u; stride > 0u; stride >>= 1u) {
            if (lid.x < stride) {
                sums[lid.x] += sums[lid.x + stride];
            }
            workgroupBarrier();
        }
        let total = sums[0];
        let scale = inverseSqrt(total / vec2<f32>(f32(q_width), f32(kv_width)) + p.eps);
        for (var e = lid.x; e < q_width + kv_width; e += 64u) {
            qkv[row + e] *= select(scale.y, scale.x, e < q_width) * qk_gain[e];
        }
        storageBarrier();
    }

    if (p.qk_norm == 1u || p.qk_norm == 4u) {
        norm_heads(row, lid.x, p.qk_norm == 4u);
    }

    // q and k heads: rotate pairs (2i, 2i + 1) in place.
    let rotated = (p.num_heads + p.num_kv_heads) * half_d;
    for (var e = lid.x; e < rotated; e += 64u) {
        let head = e / half_d;
        let i = e % half_d;
        let cs = rope[pos * half_d + i];
        let a = row + head * d + 2u * i;
        let x1 = qkv[a];
        let x2 = qkv[a + 1u];
        qkv[a] = x1 * cs.x - x2 * cs.y;
        qkv[a + 1u] = x2 * cs.x + x1 * cs.y;
    }
    storageBarrier();
    if (p.qk_norm == 3u) {
        norm_heads(row, lid.x, false);
    }

    // K (rotated) and V rows into the cache slot, one u32 word per iteration.
    if (KV_TYPE == KV_Q8) {
        // Two groups of 32 (64 elements: 16 words and one word of scales) per iteration.
        let row_words = kv_width / 4u;
        for (var u = lid.x; u < 2u * (kv_width / 64u); u += 64u) {
            let is_v = u >= kv_width / 64u;
            let pair = u % (kv_width / 64u);
            let src = select(row + p.num_heads * d, row + p.num_heads * d + kv_width, is_v) + 64u * pair;
            var m = vec2<f32>(0.0);
            for (var i = 0u; i < 64u; i++) {
                m[i / 32u] = max(m[i / 32u], abs(qkv[src + i]));
            }
            let scales = q8_scales(m);
            let s = vec2<f32>(q8_scale_of(scales, 0u), q8_scale_of(scales, 1u));
            let data = q8_row(slot) * row_words + 16u * pair;
            let sw = q8_scale_word(slot, 2u * pair, row_words);
            for (var w = 0u; w < 16u; w++) {
                let a = src + 4u * w;
                let word = q8x4_pack(vec4<f32>(qkv[a], qkv[a + 1u], qkv[a + 2u], qkv[a + 3u]), s[w / 8u]);
                if (is_v) {
                    v_cache[data + w] = word;
                } else {
                    k_cache[data + w] = word;
                }
            }
            if (is_v) {
                v_cache[sw] = scales;
            } else {
                k_cache[sw] = scales;
            }
        }
        return;
    }
    let per_word = select(select(1u, 2u, KV_TYPE == KV_F16), 4u, KV_TYPE == KV_FP8);
    let words = kv_width / per_word;
    let k_start = row + p.num_heads * d;
    let v_start = k_start + kv_width;
    for (var w = lid.x; w < words; w += 64u) {
        k_cache[slot * words + w] = pack_word(k_start, w);
        v_cache[slot * words + w] = pack_word(v_start, w);
    }
}
