//! Gemma 3: Gemma 2's layer ([`super::gemma2`]) with Qwen3's attention (per-head q/k RMSNorm
//! before the rotary step) and no soft caps. What else sets it apart is in [`ModelConfig`]:
//! five sliding-window layers to a global one, each kind with its own RoPE base.

use super::gemma2::normed_sublayers;
use super::{Layer, Names};
use crate::ModelConfig;

/// Layer `i`: each sub-layer's output normalized on its way into the residual stream.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    normed_sublayers(&n, Some(n.qk_norm()))
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
