//! LoRA adapters in the app: with slots set in the app's settings, an adapter loaded from the
//! model panel (a PEFT folder, by its path) and picked in a chat's settings gives that chat the
//! engine's greedy reply through the adapter; unloaded, the chat says it is gone.

use super::*;
use kiln_model::testing::{LLAMA_PROJECTIONS, TinyLora};
use kiln_model::{DType, Model};

#[test]
fn a_chat_replies_through_the_adapter_it_picks() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let adapter = dir.path().join("style");
    let mc = Model::load(&model).unwrap().config;
    TinyLora {
        modules: LLAMA_PROJECTIONS.map(String::from).to_vec(),
        rank: 4,
        alpha: 16.0,
        rslora: false,
        seed: 3,
    }
    .write(&adapter, &mc, DType::F32)
    .unwrap();
    let plain = greedy_reply(&model, "hello");
    let through = greedy_through(&model, Some(&adapter), |f| {
        (f.chat_tokens(vec![kiln_model::ChatMessage::new("user", "hello")], None)).unwrap()
    });
    assert_ne!(through, plain, "the adapter must change the reply");

    let store = dir.path().join("store");
    let mut h = harness(&store, None, true);
    enter(&mut h, "LoRA adapter slots (0: off)", "2");
    assert_eq!(h.state().settings.lora_slots, 2);

    h.state_mut().open_model(model);
    step_until(&mut h, "the model to open", ready);
    greedy(&mut h);
    h.get_by_label("LoRA adapter path").focus();
    h.step();
    h.get_by_label("LoRA adapter path")
        .type_text(&adapter.display().to_string());
    h.step();
    h.get_by_label("Load").click();
    let has = |a: &DesktopApp| {
        a.loaded()
            .is_some_and(|m| m.engine.lora.find("style").is_some())
    };
    step_until(&mut h, "the adapter to load", |a| has(a) && !a.lora_busy());
    let rank = (h.state().loaded())
        .and_then(|m| m.engine.lora.find("style"))
        .map(|(_, a)| a.rank)
        .unwrap();
    h.get_by_label(&format!("style (rank {rank})"));

    // The chat's settings lie below the model panel: scroll to them.
    h.get_by_label("LoRA adapter").scroll_to_me();
    h.run_ok();
    h.get_by_label("LoRA adapter").click();
    h.run_ok();
    h.get_by_label("style").click();
    h.run_ok();
    assert_eq!(h.state().chat().lora.as_deref(), Some("style"));
    send(&mut h, "hello");
    step_until(&mut h, "the reply", |a| a.generating.is_empty());
    assert_eq!(last_reply(h.state(), 0).text, through);

    h.get_by_label("Unload").scroll_to_me();
    h.run_ok();
    h.get_by_label("Unload").click();
    step_until(&mut h, "the adapter to unload", |a| {
        !a.lora_busy() && (!has(a) || !a.notices.is_empty())
    });
    assert!(!has(h.state()), "{:?}", h.state().notices);
    send(&mut h, "hello again");
    h.run_ok();
    let notices = &h.state().notices;
    assert!(
        notices.iter().any(|n| n.contains("`style` is not loaded")),
        "{notices:?}"
    );
}
