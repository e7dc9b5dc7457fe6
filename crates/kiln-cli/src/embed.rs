//! `kiln embed`: embeddings of texts, as the server's `/v1/embeddings` computes them
//! (kiln-frontend's `embedding.rs`: the final hidden state at each input's last token, unit
//! length), one JSON line per input on stdout.

use std::collections::HashMap;
use std::io::Write;

use serde_json::json;

use crate::local::{Local, LocalArgs};

#[derive(clap::Args)]
pub struct Args {
    /// A text to embed; repeat the flag for each (with none, each line of stdin is one).
    #[arg(long)]
    input: Vec<String>,
    #[command(flatten)]
    local: LocalArgs,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let inputs = match a.input.is_empty() {
        false => a.input,
        true => std::io::stdin().lines().collect::<Result<Vec<_>, _>>()?,
    };
    if inputs.is_empty() {
        anyhow::bail!("nothing to embed: give --input TEXT, or lines on stdin");
    }
    let mut local = Local::open(&a.local)?;
    let f = &local.frontend;
    let max_len = local.engine.max_len();
    let spec = f.embedding_spec();
    let mut ids = Vec::with_capacity(inputs.len());
    for (i, text) in inputs.iter().enumerate() {
        let prompt = f.encode(text, true, "input")?;
        f.check_embedding_input(&prompt, max_len, i)?;
        ids.push(prompt);
    }
    let tokens: Vec<usize> = ids.iter().map(Vec::len).collect();
    let mut vectors: HashMap<u64, Vec<f32>> = local.embed(&spec, ids)?;
    let mut stdout = std::io::stdout().lock();
    for (i, n) in tokens.into_iter().enumerate() {
        let v = vectors
            .remove(&(i as u64))
            .expect("one embedding per input");
        writeln!(
            stdout,
            "{}",
            json!({"index": i, "tokens": n, "embedding": v})
        )?;
    }
    Ok(())
}
