//! The `kiln` binary as a user runs it, on a tiny random model: `generate` with the server's
//! sampling options and structured outputs, `embed`, `info`, `speed` from a given decode
//! context, and `kiln chat` driven in a real terminal (tmux): two turns with their speed lines,
//! Ctrl-C stopping a long reply without quitting, `/exit`. This file holds the model folder and
//! the way to run `kiln`; `generate.rs` the `generate` options; `embed.rs`, `info.rs` and
//! `speed.rs` those commands; `tmux.rs` the terminal; `chat.rs` the chat sessions.

mod chat;
mod embed;
mod generate;
mod info;
mod speed;
mod tmux;

use std::path::PathBuf;
use std::process::{Command, Output};

use kiln_model::testing::{TinyConfig, write_tiny_llama};

/// A tiny model folder; `context` sets its context length.
fn model(tag: &str, context: usize) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kiln-cli-{tag}-{}", std::process::id()));
    let tc = TinyConfig {
        max_position_embeddings: context,
        ..TinyConfig::default()
    };
    write_tiny_llama(&dir, &tc, 3).unwrap();
    dir
}

fn kiln(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(args)
        .output()
        .expect("running kiln")
}
