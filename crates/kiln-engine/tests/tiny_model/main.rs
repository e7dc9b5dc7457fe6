//! Tiny random models (written with `kiln_model::testing::write_tiny_llama`) on the real GPU
//! path. `reference`, `architectures`, `layer_norm_families`, `post_norm_families`,
//! `mixtures_of_experts`, `rotary` and `sliding_windows`: the runner's logits against
//! the CPU reference
//! forward pass for every architecture (Llama, Qwen2 with attention biases and windows, Qwen3,
//! Gemma 2 and 3, SmolLM3, Granite, MiniCPM, Phi-3 and Phi-4-mini, Llama 3.2's RoPE scaling, Mistral's
//! window, tied embeddings, GGUF files of every quantized type kept quantized) over chunked
//! prefill across non-contiguous KV blocks and decode steps.
//! `serving`: greedy tokens of 8 concurrent requests equal to each run alone, with prefix
//! caching on and off; KV blocks evicted to the CPU tier and restored giving the same tokens
//! and log-probs as a fresh engine that never evicted; blocks given back behind a sliding
//! window. `prompt_logprobs`: a scored prompt against the CPU reference. `overlap` and
//! `profile`: overlapped steps and the kernel profile changing no output; `speculation`:
//! decodes with guesses of their next tokens changing no output. `disk_tier`: a prompt's
//! blocks saved to files by one engine restored into a fresh one. `embedding`: the
//! hidden state a request asks for against the reference's logits. `lora`: requests through
//! LoRA adapters against models with the adapters merged in; `lora_slots`: adapters loaded
//! and unloaded while the engine runs, and more adapters
//! than slots, taking turns. `warm_up`: the warm-up of a new
//! engine changing no output. Every test runs with both kernel families (`gpu`: tiled, `cpu`: row-wise) and the
//! f16 KV cache; the reference and CPU-tier tests with the f32 cache too.

mod architectures;
#[path = "../common/mod.rs"]
mod common;
mod disk_tier;
mod embedding;
mod layer_norm_families;
mod lora;
mod lora_slots;
mod mixtures_of_experts;
mod overlap;
mod penalties;
mod post_norm_families;
mod profile;
mod prompt_logprobs;
mod reference;
mod rotary;
mod serving;
mod sliding_windows;
mod speculation;
mod warm_up;

use std::collections::BTreeMap;

use common::{chunk, engine, gpu, run_sampled as run};
use kiln_core::{BLOCK_SIZE, SamplingParams};
use kiln_engine::{
    EngineConfig, KernelFamily, KvDtype, KvLayout, KvSize, Request, SampledToken, WeightStorage,
};
use kiln_gpu::reference::CpuModel;
use kiln_model::testing::{TinyConfig, write_tiny_gguf, write_tiny_llama};
use kiln_model::{DType, Model};

fn tiny(cfg: &TinyConfig, seed: u64) -> (tempfile::TempDir, Model) {
    let dir = tempfile::tempdir().unwrap();
    write_tiny_llama(dir.path(), cfg, seed).unwrap();
    let model = Model::load(dir.path()).unwrap();
    (dir, model)
}

fn config(blocks: usize, prefix_caching: bool) -> EngineConfig {
    EngineConfig {
        max_num_batched_tokens: 48,
        max_num_seqs: 8,
        kv: KvSize::Blocks(blocks),
        enable_prefix_caching: prefix_caching,
        max_model_len: Some(128),
        ..EngineConfig::default()
    }
}

const FAMILIES: [KernelFamily; 2] = [KernelFamily::Gpu, KernelFamily::Cpu];

/// Every kernel family with every KV cache type.
const ALL: [(KernelFamily, KvDtype); 4] = [
    (KernelFamily::Gpu, KvDtype::F16),
    (KernelFamily::Cpu, KvDtype::F16),
    (KernelFamily::Gpu, KvDtype::F32),
    (KernelFamily::Cpu, KvDtype::F32),
];

/// `ec` with this kernel family and KV type; quantized GGUF matrices stay quantized (the
/// default) with both families.
fn on(ec: EngineConfig, kernels: KernelFamily, kv_dtype: KvDtype) -> EngineConfig {
    EngineConfig {
        kernels,
        kv_dtype,
        weights: WeightStorage::Quantized,
        ..ec
    }
}

/// A deterministic pseudo-random token sequence (LCG), distinct per `salt`.
fn tokens(salt: u64, n: usize, vocab: usize) -> Vec<u32> {
    let mut s = salt
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) % vocab as u64) as u32
        })
        .collect()
}

fn request(id: u64, prompt: Vec<u32>, max_tokens: usize) -> Request {
    let sampling = SamplingParams {
        top_logprobs: 5,
        ..SamplingParams::greedy()
    };
    Request {
        sampling,
        ignore_eos: true,
        ..Request::new(id, prompt, max_tokens)
    }
}

fn ids(out: &[SampledToken]) -> Vec<u32> {
    out.iter().map(|t| t.token_id).collect()
}

/// Same greedy tokens, and log-probs within 1e-4 (the KV data is the same; only the
/// grouping of rows into matmul tiles may differ).
fn assert_same(what: &str, got: &[SampledToken], want: &[SampledToken]) {
    assert_eq!(ids(got), ids(want), "{what}: greedy tokens");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let (gl, wl) = (g.logprob.unwrap(), w.logprob.unwrap());
        assert!(
            (gl - wl).abs() < 1e-4,
            "{what}: token {i}: logprob {gl} vs {wl}"
        );
        for ((gi, gv), (wi, wv)) in g.top_logprobs.iter().zip(&w.top_logprobs) {
            assert!(
                gi == wi && (gv - wv).abs() < 1e-4,
                "{what}: token {i}: top logprobs {:?} vs {:?}",
                g.top_logprobs,
                w.top_logprobs
            );
        }
    }
}
