//! `kiln generate`: one prompt through the engine, streamed to stdout, with the prefill and
//! decode speeds at the end.

use std::io::Write;
use std::sync::atomic::AtomicBool;

use kiln_model::ChatMessage;

use crate::local::{Local, LocalArgs};
use crate::output_args::OutputArgs;
use crate::sampling_args::{DEFAULT_MAX_TOKENS, SamplingArgs};

#[derive(clap::Args)]
pub struct Args {
    #[arg(long)]
    prompt: String,
    /// Wrap the prompt as a user message in the model's chat template (ChatML if it has none).
    #[arg(long)]
    chat: bool,
    /// A system message before the prompt (implies --chat).
    #[arg(long)]
    system: Option<String>,
    #[command(flatten)]
    sampling: SamplingArgs,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    local: LocalArgs,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let grammar = a.output.grammar()?;
    let mut local = Local::open(&a.local)?;
    let f = &local.frontend;
    let spec = f.resolve(&a.sampling.params(), None)?;
    let prompt = if a.chat || a.system.is_some() {
        f.chat_tokens(
            vec![ChatMessage::new("user", a.prompt.as_str())],
            a.system.as_deref(),
        )?
    } else {
        f.encode(&a.prompt, true, "prompt")?
    };
    let max_tokens = f.check_prompt(
        &prompt,
        local.engine.max_len(),
        spec.max_tokens,
        Some(DEFAULT_MAX_TOKENS),
    )?;
    let mut stdout = std::io::stdout().lock();
    let reply = local.reply(
        prompt,
        (&spec, grammar.as_ref(), a.sampling.thinking_token_budget),
        max_tokens,
        &AtomicBool::new(false),
        &mut |text| {
            stdout.write_all(text.as_bytes())?;
            stdout.flush()
        },
    )?;
    writeln!(stdout)?;
    eprintln!("{}", reply.speed_line());
    Ok(())
}
