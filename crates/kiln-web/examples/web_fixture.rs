//! Native side of `scripts/test-web.sh`: writes a tiny random GGUF model and the greedy token
//! ids the native engine produces for the given prompts, all run at once on one engine with
//! the browser build's engine sizes (so both run the same schedule).
//!
//! `cargo run -p kiln-web --example web_fixture -- OUT_DIR N PROMPT...` writes
//! `OUT_DIR/tiny.gguf` and prints `{"adapter", "prompt_ids", "output_ids", "single_ids",
//! "penalised_ids", "kv8_ids", "lora_ids", "decode_tokens_per_s", "demo"}` (`penalised_ids`: the first
//! prompt with repetition, presence and frequency penalties, greedy; `kv8_ids`: the prompts'
//! greedy ids with an fp8 KV cache, and with q8_0 on `OUT_DIR/tiny-kv8.gguf`, the tiny model
//! with 4 KV heads; `lora_ids`: the prompts' greedy ids through `OUT_DIR/tiny-lora.gguf`, a
//! random LoRA adapter as a GGUF adapter file; `demo`: the demo page's replies to
//! "Hello" through the shared front end, greedy and penalised, and greedy from
//! `OUT_DIR/tiny-think.gguf`, the same model with a template that opens a `<think>` block, and
//! from `OUT_DIR/tiny-hf/`, a tiny Hugging Face folder (safetensors; `OUT_DIR/tiny-hf-sharded/`
//! holds the same model in three shards with an index), as
//! `{text, reasoning, finished}`; `demo.fitted`: the greedy reply to a user message of 1,100
//! `y`s alone (what the page's chat leaves of a conversation too long for the context);
//! `demo.completion`: the text completion of "Hello", greedy;
//! `demo.embedding`: the embedding of "Hello"; `demo.tools`: the tool call `web-demo/test.html` requires,
//! and the reply after its result, as `{content, calls, finish}`, and the same call from
//! `OUT_DIR/tiny-tools.gguf`, whose template renders tools and reads Hermes `<tool_call>`s).
//! With `--model FILE` it uses that GGUF instead of writing the tiny one.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use kiln_engine::{
    Engine, EngineConfig, FinishReason, GrammarCompiler, KvDtype, Request, SamplingParams,
};
use kiln_frontend::tools::{ChatTurn, ToolPlan};
use kiln_frontend::{Ending, Frontend, GenerationParams, ReasoningFormat};
use kiln_gpu::GpuContext;
use kiln_model::testing::tiny_tokenizer::THINK_TEMPLATE;
use kiln_model::testing::{
    LLAMA_PROJECTIONS, TinyConfig, TinyLora, write_tiny_gguf, write_tiny_llama,
    write_tiny_llama_sharded,
};
use kiln_model::{ChatMessage, DType, LoraAdapter, Model, ModelConfig, Weights};

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
        // Room for a conversation with tools (the generic format's system message is about
        // 500 of the byte-level tokenizer's tokens).
        let config = TinyConfig {
            max_position_embeddings: 2048,
            ..TinyConfig::default()
        };
        write_tiny_gguf(&p, &config, 7, DType::Q8_0).expect("write tiny gguf");
        p
    });
    let model = Model::load(&path).expect("load model");
    let ctx = pollster::block_on(GpuContext::new()).expect("a GPU adapter");
    let prompt_ids: Vec<Vec<u32>> = prompts
        .iter()
        .map(|p| model.tokenizer.encode(p, true).expect("encode"))
        .collect();

    // The prompts' ids on `model` with a cache of `kv_dtype`, through `lora` where given.
    let run_through = |model: &Model,
                       kv_dtype: KvDtype,
                       lora: Option<Arc<LoraAdapter>>,
                       prompts: &[Vec<u32>],
                       n: usize,
                       sampling: SamplingParams|
     -> (Vec<Vec<u32>>, f64) {
        let name = lora.as_ref().map(|a| a.name.clone());
        let ec = EngineConfig {
            kv_dtype,
            lora: lora.into_iter().collect(),
            ..page_config()
        };
        let mut engine = page_engine(&ctx, &model.config, &model.weights, ec);
        let lora = name.and_then(|n| engine.lora_ref(&n));
        let mut outs = vec![Vec::new(); prompts.len()];
        for (i, p) in prompts.iter().enumerate() {
            engine
                .add_request(Request {
                    sampling,
                    ignore_eos: true,
                    eos_token_ids: model.config.eos_token_ids.clone(),
                    lora,
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
    let run_on = |model: &Model, kv_dtype, prompts: &[Vec<u32>], n, sampling| {
        run_through(model, kv_dtype, None, prompts, n, sampling)
    };
    let run = |prompts: &[Vec<u32>], n: usize, sampling: SamplingParams| {
        run_on(&model, KvDtype::F16, prompts, n, sampling)
    };
    let greedy = SamplingParams::greedy();
    let (outs, _) = run(&prompt_ids, n, greedy);
    // 8-bit KV caches: fp8 on this model, q8_0 on one whose K/V rows (4 heads of 16) hold
    // whole 32-value groups, which this one's (2 heads of 16) do not.
    let kv8_path = out_dir.join("tiny-kv8.gguf");
    let kv8_cfg = TinyConfig {
        num_kv_heads: 4,
        ..TinyConfig::default()
    };
    write_tiny_gguf(&kv8_path, &kv8_cfg, 7, DType::Q8_0).expect("write tiny kv8 gguf");
    let kv8 = Model::load(&kv8_path).expect("load tiny kv8");
    // A LoRA adapter for the model, as llama.cpp's GGUF adapter file: the prompts' greedy ids
    // through it.
    let lora_path = out_dir.join("tiny-lora.gguf");
    let lora = TinyLora {
        modules: LLAMA_PROJECTIONS.map(String::from).to_vec(),
        rank: 4,
        alpha: 16.0,
        rslora: false,
        seed: 3,
    };
    lora.write_gguf(&lora_path, &model.config, DType::F32)
        .expect("write tiny lora");
    // The same adapter as a PEFT folder, for the demo page's folder picker.
    lora.write(&out_dir.join("tiny-lora-peft"), &model.config, DType::F32)
        .expect("write tiny lora as PEFT");
    let adapter = LoraAdapter::load("style", &lora_path, &model.config).expect("read tiny lora");
    let lora_ids = run_through(
        &model,
        KvDtype::F16,
        Some(Arc::new(adapter)),
        &prompt_ids,
        n,
        greedy,
    )
    .0;
    let kv8_ids = serde_json::json!({
        "fp8": run_on(&model, KvDtype::Fp8, &prompt_ids, n, greedy).0,
        "q8_0": run_on(&kv8, KvDtype::Q8, &prompt_ids, n, greedy).0,
    });
    let (single, rate) = run(&prompt_ids[..1], 32, greedy);
    let penalties = SamplingParams {
        repetition_penalty: 1.5,
        presence_penalty: 0.5,
        frequency_penalty: 0.3,
        ..greedy
    };
    let (penalised, _) = run(&prompt_ids[..1], 24, penalties);
    let think = out_dir.join("tiny-think.gguf");
    let think_cfg = TinyConfig {
        chat_template: Some(THINK_TEMPLATE.into()),
        ..TinyConfig::default()
    };
    write_tiny_gguf(&think, &think_cfg, 7, DType::Q8_0).expect("write tiny think gguf");
    // A model whose template renders tools: calls in its own syntax (Hermes `<tool_call>`).
    let tools = out_dir.join("tiny-tools.gguf");
    let tools_cfg = TinyConfig {
        chat_template: Some(HERMES_TEMPLATE.into()),
        max_position_embeddings: 2048,
        ..TinyConfig::default()
    };
    write_tiny_gguf(&tools, &tools_cfg, 7, DType::Q8_0).expect("write tiny tools gguf");
    let hf = out_dir.join("tiny-hf");
    write_tiny_llama(&hf, &TinyConfig::default(), 11).expect("write tiny hf folder");
    // The same model in three shards with an index (the page must give the same reply).
    let sharded = out_dir.join("tiny-hf-sharded");
    write_tiny_llama_sharded(&sharded, &TinyConfig::default(), 11, 3).expect("write shards");
    // The demo page's adapter, picked from disk into its one slot.
    let style = Arc::new(LoraAdapter::load("style", &lora_path, &model.config).expect("lora"));
    let hello = |f: &Frontend| {
        f.chat_tokens(vec![ChatMessage::new("user", "Hello")], None)
            .expect("chat prompt")
    };
    let demo = serde_json::json!({
        "greedy": demo_reply(&ctx, &path, DEMO_GREEDY),
        "completion": completion_reply(&ctx, &path),
        "embedding": embedding(&ctx, &path, "Hello"),
        "penalised": demo_reply(&ctx, &path, DEMO_PENALISED),
        "fitted": reply(&ctx, &path, DEMO_GREEDY, |f| {
            let long = "y".repeat(1100);
            f.chat_tokens(vec![ChatMessage::new("user", long)], None)
                .expect("chat prompt")
        }),
        "thinking": demo_reply(&ctx, &think, DEMO_GREEDY),
        "lora": reply_through(&ctx, &path, DEMO_GREEDY, hello, Some(style.clone())),
        "hf": demo_reply(&ctx, &hf, DEMO_GREEDY),
        "tools": {
            "required": tool_reply(&ctx, &path, TOOL_TURNS, TOOL_REQUIRED),
            "follow": tool_reply(&ctx, &path, &follow_turns(&ctx, &path), TOOL_AUTO),
            "hermes": tool_reply(&ctx, &tools, TOOL_TURNS, TOOL_REQUIRED),
            "dated_prompt_tokens": dated_prompt_tokens(&tools),
            "demo_page": tool_reply(&ctx, &path, r#"[{"role": "user", "content": "Hello"}]"#, &demo_tools()),
        },
    });
    let json = serde_json::json!({
        "adapter": ctx.describe(),
        "prompt_ids": prompt_ids,
        "output_ids": outs,
        "single_ids": single[0],
        "penalised_ids": penalised[0],
        "kv8_ids": kv8_ids,
        "lora_ids": lora_ids,
        "decode_tokens_per_s": rate,
        "demo": demo,
    });
    println!("{json}");
}

/// The demo page's sampling panel in the browser test (`web-demo/test/demo.html`): greedy,
/// then with penalties.
const DEMO_GREEDY: &str = r#"{"temperature": 0, "top_p": 1, "top_k": 0, "min_p": 0,
    "repetition_penalty": 1, "presence_penalty": 0, "frequency_penalty": 0, "max_tokens": 16}"#;
const DEMO_PENALISED: &str = r#"{"temperature": 0, "top_p": 1, "top_k": 0, "min_p": 0,
    "repetition_penalty": 1.5, "presence_penalty": 0.5, "frequency_penalty": 0.3, "max_tokens": 16}"#;

/// The reply to the user message "Hello" with `params`, as the page's chat makes it: the
/// chat template, the shared front end's request, text stream and reasoning split, the page's
/// engine sizes.
fn demo_reply(ctx: &GpuContext, path: &std::path::Path, params: &str) -> serde_json::Value {
    reply(ctx, path, params, |f| {
        f.chat_tokens(vec![ChatMessage::new("user", "Hello")], None)
            .expect("chat prompt")
    })
}

/// The text completion of "Hello" in `web-demo/test.html` (greedy, 16 tokens, the end token
/// ignored).
fn completion_reply(ctx: &GpuContext, path: &std::path::Path) -> serde_json::Value {
    let params = r#"{"temperature": 0, "max_tokens": 16, "ignore_eos": true}"#;
    reply(ctx, path, params, |f| {
        f.encode("Hello", true, "prompt").expect("encode")
    })
}

/// The embedding of `text` as the server and the page compute it (unit length).
fn embedding(ctx: &GpuContext, path: &std::path::Path, text: &str) -> Vec<f32> {
    let (frontend, config, weights) = Frontend::split(Model::load(path).expect("load model"));
    let prompt = frontend.encode(text, true, "input").expect("encode");
    let mut engine = page_engine(ctx, &config, &weights, page_config());
    let spec = frontend.embedding_spec();
    engine
        .add_request(frontend.request(&spec, 1, prompt, 1, 0, 0))
        .expect("add_request");
    let mut hidden = None;
    while engine.has_unfinished() {
        for u in pollster::block_on(engine.step()).expect("step") {
            hidden = hidden.or(u.token.and_then(|t| t.hidden));
        }
    }
    kiln_frontend::unit_length(hidden.expect("a hidden state"))
}

/// The reply to the prompt `prompt` makes with `params`, through the shared front end's
/// request, text stream and reasoning split, at the page's engine sizes.
fn reply(
    ctx: &GpuContext,
    path: &std::path::Path,
    params: &str,
    prompt: impl FnOnce(&Frontend) -> Vec<u32>,
) -> serde_json::Value {
    reply_through(ctx, path, params, prompt, None)
}

/// [`reply`] through a LoRA adapter, where given: in a page engine with one slot of rank 16
/// (the demo page's "LoRA slots" at 1 and `loadModel`'s default rank), which it holds.
fn reply_through(
    ctx: &GpuContext,
    path: &std::path::Path,
    params: &str,
    prompt: impl FnOnce(&Frontend) -> Vec<u32>,
    lora: Option<Arc<LoraAdapter>>,
) -> serde_json::Value {
    let (frontend, config, weights) = Frontend::split(Model::load(path).expect("load model"));
    let params: GenerationParams = serde_json::from_str(params).expect("params");
    let mut spec = frontend.resolve(&params, None).expect("spec");
    let prompt = prompt(&frontend);
    let max_tokens = spec.max_tokens.expect("max_tokens");
    let ec = match &lora {
        Some(a) => EngineConfig {
            lora: vec![a.clone()],
            lora_capacity: Some(kiln_engine::LoraCapacity { slots: 1, rank: 16 }),
            ..page_config()
        },
        None => page_config(),
    };
    let mut engine = page_engine(ctx, &config, &weights, ec);
    spec.lora = lora.and_then(|a| engine.lora_ref(&a.name));
    engine
        .add_request(frontend.request(&spec, 1, prompt.clone(), max_tokens, 0, 0))
        .expect("add_request");
    let reasoning = ReasoningFormat::detect(frontend.chat_template.as_ref());
    let mut split = reasoning.stream(reasoning.opened_by_ids(&frontend.tokenizer, &prompt));
    let (mut stream, mut text, mut finished) = (spec.text_stream(), String::new(), None);
    let mut thought = String::new();
    while engine.has_unfinished() {
        for u in pollster::block_on(engine.step()).expect("step") {
            let piece = stream.update(&frontend.tokenizer, &u).expect("text");
            let s = split.push(&piece.text, u.finished.is_some());
            (text, thought) = (text + &s.content, thought + &s.reasoning);
            finished = finished.or(u.finished);
        }
    }
    let finished = match finished {
        Some(FinishReason::Length) => "length",
        _ => "stop",
    };
    serde_json::json!({"text": text, "reasoning": thought, "finished": finished})
}

/// ChatML that renders tools and past calls as Hermes `<tool_call>` blocks (no reasoning
/// block, so the reply under the tools' grammar is the call), and a system turn with the
/// date when the template variable `date_string` is given (as Llama 3's templates take it).
const HERMES_TEMPLATE: &str = concat!(
    "{%- if date_string is defined -%}{{ '<|im_start|>system\\nToday is ' + date_string + '<|im_end|>\\n' }}{%- endif -%}",
    "{%- if tools -%}{{ '<|im_start|>system\\n' + tools|tojson + ' <tool_call><|im_end|>\\n' }}{%- endif -%}",
    "{%- for m in messages -%}{{ '<|im_start|>' + m.role + '\\n' + (m.content or '') }}",
    "{%- for c in m.tool_calls or [] -%}{{ '<tool_call>\\n' + c.function|tojson + '\\n</tool_call>' }}{%- endfor -%}",
    "{{ '<|im_end|>\\n' }}{%- endfor -%}",
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}",
);

/// The demo page's first reply to "Hello" with its own tools (`web-demo/tools.json`) and a
/// call required: the greedy panel with room for a call.
fn demo_tools() -> String {
    let mut fields: serde_json::Value = serde_json::from_str(DEMO_GREEDY).expect("fields");
    let tools: serde_json::Value =
        serde_json::from_str(include_str!("../../../web-demo/tools.json")).expect("tools.json");
    fields["tools"] = tools;
    fields["tool_choice"] = "required".into();
    fields["max_tokens"] = 160.into();
    fields.to_string()
}

/// Prompt tokens of `TOOL_TURNS` rendered with the template variable `date_string` (which
/// the Hermes template writes into a system turn), as `web-demo/test.html` asks the page.
fn dated_prompt_tokens(path: &std::path::Path) -> usize {
    let frontend = Frontend::split(Model::load(path).expect("load model")).0;
    let turns: Vec<ChatTurn> = serde_json::from_str(TOOL_TURNS).expect("turns");
    let kwargs = serde_json::json!({"date_string": "5 Dec 2026"});
    let text = frontend
        .render_turns(turns, None, kwargs.as_object(), Ending::NewTurn)
        .expect("render");
    assert!(text.contains("Today is 5 Dec 2026"), "{text}");
    frontend
        .encode(&text, false, "messages")
        .expect("encode")
        .len()
}

/// `web-demo/test.html`'s tool-call request (`TOOL_ASK`): its conversation, and its fields
/// with a call required and with `auto` (the conversation continued after the call).
const TOOL_TURNS: &str = r#"[{"role": "user", "content": "What is the weather in Paris?"}]"#;
const TOOL_REQUIRED: &str = r#"{"temperature": 0, "max_tokens": 120, "tool_choice": "required",
    "parallel_tool_calls": false, "tools": [{"type": "function", "function": {"name": "get_weather",
    "description": "The weather in a city", "parameters": {"type": "object",
    "properties": {"city": {"enum": ["Paris", "Oslo"]}}, "required": ["city"],
    "additionalProperties": false}}}]}"#;
const TOOL_AUTO: &str = r#"{"temperature": 0, "max_tokens": 24, "tools": [{"type": "function",
    "function": {"name": "get_weather", "description": "The weather in a city", "parameters":
    {"type": "object", "properties": {"city": {"enum": ["Paris", "Oslo"]}}, "required": ["city"],
    "additionalProperties": false}}}]}"#;

/// The page's conversation after the required call: the call (its id is not in the generic
/// format's prompt) and the tool's result.
fn follow_turns(ctx: &GpuContext, path: &std::path::Path) -> String {
    let call = tool_reply(ctx, path, TOOL_TURNS, TOOL_REQUIRED);
    let calls: Vec<serde_json::Value> = call["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .map(|c| serde_json::json!({"id": "call-1", "type": "function", "function": {"name": c[0], "arguments": c[1]}}))
        .collect();
    serde_json::json!([
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": call["content"], "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call-1", "content": "18 degrees and sunny"},
    ])
    .to_string()
}

/// The whole reply to chat `turns` (JSON) with tool request `fields` (JSON), as the page's
/// `start_chat` makes it through the shared front end: the conversation rendered with the
/// tools, the reply held to their grammar and parsed; `{content, calls: [[name, arguments]],
/// finish}`.
fn tool_reply(
    ctx: &GpuContext,
    path: &std::path::Path,
    turns: &str,
    fields: &str,
) -> serde_json::Value {
    let (frontend, config, weights) = Frontend::split(Model::load(path).expect("load model"));
    let mut fields: serde_json::Value = serde_json::from_str(fields).expect("fields");
    let obj = fields.as_object_mut().expect("an object");
    let plan = ToolPlan::parse(
        obj.remove("tools").as_ref(),
        obj.remove("tool_choice").as_ref(),
        obj.remove("parallel_tool_calls").and_then(|v| v.as_bool()),
        frontend.tool_format,
    )
    .expect("tools")
    .filter(ToolPlan::active)
    .expect("tools offered");
    let params: GenerationParams = serde_json::from_value(fields).expect("params");
    let spec = frontend.resolve(&params, None).expect("spec");
    let turns: Vec<ChatTurn> = serde_json::from_str(turns).expect("turns");
    let text = frontend
        .render_turns(turns, Some(&plan), None, Ending::NewTurn)
        .expect("render");
    let prompt = frontend.encode(&text, false, "messages").expect("encode");
    let reasoning = ReasoningFormat::detect(frontend.chat_template.as_ref());
    let opened = reasoning.opened_by_ids(&frontend.tokenizer, &prompt);
    let constraint = GrammarCompiler::default()
        .compile(
            &reasoning.grammar(plan.grammar(), opened),
            &frontend.tokenizer,
            &frontend.eos_token_ids,
            frontend.vocab_size,
        )
        .expect("grammar");
    let mut engine = page_engine(ctx, &config, &weights, page_config());
    let max_tokens = spec.max_tokens.expect("max_tokens");
    let request = frontend.request(&spec, 1, prompt, max_tokens, 0, 0);
    engine
        .add_constrained_request(request, constraint)
        .expect("add_request");
    let mut split = reasoning.stream(opened);
    let (mut stream, mut answer, mut finished) = (spec.text_stream(), String::new(), None);
    while engine.has_unfinished() {
        for u in pollster::block_on(engine.step()).expect("step") {
            let piece = stream.update(&frontend.tokenizer, &u).expect("text");
            answer += &split.push(&piece.text, u.finished.is_some()).content;
            finished = finished.or(u.finished);
        }
    }
    let finish = match finished {
        Some(FinishReason::Length) => "length",
        _ => "stop",
    };
    let (content, calls, finish) = plan.finished_reply(&answer, finish);
    let calls: Vec<_> = (calls.iter())
        .map(|c| [&c["function"]["name"], &c["function"]["arguments"]])
        .collect();
    serde_json::json!({"content": content, "calls": calls, "finish": finish})
}

/// An engine of `ec` (the page's sizes, [`page_config`], with a change or two).
fn page_engine(
    ctx: &GpuContext,
    config: &ModelConfig,
    weights: &Weights,
    ec: EngineConfig,
) -> Engine {
    Engine::new(ctx, config, weights, ec, &mut |_, _| {}).expect("engine")
}

/// The browser build's engine sizes (so the page and this run the same schedule).
fn page_config() -> EngineConfig {
    kiln_web::engine_config(64 << 20, 8)
}
