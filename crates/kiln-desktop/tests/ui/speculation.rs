//! The "Speculative tokens" setting: typed into the app's settings, kept with them, and used
//! when a model opens next. The reply is still the engine's own greedy one (no guesses), and
//! the model panel counts the guesses made and confirmed.

use super::*;

#[test]
fn speculative_tokens_from_the_settings_keep_the_reply() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let prompt = "hello hello hello hello hello";
    let expected = greedy_reply(&model, prompt);

    let store = dir.path().join("store");
    let mut h = harness(&store, None, true);
    enter(&mut h, "Speculative tokens (0: off)", "3");
    assert_eq!(h.state().settings.speculative_tokens, 3);
    let kept = Store::open(Some(store.clone())).unwrap().load_settings();
    assert_eq!(kept.unwrap().speculative_tokens, 3, "the setting is saved");

    h.state_mut().open_model(model);
    step_until(&mut h, "the model to open", ready);
    greedy(&mut h);
    send(&mut h, prompt);
    step_until(&mut h, "the reply", |a| a.generating.is_empty());
    assert_eq!(last_reply(h.state(), 0).text, expected);
    let ModelState::Ready(m) = &h.state().model else {
        unreachable!()
    };
    let stats = m.engine.stats();
    assert!(stats.spec_draft_tokens > 0, "no guesses were made");
    h.get_by_label(&format!(
        "{} of {} confirmed",
        stats.spec_accepted_tokens, stats.spec_draft_tokens
    ));
}
