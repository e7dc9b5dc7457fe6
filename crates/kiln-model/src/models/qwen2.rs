//! Qwen2 and Qwen2.5: Llama's layer. Their q, k and v biases are the `attention_bias` every
//! Qwen2 config has (set by the loader), which Llama's attention reads.

pub(super) use super::llama::layer;
