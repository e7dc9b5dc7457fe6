//! ERNIE 4.5, the dense models (ERNIE-4.5-0.3B): Llama's layer. Its rotary embedding turns
//! each pair of a head's rows side by side, `(2j, 2j + 1)`, where Llama's turns `(j, j +
//! head_dim / 2)`; the loaders put the stored q and k rows in Llama's order
//! ([`super::interleaved_rows`]), so the kernels are Llama's. Its `use_bias` (biases on every
//! projection) is refused by the config readers: the released models have none.

pub(super) use super::llama::layer;
