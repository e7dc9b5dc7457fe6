//! `kiln chat` in a terminal: history kept across turns and line editing, the oldest turns
//! left out once the context is outgrown, Ctrl-C stopping a reply without quitting, and
//! reasoning shown apart and kept in the history.

use std::path::Path;
use std::time::Duration;

use kiln_model::testing::{TinyConfig, write_tiny_llama};

use super::model;
use super::tmux::Tmux;

/// `kiln chat` on the tiny model in tmux; the pane stays after kiln exits, showing its status.
fn chat(tag: &str, dir: &Path, flags: &str) -> Tmux {
    let command = format!(
        "{} chat --model {} --temperature 0 --ignore-eos {flags}; echo kiln-exited $?; sleep 60",
        env!("CARGO_BIN_EXE_kiln"),
        dir.display()
    );
    let t = Tmux::start(tag, &command);
    t.wait_prompts(1);
    t
}

/// The prompt sizes of the speed lines on the screen.
fn prefill_sizes(screen: &str) -> Vec<usize> {
    screen
        .split("prefill: ")
        .skip(1)
        .map(|s| s.split(' ').next().unwrap().parse().unwrap())
        .collect()
}

#[test]
fn chat_in_a_terminal_keeps_history_and_quits_on_ctrl_c_at_the_prompt() {
    let dir = model("chat", 512);
    let t = chat("turns", &dir, "--max-tokens 8");
    t.keys(&["hello there", "Enter"]);
    t.wait_for("[cut at the token limit; prefill:", 1);
    t.wait_prompts(2);
    // Line editing: Up recalls the first message, which is then edited in place.
    t.keys(&["Up"]);
    t.wait_for("> hello there", 2);
    t.keys(&[
        "C-a", "Right", "Right", "Right", "Right", "Right", " again", "End", "!", "Enter",
    ]);
    t.wait_for("> hello again there!", 1);
    let screen = t.wait_for("[cut at the token limit; prefill:", 2);
    let sizes = prefill_sizes(&screen);
    // The second prompt holds the first turn, its reply and the new message.
    assert!(sizes[1] > sizes[0] + 8, "{sizes:?}\n{screen}");
    assert!(screen.contains("decode: 7 tokens"), "{screen}");
    t.wait_prompts(3);
    t.keys(&["C-c"]);
    let screen = t.wait_for("kiln-exited", 1);
    assert!(screen.contains("kiln-exited 130"), "{screen}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn chat_in_a_terminal_outgrowing_the_context_leaves_out_its_oldest_turns() {
    let dir = model("chat-fit", 128);
    let t = chat("fit", &dir, "--max-tokens 8");
    let long = "tell me more about the cat that sat on the mat";
    for turn in 1..=3 {
        t.keys(&[long, "Enter"]);
        t.wait_for("[cut at the token limit; prefill:", turn);
        t.wait_prompts(turn + 1);
    }
    // Three turns of about 60 tokens each outgrow 128: the reply still comes, from a prompt
    // that left the oldest exchanges out.
    let screen = t.screen();
    assert!(
        screen.contains("earlier messages left out to fit the context of 128 tokens"),
        "{screen}"
    );
    let sizes = prefill_sizes(&screen);
    assert!(sizes.iter().all(|&n| n + 8 <= 128), "{sizes:?}\n{screen}");
    assert!(!screen.contains("error:"), "{screen}");
    t.keys(&["/exit", "Enter"]);
    t.wait_for("kiln-exited", 1);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn chat_in_a_terminal_stops_a_reply_on_ctrl_c() {
    let dir = model("stop", 8192);
    let t = chat("stop", &dir, "--max-tokens 6000");
    for turn in 1..=2 {
        t.keys(&["write a long story", "Enter"]);
        std::thread::sleep(Duration::from_millis(1500));
        t.keys(&["C-c"]);
        let screen = t.wait_for("[stopped; prefill:", turn);
        assert!(
            !screen.contains("kiln-exited"),
            "Ctrl-C quit kiln:\n{screen}"
        );
        // A new conversation each time, so a stopped reply of any length never fills the
        // context of the next turn.
        t.keys(&["/reset", "Enter"]);
        t.wait_for("(new conversation)", turn);
        t.wait_prompts(2 * turn + 1);
    }
    t.keys(&["/exit", "Enter"]);
    t.wait_for("kiln-exited 0", 1);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn chat_in_a_terminal_shows_reasoning_apart_and_keeps_it() {
    let dir = std::env::temp_dir().join(format!("kiln-cli-think-{}", std::process::id()));
    let tc = TinyConfig {
        chat_template: Some(kiln_model::testing::tiny_tokenizer::THINK_TEMPLATE.into()),
        ..TinyConfig::default()
    };
    write_tiny_llama(&dir, &tc, 3).unwrap();
    let t = chat("think", &dir, "--max-tokens 8");
    // The template opened the block and the random model never closes it: all reasoning.
    t.keys(&["why", "Enter"]);
    let screen = t.wait_for("[cut at the token limit; prefill:", 1);
    assert!(screen.contains("thinking: "), "{screen}");
    t.wait_prompts(2);
    t.keys(&["and then", "Enter"]);
    t.wait_for("[cut at the token limit; prefill:", 2);
    t.wait_prompts(3);
    // The second message alone, for its share of the prompt.
    t.keys(&["/reset", "Enter"]);
    t.wait_for("(new conversation)", 1);
    t.wait_prompts(4);
    t.keys(&["and then", "Enter"]);
    let screen = t.wait_for("[cut at the token limit; prefill:", 3);
    // What the first turn's reply adds to the second prompt, beyond the first prompt and the
    // second message with its generation prompt: the reply's turn less one generation prompt
    // (`<|im_end|>` against `<think>`), plus its reasoning (8 tokens) in a block.
    let s = prefill_sizes(&screen);
    let added = s[1] as i64 - s[0] as i64 - s[2] as i64;
    assert!(added > 8, "{s:?}\n{screen}");
    t.wait_prompts(5);
    t.keys(&["/exit", "Enter"]);
    t.wait_for("kiln-exited 0", 1);
    std::fs::remove_dir_all(&dir).ok();
}
