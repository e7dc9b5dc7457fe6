//! `kiln generate`: one prompt through the engine, streamed to stdout, with the prefill and
//! decode speeds at the end.

use std::io::Write;
use std::time::Instant;

use anyhow::{Context, bail};
use kiln_engine::{Engine, EngineConfig, IncrementalDecoder, KvSize, Request, SamplingParams};
use kiln_gpu::GpuContext;
use kiln_model::ChatMessage;

#[derive(clap::Args)]
pub struct Args {
    /// Model folder, GGUF file or Hugging Face repo id (default: the SmolLM2-135M-Instruct GGUF).
    #[arg(long)]
    model: Option<String>,
    #[arg(long)]
    prompt: String,
    /// Wrap the prompt as a user message in the model's chat template.
    #[arg(long)]
    chat: bool,
    #[arg(long, default_value_t = 128)]
    max_tokens: usize,
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    #[arg(long, default_value_t = 1.0)]
    top_p: f32,
    #[arg(long, default_value_t = 0)]
    top_k: u32,
    #[arg(long)]
    seed: Option<u64>,
    /// Keep generating past end-of-sequence tokens.
    #[arg(long)]
    ignore_eos: bool,
    /// Bytes of GPU memory for the KV cache.
    #[arg(long, default_value_t = 256 << 20)]
    kv_memory: u64,
    /// Longest sequence (default: the model's context length, or what the KV cache holds if
    /// less); more than either is an error.
    #[arg(long)]
    max_model_len: Option<usize>,
    #[command(flatten)]
    device: crate::device_args::DeviceArgs,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let model = crate::model_path::load(a.model.as_deref())?;
    let text = if a.chat {
        let template = model
            .chat_template
            .as_ref()
            .context("the model has no chat template; drop --chat")?;
        template.render(
            &[ChatMessage {
                role: "user".into(),
                content: a.prompt.clone(),
            }],
            true,
        )?
    } else {
        a.prompt.clone()
    };
    let add_special = !a.chat;
    let prompt = model.tokenizer.encode(&text, add_special)?;
    let ctx = pollster::block_on(GpuContext::new())?;
    eprintln!("adapter: {}", ctx.describe());
    let bar = crate::model_path::upload_bar();
    let mut engine = Engine::new(
        &ctx,
        &model.config,
        &model.weights,
        a.device.apply(EngineConfig {
            max_num_seqs: 1,
            kv: KvSize::Bytes(a.kv_memory),
            max_model_len: a.max_model_len,
            ..EngineConfig::default()
        }),
        &mut |done, total| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        },
    )?;
    bar.finish_and_clear();
    if prompt.len() >= engine.max_len() {
        bail!(
            "the prompt has {} tokens; the context holds {}",
            prompt.len(),
            engine.max_len()
        );
    }
    let sampling = SamplingParams {
        temperature: a.temperature,
        top_p: a.top_p,
        top_k: a.top_k,
        ..SamplingParams::default()
    };
    sampling.validate().map_err(anyhow::Error::msg)?;
    let room = engine.max_len() - prompt.len();
    if a.max_tokens > room {
        eprintln!(
            "note: --max-tokens {} cut to {room}: the context holds {} tokens and the prompt has {}",
            a.max_tokens,
            engine.max_len(),
            prompt.len()
        );
    }
    let max_tokens = a.max_tokens.min(room);
    engine.add_request(Request {
        sampling,
        seed: a.seed.unwrap_or_else(rand::random),
        ignore_eos: a.ignore_eos,
        eos_token_ids: model.config.eos_token_ids.clone(),
        ..Request::new(0, prompt.clone(), max_tokens)
    })?;

    let mut decoder = IncrementalDecoder::new(true);
    let mut out = std::io::stdout().lock();
    let start = Instant::now();
    let mut first_token = None;
    let mut generated = 0usize;
    while engine.has_unfinished() {
        for u in pollster::block_on(engine.step())? {
            if let Some(t) = u.token {
                generated += 1;
                first_token.get_or_insert_with(Instant::now);
                write!(out, "{}", decoder.push(&model.tokenizer, t.token_id)?)?;
                out.flush()?;
            }
        }
    }
    writeln!(out, "{}", decoder.flush(&model.tokenizer)?)?;
    let end = Instant::now();
    let first = first_token.unwrap_or(end);
    let prefill_s = (first - start).as_secs_f64();
    let decode_s = (end - first).as_secs_f64();
    eprintln!(
        "prefill: {} tokens in {:.2} s ({:.1} tokens/s); decode: {} tokens in {:.2} s ({:.1} tokens/s)",
        prompt.len(),
        prefill_s,
        prompt.len() as f64 / prefill_s.max(1e-9),
        generated.saturating_sub(1),
        decode_s,
        generated.saturating_sub(1) as f64 / decode_s.max(1e-9)
    );
    Ok(())
}
