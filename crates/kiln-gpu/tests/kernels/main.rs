//! Every kernel against a CPU reference on seeded random inputs, with sizes that are not
//! multiples of the workgroup or tile sizes.
//!
//! This file holds the shared imports; `matrices.rs` the embedding gather and the matrix
//! products, `pointwise.rs` the gated activations and RMS norms, `rope_kv.rs` the rotary step
//! with the KV write, `attention.rs` paged attention.

mod attention;
#[path = "../common/mod.rs"]
mod common;
mod matrices;
mod pointwise;
mod rope_kv;

use common::*;
use kiln_gpu::ops::{self, AttentionBuffers, Matmul, MatmulArgs, OutputMap};
use kiln_gpu::reference;
use kiln_gpu::{GpuMatrix, Kernels, KvDtype, KvLayout, Recorded};
use kiln_model::Activation;
use rand::Rng;
use rand::seq::SliceRandom;
