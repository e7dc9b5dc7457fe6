// Reads a whole buffer once, as fast as the device allows: each invocation folds a strided
// slice of 16-byte words with XOR, and writes its result only when it equals a value random
// data never gives, so no read can be optimized away and almost nothing is written. Used to
// measure the read bandwidth that decode's roofline is stated against (bandwidth.rs).
// Grid: any (x, 1, 1); every invocation strides by the whole grid.

@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> sink: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let stride = groups.x * 256u;
    let words = arrayLength(&src);
    var acc = vec4<u32>(0u);
    for (var i = gid.x; i < words; i += stride) {
        acc ^= src[i];
    }
    if (all(acc == vec4<u32>(0x9e3779b9u, 0x7f4a7c15u, 0xbf58476du, 0x1ce4e5b9u))) {
        sink[gid.x % 4u] = acc.x;
    }
}
