//! The model definitions, one file per architecture: a decoder layer's operations in the
//! order they run ([`Layer`]), each with the tensors it reads, by their Hugging Face names and
//! shapes (GGUF names are mapped onto them on load). The loader's validation, the GPU runner
//! and the CPU reference all read a model through [`ModelTensors`], so none of them spells a
//! tensor name or an order of operations, and an architecture is written down once.
//!
//! Gemma's chat template (2 and 3), for files that carry none, is here too
//! ([`GEMMA_CHAT_TEMPLATE`]).

mod arcee;
mod cohere;
mod dots1;
mod ernie4_5;
mod ernie4_5_moe;
mod exaone4;
mod gemma2;
mod gemma3;
mod glm4;
mod glm4_moe;
mod gpt_oss;
mod granite;
mod granite_moe;
mod hunyuan_dense;
mod hunyuan_moe;
mod layer;
mod llama;
mod minicpm;
mod mixtral;
mod nemotron;
mod normed;
mod olmo2;
mod olmoe;
mod phi2;
mod phi3;
mod qwen2;
mod qwen2_moe;
mod qwen3;
mod qwen3_moe;
mod seed_oss;
mod smollm3;
mod stablelm;
mod starcoder2;

use crate::gguf::names::Interleaved;
use crate::{Architecture, ModelConfig};

pub use gemma3::CHAT_TEMPLATE as GEMMA_CHAT_TEMPLATE;
pub use layer::{Buf, Experts, Layer, Op};

/// A tensor the forward pass reads: its name and shape as Hugging Face writes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tensor {
    pub name: String,
    pub shape: Vec<usize>,
}

impl Tensor {
    fn new(name: impl Into<String>, shape: &[usize]) -> Self {
        Self {
            name: name.into(),
            shape: shape.to_vec(),
        }
    }

    /// The number of values.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Layer `i`'s tensors as Hugging Face names them, with their shapes.
struct Names<'a> {
    cfg: &'a ModelConfig,
    i: usize,
}

impl<'a> Names<'a> {
    fn new(cfg: &'a ModelConfig, i: usize) -> Self {
        Self { cfg, i }
    }

    fn tensor(&self, role: &str, shape: &[usize]) -> Tensor {
        Tensor::new(format!("model.layers.{}.{role}", self.i), shape)
    }

    /// An RMSNorm gain over the hidden size.
    fn norm(&self, role: &str) -> Tensor {
        self.tensor(&format!("{role}.weight"), &[self.cfg.hidden_size])
    }

    /// The bias of `role` (a norm or a projection), of `len` values.
    fn bias(&self, role: &str, len: usize) -> Tensor {
        self.tensor(&format!("{role}.bias"), &[len])
    }

    /// The widths of q, k and v.
    fn qkv_rows(&self) -> [(&'static str, usize); 3] {
        let c = self.cfg;
        let (q, kv) = (c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim);
        [("q", q), ("k", kv), ("v", kv)]
    }

    /// The q, k and v projections, as separate tensors (one where the config has them fused).
    fn qkv(&self) -> Vec<Tensor> {
        let h = self.cfg.hidden_size;
        if self.cfg.fused_qkv {
            let rows = self.qkv_rows().iter().map(|(_, r)| r).sum();
            return vec![self.tensor("self_attn.qkv_proj.weight", &[rows, h])];
        }
        self.qkv_rows()
            .map(|(p, rows)| self.tensor(&format!("self_attn.{p}_proj.weight"), &[rows, h]))
            .into()
    }

    /// The biases of q, k and v (one where the config has them fused).
    fn qkv_bias(&self) -> Vec<Tensor> {
        if self.cfg.fused_qkv {
            let rows = self.qkv_rows().iter().map(|(_, r)| r).sum();
            return vec![self.tensor("self_attn.qkv_proj.bias", &[rows])];
        }
        self.qkv_rows()
            .map(|(p, rows)| self.tensor(&format!("self_attn.{p}_proj.bias"), &[rows]))
            .into()
    }

    /// The per-head RMSNorm gains of q and k.
    fn qk_norm(&self) -> [Tensor; 2] {
        let d = self.cfg.head_dim;
        ["q", "k"].map(|p| self.tensor(&format!("self_attn.{p}_norm.weight"), &[d]))
    }

    fn o(&self) -> Tensor {
        let c = self.cfg;
        let q = c.num_heads * c.head_dim;
        self.tensor("self_attn.o_proj.weight", &[c.hidden_size, q])
    }

    /// A mixture of experts on the residual stream normalized by `post_attention_layernorm`:
    /// the router `router` and each expert `e`'s gate, up and down matrices, named by
    /// `name(e, "gate" | "up" | "down")`; no choice biases, no shared expert's gate.
    fn experts(&self, router: &str, name: impl Fn(usize, &str) -> String) -> Experts {
        let moe = self
            .cfg
            .moe
            .expect("a layer with experts has a MoE config (validated)");
        let (h, ff) = (self.cfg.hidden_size, moe.intermediate_size);
        let all = |kind: &str, shape: &[usize]| -> Vec<Tensor> {
            (0..moe.experts)
                .map(|e| self.tensor(&name(e, kind), shape))
                .collect()
        };
        Experts {
            norm: self.norm("post_attention_layernorm"),
            router: self.tensor(router, &[moe.experts, h]),
            choice_bias: None,
            shared_gate: None,
            router_bias: None,
            gate_up: [all("gate", &[ff, h]), all("up", &[ff, h])].concat(),
            down: all("down", &[h, ff]),
            gate_up_bias: None,
            down_bias: None,
        }
    }

    /// A shared expert's gated MLP named `{prefix}.{gate,up,down}_proj` around the routed
    /// `experts` (see [`Experts`]): its gate/up product and activation before them, its down
    /// product into the residual stream after.
    /// Without a shared expert in the config, the routed experts alone.
    fn with_shared_expert(&self, prefix: &str, experts: Experts) -> Vec<Op> {
        let h = self.cfg.hidden_size;
        let Some(shared) = self.cfg.moe.and_then(|m| m.shared) else {
            return vec![Op::Experts(Box::new(experts))];
        };
        let ff = shared.intermediate_size;
        let t = |p: &str, shape: &[usize]| self.tensor(&format!("{prefix}.{p}_proj.weight"), shape);
        let [project, glu, _] = llama::mlp(
            self,
            Some("post_attention_layernorm"),
            vec![t("gate", &[ff, h]), t("up", &[ff, h])],
            Buf::Residual,
        );
        let down = Op::Project {
            src: Buf::Act,
            weight: t("down", &[h, ff]),
            bias: None,
            dst: Buf::Residual,
        };
        vec![project, glu, Op::Experts(Box::new(experts)), down]
    }

    /// The gate and up projections, as separate tensors.
    fn gate_up(&self) -> Vec<Tensor> {
        let (h, ff) = (self.cfg.hidden_size, self.cfg.intermediate_size);
        ["gate", "up"]
            .map(|p| self.tensor(&format!("mlp.{p}_proj.weight"), &[ff, h]))
            .into()
    }

    fn down(&self) -> Tensor {
        let (h, ff) = (self.cfg.hidden_size, self.cfg.intermediate_size);
        self.tensor("mlp.down_proj.weight", &[h, ff])
    }
}

/// The tensors whose rows the files of `cfg`'s architecture store in another order than kiln
/// runs them (GLM-4's, ERNIE 4.5's and Cohere's q and k), each with its stored layout.
pub(crate) fn interleaved_rows(cfg: &ModelConfig) -> Vec<(String, Interleaved)> {
    match cfg.architecture {
        Architecture::Glm4
        | Architecture::Ernie45
        | Architecture::Ernie45Moe
        | Architecture::Cohere
        | Architecture::Cohere2 => qk_pairs_side_by_side(cfg),
        _ => Vec::new(),
    }
}

/// The q and k tensors (weights and biases, and the gains of their LayerNorms) of every layer,
/// each head's rotary pairs side by side in its first `rotary_dim` rows, in Hugging Face
/// folders and GGUF files alike.
fn qk_pairs_side_by_side(cfg: &ModelConfig) -> Vec<(String, Interleaved)> {
    let rotary = Some(cfg.rotary_dim());
    (0..cfg.num_layers)
        .flat_map(|i| {
            [("q", cfg.num_heads), ("k", cfg.num_kv_heads)]
                .into_iter()
                .flat_map(move |(p, heads)| {
                    let il = |flat| Interleaved {
                        heads,
                        rotary,
                        flat,
                    };
                    let gain = (cfg.qk_layer_norm).then(|| {
                        (
                            format!("model.layers.{i}.self_attn.{p}_norm.weight"),
                            il(true),
                        )
                    });
                    ["weight", "bias"]
                        .map(|s| {
                            (
                                format!("model.layers.{i}.self_attn.{p}_proj.{s}"),
                                il(false),
                            )
                        })
                        .into_iter()
                        .chain(gain)
                })
        })
        .collect()
}

/// Every tensor of a model, by role.
#[derive(Debug, Clone)]
pub struct ModelTensors {
    pub embed: Tensor,
    pub layers: Vec<Layer>,
    pub final_norm: Tensor,
    /// The final LayerNorm's bias, where the architecture's norms have one (StableLM's).
    pub final_norm_bias: Option<Tensor>,
    /// The output projection; `None` when it is the embedding (tied).
    pub lm_head: Option<Tensor>,
    /// The output projection's bias, where it has one (Phi-2's).
    pub lm_head_bias: Option<Tensor>,
}

impl ModelTensors {
    /// The tensors of `cfg`'s architecture and shape.
    pub fn for_config(cfg: &ModelConfig) -> Self {
        let layer = match cfg.architecture {
            Architecture::Llama => llama::layer,
            Architecture::Qwen2 => qwen2::layer,
            Architecture::Qwen3 => qwen3::layer,
            Architecture::Gemma2 => gemma2::layer,
            Architecture::Gemma3 => gemma3::layer,
            Architecture::Phi3 => phi3::layer,
            Architecture::SmolLM3 => smollm3::layer,
            Architecture::Granite => granite::layer,
            Architecture::MiniCpm => minicpm::layer,
            Architecture::Cohere | Architecture::Cohere2 => cohere::layer,
            Architecture::StableLm => stablelm::layer,
            Architecture::Nemotron => nemotron::layer,
            Architecture::Starcoder2 => starcoder2::layer,
            Architecture::Phi2 => phi2::layer,
            Architecture::Olmo2 => olmo2::layer,
            Architecture::Exaone4 => exaone4::layer,
            Architecture::Glm4 => glm4::layer,
            Architecture::Ernie45 => ernie4_5::layer,
            Architecture::SeedOss => seed_oss::layer,
            Architecture::Arcee => arcee::layer,
            Architecture::HunyuanDense => hunyuan_dense::layer,
            Architecture::Qwen3Moe => qwen3_moe::layer,
            Architecture::Mixtral => mixtral::layer,
            Architecture::Olmoe => olmoe::layer,
            Architecture::Qwen2Moe => qwen2_moe::layer,
            Architecture::Glm4Moe => glm4_moe::layer,
            Architecture::Ernie45Moe => ernie4_5_moe::layer,
            Architecture::GraniteMoe => granite_moe::layer,
            Architecture::Dots1 => dots1::layer,
            Architecture::HunyuanMoe => hunyuan_moe::layer,
            Architecture::GptOss => gpt_oss::layer,
        };
        let (h, vocab) = (cfg.hidden_size, cfg.vocab_size);
        let norm = final_norm_name(cfg.architecture);
        let phi2 = cfg.architecture == Architecture::Phi2;
        ModelTensors {
            embed: Tensor::new("model.embed_tokens.weight", &[vocab, h]),
            layers: (0..cfg.num_layers).map(|i| layer(cfg, i)).collect(),
            final_norm: Tensor::new(format!("{norm}.weight"), &[h]),
            final_norm_bias: (cfg.architecture.norm_bias())
                .then(|| Tensor::new(format!("{norm}.bias"), &[h])),
            lm_head: (!cfg.tie_word_embeddings).then(|| Tensor::new("lm_head.weight", &[vocab, h])),
            lm_head_bias: phi2.then(|| Tensor::new("lm_head.bias", &[vocab])),
        }
    }

    /// Every tensor of the model.
    pub fn all(&self) -> Vec<&Tensor> {
        let mut v = vec![&self.embed];
        v.extend(self.layers.iter().flat_map(Layer::tensors));
        v.push(&self.final_norm);
        v.extend(&self.final_norm_bias);
        v.extend(&self.lm_head);
        v.extend(&self.lm_head_bias);
        v
    }
}

/// The Hugging Face name of the norm before the LM head (GGUF's `output_norm`).
pub(crate) fn final_norm_name(arch: Architecture) -> &'static str {
    match arch {
        Architecture::Phi2 => "model.final_layernorm",
        _ => "model.norm",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TinyConfig;

    /// Layer 1 of the tiny model, its operations in short, and the model's tensor count.
    fn layer(tc: TinyConfig) -> (Layer, String, usize) {
        let mut t = ModelTensors::for_config(&tc.model_config());
        let total = t.all().len();
        let l = t.layers.swap_remove(1);
        let short: Vec<String> = l
            .ops
            .iter()
            .map(|op| match op {
                Op::NormedProject {
                    src,
                    norm,
                    weights,
                    bias,
                    dst,
                } => format!(
                    "{} {}{} -> {dst:?}",
                    match (src, norm) {
                        (Buf::Normed, _) => "layernormed",
                        (_, Some(_)) => "norm",
                        (_, None) => "raw",
                    },
                    weights.len(),
                    if bias.is_some() { "+bias" } else { "" }
                ),
                Op::Rotary {
                    qk_norm,
                    norm_after,
                } => match (qk_norm.is_some(), norm_after) {
                    (false, _) => "rotary".into(),
                    (true, false) => "rotary+norm".into(),
                    (true, true) => "rotary, then norm".into(),
                },
                Op::Attention { sinks } => match sinks {
                    Some(_) => "attention+sinks".into(),
                    None => "attention".into(),
                },
                Op::Project { src, dst, bias, .. } => format!(
                    "{src:?} -> {dst:?}{}",
                    if bias.is_some() { "+bias" } else { "" }
                ),
                Op::AddNormed { src, .. } => format!("+norm {src:?}"),
                Op::LayerNorm { .. } => "layernorm".into(),
                Op::GatedActivation => "glu".into(),
                Op::Activation => "act".into(),
                Op::Experts(e) => format!(
                    "experts {}{}{}{}",
                    e.gate_up.len() / 2,
                    if e.choice_bias.is_some() { "+bias" } else { "" },
                    if e.shared_gate.is_some() { "+gate" } else { "" },
                    match (&e.router_bias, &e.gate_up_bias, &e.down_bias) {
                        (Some(_), Some(_), Some(_)) => "+biases",
                        (None, None, None) => "",
                        _ => "+some biases",
                    }
                ),
            })
            .collect();
        (l, short.join(", "), total)
    }

    #[test]
    fn each_architecture_writes_its_layer() {
        let (l, ops, total) = layer(TinyConfig::default());
        assert_eq!(
            ops,
            "norm 3 -> Qkv, rotary, attention, Attn -> Residual, \
             norm 2 -> GateUp, glu, Act -> Residual"
        );
        assert_eq!(l.tensors().len(), 9);
        assert_eq!(total, 2 * 9 + 3);
        assert_eq!(
            l.tensors()[1].name,
            "model.layers.1.self_attn.q_proj.weight"
        );
        assert_eq!(l.tensors()[4].shape, [64, 64]);
        assert!(l.ops.iter().all(|op| !op.uses(Buf::Proj)));

        let (l, ops, _) = layer(TinyConfig::qwen2());
        assert!(ops.starts_with("norm 3+bias -> Qkv, rotary, attention"));
        assert_eq!(l.tensors()[5].shape, [32]);
        assert_eq!(l.tensors()[5].name, "model.layers.1.self_attn.k_proj.bias");

        // gpt-oss: biases on q, k, v and the output, sinks, experts with biases everywhere.
        let (l, ops, _) = layer(TinyConfig::gpt_oss());
        assert_eq!(
            ops,
            "norm 3+bias -> Qkv, rotary, attention+sinks, Attn -> Residual+bias, experts 6+biases"
        );
        let names: Vec<&str> = l.tensors().iter().map(|t| t.name.as_str()).collect();
        assert!(names.contains(&"model.layers.1.self_attn.sinks"));
        assert!(names.contains(&"model.layers.1.mlp.experts.5.down_proj.bias"));

        let (l, ops, _) = layer(TinyConfig::qwen3());
        assert!(ops.starts_with("norm 3 -> Qkv, rotary+norm, attention"));
        assert_eq!(l.tensors()[1].shape, [4 * 32, 64]);
        assert_eq!(l.tensors()[4].shape, [32]);

        let (l, ops, _) = layer(TinyConfig::gemma3());
        assert_eq!(
            ops,
            "norm 3 -> Qkv, rotary+norm, attention, Attn -> Proj, +norm Proj, \
             norm 2 -> GateUp, glu, Act -> Proj, +norm Proj"
        );
        let names: Vec<&str> = l.tensors().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names.len(), 13);
        assert_eq!(names[7], "model.layers.1.post_attention_layernorm.weight");
        assert_eq!(names[8], "model.layers.1.pre_feedforward_layernorm.weight");
        assert!(l.ops.iter().any(|op| op.uses(Buf::Proj)));

        let (l, ops, _) = layer(TinyConfig::gemma2());
        assert_eq!(
            ops,
            "norm 3 -> Qkv, rotary, attention, Attn -> Proj, +norm Proj, \
             norm 2 -> GateUp, glu, Act -> Proj, +norm Proj"
        );
        assert_eq!(l.tensors().len(), 11);

        // Cohere: one LayerNorm both sub-layers read, side by side.
        let (l, ops, _) = layer(TinyConfig::cohere());
        assert_eq!(
            ops,
            "layernorm, layernormed 3 -> Qkv, rotary, attention, Attn -> Residual, \
             layernormed 2 -> GateUp, glu, Act -> Residual"
        );
        assert_eq!(l.tensors().len(), 8);
        assert!(l.ops.iter().any(|op| op.uses(Buf::Normed)));

        let (l, ops, _) = layer(TinyConfig::olmo2());
        assert_eq!(
            ops,
            "raw 3 -> Qkv, rotary+norm, attention, Attn -> Proj, +norm Proj, \
             raw 2 -> GateUp, glu, Act -> Proj, +norm Proj"
        );
        let t = l.tensors();
        assert_eq!(t.len(), 11);
        assert_eq!(
            (t[3].shape.as_slice(), t[4].shape.as_slice()),
            ([64].as_slice(), [32].as_slice())
        );

        let (l, ops, _) = layer(TinyConfig::phi3());
        assert!(ops.starts_with("norm 1 -> Qkv, rotary, attention"));
        assert_eq!(l.tensors().len(), 6);
        assert_eq!(l.tensors()[1].shape, [(4 + 2 * 2) * 16, 64]);
        assert_eq!(
            l.tensors()[4].name,
            "model.layers.1.mlp.gate_up_proj.weight"
        );

        let (l, ops, _) = layer(TinyConfig::hunyuan_dense());
        assert!(ops.starts_with("norm 3 -> Qkv, rotary, then norm, attention"));
        assert_eq!(
            l.tensors()[4].name,
            "model.layers.1.self_attn.query_layernorm.weight"
        );

        let (l, ops, _) = layer(TinyConfig::arcee());
        assert_eq!(
            ops,
            "norm 3 -> Qkv, rotary, attention, Attn -> Residual, \
             norm 1 -> Act, act, Act -> Residual"
        );
        assert_eq!(l.tensors()[6].name, "model.layers.1.mlp.up_proj.weight");

        // A shared expert's MLP around the routed experts, the norm read by both listed once.
        let (l, ops, _) = layer(TinyConfig::qwen2_moe());
        assert_eq!(
            ops,
            "norm 3+bias -> Qkv, rotary, attention, Attn -> Residual, \
             norm 2 -> GateUp, glu, experts 6+gate, Act -> Residual"
        );
        let names: Vec<&str> = l.tensors().iter().map(|t| t.name.as_str()).collect();
        let norm = "model.layers.1.post_attention_layernorm.weight";
        assert_eq!(names.iter().filter(|n| **n == norm).count(), 1);
        assert!(names.contains(&"model.layers.1.mlp.shared_expert_gate.weight"));
        let (l, ops, _) = layer(TinyConfig::glm4_moe());
        assert!(ops.ends_with("norm 2 -> GateUp, glu, experts 8+bias, Act -> Residual"));
        assert!(
            l.tensors()
                .iter()
                .any(|t| t.name.ends_with("e_score_correction_bias"))
        );
        // Without a shared expert in the config, the routed experts alone.
        let mut unshared = TinyConfig::hunyuan_moe().model_config();
        unshared.moe = unshared.moe.map(|m| crate::Moe { shared: None, ..m });
        let ops = &ModelTensors::for_config(&unshared).layers[1].ops;
        assert!(matches!(ops.last(), Some(Op::Experts(_))), "{ops:?}");
        let glm = ModelTensors::for_config(&TinyConfig::glm4_moe().model_config());
        assert!(
            !glm.layers[0]
                .ops
                .iter()
                .any(|op| matches!(op, Op::Experts(_)))
        );

        // A Llama whose config has attention_bias reads (and so requires) the biases.
        let mut biased = TinyConfig::default().model_config();
        biased.attention_bias = true;
        let t = ModelTensors::for_config(&biased);
        let names: Vec<&str> = t.layers[0]
            .tensors()
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(
            names[4], "model.layers.0.self_attn.q_proj.bias",
            "{names:?}"
        );

        let tied = TinyConfig {
            tie_word_embeddings: true,
            ..TinyConfig::default()
        };
        assert!(
            ModelTensors::for_config(&tied.model_config())
                .lm_head
                .is_none()
        );
    }
}
