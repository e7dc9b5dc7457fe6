use bytemuck::{Pod, Zeroable};

use kiln_model::{LayerRope, ModelConfig};

use crate::{GpuContext, GpuError, Grid, Kernels, KvDtype, Launch};

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

/// The rotary table `rope_kv` reads: for each position `p < max_positions` and each of a
/// head's `pairs` rotation pairs, `(cos, sin)` of `p * rope.inv_freq[i]` times
/// `rope.attention_factor`, computed in f64 and rounded once to f32, so the angle is exact at
/// every position of the context (f32 `pos * inv_freq` followed by WGSL `sin`/`cos`, which are
/// only specified on [-pi, pi], is not). The pairs past `rope.inv_freq` pass through (cos 1,
/// sin 0: a partial rotary embedding's unturned dimensions, or a layer without RoPE).
pub fn rope_table(rope: &LayerRope, pairs: usize, max_positions: usize) -> Vec<f32> {
    let mut table = Vec::with_capacity(max_positions * pairs * 2);
    for p in 0..max_positions {
        for i in 0..pairs {
            let (s, c) = match rope.inv_freq.get(i) {
                Some(f) => {
                    let (s, c) = (p as f64 * f).sin_cos();
                    (s * rope.attention_factor, c * rope.attention_factor)
                }
                None => (0.0, 1.0),
            };
            table.extend([c as f32, s as f32]);
        }
    }
    table
}

/// The rotary tables of a model's layers: one per distinct set of layer frequencies (Gemma 3's
/// sliding layers rotate with their own base, and without the global layers' linear scaling;
/// SmolLM3's layers without RoPE by nothing), and which one each layer reads.
pub struct LayerRopeTables {
    tables: Vec<wgpu::Buffer>,
    of_layer: Vec<usize>,
}

impl LayerRopeTables {
    /// The tables of `c`'s layers for `max_positions` positions; refused when one table does
    /// not fit a storage binding.
    pub fn new(ctx: &GpuContext, c: &ModelConfig, max_positions: usize) -> Result<Self, GpuError> {
        let d = c.head_dim;
        if (max_positions * d * 4) as u64 > ctx.max_binding() {
            return Err(GpuError::Capacity {
                what: "positions in the rotary table (one storage binding)",
                needed: max_positions,
                max: (ctx.max_binding() / (d as u64 * 4)) as usize,
            });
        }
        let mut keys: Vec<LayerRope> = Vec::new();
        let mut tables = Vec::new();
        let mut of_layer = Vec::with_capacity(c.num_layers);
        for i in 0..c.num_layers {
            let key = c.layer_rope(i);
            let k = keys.iter().position(|k| *k == key).unwrap_or_else(|| {
                let table = rope_table(&key, d / 2, max_positions);
                let label = format!("rope ({} kind of layer)", tables.len() + 1);
                tables.push(ctx.storage_init(&label, bytemuck::cast_slice(&table)));
                keys.push(key);
                tables.len() - 1
            });
            of_layer.push(k);
        }
        Ok(Self { tables, of_layer })
    }

    /// Each layer's table, in layer order.
    pub fn per_layer(&self) -> Vec<&wgpu::Buffer> {
        self.of_layer.iter().map(|&k| &self.tables[k]).collect()
    }
}

/// Row `r` of a head in the rotary pair layout holds row `paired_row(r, head_dim, rot)` of the
/// head in the checkpoint's order ("rotate_half" over the first `rot` dimensions: element `i`
/// turns with `i + rot / 2`): the pairs become adjacent, `(i, i + rot/2)` at `(2i, 2i + 1)`.
/// The `head_dim - rot` dimensions a partial rotary embedding passes through follow, paired
/// the same way among themselves (their table entries turn by nothing). kiln lays out the rows
/// of every rotated head of q and k so at load (weights, biases and q/k norm gains alike), so
/// a rotation pair is two neighbouring outputs of the QKV product and one packed f16 word of
/// the cache. Attention is unaffected: q and k are permuted alike, and v is not permuted.
pub fn paired_row(r: usize, head_dim: usize, rot: usize) -> usize {
    let (h, e) = (r / head_dim * head_dim, r % head_dim);
    let (start, width) = match e < rot {
        true => (0, rot),
        false => (rot, head_dim - rot),
    };
    let e = e - start;
    h + start + e / 2 + (e % 2) * (width / 2)
}

/// What the rotary step reads and writes besides q, k and v: shared by [`rope_kv`] and the
/// QKV product's rotary epilogue ([`crate::ops::Pairs::Rotary`]).
#[derive(Clone)]
pub struct Rotary<'a> {
    /// Query heads, KV heads and head_dim.
    pub heads: (usize, usize, usize),
    pub kv_dtype: KvDtype,
    /// The rows of `rope` ([`rope_table`]).
    pub max_positions: usize,
    pub positions: &'a wgpu::Buffer,
    pub slot_mapping: &'a wgpu::Buffer,
    pub rope: &'a wgpu::Buffer,
    pub k_cache: &'a wgpu::Buffer,
    pub v_cache: &'a wgpu::Buffer,
}

impl Rotary<'_> {
    pub(crate) fn check(&self) {
        assert!(self.heads.2.is_multiple_of(2), "head_dim must be even");
        assert!(
            self.max_positions > 0,
            "the rotary table needs at least one position"
        );
    }
}

/// The RMSNorm of q and k before they turn (or, `after`, once they have).
#[derive(Clone, Copy)]
pub struct QkNorm<'a> {
    /// The q gain then the k gain, in the rotary pair layout as q and k are: `head_dim` each
    /// (over each head: Qwen3, Gemma 3), or as wide as q and as k (`whole`: OLMo 2;
    /// `layer_norm`: Command-R+'s gain for each head).
    pub gains: &'a wgpu::Buffer,
    pub eps: f32,
    pub whole: bool,
    /// Each head LayerNorm'd (its mean taken out) with a gain of its own; not with `whole`.
    pub layer_norm: bool,
    /// Each head normalized after it turns (Hunyuan's); not with `whole`.
    pub after: bool,
}

/// Rotary embedding on q and k of `qkv` (each head in the rotary pair layout, [`paired_row`])
/// in place, q and k normalized first (or after) with `qk_norm`, and K/V into the cache at
/// each token's slot.
pub fn rope_kv(
    ctx: &GpuContext,
    kernels: &Kernels,
    step: &wgpu::Buffer,
    r: &Rotary<'_>,
    qkv: &wgpu::Buffer,
    qk_norm: Option<QkNorm<'_>>,
) -> Launch {
    r.check();
    let (num_heads, num_kv_heads, head_dim) = r.heads;
    let p = super::params(
        ctx,
        "rope_kv",
        &Params {
            num_heads: num_heads as u32,
            num_kv_heads: num_kv_heads as u32,
            head_dim: head_dim as u32,
            max_positions: r.max_positions as u32,
            qk_norm: match qk_norm {
                None => 0,
                Some(QkNorm { whole: true, .. }) => 2,
                Some(QkNorm {
                    layer_norm: true, ..
                }) => 4,
                Some(QkNorm { after: true, .. }) => 3,
                Some(QkNorm { .. }) => 1,
            },
            eps: qk_norm.map_or(0.0, |n| n.eps),
            pad: [0; 2],
        },
    );
    let no_gain = ctx.placeholder(16);
    Launch::new(
        &ctx.device,
        kernels.get_with("rope_kv", &[r.kv_dtype.override_constant()]),
        &[
            step,
            &p,
            r.positions,
            r.slot_mapping,
            r.rope,
            qkv,
            r.k_cache,
            r.v_cache,
            qk_norm.map_or(&no_gain, |n| n.gains),
        ],
        Grid::Tokens { per: 1, y: 1 },
    )
}

#[cfg(test)]
mod tests {
    use super::paired_row;

    /// The pair layout is a permutation of each head that puts `(i, i + rot / 2)` at
    /// `(2i, 2i + 1)` and pairs the passed-through dimensions after them alike.
    #[test]
    fn pair_layout_of_whole_and_partial_rotations() {
        let layout = |d, rot| {
            (0..2 * d)
                .map(|r| paired_row(r, d, rot))
                .collect::<Vec<_>>()
        };
        assert_eq!(layout(4, 4), [0, 2, 1, 3, 4, 6, 5, 7]);
        // 6 of 10 turn: pairs (0, 3), (1, 4), (2, 5), then (6, 8), (7, 9).
        assert_eq!(layout(10, 6)[..10], [0, 3, 1, 4, 2, 5, 6, 8, 7, 9]);
        assert_eq!(
            layout(10, 6)[10..],
            [10, 13, 11, 14, 12, 15, 16, 18, 17, 19]
        );
        let mut seen = layout(128, 96);
        seen.sort_unstable();
        assert_eq!(seen, (0..256).collect::<Vec<_>>());
    }
}
