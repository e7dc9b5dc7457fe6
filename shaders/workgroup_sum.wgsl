// The per-row norms' reduction, appended by the kernel loader to the kernels of 64
// invocations a row that take one (residual_rmsnorm, gather_rmsnorm, layer_norm):
// `workgroup_sum(lid, v)` is the sum of every invocation's `v`, returned to all of them.

var<workgroup> red: array<f32, 64>;

fn workgroup_sum(lid: u32, v: f32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var k = 32u; k > 0u; k = k / 2u) {
        if (lid < k) {
            red[lid] += red[lid + k];
        }
        workgroupBarrier();
    }
    let total = red[0];
    workgroupBarrier();
    return total;
}
