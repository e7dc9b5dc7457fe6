// A mixture of experts' pairs of one step listed by expert, for the grouped product
// (moe_matmul_subgroup.wgsl): for each slot s (a token's s-th choice), the step's tokens
// ordered by the expert they chose in that slot, and that order cut into tiles of at most
// TILE tokens of one expert each.
//   order[s * p.cap + i]: the i-th token of slot s's order (an expert's tokens together, in
//     no fixed order among themselves);
//   tiles[s * p.stride]: (the slot's number of tiles, 0, 0, 0); tiles[s * p.stride + 1 + i]:
//     its i-th tile, (expert, first index into the order, tokens, 0).
// A slot lists each token once, so a product over one slot's tiles writes each token's row
// once. Needs p.experts <= MAX_EXPERTS; the slot's tiles are at most
// ceil(num_tokens / TILE) + p.experts. Grid: (slots, 1, 1), a workgroup a slot.

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, pad: u32 }
struct Params { experts: u32, slots: u32, cap: u32, stride: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> ids: array<u32>;               // (T, slots)
@group(0) @binding(3) var<storage, read_write> order: array<u32>;       // (slots, cap)
@group(0) @binding(4) var<storage, read_write> tiles: array<vec4<u32>>; // (slots, stride)

const WG: u32 = 256u;
const MAX_EXPERTS: u32 = 512u;
override TILE: u32 = 16u;

var<workgroup> counts: array<atomic<u32>, MAX_EXPERTS>;
var<workgroup> starts: array<u32, MAX_EXPERTS>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let s = wg.x;
    let tokens = step.num_tokens;
    for (var e = lid; e < p.experts; e += WG) {
        atomicStore(&counts[e], 0u);
    }
    workgroupBarrier();
    for (var t = lid; t < tokens; t += WG) {
        atomicAdd(&counts[ids[t * p.slots + s]], 1u);
    }
    workgroupBarrier();
    // Each expert's first index and tiles, in expert order, by one invocation: a few hundred
    // experts at most.
    if (lid == 0u) {
        var start = 0u;
        var n = 0u;
        for (var e = 0u; e < p.experts; e++) {
            let count = atomicLoad(&counts[e]);
            starts[e] = start;
            for (var i = 0u; i < count; i += TILE) {
                tiles[s * p.stride + 1u + n] = vec4<u32>(e, start + i, min(TILE, count - i), 0u);
                n++;
            }
            start += count;
        }
        tiles[s * p.stride] = vec4<u32>(n, 0u, 0u, 0u);
    }
    workgroupBarrier();
    for (var e = lid; e < p.experts; e += WG) {
        atomicStore(&counts[e], 0u);
    }
    workgroupBarrier();
    for (var t = lid; t < tokens; t += WG) {
        let e = ids[t * p.slots + s];
        order[s * p.cap + starts[e] + atomicAdd(&counts[e], 1u)] = t;
    }
}
