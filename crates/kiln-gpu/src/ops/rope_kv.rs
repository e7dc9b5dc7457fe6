use bytemuck::{Pod, Zeroable};

use crate::{GpuContext, Grid, Kernels, KvDtype, Launch};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    num_heads: u32,
    num_kv_heads: u32,
    head_dim: u32,
    max_positions: u32,
    qk_norm: u32,
    eps: f32,
    pad: [u32; 2],
}

/// The rotary table `rope_kv` reads: for each position `p < max_positions` and each
/// `i < inv_freq.len()`, `(cos, sin)` of `p * inv_freq[i]`, computed in f64 and rounded once
/// to f32, so the angle is exact at every position of the context (f32 `pos * inv_freq`
/// followed by WGSL `sin`/`cos`, which are only specified on [-pi, pi], is not).
/// Both are multiplied by `scale` (LongRoPE's attention factor; 1 otherwise).
pub fn rope_table(inv_freq: &[f64], max_positions: usize, scale: f64) -> Vec<f32> {
    let mut table = Vec::with_capacity(max_positions * inv_freq.len() * 2);
    for p in 0..max_positions {
        for &f in inv_freq {
            let (s, c) = (p as f64 * f).sin_cos();
            table.extend([(c * scale) as f32, (s * scale) as f32]);
        }
    }
    table
}

/// Rotary embedding on q and k of `qkv` in place, and K/V into the cache (of element type
/// `kv_dtype`) at each token's slot. `rope` is [`rope_table`] for `max_positions` positions.
/// `qk_norm`: the per-head RMSNorm of q and k first (Qwen3): the q gain then the k gain
/// (`2 * head_dim` values), and epsilon.
#[allow(clippy::too_many_arguments)]
pub fn rope_kv(
    ctx: &GpuContext,
    kernels: &Kernels,
    step: &wgpu::Buffer,
    (num_heads, num_kv_heads, head_dim): (usize, usize, usize),
    (kv_dtype, max_positions): (KvDtype, usize),
    positions: &wgpu::Buffer,
    slot_mapping: &wgpu::Buffer,
    rope: &wgpu::Buffer,
    qkv: &wgpu::Buffer,
    k_cache: &wgpu::Buffer,
    v_cache: &wgpu::Buffer,
    qk_norm: Option<(&wgpu::Buffer, f32)>,
) -> Launch {
    assert!(head_dim % 2 == 0, "head_dim must be even");
    assert!(
        max_positions > 0,
        "the rotary table needs at least one position"
    );
    let p = super::params(
        ctx,
        "rope_kv",
        &Params {
            num_heads: num_heads as u32,
            num_kv_heads: num_kv_heads as u32,
            head_dim: head_dim as u32,
            max_positions: max_positions as u32,
            qk_norm: qk_norm.is_some() as u32,
            eps: qk_norm.map_or(0.0, |n| n.1),
            pad: [0; 2],
        },
    );
    let no_gain = ctx.storage("no qk gain", 16);
    Launch::new(
        &ctx.device,
        kernels.get_with("rope_kv", &[kv_dtype.override_constant()]),
        &[
            step,
            &p,
            positions,
            slot_mapping,
            rope,
            qkv,
            k_cache,
            v_cache,
            qk_norm.map_or(&no_gain, |n| n.0),
        ],
        Grid::Tokens { per: 1, y: 1 },
    )
}
