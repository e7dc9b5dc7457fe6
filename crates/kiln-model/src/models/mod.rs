//! The model definitions, one file per architecture: which tensors a model has, by role and
//! with their shapes (Hugging Face names; GGUF names are mapped onto them on load). The
//! loader's validation, the GPU runner and the CPU reference all read a model's tensors
//! through [`ModelTensors`], so none of them spells a tensor name, and an architecture's
//! tensors are written down once.
//!
//! Gemma 3's chat template, for files that carry none, is here too ([`GEMMA3_CHAT_TEMPLATE`]).
//!
//! What is not here yet: the order of the operations, which the GPU runner and the CPU
//! reference each still write out (the same for every architecture so far, with flags for
//! biases, q/k norms and sliding windows).

mod gemma3;
mod llama;
mod phi3;
mod qwen2;
mod qwen3;

use crate::{Architecture, ModelConfig};

pub use gemma3::CHAT_TEMPLATE as GEMMA3_CHAT_TEMPLATE;

use self::Stack::{Fused, Parts};

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
}

/// Matrices the forward pass multiplies as one, stacked by rows (q, k and v; gate and up):
/// stored as separate tensors, or already fused into one (Phi-3).
#[derive(Debug, Clone)]
pub enum Stack<const N: usize> {
    Parts([Tensor; N]),
    Fused(Tensor),
}

impl<const N: usize> Stack<N> {
    /// The stored tensors, in row order.
    pub fn tensors(&self) -> Vec<&Tensor> {
        match self {
            Stack::Parts(parts) => parts.iter().collect(),
            Stack::Fused(t) => vec![t],
        }
    }
}

/// One decoder layer's tensors, by role.
#[derive(Debug, Clone)]
pub struct LayerTensors {
    /// RMSNorm gain before attention.
    pub attn_norm: Tensor,
    /// q, k and v projections, rows in that order.
    pub qkv: Stack<3>,
    pub o: Tensor,
    /// Biases of q, k and v (Qwen2).
    pub qkv_bias: Option<[Tensor; 3]>,
    /// Per-head RMSNorm gains of q and k, applied before the rotary embedding (Qwen3).
    pub qk_norm: Option<[Tensor; 2]>,
    /// RMSNorm gain before the MLP.
    pub mlp_norm: Tensor,
    /// RMSNorm gains applied to the attention's and the MLP's outputs before each is added to
    /// the residual stream (Gemma 3).
    pub post_norms: Option<[Tensor; 2]>,
    /// Gate and up projections, rows in that order.
    pub gate_up: Stack<2>,
    pub down: Tensor,
}

impl LayerTensors {
    /// Every tensor of the layer.
    pub fn all(&self) -> Vec<&Tensor> {
        let mut v = vec![&self.attn_norm];
        v.extend(self.qkv.tensors());
        v.push(&self.o);
        v.extend(self.qkv_bias.iter().flatten());
        v.extend(self.qk_norm.iter().flatten());
        v.push(&self.mlp_norm);
        v.extend(self.gate_up.tensors());
        v.push(&self.down);
        v.extend(self.post_norms.iter().flatten());
        v
    }
}

/// Every tensor of a model, by role.
#[derive(Debug, Clone)]
pub struct ModelTensors {
    pub embed: Tensor,
    pub layers: Vec<LayerTensors>,
    pub final_norm: Tensor,
    /// The output projection; `None` when it is the embedding (tied).
    pub lm_head: Option<Tensor>,
}

impl ModelTensors {
    /// The tensors of `cfg`'s architecture and shape.
    pub fn for_config(cfg: &ModelConfig) -> Self {
        let layer = match cfg.architecture {
            Architecture::Llama => llama::layer,
            Architecture::Qwen2 => qwen2::layer,
            Architecture::Qwen3 => qwen3::layer,
            Architecture::Gemma3 => gemma3::layer,
            Architecture::Phi3 => phi3::layer,
        };
        let (h, vocab) = (cfg.hidden_size, cfg.vocab_size);
        ModelTensors {
            embed: Tensor::new("model.embed_tokens.weight", &[vocab, h]),
            layers: (0..cfg.num_layers).map(|i| layer(cfg, i)).collect(),
            final_norm: Tensor::new("model.norm.weight", &[h]),
            lm_head: (!cfg.tie_word_embeddings).then(|| Tensor::new("lm_head.weight", &[vocab, h])),
        }
    }

    /// Every tensor of the model.
    pub fn all(&self) -> Vec<&Tensor> {
        let mut v = vec![&self.embed];
        v.extend(self.layers.iter().flat_map(LayerTensors::all));
        v.push(&self.final_norm);
        v.extend(&self.lm_head);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TinyConfig;

    #[test]
    fn each_architecture_adds_its_own_tensors() {
        let count = |tc: TinyConfig| {
            let t = ModelTensors::for_config(&tc.model_config());
            (t.layers[1].all().len(), t.all().len(), t)
        };
        let (llama, total, t) = count(TinyConfig::default());
        assert_eq!(llama, 9);
        assert_eq!(total, 2 * 9 + 3);
        let Stack::Parts([q, ..]) = &t.layers[1].qkv else {
            panic!("Llama's q, k and v are separate")
        };
        assert_eq!(q.name, "model.layers.1.self_attn.q_proj.weight");
        assert_eq!(t.layers[1].o.shape, [64, 64]);
        let (qwen2, _, t) = count(TinyConfig::qwen2());
        assert_eq!(qwen2, 12);
        assert_eq!(t.layers[0].qkv_bias.as_ref().unwrap()[1].shape, [32]);
        let (qwen3, _, t) = count(TinyConfig::qwen3());
        assert_eq!(qwen3, 11);
        assert_eq!(t.layers[0].qk_norm.as_ref().unwrap()[0].shape, [32]);
        assert_eq!(t.layers[0].qkv.tensors()[0].shape, [4 * 32, 64]);
        let (gemma3, _, t) = count(TinyConfig::gemma3());
        assert_eq!(gemma3, 13);
        let post = t.layers[2].post_norms.as_ref().unwrap();
        assert_eq!(
            post[0].name,
            "model.layers.2.post_attention_layernorm.weight"
        );
        assert_eq!(
            t.layers[2].mlp_norm.name,
            "model.layers.2.pre_feedforward_layernorm.weight"
        );
        let (phi3, _, t) = count(TinyConfig::phi3());
        assert_eq!(phi3, 6);
        assert_eq!(t.layers[0].qkv.tensors()[0].shape, [(4 + 2 * 2) * 16, 64]);
        assert_eq!(
            t.layers[0].gate_up.tensors()[0].name,
            "model.layers.0.mlp.gate_up_proj.weight"
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
