//! The forward pass's first launches: each token's embedding gathered into the residual
//! stream, a learned position embedding's rows added on by the tokens' positions (GPT-2's),
//! and BLOOM's LayerNorm of the result.

use kiln_model::{ModelConfig, ModelTensors, Weights};

use crate::layer::{Activations, RowOrder, UploadMatrix, gain};
use crate::ops;
use crate::step_inputs::StepInputs;
use crate::{GpuContext, GpuError, GpuMatrix, Kernels, Launch};

/// The embedding's launches, the token table (the LM head's too, where tied) and the bytes
/// of the weights it uploaded.
pub(super) struct Embedding {
    pub launches: Vec<Launch>,
    pub table: GpuMatrix,
    pub bytes: u64,
}

/// What the embedding reads and writes.
pub(super) struct EmbeddingContext<'a> {
    pub ctx: &'a GpuContext,
    pub kernels: &'a Kernels,
    pub config: &'a ModelConfig,
    pub tensors: &'a ModelTensors,
    pub weights: &'a Weights,
    pub inputs: &'a StepInputs,
    pub bufs: &'a Activations,
}

/// Uploads the embedding's tables (`matrix` stacks a table's tensors) and builds its
/// launches.
pub(super) fn embedding(e: EmbeddingContext, matrix: &UploadMatrix) -> Result<Embedding, GpuError> {
    let EmbeddingContext {
        ctx,
        kernels,
        config: c,
        tensors,
        weights,
        inputs,
        bufs,
    } = e;
    let (h, step) = (c.hidden_size, &inputs.step);
    let table = matrix(
        "embed_tokens",
        &[(&tensors.embed.name, c.vocab_size)],
        h,
        RowOrder::Stacked,
    )?;
    let mut bytes = table.bytes();
    // With BLOOM's LayerNorm of the embeddings, the gather writes into the LayerNorm's
    // buffer, from which the norm writes the residual stream.
    let embedded = match &tensors.embed_norm {
        Some(_) => bufs.normed.as_ref().ok_or_else(|| GpuError::Shape {
            op: "embedding",
            detail: "an embedding LayerNorm without the LayerNorm's buffer".into(),
        })?,
        None => &bufs.x,
    };
    let ids = (&inputs.token_ids, false);
    let scaled = (&table, c.embed_scale());
    let mut launches = ops::embedding(ctx, kernels, step, ids, scaled, embedded);
    if let Some(t) = &tensors.positions {
        let rows = c.max_position_embeddings;
        let positions = matrix("embed_positions", &[(&t.name, rows)], h, RowOrder::Stacked)?;
        bytes += positions.bytes();
        let add = (&inputs.positions, true);
        launches.extend(ops::embedding(
            ctx,
            kernels,
            step,
            add,
            (&positions, 1.0),
            embedded,
        ));
    }
    if let Some([gain_t, bias_t]) = &tensors.embed_norm {
        // (The gain read as every norm's is: its shape checked, the model's convention kept.)
        let (g, b) = (gain(weights, c, gain_t)?, weights.read_f32(&bias_t.name)?);
        bytes += (g.len() + b.len()) as u64 * 4;
        let g = ctx.storage_init("embed_norm", bytemuck::cast_slice(&g));
        let b = ctx.storage_init("embed_norm_bias", bytemuck::cast_slice(&b));
        let eps = (h, c.rms_norm_eps);
        launches.push(ops::layer_norm(
            ctx,
            kernels,
            step,
            eps,
            embedded,
            &g,
            Some(&b),
            &bufs.x,
        ));
    }
    Ok(Embedding {
        launches,
        table,
        bytes,
    })
}
