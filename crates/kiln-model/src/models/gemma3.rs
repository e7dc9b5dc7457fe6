//! Gemma 3: Qwen3's layout (per-head q/k RMSNorm, no biases) plus RMSNorms on the attention's
//! and the MLP's outputs before each joins the residual stream. What else sets it apart is in
//! [`ModelConfig`]: a GELU (tanh) gated MLP, embeddings scaled by sqrt(hidden size), tied
//! output, and sliding-window layers interleaved with global ones, each kind with its own RoPE
//! base. Hugging Face stores its norm gains minus one; GGUF files store the gains.

use super::{LayerTensors, Tensor};
use crate::ModelConfig;

pub(super) fn layer(cfg: &ModelConfig, i: usize) -> LayerTensors {
    let h = cfg.hidden_size;
    let t = |role: &str| Tensor::new(format!("model.layers.{i}.{role}.weight"), &[h]);
    LayerTensors {
        mlp_norm: t("pre_feedforward_layernorm"),
        post_norms: Some([
            t("post_attention_layernorm"),
            t("post_feedforward_layernorm"),
        ]),
        ..super::qwen3::layer(cfg, i)
    }
}

/// Gemma's turn format, for files without a template: `<start_of_turn>user` / `model` turns
/// closed by `<end_of_turn>`; a system message opens the first user turn (Gemma has no system
/// role).
pub const CHAT_TEMPLATE: &str = "\
{{- bos_token -}}
{%- if messages and messages[0].role == 'system' -%}
  {%- set preamble = (messages[0].content or '') ~ '\\n\\n' -%}
  {%- set turns = messages[1:] -%}
{%- else -%}
  {%- set preamble = '' -%}
  {%- set turns = messages -%}
{%- endif -%}
{%- for m in turns -%}
  {{- '<start_of_turn>' ~ ('model' if m.role == 'assistant' else m.role) ~ '\\n' -}}
  {{- (preamble if loop.first else '') ~ ((m.content or '') | trim) ~ '<end_of_turn>\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<start_of_turn>model\\n' -}}
{%- endif -%}";
