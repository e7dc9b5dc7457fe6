// LoRA, first product: for each token that runs through an adapter, t[row, j] = A[slot, j, :] .
// x'[row, :], x' being the row RMS-normalized with its gain as the normed products see it
// (flags & 1), or the row as is. A holds every adapter slot's matrix transposed, (k x rank)
// with the rank padded with zeros to a multiple of 4, in f16 read as four ranks at a time
// (two u32s, unpacked to f32);
// lora_expand.wgsl then adds B t to the product's output. Rows with no adapter, or whose
// adapter leaves this matrix alone (bit `slot` of p.present unset), are passed over
// (lora_expand.wgsl passes over the same rows).
// Grid: (1, ceil(num_tokens / TILE), 1), a workgroup of 64 per tile of TILE rows: each value
// of A read once serves every row of the tile through the same adapter (a prefill's rows,
// or decodes through one adapter), the tile's adapters taken one after the other. Lanes
// take four ranks each, and where the rank leaves lanes over, the lanes split k into
// stripes, summed at the end.

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, pad: u32 }
struct Params { k: u32, rank: u32, flags: u32, eps: f32, present: u32, pad0: u32, pad1: u32, pad2: u32 }

const NONE: u32 = 0xffffffffu;
const TILE: u32 = 8u;

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> slots: array<u32>;          // (T): each token's adapter or NONE
@group(0) @binding(3) var<storage, read> x: array<f32>;              // (T, k)
@group(0) @binding(4) var<storage, read> gain: array<f32>;           // (k), read with flags & 1
@group(0) @binding(5) var<storage, read> a: array<vec2<u32>>;        // (slots, k, rank / 4), f16
@group(0) @binding(6) var<storage, read_write> t: array<vec4<f32>>;  // (T, rank / 4)

var<workgroup> tile_slots: array<u32, TILE>;
var<workgroup> scales: array<f32, TILE>;
var<workgroup> partial: array<f32, 64>;
var<workgroup> stripes: array<vec4<f32>, 512>; // (TILE, 64)

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let r0 = wg.y * TILE;
    if (r0 >= step.num_tokens) {
        return;
    }
    if (lane < TILE) {
        var s = NONE;
        if (r0 + lane < step.num_tokens) {
            s = slots[r0 + lane];
        }
        if (s >= 32u || ((p.present >> s) & 1u) == 0u) {
            s = NONE;
        }
        tile_slots[lane] = s;
    }
    let ts = workgroupUniformLoad(&tile_slots);
    let normed = (p.flags & 1u) != 0u;
    // Each row's norm scale, as the normed products compute it: 8 lanes a row.
    var ss = 0.0;
    let nr = lane / 8u;
    let ns = lane % 8u;
    if (normed && ts[nr] != NONE) {
        for (var i = ns; i < p.k; i += 8u) {
            let v = x[(r0 + nr) * p.k + i];
            ss += v * v;
        }
    }
    partial[lane] = ss;
    workgroupBarrier();
    if (lane < TILE) {
        var sum = 0.0;
        for (var s = 0u; s < 8u; s++) {
            sum += partial[lane * 8u + s];
        }
        scales[lane] = select(1.0, inverseSqrt(sum / f32(p.k) + p.eps), normed);
    }
    workgroupBarrier();
    let quads = p.rank / 4u;
    for (var lead = 0u; lead < TILE; lead++) {
        let slot = ts[lead];
        var seen = slot == NONE;
        for (var e = 0u; e < lead; e++) {
            seen = seen || ts[e] == slot;
        }
        if (seen) {
            continue;
        }
        // Up to 64 quads at a time; the lanes left over split k.
        for (var q0 = 0u; q0 < quads; q0 += 64u) {
            let width = min(quads - q0, 64u);
            let groups = 64u / width;
            let q = q0 + lane % width;
            let g = lane / width;
            var acc: array<vec4<f32>, TILE>;
            if (g < groups) {
                let acol = slot * p.k * quads + q;
                for (var i = g; i < p.k; i += groups) {
                    let ap = a[acol + i * quads];
                    let av = vec4<f32>(unpack2x16float(ap.x), unpack2x16float(ap.y));
                    let gi = select(1.0, gain[i], normed);
                    for (var r = 0u; r < TILE; r++) {
                        if (ts[r] == slot) {
                            acc[r] += av * (x[(r0 + r) * p.k + i] * gi);
                        }
                    }
                }
            }
            for (var r = 0u; r < TILE; r++) {
                stripes[r * 64u + lane] = acc[r];
            }
            workgroupBarrier();
            if (lane < width) {
                for (var r = 0u; r < TILE; r++) {
                    if (ts[r] == slot) {
                        var sum = stripes[r * 64u + lane];
                        for (var s = 1u; s < groups; s++) {
                            sum += stripes[r * 64u + lane + s * width];
                        }
                        t[(r0 + r) * quads + q] = sum * scales[r];
                    }
                }
            }
            workgroupBarrier();
        }
    }
}
