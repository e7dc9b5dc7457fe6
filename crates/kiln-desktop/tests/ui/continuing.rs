//! "Continue" under a reply cut at its token limit: the model goes on writing the same reply,
//! which grows in place by the engine's greedy continuation of the conversation rendered to
//! end inside that reply.

use kiln_frontend::{ChatExtras, Ending};
use kiln_model::ChatMessage;

use super::*;

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
    // The engine's own continuation: the conversation rendered to end inside the reply.
    let more = greedy_to(&model, |f| {
        let messages = vec![
            ChatMessage::new("user", prompt),
            ChatMessage::new("assistant", first.as_str()),
        ];
        let extras = ChatExtras {
            ending: Ending::ContinueLast,
            ..ChatExtras::default()
        };
        let text = f.render_chat(messages, &extras).unwrap();
        f.encode(&text, false, "messages").unwrap()
    });
    assert!(!more.is_empty());

    h.get_by_label("Continue").click();
    h.step();
    step_until(&mut h, "the continuation", |a| a.generating.is_empty());
    assert!(h.state().notices.is_empty(), "{:?}", h.state().notices);
    let chat = &h.state().chats[0];
    assert_eq!(chat.messages.len(), 2, "the reply grew in place");
    assert_eq!(last_reply(h.state(), 0).text, format!("{first}{more}"));
}
