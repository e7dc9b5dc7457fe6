//! The forward pass. [`ModelRunner::new`] uploads the weights and builds every launch of a step
//! once (bind groups included); [`ModelRunner::step`] uploads a batch description, records all
//! launches into one compute pass, submits once and reads back only the sampled tokens
//! (`runner/record.rs`: the launches of a step in order, and the logits-only pass;
//! `runner/submit.rs`: submitting and reading back as two calls, so steps can overlap;
//! `runner/profile.rs`: the device time of each operation; `runner/lora.rs`: adapters loaded
//! into their slots while it runs; `runner/upload.rs`: a stack of tensors as one matrix;
//! `runner/budget.rs`: the KV blocks a memory budget leaves; `runner/warm_up.rs`: the first
//! use of the KV pool and the kernels paid before serving; `runner/embed.rs`: the
//! embedding's launches).

mod budget;
mod embed;
mod lora;
mod profile;
mod record;
mod submit;
mod upload;
mod warm_up;

pub use profile::{KernelProfile, OperationTime};
pub use submit::{ForwardSubmitted, SubmittedStep};

use std::sync::Arc;
use std::sync::atomic::Ordering;

use kiln_core::{BLOCK_SIZE, PENALTY_PAGE, mask_words};
use kiln_model::{Buf, LoraAdapter, ModelConfig, ModelTensors, Weights};

use self::embed::EmbeddingContext;
use crate::layer::{Activations, Layer, LayerContext, LoraSetup, RowOrder, gain};
use crate::ops::{
    self, Matmul, MatmulArgs, OutputMap, SAMPLE_OUT_STRIDE, SampleBuffers, X_HEAD_BYTES,
};
use crate::step_inputs::{StepCapacity, StepInputs};
use crate::{
    GpuContext, GpuError, KernelFamily, Kernels, KvCache, KvDtype, KvLayout, Launch, WeightStorage,
};

/// Sizes the runner allocates for.
#[derive(Clone, Copy, Debug)]
pub struct RunnerConfig {
    /// Most tokens in one step (prefill chunks plus decodes).
    pub max_tokens: usize,
    /// Most sequences in one step.
    pub max_seqs: usize,
    /// Rows of the sampler one step may use: its sampled sequences, their guesses of next
    /// tokens (speculative decoding) and scored prompt rows. Fewer than `max_seqs` counts as
    /// `max_seqs`. Each row takes a vocabulary's logits.
    pub sampler_rows: usize,
    /// GPU KV blocks of `BLOCK_SIZE` tokens (with `memory_budget`, the most).
    pub num_blocks: usize,
    /// Bytes of device memory the runner may take in all (weights, activations, KV cache):
    /// the KV cache gets what the rest leaves, up to `num_blocks`. `None`: `num_blocks`.
    pub memory_budget: Option<u64>,
    /// CPU-tier blocks (0: no CPU tier).
    pub num_cpu_blocks: usize,
    /// Longest sequence, in tokens.
    pub max_model_len: usize,
    /// The matmul and attention kernel family.
    pub kernels: KernelFamily,
    /// The KV cache's element type.
    pub kv_dtype: KvDtype,
    /// Whether quantized matrices stay quantized.
    pub weights: WeightStorage,
}

pub struct ModelRunner {
    ctx: GpuContext,
    pub config: ModelConfig,
    pub runner_config: RunnerConfig,
    pub kv: KvCache,
    inputs: StepInputs,
    embed: Vec<Launch>,
    layers: Vec<Layer>,
    final_norm: Launch,
    lm_head: Matmul,
    sample: Launch,
    logits: wgpu::Buffer,
    /// Allowed-token bitmasks of the constrained rows of a step.
    masks: wgpu::Buffer,
    sample_out: wgpu::Buffer,
    /// Where the sampler output is read back: two, so that a step can be submitted while
    /// the one before it is read.
    readback: [wgpu::Buffer; 2],
    next_readback: usize,
    /// The final norm's output of the sampler rows, and where it is read back (made when a
    /// step first asks for hidden states).
    normed: wgpu::Buffer,
    hidden_readback: Option<[wgpu::Buffer; 2]>,
    /// Inputs taken from the previous step's output.
    prev_tokens: Launch,
    table_writes: Launch,
    penalty_writes: Launch,
    /// Bytes of weights on the GPU.
    pub weight_bytes: u64,
    /// Bytes of device memory the runner's buffers take (weights, KV cache, step buffers).
    pub gpu_bytes: u64,
    /// The side of the cooperative matrices products of many rows run on, if they do.
    pub cooperative_matrix: Option<u32>,
    /// Slots for LoRA adapters (`0..lora_slots`), and the room for adapters loaded later.
    lora_slots: usize,
    lora_capacity: Option<ops::LoraCapacity>,
    /// Compute dispatches of the last step's forward pass.
    dispatches: std::cell::Cell<u32>,
    /// The kernel profile, when turned on.
    profiler: std::cell::RefCell<Option<profile::Profiler>>,
}

impl ModelRunner {
    /// Uploads the model and allocates for `rc`. `progress(done, total)` is called per tensor group.
    pub fn new(
        ctx: &GpuContext,
        config: &ModelConfig,
        weights: &Weights,
        rc: RunnerConfig,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Self, GpuError> {
        Self::with_lora(ctx, config, weights, rc, (&[], None), progress)
    }

    /// The same, holding `lora`'s adapters in slots `0..`, which a step's sequences may
    /// run through ([`kiln_core::SeqInBatch::lora`]); with a capacity, every projection has
    /// room for that many adapters of that rank, loaded later ([`ModelRunner::set_lora`]).
    pub fn with_lora(
        ctx: &GpuContext,
        config: &ModelConfig,
        weights: &Weights,
        rc: RunnerConfig,
        (lora, capacity): (&[Arc<LoraAdapter>], Option<ops::LoraCapacity>),
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Self, GpuError> {
        let lora_slots = capacity.map_or(0, |c| c.slots).max(lora.len());
        if lora_slots > ops::MAX_LORA_SLOTS {
            return Err(GpuError::Capacity {
                what: "LoRA adapters",
                needed: lora_slots,
                max: ops::MAX_LORA_SLOTS,
            });
        }
        let lora_setup = LoraSetup {
            adapters: lora,
            capacity,
        };
        let c = config;
        let (h, nh, nkv, d, inter, vocab) = (
            c.hidden_size,
            c.num_heads,
            c.num_kv_heads,
            c.head_dim,
            c.mlp_width(),
            c.vocab_size,
        );
        let qkv_width = (nh + 2 * nkv) * d;
        let kernels = Kernels::for_family(ctx, rc.kernels);
        let keep_quantized = rc.weights.keeps_quantized();
        let max_binding = ctx.max_binding() as usize;
        // Activation buffers must each fit one binding: cap the step's tokens if needed.
        // (A token's routed experts' activations and its router logits too.)
        let experts = c.moe.map_or(0, |m| {
            (m.experts_per_token * m.intermediate_size).max(m.experts + 1)
        });
        let widest = [h, qkv_width, 2 * inter, experts]
            .into_iter()
            .max()
            .unwrap_or(h)
            * 4;
        let max_tokens = rc.max_tokens.min(max_binding / widest);
        let max_logit_rows = (max_binding / (vocab * 4)).min(max_tokens);
        let max_seqs = rc.max_seqs.min(max_logit_rows);
        let max_rows = rc.sampler_rows.max(max_seqs).min(max_logit_rows);
        let rc = RunnerConfig {
            max_tokens,
            max_seqs,
            sampler_rows: max_rows,
            ..rc
        };
        let max_blocks_per_seq = rc.max_model_len.div_ceil(BLOCK_SIZE);
        let allocated_before = ctx.allocated.load(Ordering::Relaxed);
        let inputs = StepInputs::new(
            ctx,
            StepCapacity {
                tokens: max_tokens,
                seqs: max_seqs,
                rows: max_rows,
                blocks_per_seq: max_blocks_per_seq,
                penalty_pages: penalty_pages(max_seqs, rc.max_model_len),
                // A list holds each token once.
                penalty_pages_per_seq: (vocab.div_ceil(PENALTY_PAGE) + 1)
                    .min(penalty_pages(max_seqs, rc.max_model_len)),
            },
        );
        let tensors = ModelTensors::for_config(c);
        let f32s = |label: &str, n: usize| ctx.storage(label, (n * 4) as u64);
        // A product's input, with room past its rows for the uniform bindings of its head
        // that the subgroup matrix kernel reads (ops/matmul_tiles.rs).
        let x_f32s = |label: &str, n: usize| ctx.storage(label, (n * 4) as u64 + X_HEAD_BYTES);
        let bufs = Activations {
            x: x_f32s("x", max_tokens * h),
            qkv: f32s("qkv", max_tokens * qkv_width),
            attn: x_f32s("attn", max_tokens * nh * d),
            gate_up: Default::default(),
            gate_up_bytes: (max_tokens * 2 * inter * 4) as u64,
            act: x_f32s("act", max_tokens * inter),
            proj: (tensors.layers.iter())
                .any(|l| l.ops.iter().any(|op| op.uses(Buf::Proj)))
                .then(|| f32s("proj", max_tokens * h)),
            normed: (tensors.layers.iter())
                .any(|l| l.ops.iter().any(|op| op.uses(Buf::Normed)))
                .then(|| x_f32s("normed", max_tokens * h)),
            runs: {
                let split = match ops::is_rowwise(&kernels, d) {
                    true => 0,
                    false => ops::SPLIT_TOKENS.min(max_tokens as u32),
                };
                ctx.storage("attention runs", ops::attention_runs_bytes(split, nh, d))
            },
            // A stack's rank is at most its parts' (q, k and v) ranks together, padded to 4.
            lora_t: (lora.iter().map(|a| a.rank))
                .chain(capacity.map(|c| c.rank))
                .max()
                .map(|r| f32s("lora A x", max_tokens * (3 * r).next_multiple_of(4))),
            experts: c.moe.map(|m| {
                let pairs = max_tokens * m.experts_per_token;
                crate::layer::ExpertBuffers {
                    // A gated shared expert's gate is one more column.
                    logits: f32s(
                        "router logits",
                        max_tokens * (m.experts + m.shared.is_some_and(|s| s.gated) as usize),
                    ),
                    ids: f32s("expert ids", pairs),
                    weights: f32s("expert weights", pairs),
                    act: f32s("expert activations", pairs * m.intermediate_size),
                    groups: (kernels.moe_grouped && m.experts <= ops::MAX_GROUPED_EXPERTS).then(
                        || ops::ExpertGroups::new(ctx, m.experts, m.experts_per_token, max_tokens),
                    ),
                }
            }),
        };
        let x = &bufs.x;
        let normed = x_f32s("normed", max_rows * h);
        let logits = f32s("logits", max_rows * vocab);
        let masks = ctx.storage("token_masks", (max_rows * mask_words(vocab) * 4) as u64);
        let sample_out = ctx.storage("sample_out", (max_rows * SAMPLE_OUT_STRIDE * 4) as u64);
        let readback = [0, 1].map(|_| {
            ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("sample readback"),
                size: (max_rows * SAMPLE_OUT_STRIDE * 4) as u64,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        let prev_tokens = ops::prev_tokens(
            ctx,
            &kernels,
            &inputs.step,
            &inputs.prev_tokens,
            &sample_out,
            &inputs.token_ids,
        );
        let table_writes =
            ops::table_writes(ctx, &kernels, &inputs.table_writes, &inputs.block_tables);
        let penalty_writes = ops::table_writes(
            ctx,
            &kernels,
            &inputs.penalties.writes,
            &inputs.penalties.store,
        );
        let rope_tables = ops::LayerRopeTables::new(ctx, c, rc.max_model_len)?;
        let rope = rope_tables.per_layer();
        let step = &inputs.step;
        let total = c.num_layers + 2;
        let mut weight_bytes = 0;

        let matrix = |label: &str, parts: &[(&str, usize)], cols: usize, order: RowOrder| {
            upload::stack(ctx, weights, keep_quantized, label, parts, cols, order)
        };
        let embedding = embed::embedding(
            EmbeddingContext {
                ctx,
                kernels: &kernels,
                config: c,
                tensors: &tensors,
                weights,
                inputs: &inputs,
                bufs: &bufs,
            },
            &matrix,
        )?;
        weight_bytes += embedding.bytes;
        let (embed, embed_w) = (embedding.launches, embedding.table);
        progress(1, total);

        // The KV cache, made after everything but the layers' weights, so that a memory
        // budget knows what the rest takes.
        let layout = KvLayout::for_model(c, rc.kv_dtype);
        let rc = match rc.memory_budget {
            None => rc,
            Some(budget) => {
                let spent = budget::Spent {
                    allocated_before,
                    weights_made: weight_bytes,
                    bufs: &bufs,
                    layers: &tensors.layers,
                    lora: &lora_setup,
                };
                let num_blocks = budget::kv_blocks(ctx, spent, weights, &rc, layout, budget)?;
                RunnerConfig { num_blocks, ..rc }
            }
        };
        let kv = KvCache::new(ctx, layout, rc.num_blocks, rc.num_cpu_blocks)?;

        let lc = LayerContext {
            ctx,
            kernels: &kernels,
            config: c,
            rc: &rc,
            inputs: &inputs,
            kv: &kv,
            bufs: &bufs,
            rope: &rope,
            matrix: &matrix,
            weights,
            lora: lora_setup,
        };
        let mut layers = Vec::with_capacity(c.num_layers);
        for (i, t) in tensors.layers.iter().enumerate() {
            let (layer, bytes) = Layer::new(&lc, i, t)?;
            layers.push(layer);
            weight_bytes += bytes;
            progress(i + 2, total);
        }

        let final_gain = gain(weights, c, &tensors.final_norm)?;
        weight_bytes += final_gain.len() as u64 * 4;
        let final_gain = ctx.storage_init("final_norm", bytemuck::cast_slice(&final_gain));
        // The final norm's and the LM head's biases, where the model has them, as f32.
        let mut bias = |label: &str, t: &Option<kiln_model::Tensor>| {
            let Some(t) = t else { return Ok(None) };
            let v = weights.read_f32(&t.name)?;
            weight_bytes += v.len() as u64 * 4;
            Ok::<_, GpuError>(Some(ctx.storage_init(label, bytemuck::cast_slice(&v))))
        };
        let final_bias = bias("final_norm_bias", &tensors.final_norm_bias)?;
        let lm_head_bias = bias("lm_head_bias", &tensors.lm_head_bias)?;
        let final_norm = ops::gather_rmsnorm(
            ctx,
            &kernels,
            step,
            (h, c.rms_norm_eps, c.architecture.layer_norm()),
            &inputs.sample_rows,
            x,
            &final_gain,
            final_bias.as_ref(),
            &normed,
        );
        let lm_head_w = match tensors
            .lm_head
            .as_ref()
            .filter(|t| weights.contains(&t.name))
        {
            Some(t) => {
                let w = matrix("lm_head", &[(&t.name, vocab)], h, RowOrder::Stacked)?;
                weight_bytes += w.bytes();
                Some(w)
            }
            None => None,
        };
        let lm_head = Matmul::new(
            ctx,
            &kernels,
            step,
            MatmulArgs {
                x: &normed,
                w: lm_head_w.as_ref().unwrap_or(&embed_w),
                bias: lm_head_bias.as_ref(),
                y: &logits,
                ldy: vocab as u32,
                out_offset: 0,
                norm: None,
                accumulate: false,
                sample_rows: true,
                pairs: None,
                // Gemma 2 caps its logits, Granite divides them; no model does both.
                map: match (config.final_softcap, config.logits_divisor()) {
                    (Some(cap), _) => OutputMap::SoftCap(cap),
                    (None, 1.0) => OutputMap::Identity,
                    (None, d) => OutputMap::Scale(1.0 / d),
                },
            },
        )?;
        let sample = ops::sample(
            ctx,
            &kernels,
            step,
            vocab,
            SampleBuffers {
                sampling: &inputs.sampling,
                penalties: &inputs.penalties.store,
                pool_base: inputs.penalties.pool_base,
                penalty_raw: &inputs.penalties.raw,
                masks: &masks,
                logits: &logits,
                out: &sample_out,
                token_ids: &inputs.token_ids,
            },
        );
        progress(total, total);

        Ok(Self {
            ctx: ctx.clone(),
            config: c.clone(),
            runner_config: rc,
            kv,
            inputs,
            embed,
            layers,
            final_norm,
            lm_head,
            sample,
            logits,
            masks,
            sample_out,
            readback,
            next_readback: 0,
            normed,
            hidden_readback: None,
            prev_tokens,
            table_writes,
            penalty_writes,
            weight_bytes,
            gpu_bytes: ctx.allocated.load(Ordering::Relaxed) - allocated_before,
            cooperative_matrix: kernels.cooperative,
            lora_slots,
            lora_capacity: capacity,
            dispatches: Default::default(),
            profiler: Default::default(),
        })
    }

    /// What one step may hold (tokens, sequences, block-table entries) and the penalty pool.
    pub fn step_capacity(&self) -> StepCapacity {
        self.inputs.cap
    }

    pub fn context(&self) -> &GpuContext {
        &self.ctx
    }
}

/// Pages of the penalty pool: a list of every position for each sequence, up to 4M entries
/// (48 MiB; lists hold distinct tokens, so most take far less).
fn penalty_pages(max_seqs: usize, max_model_len: usize) -> usize {
    (max_seqs * max_model_len)
        .min(1 << 22)
        .div_ceil(PENALTY_PAGE)
}
