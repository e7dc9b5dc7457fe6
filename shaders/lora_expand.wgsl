// LoRA, second product: y[row, n] += B[slot, n, :] . t[row, :] for each token that runs
// through an adapter (B scaled by the adapter's alpha / r at load, its rows in the order of
// the product's outputs), t being lora_shrink.wgsl's output for the row. B is stored
// transposed, (rank x n) with n padded to a multiple of 4, in f16, so that an invocation
// reads the four outputs it makes as two u32s and neighbouring invocations neighbouring
// ones; each read serves every row of a tile of TILE rows through the same adapter. Rows with no
// adapter, or whose adapter leaves this matrix alone, are passed over.
// Grid: (ceil(n / 4 / 256), ceil(num_tokens / TILE), 1).

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, pad: u32 }
struct Params { n: u32, rank: u32, ldy: u32, present: u32 }

const NONE: u32 = 0xffffffffu;
const TILE: u32 = 8u;

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> slots: array<u32>;      // (T)
@group(0) @binding(3) var<storage, read> t: array<f32>;          // (T, rank)
@group(0) @binding(4) var<storage, read> b: array<vec2<u32>>;    // (slots, rank, n / 4), f16
@group(0) @binding(5) var<storage, read_write> y: array<f32>;    // (T, ldy)

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let quads = (p.n + 3u) / 4u;
    let q = wg.x * 256u + lane;
    let r0 = wg.y * TILE;
    if (q >= quads || r0 >= step.num_tokens) {
        return;
    }
    var ts: array<u32, TILE>;
    for (var r = 0u; r < TILE; r++) {
        var s = NONE;
        if (r0 + r < step.num_tokens) {
            s = slots[r0 + r];
        }
        if (s >= 32u || ((p.present >> s) & 1u) == 0u) {
            s = NONE;
        }
        ts[r] = s;
    }
    for (var lead = 0u; lead < TILE; lead++) {
        let slot = ts[lead];
        var seen = slot == NONE;
        for (var e = 0u; e < lead; e++) {
            seen = seen || ts[e] == slot;
        }
        if (seen) {
            continue;
        }
        let bcol = slot * p.rank * quads + q;
        var acc: array<vec4<f32>, TILE>;
        for (var j = 0u; j < p.rank; j++) {
            let bp = b[bcol + j * quads];
            let bv = vec4<f32>(unpack2x16float(bp.x), unpack2x16float(bp.y));
            for (var r = 0u; r < TILE; r++) {
                if (ts[r] == slot) {
                    acc[r] += bv * t[(r0 + r) * p.rank + j];
                }
            }
        }
        for (var r = 0u; r < TILE; r++) {
            if (ts[r] != slot) {
                continue;
            }
            let out = (r0 + r) * p.ldy + q * 4u;
            for (var c = 0u; c < 4u; c++) {
                if (q * 4u + c < p.n) {
                    y[out + c] += acc[r][c];
                }
            }
        }
    }
}
