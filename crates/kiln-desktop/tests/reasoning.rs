//! A model that reasons, in the desktop app: the tiny random model given a chat template that
//! opens a `<think>` block, so its whole reply is reasoning (the random model never closes the
//! block). The reasoning streams apart from the answer, equal to the engine's own greedy
//! output, folds under a "Thinking" header, and goes back to the template with the next turn;
//! a chat's thinking budget ends it.

mod common;

use common::*;
use eframe::egui::accesskit::Role;
use egui_kittest::kittest::{Queryable, by};
use kiln_model::testing::TinyConfig;

/// The tiny model with a chat template that opens a `<think>` block, written in `dir`.
fn thinking_model(dir: &std::path::Path) -> std::path::PathBuf {
    let tc = TinyConfig {
        chat_template: Some(kiln_model::testing::tiny_tokenizer::THINK_TEMPLATE.into()),
        max_position_embeddings: 1024,
        ..TinyConfig::default()
    };
    tiny_model_with(dir, &tc)
}

#[test]
fn reasoning_streams_apart_and_folds_under_its_header() {
    let dir = tempfile::tempdir().unwrap();
    let model = thinking_model(dir.path());
    let raw = greedy_reply(&model, "why");
    assert!(
        !raw.trim().is_empty() && !raw.contains("</think>"),
        "{raw:?}"
    );

    let mut h = harness(&dir.path().join("store"), Some(model), true);
    step_until(&mut h, "the model to open", ready);
    greedy(&mut h);
    send(&mut h, "why");
    step_until(&mut h, "the reply", |app| app.generating.is_empty());
    assert!(h.state().notices.is_empty(), "{:?}", h.state().notices);
    let reply = last_reply(h.state(), 0).clone();
    assert_eq!(reply.reasoning, raw.trim_matches('\n'));
    assert_eq!(reply.text, "");
    // Folded under its header, which opens on a click.
    assert!(h.query_by_label(&reply.reasoning).is_none());
    h.get_by_label("Thinking").click();
    h.run_ok();
    h.get_by_label(&reply.reasoning);

    // The next turn's prompt carries the reasoning (the template renders it): longer than
    // the same turn after an empty reply.
    let prompt_of = |h: &egui_kittest::Harness<'_, kiln_desktop::DesktopApp>| {
        last_reply(h.state(), 0)
            .stats
            .as_ref()
            .unwrap()
            .prompt_tokens
    };
    send(&mut h, "and then");
    step_until(&mut h, "the second reply", |app| app.generating.is_empty());
    assert!(h.state().notices.is_empty(), "{:?}", h.state().notices);
    let with = prompt_of(&h);
    // The first reply's reasoning dropped, the second reply regenerated.
    h.state_mut().chats[0].messages[1].reasoning.clear();
    h.run_ok(); // a frame after the change, so the click finds the current button
    h.get_by_label("Regenerate").click();
    h.step();
    assert!(h.state().is_generating(), "{:?}", h.state().notices);
    step_until(&mut h, "the regenerated reply", |app| {
        app.generating.is_empty()
    });
    let without = prompt_of(&h);
    assert!(
        with > without + MAX_TOKENS as usize - 2,
        "{with} against {without}"
    );
}

/// A chat's thinking budget, set in its settings panel: the reasoning stops after that many
/// tokens (`</think>` written for the random model, which never closes the block) and the
/// rest of the reply is its answer; the budget goes with the chat's request export.
#[test]
fn a_thinking_budget_ends_the_reasoning() {
    let dir = tempfile::tempdir().unwrap();
    let model = thinking_model(dir.path());
    let mut h = harness(&dir.path().join("store"), Some(model), true);
    step_until(&mut h, "the model to open", ready);
    greedy(&mut h);
    // Its checkbox sets the budget (1024 at first, more than the reply's tokens: the same
    // constrained sampling, never forced); the number beside it takes 3.
    let budget = |role| by().role(role).label("Thinking budget");
    h.get(budget(Role::CheckBox)).click_accesskit();
    h.run_ok();
    assert_eq!(h.state().chats[0].thinking_budget, Some(1024));
    send(&mut h, "why");
    step_until(&mut h, "the reply", |app| app.generating.is_empty());
    let unbounded = last_reply(h.state(), 0).clone();
    assert!(unbounded.text.is_empty(), "{unbounded:?}");

    h.get(budget(Role::SpinButton)).set_value_accesskit(3.0);
    h.run_ok();
    assert_eq!(h.state().chats[0].thinking_budget, Some(3));
    h.get_by_label("Regenerate").click();
    h.step();
    step_until(&mut h, "the regenerated reply", |app| {
        app.generating.is_empty()
    });
    assert!(h.state().notices.is_empty(), "{:?}", h.state().notices);
    let reply = last_reply(h.state(), 0).clone();
    assert!(
        !reply.reasoning.is_empty() && unbounded.reasoning.starts_with(&reply.reasoning),
        "{reply:?} against {unbounded:?}"
    );
    assert!(
        reply.reasoning.len() < unbounded.reasoning.len(),
        "{reply:?}"
    );
    assert!(!reply.text.is_empty(), "{reply:?}");
    let body = h.state().chats[0].to_request("tiny");
    assert_eq!(body["thinking_token_budget"], 3, "{body}");
}
