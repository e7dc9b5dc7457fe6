use bytemuck::{Pod, Zeroable};

use crate::{GpuContext, GpuError, Grid, Kernels, KvDtype, Launch};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    num_heads: u32,
    num_kv_heads: u32,
    head_dim: u32,
    qkv_stride: u32,
    scale: f32,
    block_size: u32,
    pad: [u32; 2],
}

/// The buffers paged attention reads and writes.
pub struct AttentionBuffers<'a> {
    pub positions: &'a wgpu::Buffer,
    pub token_seq: &'a wgpu::Buffer,
    pub seq_info: &'a wgpu::Buffer,
    pub block_tables: &'a wgpu::Buffer,
    pub qkv: &'a wgpu::Buffer,
    pub k_cache: &'a wgpu::Buffer,
    pub v_cache: &'a wgpu::Buffer,
    pub out: &'a wgpu::Buffer,
}

/// Paged attention over the flattened batch, reading a cache of element type `kv_dtype`.
pub fn attention(
    ctx: &GpuContext,
    kernels: &Kernels,
    step: &wgpu::Buffer,
    (num_heads, num_kv_heads, head_dim): (usize, usize, usize),
    kv_dtype: KvDtype,
    b: AttentionBuffers<'_>,
) -> Result<Launch, GpuError> {
    let group = num_heads / num_kv_heads.max(1);
    if num_kv_heads == 0 || num_heads % num_kv_heads != 0 || group > 16 || group * head_dim > 1024 {
        return Err(GpuError::Shape {
            op: "attention",
            detail: format!(
                "{num_heads} heads over {num_kv_heads} KV heads of {head_dim}: need heads divisible by KV \
                 heads, at most 16 query heads per KV head and (heads per KV head) x head_dim <= 1024"
            ),
        });
    }
    let p = super::params(
        ctx,
        "attention",
        &Params {
            num_heads: num_heads as u32,
            num_kv_heads: num_kv_heads as u32,
            head_dim: head_dim as u32,
            qkv_stride: ((num_heads + 2 * num_kv_heads) * head_dim) as u32,
            scale: 1.0 / (head_dim as f32).sqrt(),
            block_size: kiln_core::BLOCK_SIZE as u32,
            pad: [0; 2],
        },
    );
    let buffers = [
        step,
        &p,
        b.positions,
        b.token_seq,
        b.seq_info,
        b.block_tables,
        b.qkv,
        b.k_cache,
        b.v_cache,
        b.out,
    ];
    let constants = [kv_dtype.override_constant()];
    Ok(if kernels.rowwise && head_dim % 4 == 0 && head_dim <= 256 {
        let grid = Grid::Elements {
            width: num_heads as u32,
            per: 64,
        };
        Launch::new(
            &ctx.device,
            kernels.get_with("attention_rowwise", &constants),
            &buffers,
            grid,
        )
    } else {
        let grid = Grid::Tokens {
            per: 1,
            y: num_kv_heads as u32,
        };
        Launch::new(
            &ctx.device,
            kernels.get_with("attention", &constants),
            &buffers,
            grid,
        )
    })
}
