//! Text files dropped on the window go with the next message (a file that is not text is
//! refused in the window); the reply is the engine's greedy reply to the message as sent.

use kiln_desktop::attach::{Attachment, compose};

use super::*;

#[test]
fn dropped_text_files_go_with_the_message() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "alpha beta gamma\n").unwrap();
    let blob = dir.path().join("blob.bin");
    std::fs::write(&blob, [0xff, 0x00, 0x13]).unwrap();
    let attached = Attachment {
        name: "notes.txt".into(),
        text: "alpha beta gamma\n".into(),
    };
    let sent = compose("Summarize this", std::slice::from_ref(&attached));
    let expected = greedy_reply(&model, &sent);

    let mut h = harness(&dir.path().join("store"), Some(model), true);
    step_until(&mut h, "the model to open", ready);
    let drop_files = |h: &mut Harness<'_, DesktopApp>, paths: &[&Path]| {
        for p in paths {
            let f = std::sync::Arc::new(Dropped(p.to_path_buf()));
            h.input_mut().dropped_files.push(f);
        }
        h.step();
        h.run_ok();
    };
    // Attached, then removed with its button, then attached again with a file that is not
    // text, which the window refuses by name.
    drop_files(&mut h, &[&notes]);
    assert_eq!(h.state().attachments, std::slice::from_ref(&attached));
    h.get_by_label("Remove notes.txt").click();
    h.run_ok();
    assert!(h.state().attachments.is_empty());
    drop_files(&mut h, &[&notes, &blob]);
    assert_eq!(h.state().attachments, [attached]);
    h.get_by_label_contains("notes.txt (0.0 KiB)");
    h.get_by_label_contains(&format!("Cannot attach {}", blob.display()));

    greedy(&mut h);
    send(&mut h, "Summarize this");
    assert_eq!(h.state().chats[0].messages[0].text, sent);
    assert!(h.state().attachments.is_empty(), "sent with the message");
    step_until(&mut h, "the reply", |a| a.generating.is_empty());
    assert_eq!(last_reply(h.state(), 0).text, expected);
    // The model stayed open: dropped text files are not models.
    assert!(ready(h.state()));
}
