//! Native side of `scripts/test-web.sh`: writes a tiny random GGUF model and the greedy token
//! ids the native engine produces for the given prompts, all run at once on one engine with
//! the browser build's engine sizes (so both run the same schedule).
//!
//! `cargo run -p kiln-web --example web_fixture -- OUT_DIR N PROMPT...` writes
//! `OUT_DIR/tiny.gguf` and prints `{"adapter", "prompt_ids", "output_ids", "single_ids",
//! "penalised_ids", "decode_tokens_per_s"}` (`penalised_ids`: the first prompt with
//! repetition, presence and frequency penalties, greedy).
//! With `--model FILE` it uses that GGUF instead of writing the tiny one.

use std::path::PathBuf;
use std::time::Instant;

use kiln_engine::{Engine, Request, SamplingParams};
use kiln_gpu::GpuContext;
use kiln_model::testing::{TinyConfig, write_tiny_gguf};
use kiln_model::{DType, Model};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut model_path = None;
    if args.first().map(String::as_str) == Some("--model") {
        model_path = Some(PathBuf::from(args.remove(1)));
        args.remove(0);
    }
    let [out_dir, n, prompts @ ..] = &args[..] else {
        eprintln!("usage: web_fixture [--model FILE] OUT_DIR N PROMPT...");
        std::process::exit(2);
    };
    let n: usize = n.parse().expect("N");
    let out_dir = PathBuf::from(out_dir);
    std::fs::create_dir_all(&out_dir).expect("out dir");
    let path = model_path.unwrap_or_else(|| {
        let p = out_dir.join("tiny.gguf");
        write_tiny_gguf(&p, &TinyConfig::default(), 7, DType::Q8_0).expect("write tiny gguf");
        p
    });
    let model = Model::load(&path).expect("load model");
    let ctx = pollster::block_on(GpuContext::new()).expect("a GPU adapter");
    let prompt_ids: Vec<Vec<u32>> = prompts
        .iter()
        .map(|p| model.tokenizer.encode(p, true).expect("encode"))
        .collect();

    let run = |prompts: &[Vec<u32>], n: usize, sampling: SamplingParams| -> (Vec<Vec<u32>>, f64) {
        let mut engine = Engine::new(
            &ctx,
            &model.config,
            &model.weights,
            kiln_web::engine_config(64 << 20, 8),
            &mut |_, _| {},
        )
        .expect("engine");
        let mut outs = vec![Vec::new(); prompts.len()];
        for (i, p) in prompts.iter().enumerate() {
            engine
                .add_request(Request {
                    sampling,
                    ignore_eos: true,
                    eos_token_ids: model.config.eos_token_ids.clone(),
                    ..Request::new(i as u64 + 1, p.clone(), n)
                })
                .expect("add_request");
        }
        let (mut first, mut last) = (None, Instant::now());
        while engine.has_unfinished() {
            for u in pollster::block_on(engine.step()).expect("step") {
                if let Some(t) = u.token {
                    outs[u.id as usize - 1].push(t.token_id);
                    last = Instant::now();
                    first.get_or_insert(last);
                }
            }
        }
        let total: usize = outs.iter().map(Vec::len).sum();
        let rate = (total - prompts.len()) as f64 / (last - first.unwrap()).as_secs_f64().max(1e-9);
        (outs, rate)
    };
    let greedy = SamplingParams::greedy();
    let (outs, _) = run(&prompt_ids, n, greedy);
    let (single, rate) = run(&prompt_ids[..1], 32, greedy);
    let penalties = SamplingParams {
        repetition_penalty: 1.5,
        presence_penalty: 0.5,
        frequency_penalty: 0.3,
        ..greedy
    };
    let (penalised, _) = run(&prompt_ids[..1], 24, penalties);
    let json = serde_json::json!({
        "adapter": ctx.describe(),
        "prompt_ids": prompt_ids,
        "output_ids": outs,
        "single_ids": single[0],
        "penalised_ids": penalised[0],
        "decode_tokens_per_s": rate,
    });
    println!("{json}");
}
