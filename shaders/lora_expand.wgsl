// LoRA, second product: y[row, n] += B[slot, n, :] . t[row, :] for each token that runs
// through an adapter (B scaled by the adapter's alpha / r at load, its rows in the order of
// the product's outputs), t being lora_shrink.wgsl's output for the row. B is stored
// transposed, (rank x n) with n padded to a multiple of 4, so that an invocation reads the
// four outputs it makes as one vec4 and neighbouring invocations neighbouring vec4s. Rows
// with no adapter, or whose adapter leaves this matrix alone, are passed over.
// Grid: (ceil(num_tokens * n / 4 / 256), 1, 1), folded into two dimensions.

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, pad: u32 }
struct Params { n: u32, rank: u32, ldy: u32, present: u32 }

const NONE: u32 = 0xffffffffu;

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> slots: array<u32>;      // (T)
@group(0) @binding(3) var<storage, read> t: array<f32>;          // (T, rank)
@group(0) @binding(4) var<storage, read> b: array<vec4<f32>>;    // (slots, rank, n / 4)
@group(0) @binding(5) var<storage, read_write> y: array<f32>;    // (T, ldy)

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * 256u;
    let quads = (p.n + 3u) / 4u;
    if (idx >= step.num_tokens * quads) {
        return;
    }
    let row = idx / quads;
    let q = idx % quads;
    let slot = slots[row];
    if (slot == NONE || slot >= 32u || ((p.present >> slot) & 1u) == 0u) {
        return;
    }
    let bcol = slot * p.rank * quads + q;
    var acc = vec4<f32>(0.0);
    for (var j = 0u; j < p.rank; j++) {
        acc += b[bcol + j * quads] * t[row * p.rank + j];
    }
    let out = row * p.ldy + q * 4u;
    for (var c = 0u; c < 4u; c++) {
        if (q * 4u + c < p.n) {
            y[out + c] += acc[c];
        }
    }
}
