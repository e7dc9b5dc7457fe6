use bytemuck::{Pod, Zeroable};

use crate::{GpuContext, GpuError, Grid, Kernels, KvDtype, Launch, Recorded};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    num_heads: u32,
    num_kv_heads: u32,
    head_dim: u32,
    qkv_stride: u32,
    scale: f32,
    block_size: u32,
    /// Sliding window: the latest keys each token sees (0: all).
    window: u32,
    /// Tokens per query tile of the GPU family's kernel ([`query_tile`]).
    query_tile: u32,
    /// Each query head's sink logit ([`Scores::sinks`]; [`NO_SINK`] without).
    sinks: [f32; MAX_SINK_HEADS],
}

/// The most query heads whose sinks the kernels' parameters hold.
pub const MAX_SINK_HEADS: usize = 128;

/// The sink of a head without one: a logit whose share of the softmax is 0 (its exponential
/// underflows), so one code path serves both.
const NO_SINK: f32 = -1.0e30;

/// How a layer's attention scores its keys.
#[derive(Clone, Debug, Default)]
pub struct Scores {
    /// Each token sees the latest `window` keys, itself included (`None`: all of them).
    pub window: Option<usize>,
    /// The scores' scale.
    pub scale: f32,
    /// Scores soft-capped, `cap * tanh(score / cap)`, after the scale (Gemma 2's).
    pub softcap: Option<f32>,
    /// One logit per query head that joins its softmax and weighs no value (gpt-oss's).
    pub sinks: Option<Vec<f32>>,
    /// ALiBi's biases, with this maximum (BLOOM's and MPT's 8; `shaders/alibi.wgsl`).
    pub alibi: Option<f32>,
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
    /// The split runs' outputs, maxima and sums ([`attention_runs_bytes`]), shared by every
    /// layer: one layer's runs are combined before the next layer's start.
    pub runs: &'a wgpu::Buffer,
}

/// Bytes of the split runs' scratch for steps of at most `split_tokens` tokens (16 when
/// never split).
pub fn attention_runs_bytes(split_tokens: u32, num_heads: usize, head_dim: usize) -> u64 {
    (split_tokens as u64 * (num_heads * (head_dim + 2)) as u64 * SPLITS as u64 * 4).max(16)
}

/// Whether heads of `head_dim` take the row-wise kernels (which never split the context).
pub fn is_rowwise(kernels: &Kernels, head_dim: usize) -> bool {
    kernels.rowwise && head_dim.is_multiple_of(4) && head_dim <= 256
}

/// Runs of the context one token's attention is split into when the step is small
/// (flash-decoding), and the most tokens a step may have for it.
pub const SPLITS: u32 = 16;
pub const SPLIT_TOKENS: u32 = 32;

/// Query rows one workgroup of the GPU family's kernel serves, and the floats of their queries
/// it keeps (rows rounded up to 4) in workgroup memory (`shaders/attention.wgsl`).
const MAX_ROWS: usize = 16;
const MAX_QUERY_FLOATS: usize = 1024;

/// Tokens per query tile of the GPU family's kernel for `group` query heads per KV head of
/// `head_dim`: the most whose rows (tokens x heads) fit its bounds, or `None` when even one
/// token's do not.
pub fn query_tile(group: usize, head_dim: usize) -> Option<u32> {
    let fits = |tokens: &usize| {
        let rows = tokens * group;
        group > 0 && rows <= MAX_ROWS && rows.div_ceil(4) * 4 * head_dim <= MAX_QUERY_FLOATS
    };
    (1..=MAX_ROWS).take_while(fits).last().map(|t| t as u32)
}

/// Paged attention of one layer: one launch over the whole context of every token, or, for
/// steps of at most `split_tokens` tokens (decode), the context split in [`SPLITS`] runs and a
/// second pass that combines them.
pub struct Attention {
    whole: Launch,
    split: Option<(Launch, Launch)>,
    split_tokens: u32,
    /// For steps of decoding tokens only (no more tokens than sampled rows): the row-wise
    /// subgroup kernel with a workgroup per token's query heads of a KV head, where the whole
    /// launch's 8-row blocks would repeat rows (fewer than 8 query heads per KV head).
    decode: Option<Launch>,
}

impl Recorded for Attention {
    fn record(&self, pass: &mut wgpu::ComputePass<'_>, tokens: u32, samples: u32) -> u32 {
        match &self.split {
            Some((runs, reduce)) if tokens <= self.split_tokens => {
                runs.record(pass, tokens, samples) + reduce.record(pass, tokens, samples)
            }
            _ => match &self.decode {
                Some(decode) if tokens <= samples => decode.record(pass, tokens, samples),
                _ => self.whole.record(pass, tokens, samples),
            },
        }
    }

    fn label(&self) -> String {
        format!("attention ({})", self.whole.kernel.name)
    }
}

/// Paged attention over the flattened batch, reading a cache of element type `kv_dtype`, its
/// scores as `scores` says. Steps of at most `split_tokens` tokens split the context (GPU
/// family only; 0: never).
#[allow(clippy::too_many_arguments)]
pub fn attention(
    ctx: &GpuContext,
    kernels: &Kernels,
    step: &wgpu::Buffer,
    (num_heads, num_kv_heads, head_dim): (usize, usize, usize),
    scores: Scores,
    kv_dtype: KvDtype,
    b: AttentionBuffers<'_>,
    split_tokens: u32,
) -> Result<Attention, GpuError> {
    let group = num_heads / num_kv_heads.max(1);
    let rowwise = is_rowwise(kernels, head_dim);
    let tile = query_tile(group, head_dim);
    let sinks_fit = scores.sinks.as_ref().is_none_or(|s| {
        s.len() == num_heads && num_heads <= MAX_SINK_HEADS && s.iter().all(|x| x.is_finite())
    });
    if !sinks_fit {
        return Err(GpuError::Shape {
            op: "attention",
            detail: format!(
                "sinks for {num_heads} heads (at most {MAX_SINK_HEADS}, finite): {:?}",
                scores.sinks.as_ref().map(Vec::len)
            ),
        });
    }
    if num_kv_heads == 0 || num_heads % num_kv_heads != 0 || (!rowwise && tile.is_none()) {
        return Err(GpuError::Shape {
            op: "attention",
            detail: format!(
                "{num_heads} heads over {num_kv_heads} KV heads of {head_dim}: need heads divisible by KV \
                 heads, at most {MAX_ROWS} query heads per KV head and 4 ceil(heads per KV head / 4) x \
                 head_dim <= {MAX_QUERY_FLOATS}"
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
            scale: scores.scale,
            block_size: kiln_core::BLOCK_SIZE as u32,
            window: scores.window.unwrap_or(0) as u32,
            query_tile: tile.unwrap_or(1),
            sinks: std::array::from_fn(|h| {
                (scores.sinks.as_ref()).map_or(NO_SINK, |s| s.get(h).copied().unwrap_or(NO_SINK))
            }),
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
        b.runs,
    ];
    let constants = [
        kv_dtype.override_constant(),
        ("SOFTCAP", scores.softcap.unwrap_or(0.0) as f64),
        ("ALIBI", scores.alibi.unwrap_or(0.0) as f64),
    ];
    if rowwise {
        if kernels.rowwise_subgroups && head_dim % 8 == 0 {
            // A workgroup per `rows` query rows of a segment and KV head, the head size
            // compiled in (it reads K and V by octets; a head size of 4 mod 8 takes the plain
            // row-wise kernel).
            let launch = |rows: usize| {
                let kernel = kernels.get_with(
                    "attention_rowwise_subgroup",
                    &[
                        constants[0],
                        constants[1],
                        constants[2],
                        ("D4", (head_dim / 4) as f64),
                        ("ROWS", rows as f64),
                    ],
                );
                let grid = Grid::TokensZ {
                    y: num_kv_heads as u32,
                    z: group.div_ceil(rows) as u32,
                };
                Launch::new(&ctx.device, kernel, &buffers[..10], grid)
            };
            return Ok(Attention {
                whole: launch(8),
                split: None,
                split_tokens: 0,
                decode: (group < 8).then(|| launch(group)),
            });
        }
        let grid = Grid::Elements {
            width: num_heads as u32,
            per: 64,
        };
        let kernel = kernels.get_with("attention_rowwise", &constants);
        return Ok(Attention {
            whole: Launch::new(&ctx.device, kernel, &buffers[..10], grid),
            split: None,
            split_tokens: 0,
            decode: None,
        });
    }
    // The row-wise kernels never split; these do.
    if b.runs.size() < attention_runs_bytes(split_tokens, num_heads, head_dim) {
        return Err(GpuError::Shape {
            op: "attention",
            detail: format!(
                "{} bytes of split runs, {split_tokens} tokens need {}",
                b.runs.size(),
                attention_runs_bytes(split_tokens, num_heads, head_dim)
            ),
        });
    }
    let whole = Launch::new(
        &ctx.device,
        kernels.get_with("attention", &constants),
        &buffers,
        Grid::Tokens {
            per: 1,
            y: num_kv_heads as u32,
        },
    );
    let split = (split_tokens > 0).then(|| {
        let splits = ("SPLITS", SPLITS as f64);
        let runs = Launch::new(
            &ctx.device,
            kernels.get_with(
                "attention",
                &[constants[0], constants[1], constants[2], splits],
            ),
            &buffers,
            Grid::TokensZ {
                y: num_kv_heads as u32,
                z: SPLITS,
            },
        );
        let reduce = Launch::new(
            &ctx.device,
            kernels.get_with("attention_reduce", &[splits]),
            &[step, &p, b.runs, b.out],
            Grid::Tokens {
                per: 1,
                y: num_heads as u32,
            },
        );
        (runs, reduce)
    });
    Ok(Attention {
        whole,
        split,
        split_tokens,
        decode: None,
    })
}

#[cfg(test)]
mod tests {
    use super::query_tile;

    #[test]
    fn query_tiles_fill_the_rows_the_kernel_holds() {
        // (query heads per KV head, head_dim) -> tokens per tile
        assert_eq!(query_tile(3, 64), Some(5)); // SmolLM2: 15 rows
        assert_eq!(query_tile(1, 64), Some(16));
        assert_eq!(query_tile(4, 128), Some(2)); // Llama 3 8B: 8 rows of 128
        assert_eq!(query_tile(7, 128), Some(1)); // Qwen2.5-7B: 7 rows, rounded to 8
        assert_eq!(query_tile(4, 256), Some(1)); // Gemma 3
        assert_eq!(query_tile(1, 24), Some(16));
        assert_eq!(query_tile(16, 64), Some(1));
        assert_eq!(query_tile(17, 64), None);
        assert_eq!(query_tile(1, 512), None);
        assert_eq!(query_tile(10, 96), None); // 12 rows of 96: 1152 floats
    }
}
