// Embedding gather: x[t, :] = table[ids[t], :] * scale, rows dequantized to f32 (any weight
// format: the loader appends the format file, which declares binding 3, `w`). With `add`, the
// row is added to x instead (learned position embeddings: ids are the tokens' positions).
// A table larger than one storage binding is split by rows; each chunk is one dispatch that
// writes only the tokens whose id falls inside it.
// Grid: (num_tokens, 1, 1), 64 invocations per token.

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, pad: u32 }
struct Params { hidden: u32, row_offset: u32, rows: u32, so: u32, scale: f32, add: u32, pad1: u32, pad2: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> ids: array<u32>;         // (T)
@group(0) @binding(4) var<storage, read_write> x: array<f32>;     // (T, hidden)

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let t = wg.x;
    if (t >= step.num_tokens) {
        return;
    }
    let id = ids[t];
    if (id < p.row_offset || id >= p.row_offset + p.rows) {
        return;
    }
    let pairs = p.hidden / 2u;
    let row = id - p.row_offset;
    let dst = t * p.hidden;
    for (var i = lid.x; i < pairs; i += 64u) {
        var v = w_pair(row, i, p.hidden, p.so) * p.scale;
        if (p.add != 0u) {
            v += vec2<f32>(x[dst + 2u * i], x[dst + 2u * i + 1u]);
        }
        x[dst + 2u * i] = v.x;
        x[dst + 2u * i + 1u] = v.y;
    }
}
