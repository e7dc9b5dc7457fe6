//! The KV cache on disk (a setting, on by default): a chat's computed prompt is written to the
//! store's `kv-cache` folder, and after the app is closed and opened again, regenerating the
//! reply serves the prompt from there: the same reply, its prompt tokens counted as cached.

use super::*;

fn disk_stats(app: &DesktopApp) -> Option<kiln_engine::disk_tier::DiskTierStats> {
    match &app.model {
        ModelState::Ready(l) => l.engine.disk_stats(),
        _ => None,
    }
}

#[test]
fn a_chat_goes_on_from_disk_after_the_app_is_opened_again() {
    let dir = tempfile::tempdir().unwrap();
    let (mut h, store) = app_with_tiny_model(dir.path());
    send(&mut h, &"tell me a story about the sea. ".repeat(12));
    step_until(&mut h, "the reply", |a| a.generating.is_empty());
    let first = last_reply(h.state(), 0).clone();
    let stats = first.stats.as_ref().unwrap();
    assert_eq!(stats.cached_tokens, 0);
    assert!(stats.prompt_tokens >= 32, "{stats:?}");
    step_until(&mut h, "the blocks on disk", |a| {
        disk_stats(a).is_some_and(|s| s.pending == 0 && s.blocks_written >= 2)
    });
    drop(h);
    assert!(store.join("kv-cache").is_dir());

    let mut h = harness(&store, None, true);
    step_until(&mut h, "the model to open again", ready);
    assert!(disk_stats(h.state()).unwrap().blocks_resident >= 2);
    h.get_by_label("Regenerate").click();
    h.step();
    step_until(&mut h, "the regenerated reply", |a| a.generating.is_empty());
    let again = last_reply(h.state(), 0);
    assert_eq!(again.text, first.text);
    let cached = again.stats.as_ref().unwrap().cached_tokens;
    assert!(
        cached >= 32 && cached < stats.prompt_tokens,
        "the prompt's full blocks came from disk: {cached} of {}",
        stats.prompt_tokens
    );
    let restored = disk_stats(h.state()).unwrap().blocks_restored;
    assert!(restored >= 2);
    // The model panel says what the disk holds and gave back.
    h.run_ok();
    h.get_by_label_contains(&format!("{restored} read back"));
}

/// "Empty the KV cache" lets go of the chat's blocks in memory and their files: the panel
/// says how many, and the regenerated reply's prompt is computed again.
#[test]
fn emptying_the_kv_cache_lets_go_of_memory_and_files() {
    let dir = tempfile::tempdir().unwrap();
    let (mut h, _store) = app_with_tiny_model(dir.path());
    send(&mut h, &"tell me a story about the sea. ".repeat(12));
    step_until(&mut h, "the reply", |a| a.generating.is_empty());
    step_until(&mut h, "the blocks on disk", |a| {
        disk_stats(a).is_some_and(|s| s.pending == 0 && s.blocks_written >= 2)
    });
    let written = disk_stats(h.state()).unwrap().blocks_resident;
    h.get_by_label("Empty the KV cache").click();
    h.step();
    step_until(&mut h, "the cache emptied", |a| a.emptied.is_some());
    let r = h.state().emptied.unwrap();
    assert_eq!(r.disk_blocks, written, "{r:?}");
    assert!(r.gpu_blocks + r.cpu_blocks >= 2, "{r:?}");
    assert_eq!(disk_stats(h.state()).unwrap().blocks_resident, 0);
    h.run_ok();
    h.get_by_label_contains(&format!("{} files", r.disk_blocks));
    h.get_by_label("Regenerate").click();
    h.step();
    step_until(&mut h, "the regenerated reply", |a| a.generating.is_empty());
    let again = last_reply(h.state(), 0);
    assert_eq!(
        again.stats.as_ref().unwrap().cached_tokens,
        0,
        "computed again"
    );
}
