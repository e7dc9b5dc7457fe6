//! The Hugging Face names and shapes of a layer's tensors, which the architectures' files
//! compose their operations from.

use super::{Buf, Experts, Op, Tensor, llama};
use crate::ModelConfig;

/// Layer `i`'s tensors as Hugging Face names them, with their shapes.
pub(super) struct Names<'a> {
    pub(super) cfg: &'a ModelConfig,
    pub(super) i: usize,
}

impl<'a> Names<'a> {
    pub(super) fn new(cfg: &'a ModelConfig, i: usize) -> Self {
        Self { cfg, i }
    }

    pub(super) fn tensor(&self, role: &str, shape: &[usize]) -> Tensor {
        Tensor::new(format!("model.layers.{}.{role}", self.i), shape)
    }

    /// An RMSNorm gain over the hidden size.
    pub(super) fn norm(&self, role: &str) -> Tensor {
        self.tensor(&format!("{role}.weight"), &[self.cfg.hidden_size])
    }

    /// The bias of `role` (a norm or a projection), of `len` values.
    pub(super) fn bias(&self, role: &str, len: usize) -> Tensor {
        self.tensor(&format!("{role}.bias"), &[len])
    }

    /// The widths of q, k and v.
    pub(super) fn qkv_rows(&self) -> [(&'static str, usize); 3] {
        let c = self.cfg;
        let (q, kv) = (c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim);
        [("q", q), ("k", kv), ("v", kv)]
    }

    /// The q, k and v projections, as separate tensors (one where the config has them fused).
    pub(super) fn qkv(&self) -> Vec<Tensor> {
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
    pub(super) fn qkv_bias(&self) -> Vec<Tensor> {
        if self.cfg.fused_qkv {
            let rows = self.qkv_rows().iter().map(|(_, r)| r).sum();
            return vec![self.tensor("self_attn.qkv_proj.bias", &[rows])];
        }
        self.qkv_rows()
            .map(|(p, rows)| self.tensor(&format!("self_attn.{p}_proj.bias"), &[rows]))
            .into()
    }

    /// The per-head RMSNorm gains of q and k.
    pub(super) fn qk_norm(&self) -> [Tensor; 2] {
        let d = self.cfg.head_dim;
        ["q", "k"].map(|p| self.tensor(&format!("self_attn.{p}_norm.weight"), &[d]))
    }

    pub(super) fn o(&self) -> Tensor {
        let c = self.cfg;
        let q = c.num_heads * c.head_dim;
        self.tensor("self_attn.o_proj.weight", &[c.hidden_size, q])
    }

    /// A mixture of experts on the residual stream normalized by `post_attention_layernorm`:
    /// the router `router` and each expert `e`'s gate, up and down matrices, named by
    /// `name(e, "gate" | "up" | "down")`; no choice biases, no shared expert's gate.
    pub(super) fn experts(&self, router: &str, name: impl Fn(usize, &str) -> String) -> Experts {
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
    pub(super) fn with_shared_expert(&self, prefix: &str, experts: Experts) -> Vec<Op> {
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
    pub(super) fn gate_up(&self) -> Vec<Tensor> {
        let (h, ff) = (self.cfg.hidden_size, self.cfg.intermediate_size);
        ["gate", "up"]
            .map(|p| self.tensor(&format!("mlp.{p}_proj.weight"), &[ff, h]))
            .into()
    }

    pub(super) fn down(&self) -> Tensor {
        let (h, ff) = (self.cfg.hidden_size, self.cfg.intermediate_size);
        self.tensor("mlp.down_proj.weight", &[h, ff])
    }
}
