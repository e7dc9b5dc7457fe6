// Lanes 0-7's values of `v`, in every lane, as an octet (a subgroupBroadcast from each): for
// the kernels in which lane L loads element L of each octet of x (matmul_rowwise_subgroup.wgsl
// and moe_matmul_subgroup.wgsl, to each of which the loader appends this file; `Octet`: octet.wgsl).
fn lane_octet(v: f32) -> Octet {
    let a = vec4<f32>(
        subgroupBroadcast(v, 0u),
        subgroupBroadcast(v, 1u),
        subgroupBroadcast(v, 2u),
        subgroupBroadcast(v, 3u),
    );
    let b = vec4<f32>(
        subgroupBroadcast(v, 4u),
        subgroupBroadcast(v, 5u),
        subgroupBroadcast(v, 6u),
        subgroupBroadcast(v, 7u),
    );
    return Octet(a, b);
}
