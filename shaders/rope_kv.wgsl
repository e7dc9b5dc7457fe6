// Rotary embedding on q and k, then K and V written into the paged cache.
//   qkv[t] = [q heads | k heads | v heads], each head_dim wide (HF "rotate_half" layout):
//   for i < D/2, angle = pos * inv_freq[i]:
//     x[i]       = x[i] * cos - x[i + D/2] * sin
//     x[i + D/2] = x[i + D/2] * cos + x[i] * sin
//   then k_cache[slot, h, :] = k[h, :], v_cache[slot, h, :] = v[h, :], slot = slot_mapping[t].
// Grid: (num_tokens, 1, 1), 64 invocations per token.

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, pad: u32 }
struct Params { num_heads: u32, num_kv_heads: u32, head_dim: u32, pad: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> positions: array<u32>;     // (T)
@group(0) @binding(3) var<storage, read> slot_mapping: array<u32>;  // (T)
@group(0) @binding(4) var<storage, read> inv_freq: array<f32>;      // (D / 2)
@group(0) @binding(5) var<storage, read_write> qkv: array<f32>;     // (T, (H + 2 * KVH) * D)
@group(0) @binding(6) var<storage, read_write> k_cache: array<f32>; // (slots, KVH, D)
@group(0) @binding(7) var<storage, read_write> v_cache: array<f32>; // (slots, KVH, D)

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
    let pos = f32(positions[t]);
    let slot = slot_mapping[t];
    let kv_width = p.num_kv_heads * d;

    // q and k heads: rotate pairs (i, i + D/2); k pairs also go to the cache.
    let rotated = (p.num_heads + p.num_kv_heads) * half_d;
    for (var e = lid.x; e < rotated; e += 64u) {
        let head = e / half_d;
        let i = e % half_d;
        let angle = pos * inv_freq[i];
        let c = cos(angle);
        let s = sin(angle);
        let a = row + head * d + i;
        let x1 = qkv[a];
        let x2 = qkv[a + half_d];
        let r1 = x1 * c - x2 * s;
        let r2 = x2 * c + x1 * s;
        qkv[a] = r1;
        qkv[a + half_d] = r2;
        if (head >= p.num_heads) {
            let kh = head - p.num_heads;
            let dst = slot * kv_width + kh * d + i;
            k_cache[dst] = r1;
            k_cache[dst + half_d] = r2;
        }
    }
    let v_start = row + (p.num_heads + p.num_kv_heads) * d;
    for (var e = lid.x; e < kv_width; e += 64u) {
        v_cache[slot * kv_width + e] = qkv[v_start + e];
    }
}
