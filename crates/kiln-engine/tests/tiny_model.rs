//! Tiny random models (written with `kiln_model::testing::write_tiny_llama`) on the real GPU
//! path: the runner's logits against the CPU reference forward pass (Llama, Qwen2 with
//! attention biases, tied embeddings, GGUF files of every quantized type kept quantized) over chunked prefill across non-contiguous KV blocks
//! and decode steps; greedy tokens of 8 concurrent requests equal to each run alone, with
//! prefix caching on and off; and KV blocks evicted to the CPU tier and restored giving the
//! same tokens and log-probs as a fresh engine that never evicted. Every test runs with both
//! kernel families (`gpu`: tiled, `cpu`: row-wise) and the f16 KV cache; the reference and
//! CPU-tier tests with the f32 cache too.

mod common;

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

/// `ec` with this kernel family and KV type; quantized GGUF matrices stay quantized with both
/// families (`auto` would widen them for the row-wise one; the default model's test covers that).
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

/// Prefill 45 tokens in chunks of 16, 13 and 16 (the second and third cross block
/// boundaries mid-chunk), then 5 decode steps, into blocks 5, 2, 7, 0 (not in order); each
/// step's sampled-row logits against the CPU forward pass at that position.
///
/// Tolerance: both sides use f16-rounded weights, but the GPU folds the RMSNorm gains into
/// the weights before rounding and the reference applies them after (~5e-4 relative per
/// weight), and accumulation is f32 (GPU) vs f64 (CPU). These models' logits reach ~1.8 and
/// the measured differences ~1.3e-3, so `atol 2e-3 + 1e-2 * max|logit|` (~2e-2) leaves ~15x
/// headroom. The test also checks that the tolerance is far below the effect of changing one
/// early prompt token (~0.35 on the decode logits), so a wrong block, slot or position
/// cannot hide inside it. The f16 KV cache adds one f16 rounding of each K and V (~5e-4
/// relative), well inside the same tolerance. Runs every kernel family and KV type.
fn check_against_reference(name: &str, cfg: &TinyConfig) {
    let (_dir, model) = tiny(cfg, 7);
    check_model_against_reference(name, &model);
}

fn check_model_against_reference(name: &str, model: &Model) {
    let ctx = gpu();
    let cpu = CpuModel::load(&model.config, &model.weights).unwrap();
    let vocab = model.config.vocab_size;
    let all = tokens(1, 50, vocab); // 45 prompt tokens, then the 5 decode inputs
    let want = cpu.forward(&all);
    let worst: Vec<f32> = ALL
        .iter()
        .map(|&(family, dtype)| {
            let name = format!("{name} kernels {family} kv {dtype}");
            check_steps(
                &name,
                &mut engine(&ctx, model, on(config(16, false), family, dtype)),
                &all,
                &want,
            )
        })
        .collect();
    // Sensitivity: the decode logits after changing token 3 (block 5 of the table).
    let mut other = all.clone();
    other[3] = (other[3] + 1) % vocab as u32;
    let alt = cpu.forward(&other);
    let sens = (45..50)
        .map(|p| {
            alt[p]
                .iter()
                .zip(&want[p])
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max)
        })
        .fold(f32::MAX, f32::min);
    let max_tol = 2e-3 + 1e-2 * want.iter().flatten().fold(0f32, |m, v| m.max(v.abs()));
    assert!(
        sens > 5.0 * max_tol,
        "{name}: one changed context token moves the logits by only {sens}, tolerance {max_tol}"
    );
    for ((family, dtype), worst) in ALL.iter().zip(worst) {
        eprintln!(
            "{name} kernels {family} kv {dtype}: worst |gpu - cpu| logit difference {worst:e}, tolerance <= {max_tol:e}, one-token sensitivity {sens:e}"
        );
    }
}

/// Prefill in three chunks and five decode steps into blocks 5, 2, 7, 0; returns the worst
/// logit difference.
fn check_steps(
    name: &str,
    engine: &mut kiln_engine::Engine,
    all: &[u32],
    want: &[Vec<f32>],
) -> f32 {
    let table = [5u32, 2, 7, 0];
    let mut steps = vec![(0, 16), (16, 29), (29, 45)];
    steps.extend((45..50).map(|p| (p, p + 1)));
    let mut worst = 0f32;
    for (start, end) in steps {
        let got = pollster::block_on(engine.runner().logits(&chunk(
            &all[start..end],
            start,
            &table,
        )))
        .unwrap()
        .remove(0);
        let w = &want[end - 1];
        let scale = w.iter().fold(0f32, |m, v| m.max(v.abs()));
        let tol = 2e-3 + 1e-2 * scale;
        for (i, (g, w)) in got.iter().zip(w).enumerate() {
            worst = worst.max((g - w).abs());
            assert!(
                (g - w).abs() <= tol && g.is_finite(),
                "{name}: position {}: logit {i}: got {g}, want {w} (tol {tol})",
                end - 1
            );
        }
        let argmax = |l: &[f32]| (0..l.len()).max_by(|&a, &b| l[a].total_cmp(&l[b])).unwrap();
        assert_eq!(
            argmax(&got),
            argmax(w),
            "{name}: position {}: argmax",
            end - 1
        );
    }
    worst
}

#[test]
fn logits_match_cpu_reference_llama() {
    check_against_reference("llama", &TinyConfig::default());
}

/// GGUF files whose matrices stay quantized on the GPU (Q/K rows permuted in the file): the
/// kernels' in-register dequantization against the reference's, kiln-model's own code.
#[test]
fn logits_match_cpu_reference_quantized_gguf() {
    for dtype in [DType::Q8_0, DType::Q4_0, DType::Q4_1] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tiny.gguf");
        write_tiny_gguf(&path, &TinyConfig::default(), 7, dtype).unwrap();
        let model = Model::load(&path).unwrap();
        check_model_against_reference(&format!("gguf {dtype:?}"), &model);
    }
}

/// The same for the 5-bit types and the K-quants (blocks of 256, so a model 256 wide): Q4_K and
/// Q6_K are what Q4_K_M files are mostly made of.
#[test]
fn logits_match_cpu_reference_k_quant_gguf() {
    let cfg = TinyConfig {
        hidden_size: 256,
        intermediate_size: 512,
        head_dim: 64,
        ..TinyConfig::default()
    };
    for dtype in [
        DType::Q5_0,
        DType::Q5_1,
        DType::Q4_K,
        DType::Q5_K,
        DType::Q6_K,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tiny.gguf");
        write_tiny_gguf(&path, &cfg, 7, dtype).unwrap();
        let model = Model::load(&path).unwrap();
        check_model_against_reference(&format!("gguf {dtype:?}"), &model);
    }
}

#[test]
fn logits_match_cpu_reference_qwen2_biases() {
    check_against_reference("qwen2", &TinyConfig::qwen2());
}

/// Qwen3: per-head q/k RMSNorm before the rotary embedding, no biases, head_dim 32 with 4 heads
/// in a hidden size of 64; as a Hugging Face folder and as a GGUF file (`qwen3` metadata,
/// `attn_q_norm` / `attn_k_norm` tensors).
#[test]
fn logits_match_cpu_reference_qwen3_qk_norm() {
    let cfg = TinyConfig::qwen3();
    check_against_reference("qwen3", &cfg);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    write_tiny_gguf(&path, &cfg, 7, DType::F16).unwrap();
    let model = Model::load(&path).unwrap();
    assert_eq!(model.config.architecture, kiln_model::Architecture::Qwen3);
    check_model_against_reference("qwen3 gguf", &model);
}

/// Gemma 3: norms after attention and after the MLP, GELU (tanh), embeddings scaled by
/// sqrt(64), q/k norms, tied embeddings, and a window of 12 on layers 1 and 3 (RoPE base 10000)
/// with layers 2 and 4 global (base 1e6), so the 50 positions here cross the window on the
/// sliding layers while token 3 still reaches the decode logits through the global ones. As a
/// Hugging Face folder (gains stored minus one, queries scaled by 1/sqrt(24)) and as GGUF.
#[test]
fn logits_match_cpu_reference_gemma3() {
    let cfg = TinyConfig::gemma3();
    let (_dir, model) = tiny(&cfg, 7);
    let c = &model.config;
    assert_eq!(c.architecture, kiln_model::Architecture::Gemma3);
    assert_eq!(
        (c.norm_gain_offset, c.query_pre_attn_scalar),
        (1.0, Some(24.0))
    );
    assert_eq!(
        (0..4).map(|i| c.layer_window(i)).collect::<Vec<_>>(),
        [Some(12), None, Some(12), None]
    );
    assert_eq!(
        (c.layer_rope_theta(0), c.layer_rope_theta(1)),
        (10000.0, 1.0e6)
    );
    assert_eq!(c.activation, kiln_model::Activation::GeluTanh);
    check_model_against_reference("gemma3", &model);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    write_tiny_gguf(&path, &cfg, 7, DType::F16).unwrap();
    let model = Model::load(&path).unwrap();
    assert_eq!(model.config.layer_window(3), None);
    assert_eq!(model.config.norm_gain_offset, 0.0);
    check_model_against_reference("gemma3 gguf", &model);
}

/// Phi-3: q/k/v and gate/up fused into one tensor each (`qkv_proj`, `gate_up_proj`; GGUF
/// `attn_qkv`, `ffn_up`), and LongRoPE: the long factors (the context, 512, is past the original
/// 64) dividing each frequency, cos and sin scaled by sqrt(1 + ln 8 / ln 64). As a Hugging
/// Face folder and as GGUF (factors as `rope_factors_*` tensors).
#[test]
fn logits_match_cpu_reference_phi3() {
    let cfg = TinyConfig::phi3();
    let (_dir, model) = tiny(&cfg, 7);
    assert_eq!(model.config.architecture, kiln_model::Architecture::Phi3);
    assert_eq!(model.config.long_rope, cfg.long_rope);
    assert!((model.config.rope_attention_factor() - 1.5f64.sqrt()).abs() < 1e-6);
    check_model_against_reference("phi3", &model);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    write_tiny_gguf(&path, &cfg, 7, DType::F16).unwrap();
    let model = Model::load(&path).unwrap();
    assert_eq!(model.config.long_rope, cfg.long_rope);
    check_model_against_reference("phi3 gguf", &model);
}

/// Llama 3.2's shape of model: tied embeddings and Llama 3 RoPE scaling (factor 32, original
/// context 64, so the 50 positions here cross the scaled band of frequencies), as a Hugging
/// Face folder and as GGUF (`rope.scaling.*` metadata).
#[test]
fn logits_match_cpu_reference_llama32_rope_scaling() {
    let cfg = TinyConfig {
        tie_word_embeddings: true,
        rope_theta: 500000.0,
        rope_scaling: Some(kiln_model::RopeScaling {
            factor: 32.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 64,
        }),
        ..TinyConfig::default()
    };
    check_against_reference("llama3.2", &cfg);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    write_tiny_gguf(&path, &cfg, 7, DType::F16).unwrap();
    let model = Model::load(&path).unwrap();
    assert_eq!(model.config.rope_scaling, cfg.rope_scaling);
    assert!(model.config.tie_word_embeddings);
    check_model_against_reference("llama3.2 gguf", &model);
}

/// Mistral's sliding window (30 positions, so the 45-token prompt's last chunk and every decode
/// step see only part of the context; over two layers token 3 still reaches the decode
/// logits, which the sensitivity check needs), as a folder and as GGUF.
#[test]
fn logits_match_cpu_reference_sliding_window() {
    let cfg = TinyConfig {
        sliding_window: Some(30),
        ..TinyConfig::default()
    };
    check_against_reference("sliding window", &cfg);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    write_tiny_gguf(&path, &cfg, 7, DType::F16).unwrap();
    let model = Model::load(&path).unwrap();
    assert_eq!(model.config.sliding_window, Some(30));
    check_model_against_reference("sliding window gguf", &model);
}

/// Mistral's window on every layer with a 12-block pool (192 tokens) that four requests of
/// 110 to 240 tokens share: the scheduler gives back the blocks behind each window, so the
/// pool's blocks are reused under running requests and one sequence outgrows the pool. Each
/// greedy token is the CPU reference's top token or within the reference test's tolerance of
/// it, and its log-prob is the reference's within 5e-3 (measured: 5.3e-4; giving back one
/// block too early moved one by 1.6e-2).
#[test]
fn sliding_window_gives_back_blocks_and_tokens_match_reference() {
    let cfg = TinyConfig {
        sliding_window: Some(30),
        ..TinyConfig::default()
    };
    let (_dir, model) = tiny(&cfg, 7);
    let cpu = CpuModel::load(&model.config, &model.weights).unwrap();
    let ctx = gpu();
    let vocab = model.config.vocab_size;
    let lens = [(60, 50), (45, 80), (90, 150), (20, 90)];
    let reqs = || {
        lens.iter()
            .enumerate()
            .map(|(i, &(n, out))| request(i as u64, tokens(300 + i as u64, n, vocab), out))
            .collect::<Vec<_>>()
    };
    for family in FAMILIES {
        let ec = EngineConfig {
            max_num_batched_tokens: 32,
            max_num_seqs: 4,
            kv: KvSize::Blocks(12),
            enable_prefix_caching: true,
            max_model_len: Some(256),
            ..EngineConfig::default()
        };
        let mut e = engine(&ctx, &model, on(ec, family, KvDtype::F16));
        let out = run(&mut e, reqs());
        let stats = e.stats();
        assert!(stats.window_released_blocks > 20, "{stats:?}");
        let (mut exact, mut total, mut worst) = (0, 0, 0f32);
        for r in reqs() {
            let got = &out[&r.id];
            assert_eq!(got.len(), lens[r.id as usize].1);
            let seq = [&r.prompt[..], &ids(got)].concat();
            let want = cpu.forward(&seq);
            for (k, t) in got.iter().enumerate() {
                let w = &want[r.prompt.len() - 1 + k];
                let top = w.iter().fold(f32::MIN, |m, &v| m.max(v));
                let scale = w.iter().fold(0f32, |m, v| m.max(v.abs()));
                let tol = 2e-3 + 1e-2 * scale;
                let chosen = w[t.token_id as usize];
                let log_z = top + w.iter().map(|v| (v - top).exp()).sum::<f32>().ln();
                let want_lp = chosen - log_z;
                let got_lp = t.logprob.unwrap();
                let what = format!("kernels {family} request {} token {k}", r.id);
                assert!(top - chosen <= tol, "{what}: logit {chosen}, top {top}");
                assert!(
                    (got_lp - want_lp).abs() <= 5e-3,
                    "{what}: log-prob {got_lp} vs {want_lp}"
                );
                worst = worst.max((got_lp - want_lp).abs());
                exact += (chosen == top) as usize;
                total += 1;
            }
        }
        eprintln!("kernels {family}: {exact}/{total} top tokens, log-probs within {worst:.1e}");
        assert!(
            exact * 10 >= total * 9,
            "kernels {family}: {exact}/{total} top tokens"
        );
    }
}

#[test]
fn logits_match_cpu_reference_tied_embeddings() {
    check_against_reference(
        "tied",
        &TinyConfig {
            tie_word_embeddings: true,
            num_kv_heads: 1,
            ..TinyConfig::default()
        },
    );
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

#[test]
fn concurrent_requests_match_each_alone() {
    let (_dir, model) = tiny(&TinyConfig::default(), 8);
    let ctx = gpu();
    let vocab = model.config.vocab_size;
    let shared = tokens(100, 2 * BLOCK_SIZE + 3, vocab);
    let prompts: Vec<Vec<u32>> = [5usize, 17, 33, 40, 1, 50, 23, 64]
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            // Requests 1, 3, 5 and 7 share a 35-token prefix (2 full blocks + 3).
            if i % 2 == 1 {
                [
                    &shared[..n.min(shared.len())],
                    &tokens(200 + i as u64, n.saturating_sub(shared.len()), vocab)[..],
                ]
                .concat()
            } else {
                tokens(200 + i as u64, n, vocab)
            }
        })
        .collect();
    let reqs = || {
        prompts
            .iter()
            .enumerate()
            .map(|(i, p)| request(i as u64, p.clone(), 6))
            .collect::<Vec<_>>()
    };
    for family in FAMILIES {
        let config = |blocks, caching| on(config(blocks, caching), family, KvDtype::F16);
        let mut solo_engine = engine(&ctx, &model, config(64, false));
        let alone: Vec<Vec<SampledToken>> = reqs()
            .into_iter()
            .map(|r| {
                let id = r.id;
                run(&mut solo_engine, vec![r]).remove(&id).unwrap()
            })
            .collect();
        for caching in [false, true] {
            let mut e = engine(&ctx, &model, config(64, caching));
            // Twice, so that with caching the second round starts from cached prefixes.
            for round in 0..2 {
                let together = run(&mut e, reqs());
                for (i, want) in alone.iter().enumerate() {
                    assert_same(
                        &format!("kernels {family} caching {caching} round {round} request {i}"),
                        &together[&(i as u64)],
                        want,
                    );
                }
            }
            let hits = e.stats().prefix_cache_hits;
            assert_eq!(
                hits > 0,
                caching,
                "prefix cache hits {hits} with caching {caching}"
            );
        }
    }
}

/// A prompt's cached blocks pushed out to the CPU tier by a request that needs the whole GPU
/// pool, then restored for a longer prompt sharing that prefix: same tokens and log-probs as
/// a fresh engine that computes everything.
#[test]
fn cpu_tier_restores_evicted_blocks() {
    for (family, dtype) in [
        (KernelFamily::Gpu, KvDtype::F16),
        (KernelFamily::Cpu, KvDtype::F32),
    ] {
        check_cpu_tier(family, dtype);
    }
}

fn check_cpu_tier(family: KernelFamily, dtype: KvDtype) {
    let config = |blocks, caching| on(config(blocks, caching), family, dtype);
    let (_dir, model) = tiny(&TinyConfig::qwen2(), 9);
    let ctx = gpu();
    let vocab = model.config.vocab_size;
    let first = tokens(300, 3 * BLOCK_SIZE + 6, vocab); // 3 full blocks, cached after it runs
    let filler = tokens(301, 8 * BLOCK_SIZE - 4, vocab); // with its 4 outputs: all 8 blocks
    let again = [&first[..], &tokens(302, 10, vocab)[..]].concat();
    let per_block = KvLayout::for_model(&model.config, dtype).bytes_per_block();
    let mut e = engine(
        &ctx,
        &model,
        EngineConfig {
            cpu_kv_bytes: 64 * per_block,
            ..config(8, true)
        },
    );
    run(&mut e, vec![request(1, first.clone(), 4)]);
    run(&mut e, vec![request(2, filler, 4)]);
    let s = e.stats();
    assert!(
        s.cpu_blocks_stored >= 3,
        "the first prompt's 3 cached blocks went to the CPU tier: {s:?}"
    );
    assert_eq!(s.cpu_blocks_restored, 0, "{s:?}");
    let got = run(&mut e, vec![request(3, again.clone(), 6)])
        .remove(&3)
        .unwrap();
    let s = e.stats();
    assert!(
        s.cpu_blocks_restored >= 3,
        "the shared prefix came back from the CPU tier: {s:?}"
    );

    let mut fresh = engine(&ctx, &model, config(64, false));
    let want = run(&mut fresh, vec![request(3, again, 6)])
        .remove(&3)
        .unwrap();
    assert_same(
        &format!("kernels {family} kv {dtype}: restored from the CPU tier"),
        &got,
        &want,
    );
}

/// The same KV memory holds twice the blocks as f16 as it does as f32, for the GPU pool the
/// scheduler gets and for the CPU tier.
#[test]
fn f16_kv_holds_twice_the_blocks() {
    let (_dir, model) = tiny(&TinyConfig::default(), 10);
    let ctx = gpu();
    let f32_block = KvLayout::for_model(&model.config, KvDtype::F32).bytes_per_block();
    let bytes = 40 * f32_block + f32_block / 2;
    let blocks = |kv_dtype| {
        let ec = EngineConfig {
            kv: KvSize::Bytes(bytes),
            cpu_kv_bytes: 3 * f32_block,
            kv_dtype,
            ..config(1, false)
        };
        let e = engine(&ctx, &model, ec);
        (
            e.runner_config().num_blocks,
            e.runner_config().num_cpu_blocks,
            e.stats().kv_blocks_free,
        )
    };
    assert_eq!(blocks(KvDtype::F32), (40, 3, 40));
    assert_eq!(blocks(KvDtype::F16), (81, 6, 81));
}

/// The dispatch count of a step, as `kiln speed` reports it: per layer the QKV product, RoPE and
/// the KV write, attention (two passes when the context is split, as it is for steps of up to
/// 32 tokens with the GPU family), the output product, gate/up, SiLU, down; plus the embedding,
/// the final norm, the logits and sampling.
#[test]
fn dispatches_per_step() {
    let ctx = gpu();
    let (_dir, model) = tiny(&TinyConfig::default(), 3);
    let layers = model.config.num_layers as u32;
    for (family, attention) in [(KernelFamily::Gpu, 2), (KernelFamily::Cpu, 1)] {
        let mut engine = engine(&ctx, &model, on(config(16, false), family, KvDtype::F16));
        let ids = tokens(9, 17, model.config.vocab_size);
        let table = [0u32, 1];
        for (start, end) in [(0, 16), (16, 17)] {
            pollster::block_on(
                engine
                    .runner()
                    .logits(&chunk(&ids[start..end], start, &table)),
            )
            .unwrap();
            // The logits call records no sampling.
            assert_eq!(
                engine.runner().last_dispatches(),
                1 + layers * (6 + attention) + 2,
                "kernels {family}, tokens {start}..{end}"
            );
        }
    }
}
