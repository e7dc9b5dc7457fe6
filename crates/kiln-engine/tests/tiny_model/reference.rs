//! The runner's logits against the CPU reference forward pass: the harness every
//! architecture's test uses (`architectures.rs` and the modules beside it), and Llama's as HF
//! folder and GGUF of every quantized type.

use super::*;
use kiln_model::testing::{safetensors_bytes, tiny_tensors};

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
/// relative), well inside the same tolerance. Runs every kernel family and KV type; the fp8
/// and q8_0 caches against the reference reading K and V through the same rounding (q8_0
/// where the model's K row is a multiple of 64 elements).
pub(super) fn check_against_reference(name: &str, cfg: &TinyConfig) {
    let (_dir, model) = tiny(cfg, 7);
    check_model_against_reference(name, &model);
}

/// The same tiny model (seed 7) as an f16 GGUF file.
pub(super) fn tiny_gguf(cfg: &TinyConfig) -> (tempfile::TempDir, Model) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    write_tiny_gguf(&path, cfg, 7, DType::F16).unwrap();
    let model = Model::load(&path).unwrap();
    (dir, model)
}

/// `cfg`'s tiny model (seed 7) as a Hugging Face folder and as GGUF, each read back and its
/// config checked by `check`, against the reference.
pub(super) fn check_folder_and_gguf(
    name: &str,
    cfg: &TinyConfig,
    check: impl Fn(&kiln_model::ModelConfig),
) {
    let (_dir, model) = tiny(cfg, 7);
    check(&model.config);
    check_model_against_reference(name, &model);
    let (_gguf, model) = tiny_gguf(cfg);
    check(&model.config);
    check_model_against_reference(&format!("{name} gguf"), &model);
}

pub(super) fn check_model_against_reference(name: &str, model: &Model) {
    let ctx = gpu();
    let cpu = CpuModel::load(&model.config, &model.weights).unwrap();
    let vocab = model.config.vocab_size;
    let all = tokens(1, 50, vocab); // 45 prompt tokens, then the 5 decode inputs
    let want = cpu.forward(&all);
    // The 8-bit caches against the reference reading K and V through their rounding (q8_0
    // where the model's rows are whole pairs of its groups).
    let small: Vec<(KvDtype, Vec<Vec<f32>>)> = [KvDtype::Fp8, KvDtype::Q8]
        .into_iter()
        .filter(|&d| KvLayout::for_model(&model.config, d).unfit().is_none())
        .map(|d| {
            let cpu = CpuModel::load(&model.config, &model.weights).unwrap();
            (d, cpu.with_kv_cache(d).forward(&all))
        })
        .collect();
    let configs: Vec<_> = (ALL.iter().copied())
        .chain(small.iter().flat_map(|(d, _)| FAMILIES.map(|f| (f, *d))))
        .collect();
    // An 8-bit cache is compared with its rounded reference only where the products are
    // exact f32: products on cooperative matrices round their inputs to f16 (about 1e-3 of
    // each K value), which sends values near a rounding boundary to the other side of it.
    let worst: Vec<Option<f32>> = (configs.iter())
        .map(|&(family, dtype)| {
            let name = format!("{name} kernels {family} kv {dtype}");
            let want = small
                .iter()
                .find(|(d, _)| *d == dtype)
                .map_or(&want, |(_, w)| w);
            let mut engine = engine(&ctx, model, on(config(16, false), family, dtype));
            if dtype.bytes() == 1 && engine.runner().cooperative_matrix.is_some() {
                eprintln!("{name}: not compared (products on cooperative matrices)");
                return None;
            }
            Some(check_steps(&name, &mut engine, &all, want))
        })
        .collect();
    // Sensitivity: the decode logits after changing token 3 (block 5 of the table); with
    // ALiBi, whose biases fade a token 40 positions back from most heads' view, every token
    // of that block.
    let mut other = all.clone();
    let changed = if model.config.alibi.is_some() {
        0..16
    } else {
        3..4
    };
    for t in &mut other[changed] {
        *t = (*t + 1) % vocab as u32;
    }
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
    // The rounding itself must show: the GPU far nearer the rounded reference than the
    // rounded reference is to the exact one (a cache that kept more bits would fail).
    for (dtype, rounded) in &small {
        let effect = (45..50)
            .flat_map(|p| rounded[p].iter().zip(&want[p]).map(|(a, b)| (a - b).abs()))
            .fold(0f32, f32::max);
        for (&(family, d), worst) in configs.iter().zip(&worst) {
            let Some(worst) = worst else { continue };
            assert!(
                d != *dtype || *worst * 2.0 < effect,
                "{name} kernels {family}: {d} cache {worst} off its reference, which is {effect} off the exact one"
            );
        }
        eprintln!("{name}: the {dtype} cache's rounding moves the decode logits by {effect:e}");
    }
    for ((family, dtype), worst) in configs.iter().zip(worst) {
        let Some(worst) = worst else { continue };
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

/// What `kiln info` prints as the weights' GPU bytes (`gpu_weight_bytes`, from the file alone)
/// equals what the runner uploads, for an f32 folder with one matrix beyond f16's range (kept
/// f32 on the GPU, so the same folder without that value takes fewer bytes) and for a quantized
/// GGUF file, kept quantized or widened to f16.
#[test]
fn info_weight_bytes_equal_the_uploaded_ones() {
    let ctx = gpu();
    let cfg = TinyConfig::default();
    let dir = tempfile::tempdir().unwrap();
    write_tiny_llama(dir.path(), &cfg, 7).unwrap();
    let uploaded_as = |model: &Model, weights| {
        let ec = EngineConfig {
            weights,
            ..on(config(16, false), KernelFamily::Gpu, KvDtype::F16)
        };
        engine(&ctx, model, ec).runner().weight_bytes
    };
    let uploaded = |model: &Model| uploaded_as(model, WeightStorage::Quantized);
    let counted = |model: &Model| {
        kiln_gpu::gpu_weight_bytes(&model.weights, WeightStorage::Quantized)
            .unwrap()
            .0
    };
    let model = Model::load(dir.path()).unwrap();
    let plain = counted(&model);
    assert_eq!(plain, uploaded(&model));
    let mut tensors = tiny_tensors(&cfg.model_config(), 7);
    let down = (tensors.iter_mut())
        .find(|t| t.name == "model.layers.1.mlp.down_proj.weight")
        .unwrap();
    down.data[3] = 1.0e5;
    let f16_bytes = down.data.len() as u64 * 2;
    let st = safetensors_bytes(&tensors, DType::F32);
    std::fs::write(dir.path().join("model.safetensors"), st).unwrap();
    let model = Model::load(dir.path()).unwrap();
    let big = counted(&model);
    assert_eq!(big, plain + f16_bytes, "the matrix counted as f32");
    assert_eq!(big, uploaded(&model));
    let path = dir.path().join("tiny.gguf");
    write_tiny_gguf(&path, &cfg, 7, DType::Q4_1).unwrap();
    let model = Model::load(&path).unwrap();
    let q = counted(&model);
    assert_eq!(q, uploaded(&model));
    assert!(q < plain, "Q4_1 {q} bytes, f16 {plain}");
    let (widened, types) = kiln_gpu::gpu_weight_bytes(&model.weights, WeightStorage::F16).unwrap();
    assert_eq!(widened, uploaded_as(&model, WeightStorage::F16));
    assert_eq!((widened, types), (plain, vec!["Q4_1".to_string()]));
}
