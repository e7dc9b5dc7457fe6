//! A chat longer than the model's context keeps going: its oldest exchanges are left out of
//! the prompt (the chat keeps them), the reply is the engine's greedy reply to the fitted
//! conversation, and the line under it says how many messages were left out.

use kiln_desktop::store::Message;
use kiln_frontend::ChatExtras;
use kiln_model::ChatMessage;
use kiln_model::testing::TinyConfig;

use super::*;

#[test]
fn a_chat_longer_than_the_context_leaves_out_its_oldest_messages() {
    let dir = tempfile::tempdir().unwrap();
    let context = 256;
    let tc = TinyConfig {
        max_position_embeddings: context,
        ..TinyConfig::default()
    };
    let model = tiny_model_with(dir.path(), &tc);
    let mut earlier = Vec::new();
    for i in 0..6 {
        earlier.push(("user", format!("question {i}: {}", "why ".repeat(10))));
        earlier.push(("assistant", format!("answer {i}: {}", "because ".repeat(6))));
    }
    let last = "and now?";
    let mut messages: Vec<ChatMessage> = (earlier.iter())
        .map(|(role, text)| ChatMessage::new(*role, text.as_str()))
        .collect();
    messages.push(ChatMessage::new("user", last));
    // The engine's greedy reply to the conversation fitted with room for `MAX_TOKENS`.
    let mut dropped = 0;
    let expected = greedy_to(&model, |f| {
        let room = MAX_TOKENS as usize;
        let fitted = f.fit_chat(messages, &ChatExtras::default(), context, room, 0);
        let fitted = fitted.unwrap();
        dropped = fitted.dropped;
        fitted.prompt
    });
    assert!(dropped >= 2, "the conversation must not fit whole");

    let mut h = harness(&dir.path().join("store"), Some(model), true);
    step_until(&mut h, "the model to open", ready);
    greedy(&mut h);
    {
        let app = h.state_mut();
        let chat = &mut app.chats[app.current];
        chat.messages = (earlier.iter())
            .map(|(role, text)| Message {
                role: role.to_string(),
                text: text.clone(),
                ..Message::default()
            })
            .collect();
    }
    send(&mut h, last);
    step_until(&mut h, "the reply", |a| a.generating.is_empty());
    assert!(h.state().notices.is_empty(), "{:?}", h.state().notices);
    let reply = last_reply(h.state(), 0);
    assert_eq!(reply.text, expected);
    let stats = reply.stats.clone().expect("the reply's line");
    assert_eq!(stats.left_out, dropped);
    assert!(stats.prompt_tokens + MAX_TOKENS as usize <= context);
    // The chat keeps every message; the line under the reply says what the prompt left out.
    assert_eq!(h.state().chats[0].messages.len(), earlier.len() + 2);
    let line = stats.line();
    assert!(
        line.contains(&format!("{dropped} earlier messages left out")),
        "{line}"
    );
    h.get_by_label_contains("earlier messages left out to fit the context");
}
