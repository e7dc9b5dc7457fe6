//! Constructors for the launches of each kernel. Each checks shapes, writes the kernel's
//! static parameters into a small uniform buffer (the twin of the WGSL `Params` struct) and
//! binds its buffers once; the per-step counts come from the shared step uniform.

mod attention;
mod embedding;
mod expert_groups;
mod experts;
mod gather_rmsnorm;
mod glu;
mod layer_norm;
mod lora;
mod matmul;
mod matmul_tiles;
mod prev_tokens;
mod residual_rmsnorm;
mod rope_kv;
mod sample;
mod table_writes;
mod ungated;

pub use attention::{
    Attention, AttentionBuffers, MAX_SINK_HEADS, SPLIT_TOKENS, SPLITS, Scores, attention,
    attention_runs_bytes, is_rowwise, query_tile,
};
pub use embedding::embedding;
pub use expert_groups::{
    ExpertGroups, MAX_GROUPED_EXPERTS, expert_matmul, grouped_from, moe_group,
};
pub use experts::{
    ExpertProduct, RouterLogits, Routing, expert_matvec, moe_route, moe_shared_gate,
};
pub use gather_rmsnorm::gather_rmsnorm;
pub use glu::glu;
pub use layer_norm::layer_norm;
pub use lora::{Lora, LoraBuffers, LoraCapacity, LoraShape, MAX_LORA_SLOTS};
pub use matmul::{
    MATVEC_MAX_ROWS, Matmul, MatmulArgs, OutputMap, Pairs, ROTARY_STORAGE_BINDINGS, X_HEAD_BYTES,
    coop_workgroup_bytes,
};
pub use prev_tokens::prev_tokens;
pub use residual_rmsnorm::residual_rmsnorm;
pub use rope_kv::{LayerRopeTables, QkNorm, Rotary, paired_row, rope_kv, rope_table};
pub use sample::{
    MAX_UNLISTED, NO_MASK, NO_TOKEN, SAMPLE_OUT_STRIDE, SampleBuffers, SampleUniform,
    decode_sample_out, sample, sampler_rows,
};
pub use table_writes::{Runs, table_writes};
pub use ungated::ungated;

use crate::GpuContext;

/// A uniform buffer holding one kernel's static parameters.
pub(crate) fn params<T: bytemuck::Pod>(ctx: &GpuContext, label: &str, p: &T) -> wgpu::Buffer {
    ctx.uniform_init(label, bytemuck::bytes_of(p))
}
