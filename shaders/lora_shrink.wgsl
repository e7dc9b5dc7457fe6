// LoRA, first product: for each token that runs through an adapter, t[row, j] = A[slot, j, :] .
// x'[row, :], x' being the row RMS-normalized with its gain as the normed products see it
// (flags & 1), or the row as is. A holds every adapter slot's matrix transposed, (k x rank)
// with the rank padded with zeros to a multiple of 4, read as vec4s of four ranks;
// lora_expand.wgsl then adds B t to the product's output. Rows with no adapter, or whose
// adapter leaves this matrix alone (bit `slot` of p.present unset), are passed over
// (lora_expand.wgsl passes over the same rows).
// Grid: (num_tokens, 1, 1), a workgroup of 64 per row: lanes take four ranks each, and
// where the rank leaves lanes over, the lanes split k into stripes, summed at the end.

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, pad: u32 }
struct Params { k: u32, rank: u32, flags: u32, eps: f32, present: u32, pad0: u32, pad1: u32, pad2: u32 }

const NONE: u32 = 0xffffffffu;

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> slots: array<u32>;          // (T): each token's adapter or NONE
@group(0) @binding(3) var<storage, read> x: array<f32>;              // (T, k)
@group(0) @binding(4) var<storage, read> gain: array<f32>;           // (k), read with flags & 1
@group(0) @binding(5) var<storage, read> a: array<vec4<f32>>;        // (slots, k, rank / 4)
@group(0) @binding(6) var<storage, read_write> t: array<vec4<f32>>;  // (T, rank / 4)

var<workgroup> row_slot: u32;
var<workgroup> partial: array<f32, 64>;
var<workgroup> stripes: array<vec4<f32>, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let row = wg.x;
    if (row >= step.num_tokens) {
        return;
    }
    if (lane == 0u) {
        row_slot = slots[row];
    }
    let slot = workgroupUniformLoad(&row_slot);
    if (slot == NONE || slot >= 32u || ((p.present >> slot) & 1u) == 0u) {
        return;
    }
    let base = row * p.k;
    let normed = (p.flags & 1u) != 0u;
    // The row's norm scale, as the normed products compute it.
    var scale = 1.0;
    if (normed) {
        var ss = 0.0;
        for (var i = lane; i < p.k; i += 64u) {
            ss += x[base + i] * x[base + i];
        }
        partial[lane] = ss;
        for (var w = 32u; w > 0u; w >>= 1u) {
            workgroupBarrier();
            if (lane < w) {
                partial[lane] += partial[lane + w];
            }
        }
        workgroupBarrier();
        scale = inverseSqrt(partial[0] / f32(p.k) + p.eps);
    }
    let quads = p.rank / 4u;
    // Up to 64 quads at a time; the lanes left over split k.
    for (var q0 = 0u; q0 < quads; q0 += 64u) {
        let width = min(quads - q0, 64u);
        let groups = 64u / width;
        let q = q0 + lane % width;
        let g = lane / width;
        var acc = vec4<f32>(0.0);
        if (g < groups) {
            let acol = slot * p.k * quads + q;
            for (var i = g; i < p.k; i += groups) {
                var xi = x[base + i];
                if (normed) {
                    xi *= gain[i];
                }
                acc += a[acol + i * quads] * xi;
            }
        }
        stripes[lane] = acc;
        workgroupBarrier();
        if (lane < width) {
            var sum = stripes[lane];
            for (var s = 1u; s < groups; s++) {
                sum += stripes[lane + s * width];
            }
            t[row * quads + q] = sum * scale;
        }
        workgroupBarrier();
    }
}
