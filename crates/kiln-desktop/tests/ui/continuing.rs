//! "Continue" under a reply cut at its token limit: the model goes on writing the same reply,
//! which grows in place by the engine's greedy continuation of the conversation rendered to
//! end inside that reply.

use kiln_engine::{Engine, EngineConfig, KvSize};
use kiln_frontend::{ChatExtras, Ending, Frontend, GenerationParams};
use kiln_model::{ChatMessage, Model};

use super::*;

/// The engine's greedy continuation (at most `MAX_TOKENS`) of `reply` to `user`.
fn continuation(model: &Path, user: &str, reply: &str) -> String {
    let (frontend, config, weights) = Frontend::split(Model::load(model).unwrap());
    let ctx = pollster::block_on(kiln_gpu::GpuContext::new()).expect("a GPU adapter (lavapipe)");
    let ec = EngineConfig {
        kv: KvSize::Blocks(64),
        ..EngineConfig::default()
    };
    let mut engine = Engine::new(&ctx, &config, &weights, ec, &mut |_, _| {}).unwrap();
    let params = GenerationParams {
        temperature: Some(0.0),
        max_tokens: Some(MAX_TOKENS),
        ..Default::default()
    };
    let spec = frontend.resolve(&params, None).unwrap();
    let messages = vec![
        ChatMessage::new("user", user),
        ChatMessage::new("assistant", reply),
    ];
    let extras = ChatExtras {
        ending: Ending::ContinueLast,
        ..ChatExtras::default()
    };
    let text = frontend.render_chat(messages, &extras).unwrap();
    let prompt = frontend.encode(&text, false, "messages").unwrap();
    let request = frontend.request(&spec, 1, prompt, MAX_TOKENS as usize, 0, 0);
    engine.add_request(request).unwrap();
    let mut stream = spec.text_stream();
    let mut out = String::new();
    while engine.has_unfinished() {
        for u in pollster::block_on(engine.step()).unwrap() {
            out += &stream.update(&frontend.tokenizer, &u).unwrap().text;
        }
    }
    out
}

#[test]
fn continue_goes_on_writing_a_cut_reply() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let prompt = "tell me a story";
    let first = greedy_reply(&model, prompt);

    let mut h = harness(&dir.path().join("store"), Some(model.clone()), true);
    step_until(&mut h, "the model to open", ready);
    greedy(&mut h);
    send(&mut h, prompt);
    step_until(&mut h, "the reply", |a| a.generating.is_empty());
    let reply = last_reply(h.state(), 0).clone();
    assert_eq!(reply.text, first);
    assert_eq!(
        reply.stats.as_ref().unwrap().end,
        "length",
        "the reply must be cut"
    );
    let more = continuation(&model, prompt, &first);
    assert!(!more.is_empty());

    h.get_by_label("Continue").click();
    h.step();
    step_until(&mut h, "the continuation", |a| a.generating.is_empty());
    assert!(h.state().notices.is_empty(), "{:?}", h.state().notices);
    let chat = &h.state().chats[0];
    assert_eq!(chat.messages.len(), 2, "the reply grew in place");
    assert_eq!(last_reply(h.state(), 0).text, format!("{first}{more}"));
}
