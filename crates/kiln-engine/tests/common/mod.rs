#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use kiln_core::{BLOCK_SIZE, SampleSpec, SeqInBatch, StepBatch};
use kiln_engine::{Engine, EngineConfig, KvSize, Request, SampledToken, SamplingParams};
use kiln_gpu::GpuContext;
use kiln_model::Model;

pub fn gpu() -> GpuContext {
    match pollster::block_on(GpuContext::new()) {
        Ok(ctx) => ctx,
        Err(e) => panic!("GPU tests need an adapter and none was found: {e}"),
    }
}

/// The default model; a missing file fails the test with the command that fetches it.
pub fn default_model() -> Model {
    let path = std::env::var_os("KILN_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../models/SmolLM2-135M-Instruct.Q4_1.gguf")
        });
    assert!(
        path.exists(),
        "{} is missing: run `scripts/fetch-model.sh` first",
        path.display()
    );
    Model::load(&path).unwrap_or_else(|e| panic!("loading {}: {e}", path.display()))
}

pub fn reference() -> serde_json::Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/reference/smollm2-135m-instruct.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

pub fn engine(ctx: &GpuContext, model: &Model, cfg: EngineConfig) -> Engine {
    Engine::new(ctx, &model.config, &model.weights, cfg, &mut |_, _| {}).expect("engine")
}

pub fn small_config() -> EngineConfig {
    EngineConfig {
        max_num_batched_tokens: 512,
        max_num_seqs: 16,
        kv: KvSize::Blocks(256),
        ..EngineConfig::default()
    }
}

pub fn greedy_request(
    id: u64,
    prompt: Vec<u32>,
    max_tokens: usize,
    ignore_eos: bool,
    eos: &[u32],
) -> Request {
    Request {
        sampling: SamplingParams::greedy(),
        ignore_eos,
        eos_token_ids: eos.to_vec(),
        ..Request::new(id, prompt, max_tokens)
    }
}

/// Runs every request to completion; returns the sampled tokens by request id.
pub fn run_sampled(
    engine: &mut Engine,
    requests: Vec<Request>,
) -> BTreeMap<u64, Vec<SampledToken>> {
    let mut out = BTreeMap::new();
    for r in requests {
        out.insert(r.id, Vec::new());
        engine.add_request(r).expect("add_request");
    }
    while engine.has_unfinished() {
        for u in pollster::block_on(engine.step()).expect("step") {
            if let Some(t) = u.token {
                out.get_mut(&u.id).unwrap().push(t);
            }
        }
    }
    out
}

/// Runs every request to completion; returns the token ids by request id.
pub fn run_all(engine: &mut Engine, requests: Vec<Request>) -> BTreeMap<u64, Vec<u32>> {
    run_sampled(engine, requests)
        .into_iter()
        .map(|(id, t)| (id, t.iter().map(|t| t.token_id).collect()))
        .collect()
}

/// One sequence's step by hand: `ids` at positions `start..`, the last one sampled greedily.
pub fn chunk(ids: &[u32], start: usize, table: &[u32]) -> StepBatch {
    let end = start + ids.len();
    let slot = |p: usize| table[p / BLOCK_SIZE] * BLOCK_SIZE as u32 + (p % BLOCK_SIZE) as u32;
    StepBatch {
        token_ids: ids.to_vec(),
        positions: (start as u32..end as u32).collect(),
        slot_mapping: (start..end).map(slot).collect(),
        seqs: vec![SeqInBatch {
            query_start: 0,
            query_len: ids.len() as u32,
            context_len: end as u32,
            table_row: 0,
            table_from: 0,
            table_tail: table[..end.div_ceil(BLOCK_SIZE)].to_vec(),
            score: None,
            lora: None,
            drafts: 0,
            sample: Some(SampleSpec {
                params: SamplingParams::greedy(),
                seed: 0,
                draw_index: 0,
                penalties: Default::default(),
            }),
        }],
        ..StepBatch::default()
    }
}

/// A JSON array of token ids.
pub fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}
