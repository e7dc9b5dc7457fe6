//! `kiln chat`: an interactive chat in the terminal. Each line is a user turn; the reply
//! streams as it is generated, followed by its speed line. The whole conversation is the
//! prompt of every turn (the prefix cache keeps the earlier turns' KV, so only the new turn
//! is prefilled). Ctrl-C stops a reply (what was written stays in the history); at the prompt
//! it quits, as do Ctrl-D and `/exit`. `/reset` starts a new conversation.

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use kiln_model::ChatMessage;

use crate::local::{End, Local, LocalArgs};
use crate::sampling_args::{DEFAULT_MAX_TOKENS, SamplingArgs};

#[derive(clap::Args)]
pub struct Args {
    /// The system message that opens every conversation.
    #[arg(long)]
    system: Option<String>,
    #[command(flatten)]
    sampling: SamplingArgs,
    #[command(flatten)]
    local: LocalArgs,
}

const HELP: &str = "type a message and press Enter; Ctrl-C stops a reply; /reset starts over; /exit or Ctrl-D quits";

/// The stop key: while a reply is generated, Ctrl-C asks it to stop; otherwise it quits.
struct StopKey {
    generating: AtomicBool,
    interrupt: AtomicBool,
}

impl StopKey {
    fn install() -> anyhow::Result<Arc<StopKey>> {
        let key = Arc::new(StopKey {
            generating: AtomicBool::new(false),
            interrupt: AtomicBool::new(false),
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        // The handler is registered here, so no Ctrl-C from now on kills the process.
        #[cfg(unix)]
        let mut signals = runtime.block_on(async {
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        })?;
        #[cfg(windows)]
        let mut signals = runtime.block_on(async { tokio::signal::windows::ctrl_c() })?;
        let k = key.clone();
        std::thread::spawn(move || {
            runtime.block_on(async {
                while signals.recv().await.is_some() {
                    if k.generating.load(Ordering::SeqCst) {
                        k.interrupt.store(true, Ordering::SeqCst);
                    } else {
                        println!();
                        std::process::exit(130);
                    }
                }
            })
        });
        Ok(key)
    }
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let mut local = Local::open(&a.local)?;
    let spec = a
        .sampling
        .params()
        .resolve(&local.frontend.defaults, None)?;
    let key = StopKey::install()?;
    let mut history: Vec<ChatMessage> = Vec::new();
    eprintln!("{HELP}");
    let stdin = std::io::stdin();
    let mut line = String::new();
    loop {
        print!("> ");
        std::io::stdout().flush()?;
        line.clear();
        if stdin.lock().read_line(&mut line)? == 0 {
            println!();
            return Ok(());
        }
        let message = line.trim();
        match message {
            "" => continue,
            "/exit" | "/quit" => return Ok(()),
            "/help" => {
                eprintln!("{HELP}");
                continue;
            }
            "/reset" => {
                history.clear();
                eprintln!("(new conversation)");
                continue;
            }
            _ => {}
        }
        history.push(ChatMessage::new("user", message));
        let f = &local.frontend;
        let checked = f
            .chat_tokens(history.clone(), a.system.as_deref())
            .and_then(|prompt| {
                let room = f.check_prompt(
                    &prompt,
                    local.engine.max_len(),
                    spec.max_tokens,
                    Some(DEFAULT_MAX_TOKENS),
                )?;
                Ok((prompt, room))
            });
        let (prompt, max_tokens) = match checked {
            Ok(x) => x,
            Err(e) => {
                history.pop();
                eprintln!("error: {e} (/reset starts a new conversation)");
                continue;
            }
        };
        key.interrupt.store(false, Ordering::SeqCst);
        key.generating.store(true, Ordering::SeqCst);
        let mut stdout = std::io::stdout().lock();
        let reply = local.reply(prompt, &spec, max_tokens, &key.interrupt, &mut |text| {
            stdout.write_all(printable(text).as_bytes())?;
            stdout.flush()
        });
        key.generating.store(false, Ordering::SeqCst);
        let reply = reply?;
        writeln!(stdout)?;
        let how = match reply.end {
            End::Stop => "",
            End::Length => "cut at the token limit; ",
            End::Interrupted => "stopped; ",
        };
        eprintln!("[{how}{}]", reply.speed_line());
        history.push(ChatMessage::new("assistant", reply.text));
    }
}

/// `text` with control characters other than newline and tab shown as U+FFFD, so a model
/// cannot send escape sequences to the terminal.
fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| c.is_control() && c != '\n' && c != '\t';
    if text.chars().any(bad) {
        text.chars()
            .map(|c| if bad(c) { '\u{FFFD}' } else { c })
            .collect::<String>()
            .into()
    } else {
        text.into()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_never_reach_the_terminal() {
        assert_eq!(
            super::printable("a\x1b[2Jb\n\tc\u{9b}"),
            "a\u{FFFD}[2Jb\n\tc\u{FFFD}"
        );
        assert!(matches!(
            super::printable("plain"),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
