//! A chat's reply format: with a JSON schema the reply is JSON valid under it (the random
//! model writes anything otherwise), kept with the chat and in its exported request; a schema
//! that is not JSON is shown under the field and stops the send with a notice.

use kiln_desktop::reply_format::{FormatKind, ReplyFormat};
use kiln_desktop::store::Store;

use super::*;

#[test]
fn a_json_schema_holds_the_reply() {
    let dir = tempfile::tempdir().unwrap();
    let (mut h, store) = app_with_tiny_model(dir.path());
    // The model does not reason: no thinking budget among the chat's settings.
    assert!(h.query_by_label("Thinking budget").is_none());
    let schema = r#"{"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99}}, "required": ["n"], "additionalProperties": false}"#;
    {
        let app = h.state_mut();
        app.chats[app.current].format = ReplyFormat {
            kind: FormatKind::JsonSchema,
            schema: schema.into(),
        };
    }
    h.run_ok();
    send(&mut h, "Hello");
    step_until(&mut h, "the reply", |a| a.generating.is_empty());
    assert!(h.state().notices.is_empty(), "{:?}", h.state().notices);
    let reply = last_reply(h.state(), 0);
    let v: serde_json::Value = serde_json::from_str(&reply.text)
        .unwrap_or_else(|e| panic!("the reply is not JSON ({e}): {:?}", reply.text));
    let n = v["n"].as_i64().expect("an integer n");
    assert!(
        (0..=99).contains(&n) && v.as_object().unwrap().len() == 1,
        "{v}"
    );
    // Kept with the chat, and in its request body.
    let id = h.state().chats[0].id.clone();
    let (chats, _) = Store::open(Some(store)).unwrap().load_chats();
    let kept = chats.iter().find(|c| c.id == id).unwrap();
    assert_eq!(kept.format.kind, FormatKind::JsonSchema);
    let body = kept.to_request("tiny");
    assert_eq!(
        body["response_format"]["json_schema"]["schema"]["required"][0],
        "n"
    );

    // A schema that is not JSON: said under the field, and the send refused with a notice.
    {
        let app = h.state_mut();
        app.chats[app.current].format.schema = "{not json".into();
    }
    h.run_ok();
    h.get_by_label_contains("is not JSON");
    let before = h.state().chats[0].messages.len();
    send(&mut h, "Again");
    h.run_ok();
    assert!(h.state().generating.is_empty());
    assert!(
        h.state().notices.iter().any(|n| n.contains("is not JSON")),
        "{:?}",
        h.state().notices
    );
    assert_eq!(
        h.state().chats[0].messages.len(),
        before + 1,
        "the message stays"
    );
}
