//! The "KV cache type" setting: picked in the app's settings, kept with them and used when a
//! model opens next. q8_0 on the tiny model (K rows of 32 values, not a multiple of 64) is
//! refused in the window, naming the type; with fp8 the model opens and replies.

use super::*;
use kiln_engine::KvDtype;

fn pick(h: &mut Harness<'_, DesktopApp>, name: &str) {
    h.get_by_label("KV cache type").click();
    h.run_ok();
    h.get_by_label(name).click();
    h.run_ok();
}

#[test]
fn the_kv_cache_type_is_picked_kept_and_used() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let store = dir.path().join("store");
    let mut h = harness(&store, None, true);
    pick(&mut h, "q8_0");
    assert_eq!(h.state().settings.kv_dtype, KvDtype::Q8);
    let kept = Store::open(Some(store.clone())).unwrap().load_settings();
    assert_eq!(kept.unwrap().kv_dtype, KvDtype::Q8, "the setting is saved");

    h.state_mut().open_model(model.clone());
    step_until(&mut h, "the error", |a| {
        matches!(a.model, ModelState::Failed { .. })
    });
    let ModelState::Failed { error, .. } = &h.state().model else {
        unreachable!()
    };
    assert!(
        error.contains("q8_0 KV cache") && error.contains("multiple of 64"),
        "{error}"
    );

    pick(&mut h, "fp8");
    h.state_mut().open_model(model);
    step_until(&mut h, "the model to open", ready);
    greedy(&mut h);
    send(&mut h, "hello");
    step_until(&mut h, "the reply", |a| a.generating.is_empty());
    assert!(!last_reply(h.state(), 0).text.is_empty());
}
