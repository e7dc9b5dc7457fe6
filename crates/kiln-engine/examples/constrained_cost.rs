//! Measures grammar-constrained decoding on the default model (BENCHMARKS.md): the CPU cost of
//! one allowed-token mask (p50, p99) along a JSON-schema output, and the decode rate of a batch
//! of 16 requests with 0 and with 8 of them constrained (`cargo run --release -p kiln-engine
//! --example constrained_cost`, `WGPU_BACKEND=vulkan`).

use std::path::PathBuf;
use std::time::Instant;

use kiln_engine::{
    ConstraintFactory, Engine, EngineConfig, Grammar, KvSize, Request, SamplingParams,
};
use kiln_gpu::GpuContext;
use kiln_model::{ChatMessage, Model};
use serde_json::json;

fn main() -> anyhow::Result<()> {
    let path = std::env::var_os("KILN_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../models/SmolLM2-135M-Instruct.Q4_1.gguf")
        });
    let model = Model::load(&path)?;
    let eos = model.config.eos_token_ids.clone();
    let t = Instant::now();
    let factory = ConstraintFactory::new(&model.tokenizer, &eos, model.config.vocab_size)
        .map_err(anyhow::Error::msg)?;
    println!(
        "factory (token trie of {} tokens): {:.1} ms",
        model.config.vocab_size,
        t.elapsed().as_secs_f64() * 1e3
    );
    let schema = Grammar::JsonSchema(json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 24},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "city": {"enum": ["Paris", "London", "Tokyo"]},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 4},
        },
        "required": ["name", "age", "city", "tags"],
    }));
    let t = Instant::now();
    let _ = factory.compile(&schema).map_err(anyhow::Error::msg)?;
    println!("compile schema: {:.2} ms", t.elapsed().as_secs_f64() * 1e3);

    let ctx = pollster::block_on(GpuContext::new())?;
    let cfg = EngineConfig {
        max_num_batched_tokens: 1024,
        max_num_seqs: 16,
        kv: KvSize::Blocks(512),
        ..EngineConfig::default()
    };
    let mut engine = Engine::new(&ctx, &model.config, &model.weights, cfg, &mut |_, _| {})?;
    let prompt = {
        let text = model.chat_template.as_ref().unwrap().render(
            &[ChatMessage::new("user", "Describe a person as JSON.")],
            true,
        )?;
        model.tokenizer.encode(&text, false)?
    };
    let request = |id: u64| Request {
        sampling: SamplingParams {
            temperature: 0.7,
            ..SamplingParams::default()
        },
        seed: id,
        ignore_eos: true,
        eos_token_ids: eos.clone(),
        ..Request::new(id, prompt.clone(), 32)
    };
    for constrained in [0usize, 8] {
        for id in 0..16u64 {
            if (id as usize) < constrained {
                engine.add_constrained_request(
                    request(id),
                    factory.compile(&schema).map_err(anyhow::Error::msg)?,
                )?;
            } else {
                engine.add_request(request(id))?;
            }
        }
        // The first step prefills; time the decode steps after it.
        let mut steps = 0;
        let mut tokens = 0;
        let mut start = None;
        while engine.has_unfinished() {
            let updates = pollster::block_on(engine.step())?;
            if start.is_none() {
                start = Some(Instant::now());
                continue;
            }
            steps += 1;
            tokens += updates.iter().filter(|u| u.token.is_some()).count();
        }
        let s = start.unwrap().elapsed().as_secs_f64();
        println!(
            "batch of 16, {constrained} constrained: {steps} decode steps, {:.1} tokens/s",
            tokens as f64 / s
        );
        let failures = engine.take_failures();
        anyhow::ensure!(failures.is_empty(), "constraint failures: {failures:?}");
    }

    // Mask cost along walks of the schema, choosing the first allowed non-EOS token.
    let mut times = Vec::new();
    for _ in 0..20 {
        let mut c = factory.compile(&schema).map_err(anyhow::Error::msg)?;
        for _ in 0..200 {
            let t = Instant::now();
            let m = c.mask().map_err(anyhow::Error::msg)?;
            times.push(t.elapsed().as_secs_f64() * 1e6);
            let allowed: Vec<u32> = (0..m.len() as u32 * 32)
                .filter(|&i| m[i as usize / 32] >> (i % 32) & 1 == 1)
                .collect();
            let Some(&tok) = allowed.iter().rev().find(|t| !eos.contains(t)) else {
                break;
            };
            c.consume(tok).map_err(anyhow::Error::msg)?;
            if c.is_stopped() {
                break;
            }
        }
    }
    times.sort_by(f64::total_cmp);
    let pct = |p: f64| times[((times.len() - 1) as f64 * p) as usize];
    println!(
        "mask per constrained token: p50 {:.0} us, p99 {:.0} us ({} masks)",
        pct(0.5),
        pct(0.99),
        times.len()
    );
    Ok(())
}
