//! Gemma 3: Qwen3's attention (per-head q/k RMSNorm, no biases), with RMSNorms on the
//! attention's and the MLP's outputs before each joins the residual stream. What else sets it
//! apart is in [`ModelConfig`]: a GELU (tanh) gated MLP, embeddings scaled by sqrt(hidden
//! size), tied output, and sliding-window layers interleaved with global ones, each kind with
//! its own RoPE base. Hugging Face stores its norm gains minus one; GGUF files store the gains.

use super::Buf::Proj;
use super::Op::AddNormed;
use super::llama::{attention, mlp};
use super::{Layer, Names};
use crate::ModelConfig;

/// Layer `i`: each sub-layer's output normalized on its way into the residual stream.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let mut ops = attention(&n, n.qkv(), Some(n.qk_norm()), Proj).to_vec();
    ops.push(AddNormed {
        src: Proj,
        norm: n.norm("post_attention_layernorm"),
    });
    ops.extend(mlp(&n, "pre_feedforward_layernorm", n.gate_up(), Proj));
    ops.push(AddNormed {
        src: Proj,
        norm: n.norm("post_feedforward_layernorm"),
    });
    Layer { ops }
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
