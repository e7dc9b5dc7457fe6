//! Phi-3 and Phi-3.5: Llama's layer with q, k and v fused into one tensor, and gate and up
//! into another; its LongRoPE frequency factors are in [`crate::ModelConfig`].

use super::Buf::Residual;
use super::llama::{attention, mlp};
use super::{Layer, Names};
use crate::ModelConfig;

pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let (h, d, ff) = (cfg.hidden_size, cfg.head_dim, cfg.intermediate_size);
    let qkv = n.tensor(
        "self_attn.qkv_proj.weight",
        &[(cfg.num_heads + 2 * cfg.num_kv_heads) * d, h],
    );
    let gate_up = n.tensor("mlp.gate_up_proj.weight", &[2 * ff, h]);
    let mut ops = attention(&n, vec![qkv], None, Residual).to_vec();
    ops.extend(mlp(
        &n,
        Some("post_attention_layernorm"),
        vec![gate_up],
        Residual,
    ));
    Layer { ops }
}
