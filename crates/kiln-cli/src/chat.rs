//! `kiln chat`: an interactive chat in the terminal. Each line is a user turn; the reply streams as
//! it is generated, followed by its speed line. The whole conversation is the prompt of every turn
//! (the prefix cache keeps the earlier turns' KV, so only the new turn is prefilled); once it
//! outgrows the context, its oldest exchanges are left out of the prompt (said on stderr), the
//! latest always kept. The input line is edited with rustyline (arrow keys, Home/End, word moves;
//! Up and Down recall this session's earlier messages). Ctrl-C stops a reply (what was written
//! stays in the history); at the prompt it quits, as do Ctrl-D and `/exit`. `/reset` starts a new
//! conversation. A model that reasons in `<think>` blocks has its reasoning shown apart (after
//! `thinking:`, dimmed in a terminal) and kept in the history as the turn's `reasoning_content`.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use kiln_frontend::{ChatExtras, ReasoningFormat};
use kiln_model::ChatMessage;
use rustyline::error::ReadlineError;

use crate::local::{End, Local, LocalArgs};
use crate::output_args::OutputArgs;
use crate::sampling_args::{DEFAULT_MAX_TOKENS, SamplingArgs};

#[derive(clap::Args)]
pub struct Args {
    /// The system message that opens every conversation.
    #[arg(long)]
    system: Option<String>,
    #[command(flatten)]
    sampling: SamplingArgs,
    /// Every reply under this structured output.
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    local: LocalArgs,
}

const HELP: &str = "type a message and press Enter; Ctrl-C stops a reply; /reset starts over; /exit or Ctrl-D quits";

/// The stop key: while a reply is generated, Ctrl-C asks it to stop; otherwise (a signal
/// outside the line editor) it quits.
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
    let grammar = a.output.grammar()?;
    let mut local = Local::open(&a.local)?;
    let spec = local.frontend.resolve(&a.sampling.params(), None)?;
    let key = StopKey::install()?;
    let reasoning = local.reasoning;
    let mut history: Vec<ChatMessage> = Vec::new();
    // Messages the prompt leaves out (kept while the rest fits, so turns extend one prompt).
    let mut cut = 0;
    eprintln!("{HELP}");
    let mut typed: Vec<String> = Vec::new();
    loop {
        let line = match read_line(&typed) {
            Ok(line) => line,
            Err(ReadlineError::Eof) => {
                println!();
                return Ok(());
            }
            Err(ReadlineError::Interrupted) => {
                println!();
                std::process::exit(130);
            }
            Err(e) => return Err(e.into()),
        };
        let message = line.trim();
        if !message.is_empty() {
            typed.push(message.to_string());
        }
        match message {
            "" => continue,
            "/exit" | "/quit" => return Ok(()),
            "/help" => {
                eprintln!("{HELP}");
                continue;
            }
            "/reset" => {
                history.clear();
                cut = 0;
                eprintln!("(new conversation)");
                continue;
            }
            _ => {}
        }
        history.push(ChatMessage::new("user", message));
        let f = &local.frontend;
        // A conversation longer than the context leaves its oldest exchanges out of the
        // prompt (the history keeps them), with room for the reply.
        let max_len = local.engine.max_len();
        let extras = ChatExtras {
            system: a.system.as_deref(),
            ..ChatExtras::default()
        };
        let room = spec
            .max_tokens
            .unwrap_or(DEFAULT_MAX_TOKENS.min(max_len / 4));
        let checked = f
            .fit_chat(history.clone(), &extras, max_len, room, cut)
            .and_then(|fitted| {
                let room = f.check_prompt(
                    &fitted.prompt,
                    max_len,
                    spec.max_tokens,
                    Some(DEFAULT_MAX_TOKENS),
                )?;
                Ok((fitted, room))
            });
        let (prompt, max_tokens) = match checked {
            Ok((fitted, room)) => {
                if fitted.dropped > cut {
                    eprintln!(
                        "({} earlier messages left out to fit the context of {max_len} tokens)",
                        fitted.dropped
                    );
                }
                cut = fitted.dropped;
                (fitted.prompt, room)
            }
            Err(e) => {
                history.pop();
                eprintln!("error: {e} (/reset starts a new conversation)");
                continue;
            }
        };
        key.interrupt.store(false, Ordering::SeqCst);
        key.generating.store(true, Ordering::SeqCst);
        let mut out = Printer::new(reasoning.opened_by_ids(&f.tokenizer, &prompt), reasoning);
        let budget = a.sampling.thinking_token_budget;
        let asked = (&spec, grammar.as_ref(), budget);
        let reply = local.reply(prompt, asked, max_tokens, &key.interrupt, &mut |text| {
            out.push(text, false)
        });
        key.generating.store(false, Ordering::SeqCst);
        let reply = reply?;
        out.push("", true)?;
        out.end()?;
        let how = match reply.end {
            End::Stop => "",
            End::Length => "cut at the token limit; ",
            End::Interrupted => "stopped; ",
        };
        eprintln!("[{how}{}]", reply.speed_line());
        let mut turn = ChatMessage::new("assistant", out.content);
        turn.reasoning_content = Some(out.reasoning).filter(|r| !r.is_empty());
        history.push(turn);
    }
}

/// A reply on the terminal: its reasoning after `thinking:` (dimmed where stdout is a
/// terminal), then its answer; both kept for the history.
struct Printer {
    split: kiln_frontend::ReasoningStream,
    style: bool,
    in_reasoning: bool,
    reasoning: String,
    content: String,
}

const DIM: &str = "\x1b[2m";
const PLAIN: &str = "\x1b[0m";

impl Printer {
    fn new(opened: bool, format: ReasoningFormat) -> Printer {
        use std::io::IsTerminal;
        Printer {
            split: format.stream(opened),
            style: std::io::stdout().is_terminal(),
            in_reasoning: false,
            reasoning: String::new(),
            content: String::new(),
        }
    }

    fn push(&mut self, text: &str, last: bool) -> std::io::Result<()> {
        let s = self.split.push(text, last);
        let mut stdout = std::io::stdout().lock();
        if !s.reasoning.is_empty() {
            if self.reasoning.is_empty() {
                let dim = if self.style { DIM } else { "" };
                write!(stdout, "{dim}thinking: ")?;
                self.in_reasoning = true;
            }
            stdout.write_all(printable(&s.reasoning).as_bytes())?;
            self.reasoning += &s.reasoning;
        }
        if !s.content.is_empty() {
            self.close_reasoning(&mut stdout)?;
            stdout.write_all(printable(&s.content).as_bytes())?;
            self.content += &s.content;
        }
        stdout.flush()
    }

    fn close_reasoning(&mut self, stdout: &mut impl Write) -> std::io::Result<()> {
        if std::mem::take(&mut self.in_reasoning) {
            let plain = if self.style { PLAIN } else { "" };
            write!(stdout, "{plain}\n\n")?;
        }
        Ok(())
    }

    /// Ends the reply's line (and the dimmed style).
    fn end(&mut self) -> std::io::Result<()> {
        let mut stdout = std::io::stdout().lock();
        if self.in_reasoning && self.style {
            write!(stdout, "{PLAIN}")?;
        }
        writeln!(stdout)
    }
}

/// One line from the line editor, with `typed` as the history that Up and Down walk. The
/// editor reads keys in raw mode, so Ctrl-C at the prompt arrives as a key (`Interrupted`);
/// it also takes over SIGINT while it exists, so it lives only for the one line and the stop
/// key's handler is back in place while a reply is generated.
fn read_line(typed: &[String]) -> rustyline::Result<String> {
    let mut editor = rustyline::DefaultEditor::new()?;
    for line in typed {
        editor.add_history_entry(line.as_str())?;
    }
    editor.readline("> ")
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
