// A step's writes to the block tables the runner keeps between steps (each running sequence
// holds a row; a step sends only the entries its row does not hold yet), as runs of
// consecutive entries: w[0] runs, run r described by w[1 + 3r ..]: (first entry, length,
// offset of its blocks in w). Runs first in the forward pass, before attention reads the
// tables.
// Grid: (WORKGROUPS, 1, 1); workgroup g takes runs g, g + WORKGROUPS, ..., its 64 invocations
// striding over a run's entries.

const WORKGROUPS: u32 = 16u;

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read_write> block_tables: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    for (var r = wg.x; r < w[0]; r += WORKGROUPS) {
        let first = w[1u + 3u * r];
        let len = w[2u + 3u * r];
        let src = w[3u + 3u * r];
        for (var i = lane; i < len; i += 64u) {
            block_tables[first + i] = w[src + i];
        }
    }
}
