//! The "Give GPU memory back after idle" setting: typed into the app's settings and kept;
//! with a model open, the engine sleeps after that long without replies (the model panel
//! says its GPU memory is given back), and the next message wakes it and gets the same greedy
//! reply.

use super::*;

#[test]
fn an_idle_engine_gives_its_gpu_memory_back_and_a_message_wakes_it() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let expected = greedy_reply(&model, "hello");

    let store = dir.path().join("store");
    let mut h = harness(&store, None, true);
    enter(&mut h, "Give GPU memory back after idle (s, 0: never)", "1");
    assert_eq!(h.state().settings.sleep_after_idle_s, 1);
    let kept = Store::open(Some(store.clone())).unwrap().load_settings();
    assert_eq!(kept.unwrap().sleep_after_idle_s, 1, "the setting is saved");

    h.state_mut().open_model(model);
    step_until(&mut h, "the model to open", ready);
    greedy(&mut h);
    let asleep = |a: &DesktopApp| a.loaded().is_some_and(|m| m.engine.is_sleeping());
    step_until(&mut h, "the engine to sleep", asleep);
    h.get_by_label("given back: the engine sleeps until the next message");

    send(&mut h, "hello");
    step_until(&mut h, "the reply", |a| a.generating.is_empty());
    assert_eq!(last_reply(h.state(), 0).text, expected);
    let m = h.state().loaded().unwrap();
    let sleeps = m
        .engine
        .health
        .sleeps
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(sleeps >= 1, "{sleeps}");
}
