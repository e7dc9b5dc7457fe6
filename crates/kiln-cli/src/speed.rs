//! `kiln speed`: the engine measured in-process, in the units the GPU goals are stated in: the
//! device's memory bandwidth, decode tokens/s and the fraction of the bandwidth roofline at
//! several numbers of concurrent sequences, and prefill tokens/s at several prompt lengths.
//!
//! Fraction of the roofline = (bytes a decode step must read ÷ the device's bandwidth) ÷ the
//! measured step time, the bandwidth being the larger of its buffer-copy and reading-kernel
//! rates (`kiln_gpu::Bandwidth`). A step reads every weight matrix once (the embedding table only when it
//! is also the output matrix) plus the K/V of every running sequence's context. The weights'
//! bytes are the runner's GPU bytes scaled by the share of the parameters a step reads.
//!
//! The model is a file or folder, or `--synthetic`: random weights in a known model's shapes,
//! written by kiln's own model writer (nothing is downloaded).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use kiln_engine::{Engine, EngineConfig, KvLayout, KvSize, Request, SamplingParams};
use kiln_gpu::{Bandwidth, GpuContext, KernelProfile, Kernels};
use kiln_model::testing::{TinyConfig, write_random_gguf, write_random_llama};
use kiln_model::{Architecture, DType, Model, ModelConfig};
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

#[derive(clap::Args)]
pub struct Args {
    /// Model folder, GGUF file or Hugging Face repo id (default: the SmolLM2-135M-Instruct GGUF).
    #[arg(long, conflicts_with = "synthetic")]
    model: Option<String>,
    /// Random f16 weights in these shapes instead of a model file (written to a temporary
    /// folder first: about 16 GB for llama3-8b).
    #[arg(long, value_enum)]
    synthetic: Option<Synthetic>,
    /// The synthetic model's matrix type: f16 (a Hugging Face folder) or a GGUF block type
    /// (q8_0, q4_0, q4_1, q5_0, q5_1, q2_k ... q6_k, iq4_nl, iq4_xs, mxfp4: a GGUF file, kept
    /// quantized on the GPU).
    #[arg(long, default_value = "f16", value_parser = parse_synthetic_type, requires = "synthetic")]
    synthetic_type: DType,
    /// Write the synthetic model here and keep it (a later run with the same folder reads it
    /// instead of writing it again), rather than in a temporary folder.
    #[arg(long, requires = "synthetic")]
    synthetic_dir: Option<PathBuf>,
    /// Concurrent decoding sequences to measure.
    #[arg(long, value_delimiter = ',', default_value = "1,8,32,64")]
    concurrency: Vec<usize>,
    /// Prompt lengths whose prefill is measured.
    #[arg(long, value_delimiter = ',', default_value = "512,4096")]
    prompt_lens: Vec<usize>,
    /// Decode steps timed per concurrency (after the prompts are prefilled).
    #[arg(long, default_value_t = 32)]
    decode_steps: usize,
    /// Prompt length of each decoding sequence: the context decode starts from (long contexts
    /// weigh attention, as agent loops do).
    #[arg(long, default_value_t = 32)]
    decode_context: usize,
    /// Bytes of GPU memory for the KV cache.
    #[arg(long, default_value_t = 2 << 30)]
    kv_memory: u64,
    /// Also write the results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also time every operation on the device (each in a compute pass of its own, with
    /// timestamp queries) and print where the timed steps' device time goes, at each
    /// concurrency and prompt length. The timed steps then include the profile's own cost.
    #[arg(long)]
    profile: bool,
    /// Every timed request runs through this LoRA adapter (a PEFT folder made for the model).
    #[arg(long, conflicts_with = "synthetic")]
    lora: Option<PathBuf>,
    #[command(flatten)]
    device: crate::device_args::DeviceArgs,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Synthetic {
    /// Llama 3 8B: hidden 4096, 32 layers, 32 heads / 8 KV heads of 128, vocab 128256.
    #[value(name = "llama3-8b")]
    Llama3_8b,
    /// Llama 3.2 1B: hidden 2048, 16 layers, 32 heads / 8 KV heads of 64, tied embeddings.
    #[value(name = "llama3.2-1b")]
    Llama32_1b,
    /// Granite 3.0 1B-A400M, a mixture of experts: hidden 1024, 24 layers, 16 heads / 8 KV
    /// heads of 64, 32 experts of 512 a layer, 8 a token, tied embeddings (1.3B parameters,
    /// 0.4B a token).
    #[value(name = "granite-moe-1b")]
    GraniteMoe1b,
    /// The same with a dense MLP of 4096 (8 experts' worth): what a token reads and
    /// computes, without the experts' routing and gathering.
    #[value(name = "granite-moe-1b-dense")]
    GraniteMoe1bDense,
}

impl Synthetic {
    fn shapes(self) -> TinyConfig {
        let (hidden_size, intermediate_size, num_layers, head_dim, tie_word_embeddings) = match self
        {
            Synthetic::Llama3_8b => (4096, 14336, 32, 128, false),
            Synthetic::Llama32_1b => (2048, 8192, 16, 64, true),
            Synthetic::GraniteMoe1b => (1024, 512, 24, 64, true),
            Synthetic::GraniteMoe1bDense => (1024, 4096, 24, 64, true),
        };
        // Granite 3.0's multipliers.
        let granite = kiln_model::GraniteScales {
            embedding: 12.0,
            attention: 0.015625,
            residual: 0.22,
            logits: 6.0,
        };
        let granite = |architecture| TinyConfig {
            architecture,
            num_heads: 16,
            vocab_size: 49155,
            rope_theta: 10000.0,
            granite: Some(granite),
            moe: (architecture == Architecture::GraniteMoe)
                .then(|| kiln_model::Moe::softmax(32, 8, 512, true)),
            ..TinyConfig::default()
        };
        let base = match self {
            Synthetic::GraniteMoe1b => granite(Architecture::GraniteMoe),
            Synthetic::GraniteMoe1bDense => granite(Architecture::Granite),
            _ => TinyConfig {
                architecture: Architecture::Llama,
                num_heads: 32,
                vocab_size: 128256,
                rope_theta: 500000.0,
                ..TinyConfig::default()
            },
        };
        TinyConfig {
            hidden_size,
            intermediate_size,
            num_layers,
            num_kv_heads: 8,
            head_dim,
            max_position_embeddings: 8192,
            rms_norm_eps: 1e-5,
            tie_word_embeddings,
            dtype: DType::F16,
            ..base
        }
    }
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let (model, name, _dir) = match a.synthetic {
        Some(s) => {
            let temp = match &a.synthetic_dir {
                Some(_) => None,
                None => Some(tempfile::tempdir()?),
            };
            let dir = a.synthetic_dir.clone().unwrap_or_else(|| {
                temp.as_ref()
                    .expect("a temporary folder")
                    .path()
                    .to_path_buf()
            });
            let shapes = s.shapes();
            let model = if a.synthetic_type == DType::F16 {
                if dir.join("model.safetensors").exists() {
                    eprintln!("reading the random {s:?} model in {}", dir.display());
                } else {
                    eprintln!("writing a random {s:?} model to {}", dir.display());
                    write_random_llama(&dir, &shapes, 1)?;
                }
                Model::load(&dir)?
            } else {
                let t = a.synthetic_type;
                let path = dir.join(format!("model-{}.gguf", t.name()));
                if path.exists() {
                    eprintln!(
                        "reading the random {s:?} {} model {}",
                        t.name(),
                        path.display()
                    );
                } else {
                    eprintln!(
                        "writing a random {s:?} {} model to {}",
                        t.name(),
                        path.display()
                    );
                    std::fs::create_dir_all(&dir)?;
                    write_random_gguf(&path, &shapes, t, 1)?;
                }
                Model::load(&path)?
            };
            let want = shapes.model_config();
            anyhow::ensure!(
                (
                    model.config.architecture,
                    model.config.hidden_size,
                    model.config.num_layers
                ) == (want.architecture, want.hidden_size, want.num_layers)
                    && model.config.intermediate_size == want.intermediate_size
                    && model.config.vocab_size == want.vocab_size,
                "{} holds another model than the synthetic {s:?}: give an empty folder",
                dir.display()
            );
            let name = format!("synthetic {s:?}, {}", a.synthetic_type.name());
            (model, name, temp)
        }
        None => {
            let model = crate::model_path::load(a.model.as_deref())?;
            let name = a.model.clone().unwrap_or_else(|| "default model".into());
            (model, name, None)
        }
    };
    let ctx = pollster::block_on(GpuContext::new())?;
    eprintln!("adapter: {}", ctx.describe());
    let measured = Bandwidth::measure(&ctx, &Kernels::new(&ctx));
    let bandwidth = measured.ceiling();
    let max_seqs = a.concurrency.iter().copied().max().unwrap_or(1);
    let mut engine = crate::model_path::build_engine(
        &ctx,
        &model.config,
        &model.weights,
        a.device.apply(EngineConfig {
            max_num_seqs: max_seqs,
            kv: KvSize::Bytes(a.kv_memory),
            enable_prefix_caching: false,
            lora: match &a.lora {
                Some(dir) => vec![std::sync::Arc::new(kiln_model::LoraAdapter::load(
                    "lora",
                    dir,
                    &model.config,
                )?)],
                None => Vec::new(),
            },
            ..EngineConfig::default()
        }),
    )?;
    let c = model.config.clone();
    let weight_bytes = engine.runner().weight_bytes as f64;
    let cooperative_matrix = engine.runner().cooperative_matrix;
    if let Some(side) = cooperative_matrix {
        eprintln!("products of many rows on cooperative matrices {side}x{side}");
    }
    let step_weight_bytes = |sequences| weight_bytes * read_share(&c, sequences);
    let kv_token_bytes = KvLayout::for_model(&c, a.device.kv_dtype).bytes_per_token() as f64;
    println!(
        "model: {name}; {:.2} GB of weights on the GPU, {:.2} GB read per decode step",
        weight_bytes / 1e9,
        step_weight_bytes(1) / 1e9
    );
    println!(
        "bandwidth: {:.1} GB/s (the larger of: buffer copies {:.1} GB/s read + write, a reading kernel {:.1} GB/s)",
        bandwidth / 1e9,
        measured.copy / 1e9,
        measured.read / 1e9
    );

    let mut ids = 0u64;
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut random_prompt = |len: usize| -> Vec<u32> {
        (0..len)
            .map(|_| rng.random_range(0..c.vocab_size as u32))
            .collect()
    };
    let lora = engine.lora_ref("lora");
    let mut request = |prompt: Vec<u32>, max_tokens: usize| {
        ids += 1;
        Request {
            sampling: SamplingParams::default(),
            seed: 0,
            ignore_eos: true,
            lora,
            ..Request::new(ids, prompt, max_tokens)
        }
    };
    // A warm-up request compiles and runs every pipeline once.
    engine.add_request(request(random_prompt(16), 2))?;
    run_all(&mut engine)?;
    engine.runner().set_profiling(a.profile)?;
    let mut profiles = Vec::new();

    let decode_len = a.decode_context + a.decode_steps + 2;
    anyhow::ensure!(
        decode_len <= engine.max_len(),
        "--decode-context {} and --decode-steps {} need {decode_len} tokens a sequence; the \
         context holds {}",
        a.decode_context,
        a.decode_steps,
        engine.max_len()
    );
    let mut decode = Vec::new();
    println!(
        "\ndecode from prompts of {} tokens:\n| sequences | decode tokens/s | step ms | GB read per step | roofline fraction | dispatches per step |\n|---|---|---|---|---|---|",
        a.decode_context
    );
    for &n in &a.concurrency {
        let prompt_len = a.decode_context;
        for _ in 0..n {
            engine.add_request(request(random_prompt(prompt_len), a.decode_steps + 2))?;
        }
        // Prefill, and one decode step so every sequence is decoding.
        let mut started = 0;
        while started < 2 * n {
            started += step_tokens(&mut engine)?;
        }
        engine.runner().take_profile();
        let t = Instant::now();
        let mut tokens = 0;
        for _ in 0..a.decode_steps {
            tokens += step_tokens(&mut engine)?;
        }
        let step_s = t.elapsed().as_secs_f64() / a.decode_steps as f64;
        profiles.push((
            format!("decode, {n} sequences"),
            engine.runner().take_profile(),
        ));
        let dispatches = engine.runner().last_dispatches();
        run_all(&mut engine)?;
        let context = (prompt_len + 2 + a.decode_steps / 2) as f64;
        let bytes = step_weight_bytes(n) + n as f64 * context * kv_token_bytes;
        let fraction = bytes / bandwidth / step_s;
        let rate = tokens as f64 / (step_s * a.decode_steps as f64);
        println!(
            "| {n} | {rate:.1} | {:.2} | {:.3} | {fraction:.3} | {dispatches} |",
            step_s * 1e3,
            bytes / 1e9
        );
        decode.push(json!({"sequences": n, "prompt_tokens": prompt_len, "tokens_per_s": rate, "step_ms": step_s * 1e3, "bytes_per_step": bytes, "roofline_fraction": fraction, "dispatches": dispatches}));
    }

    let mut prefill = Vec::new();
    println!("\n| prompt tokens | prefill tokens/s | seconds |\n|---|---|---|");
    for &len in &a.prompt_lens {
        if len >= engine.max_len() {
            println!(
                "| {len} | (longer than the context, {} tokens) | |",
                engine.max_len()
            );
            continue;
        }
        engine.add_request(request(random_prompt(len), 1))?;
        engine.runner().take_profile();
        let t = Instant::now();
        run_all(&mut engine)?;
        let s = t.elapsed().as_secs_f64();
        profiles.push((
            format!("prefill, {len} tokens"),
            engine.runner().take_profile(),
        ));
        println!("| {len} | {:.1} | {s:.2} |", len as f64 / s);
        prefill.push(json!({"prompt_tokens": len, "tokens_per_s": len as f64 / s, "seconds": s}));
    }

    let profiles: Vec<Value> = match a.profile {
        true => profiles
            .iter()
            .map(|(what, p)| print_profile(what, p))
            .collect(),
        false => Vec::new(),
    };

    if let Some(path) = &a.json {
        let out: Value = json!({
            "model": name, "adapter": ctx.describe(), "kernels": a.device.kernels.to_string(),
            "cooperative_matrix": cooperative_matrix,
            "kv_dtype": a.device.kv_dtype.to_string(), "weight_bytes": weight_bytes,
            "bytes_read_per_step_weights": step_weight_bytes(1), "bandwidth_bytes_per_s": bandwidth,
            "copy_bandwidth_bytes_per_s": measured.copy, "read_bandwidth_bytes_per_s": measured.read,
            "decode": decode, "prefill": prefill, "profiles": profiles,
        });
        std::fs::write(path, serde_json::to_vec_pretty(&out)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// A `--synthetic-type`: F16 or a block type, by its GGML name in any case.
fn parse_synthetic_type(s: &str) -> Result<DType, String> {
    DType::ALL
        .into_iter()
        .filter(|t| *t == DType::F16 || t.is_quantized())
        .find(|t| t.name().eq_ignore_ascii_case(s))
        .ok_or_else(|| format!("{s}: not f16 or a GGUF block type (q8_0, q4_k, ...)"))
}

/// Prints where the device time of `what`'s steps went; returns it as JSON.
fn print_profile(what: &str, p: &KernelProfile) -> Value {
    let total = p.ms_per_step();
    println!(
        "\ndevice time per step, {what} ({} steps timed, {total:.2} ms a step):\n| operation | per step | ms a step | share |\n|---|---|---|---|",
        p.steps
    );
    for o in &p.operations {
        println!(
            "| {} | {} | {:.3} | {:.1}% |",
            o.label,
            o.per_step,
            o.ms_per_step,
            100.0 * o.ms_per_step / total.max(f64::MIN_POSITIVE)
        );
    }
    let operations: Vec<Value> = (p.operations.iter())
        .map(
            |o| json!({"operation": o.label, "per_step": o.per_step, "ms_per_step": o.ms_per_step}),
        )
        .collect();
    json!({"steps": what, "steps_timed": p.steps, "ms_per_step": total, "operations": operations})
}

/// The share of the model's parameters a decode step of `sequences` reads: all but the
/// embedding table (unless that table is also the output matrix), and of a mixture's experts
/// the share that so many tokens choose, if each chose at random (`1 - (1 - k/E)^n`).
fn read_share(c: &ModelConfig, sequences: usize) -> f64 {
    let all = c.param_count() as f64;
    let gathered = if c.tie_word_embeddings {
        0
    } else {
        c.vocab_size * c.hidden_size
    };
    let unread_experts = c.moe.map_or(0.0, |m| {
        let routed = m.first_layer..c.num_layers;
        let expert = 3 * c.hidden_size * m.intermediate_size;
        let all_experts = (routed.len() * m.experts * expert) as f64;
        let untouched =
            (1.0 - m.experts_per_token as f64 / m.experts as f64).powi(sequences as i32);
        all_experts * untouched
    });
    (all - gathered as f64 - unread_experts) / all
}

/// Tokens produced by one engine step.
fn step_tokens(engine: &mut Engine) -> anyhow::Result<usize> {
    Ok(pollster::block_on(engine.step())?
        .iter()
        .filter(|u| u.token.is_some())
        .count())
}

fn run_all(engine: &mut Engine) -> anyhow::Result<()> {
    while engine.has_unfinished() {
        pollster::block_on(engine.step())?;
    }
    Ok(())
}
