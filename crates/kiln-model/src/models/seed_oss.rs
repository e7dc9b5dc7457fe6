//! Seed-OSS (ByteDance's Seed-OSS-36B): Llama's layer with q, k and v biases (its config's
//! `attention_bias`, read by the loaders). Biases on o_proj (`attention_out_bias`) or on the
//! MLP (`mlp_bias`), which the released models do not have, are refused by the config reader.
//! llama.cpp's GGUF files name the norm before the MLP `post_attention_norm`
//! (`gguf::names`).

pub(super) use super::llama::layer;
