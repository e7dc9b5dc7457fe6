// A step's writes to the block tables the runner keeps between steps (each running sequence
// holds a row; a step sends only the entries its row does not hold yet): block_tables[w[2i+1]]
// = w[2i+2] for i < w[0]. Runs first in the forward pass, before attention reads the tables.
// Grid: (WORKGROUPS, 1, 1) of 64 invocations striding over the writes.

const WORKGROUPS: u32 = 16u;

@group(0) @binding(0) var<storage, read> w: array<u32>;                   // count, then pairs
@group(0) @binding(1) var<storage, read_write> block_tables: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    for (var i = gid.x; i < w[0]; i += 64u * WORKGROUPS) {
        block_tables[w[2u * i + 1u]] = w[2u * i + 2u];
    }
}
