use bytemuck::{Pod, Zeroable};

use crate::{GpuContext, Grid, Kernels, Launch};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    num_heads: u32,
    num_kv_heads: u32,
    head_dim: u32,
    pad: u32,
}

/// Rotary embedding on q and k of `qkv` in place, and K/V into the cache at each token's slot.
#[allow(clippy::too_many_arguments)]
pub fn rope_kv(
    ctx: &GpuContext,
    kernels: &Kernels,
    step: &wgpu::Buffer,
    (num_heads, num_kv_heads, head_dim): (usize, usize, usize),
    positions: &wgpu::Buffer,
    slot_mapping: &wgpu::Buffer,
    inv_freq: &wgpu::Buffer,
    qkv: &wgpu::Buffer,
    k_cache: &wgpu::Buffer,
    v_cache: &wgpu::Buffer,
) -> Launch {
    assert!(head_dim % 2 == 0, "head_dim must be even");
    let p = super::params(
        ctx,
        "rope_kv",
        &Params { num_heads: num_heads as u32, num_kv_heads: num_kv_heads as u32, head_dim: head_dim as u32, pad: 0 },
    );
    Launch::new(
        &ctx.device,
        kernels.get("rope_kv"),
        &[step, &p, positions, slot_mapping, inv_freq, qkv, k_cache, v_cache],
        Grid::Tokens { per: 1, y: 1 },
    )
}
