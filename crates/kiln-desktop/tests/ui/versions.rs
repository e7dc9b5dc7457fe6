//! Regenerate keeps the reply it replaces: the last reply shows "version 2 of 2", and
//! "Previous" and "Next" go between the versions, kept with the chat on disk; the conversation
//! goes on from the version shown.

use kiln_desktop::store::Store;

use super::*;

#[test]
fn regenerate_keeps_earlier_replies_as_versions() {
    let dir = tempfile::tempdir().unwrap();
    let (mut h, store) = app_with_tiny_model(dir.path());
    {
        // Sampled, so the versions differ.
        let app = h.state_mut();
        app.chats[app.current].sampling.temperature = Some(1.0);
    }
    send(&mut h, "hello");
    step_until(&mut h, "the reply", |a| a.generating.is_empty());
    let first = last_reply(h.state(), 0).text.clone();
    h.get_by_label("Regenerate").click();
    h.step();
    step_until(&mut h, "the second reply", |a| a.generating.is_empty());
    let second = last_reply(h.state(), 0).text.clone();
    assert_eq!(
        h.state().chats[0].messages.len(),
        2,
        "one reply, two versions"
    );
    assert_eq!(last_reply(h.state(), 0).version_count(), 2);
    h.get_by_label("version 2 of 2");

    h.get_by_label("Previous").click();
    h.run_ok();
    assert_eq!(last_reply(h.state(), 0).text, first);
    h.get_by_label("version 1 of 2");
    // Kept on disk as shown.
    let id = h.state().chats[0].id.clone();
    let (chats, _) = Store::open(Some(store.clone())).unwrap().load_chats();
    let kept = chats.iter().find(|c| c.id == id).unwrap();
    let m = kept.messages.last().unwrap();
    assert_eq!(
        (m.text.as_str(), m.version, m.versions.len()),
        (first.as_str(), 0, 1)
    );
    assert_eq!(m.versions[0].text, second);

    h.get_by_label("Next").click();
    h.run_ok();
    assert_eq!(last_reply(h.state(), 0).text, second);
    // A third regenerate adds a third version after the others.
    h.get_by_label("Regenerate").click();
    h.step();
    step_until(&mut h, "the third reply", |a| a.generating.is_empty());
    let m = last_reply(h.state(), 0);
    assert_eq!((m.version, m.version_count()), (2, 3));
    let texts: Vec<String> = m.all_versions().into_iter().map(|v| v.text).collect();
    assert_eq!(&texts[..2], [first, second]);
}
