//! The `kiln` binary as a user runs it, on a tiny random model: `generate` with the server's
//! sampling options and structured outputs, `speed` from a given decode context, and `kiln chat` driven in a real
//! terminal (tmux): two turns with their speed lines, Ctrl-C stopping a long reply without
//! quitting, `/exit`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use kiln_model::testing::{TinyConfig, tiny_tokenizer, write_tiny_llama};

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

fn generate(dir: &Path, extra: &[&str]) -> (String, String, bool) {
    let d = dir.to_str().unwrap();
    let mut args = vec!["generate", "--model", d, "--prompt", "the cat sat on"];
    args.extend_from_slice(extra);
    let out = kiln(&args);
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

#[test]
fn generate_takes_the_servers_sampling_options() {
    let dir = model("generate", 512);
    let greedy = ["--temperature", "0", "--max-tokens", "16", "--ignore-eos"];
    let (a, err, ok) = generate(&dir, &[&greedy[..], &["--seed", "1"]].concat());
    assert!(ok, "{err}");
    assert!(err.contains("decode: 15 tokens"), "speed line: {err}");
    let (b, _, _) = generate(&dir, &[&greedy[..], &["--seed", "2"]].concat());
    assert_eq!(a, b, "temperature 0 must not depend on the seed");
    // A stop string cuts the text before it.
    let chars: Vec<char> = a.trim_end_matches('\n').chars().collect();
    assert!(chars.len() >= 6, "too short to test stop strings: {a:?}");
    let stop: String = chars[chars.len() / 2..chars.len() / 2 + 2].iter().collect();
    let (cut, err, ok) = generate(&dir, &[&greedy[..], &["--stop", &stop]].concat());
    assert!(ok, "{err}");
    assert_eq!(cut.trim_end_matches('\n'), &a[..a.find(&stop).unwrap()]);
    // Penalties, min-p, top-k and a system prompt are accepted; bad values name the option.
    let (_, err, ok) = generate(
        &dir,
        &[
            "--max-tokens",
            "4",
            "--min-p",
            "0.1",
            "--top-k",
            "-1",
            "--repetition-penalty",
            "1.2",
            "--presence-penalty",
            "0.5",
            "--frequency-penalty",
            "0.5",
            "--system",
            "be brief",
        ],
    );
    assert!(ok, "{err}");
    let (_, err, ok) = generate(&dir, &["--top-p", "0"]);
    assert!(!ok && err.contains("top_p"), "{err}");
    let (_, err, ok) = generate(&dir, &["--max-tokens", "100000"]);
    assert!(
        !ok && err.contains("maximum context length is 512"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn generate_holds_to_a_structured_output() {
    let dir = model("structured", 512);
    let sampled = ["--temperature", "1", "--seed", "3", "--max-tokens", "40"];
    let run = |flags: &[&str]| {
        let (out, err, ok) = generate(&dir, &[&sampled[..], flags].concat());
        assert!(ok, "{flags:?}: {err}");
        out.trim_end_matches('\n').to_string()
    };
    let free = run(&[]);
    let picked = run(&["--choice", "yes", "--choice", "no"]);
    assert!(
        ["yes", "no"].contains(&picked.as_str()),
        "{picked:?} (free: {free:?})"
    );
    let digits = run(&["--regex", "[0-9]{3}"]);
    assert!(
        digits.len() == 3 && digits.chars().all(|c| c.is_ascii_digit()),
        "{digits:?}"
    );
    // A schema from a file, and any JSON object.
    let schema = dir.join("schema.json");
    std::fs::write(
        &schema,
        r#"{"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99}},
            "required": ["n"], "additionalProperties": false}"#,
    )
    .unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&run(&["--json-schema", &format!("@{}", schema.display())])).unwrap();
    assert!(v["n"].as_u64().is_some_and(|n| n <= 99), "{v}");
    let object = run(&["--json"]);
    assert!(object.starts_with('{'), "{object:?}");
    // vLLM's token filters: one token allowed, written at every step.
    let a = (tiny_tokenizer::tokens().iter())
        .position(|t| t == "a")
        .unwrap();
    assert_eq!(run(&["--allowed-token-id", &a.to_string()]), "a".repeat(40));
    // One kind at a time; a schema that is not JSON is refused naming the flag.
    let (_, err, ok) = generate(&dir, &["--json", "--regex", "a"]);
    assert!(!ok && err.contains("cannot be used with"), "{err}");
    let (_, err, ok) = generate(&dir, &["--json-schema", "{nope"]);
    assert!(!ok && err.contains("--json-schema"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `--thinking-token-budget`: the template opens a `<think>` block the random model never
/// closes; with a budget, `</think>` is written after that many tokens of it.
#[test]
fn generate_bounds_the_reasoning_by_a_thinking_budget() {
    let dir = std::env::temp_dir().join(format!("kiln-cli-budget-{}", std::process::id()));
    let tc = TinyConfig {
        chat_template: Some(tiny_tokenizer::THINK_TEMPLATE.into()),
        ..TinyConfig::default()
    };
    write_tiny_llama(&dir, &tc, 3).unwrap();
    let run = |budget: &str| {
        let flags = [
            "--chat",
            "--temperature",
            "0",
            "--ignore-eos",
            "--max-tokens",
            "24",
        ];
        let (out, err, ok) = generate(
            &dir,
            &[&flags[..], &["--thinking-token-budget", budget]].concat(),
        );
        assert!(ok, "{budget}: {err}");
        out
    };
    // A budget the reply cannot reach: the same constrained sampling, never forced.
    let unbounded = run("1000");
    assert!(!unbounded.contains("</think>"), "{unbounded:?}");
    let bounded = run("4");
    let cut = bounded.find("</think>").expect(&bounded);
    assert!(
        cut > 0 && unbounded.starts_with(&bounded[..cut]),
        "{bounded:?} {unbounded:?}"
    );
    assert!(run("0").starts_with("</think>"));
    std::fs::remove_dir_all(&dir).ok();
}

/// The prompt tokens of a speed line.
fn prefill_tokens(speed: &str) -> usize {
    let at = speed.find("prefill: ").expect("a speed line") + "prefill: ".len();
    speed[at..].split(' ').next().unwrap().parse().unwrap()
}

/// `kiln embed`'s vectors, one per JSON line: `(index, tokens, embedding)`.
fn embeddings(stdout: &[u8]) -> Vec<(u64, u64, Vec<f64>)> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
            let e = v["embedding"].as_array().expect("embedding");
            let floats = e.iter().map(|x| x.as_f64().unwrap()).collect();
            (
                v["index"].as_u64().unwrap(),
                v["tokens"].as_u64().unwrap(),
                floats,
            )
        })
        .collect()
}

#[test]
fn embed_prints_a_unit_vector_per_input() {
    let dir = model("embed", 512);
    let d = dir.to_str().unwrap();
    let inputs = ["the cat sat", "a dog ran", "the cat sat"];
    let mut args = vec!["embed", "--model", d];
    for i in inputs {
        args.extend(["--input", i]);
    }
    let out = kiln(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let e = embeddings(&out.stdout);
    assert_eq!(e.len(), 3);
    let width = TinyConfig::default().hidden_size;
    for (i, (index, tokens, v)) in e.iter().enumerate() {
        assert_eq!(*index, i as u64);
        assert!(*tokens >= 3, "{tokens}");
        assert_eq!(v.len(), width);
        let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{norm}");
    }
    let diff = |a: &[f64], b: &[f64]| {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max)
    };
    assert!(diff(&e[0].2, &e[2].2) < 1e-5, "equal inputs");
    assert!(diff(&e[0].2, &e[1].2) > 1e-3, "different inputs");
    // An input longer than the context is refused by its index.
    let long = "word ".repeat(600);
    let out = kiln(&["embed", "--model", d, "--input", "x", "--input", &long]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("input 1"), "{err}");
}

#[test]
fn info_names_the_chat_templates_tool_and_reasoning_formats() {
    let line = |tc: TinyConfig, tag: &str| {
        let dir = std::env::temp_dir().join(format!("kiln-cli-info-{tag}-{}", std::process::id()));
        write_tiny_llama(&dir, &tc, 3).unwrap();
        let out = kiln(&["info", "--model", dir.to_str().unwrap()]);
        std::fs::remove_dir_all(&dir).ok();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let chat = stdout
            .lines()
            .find(|l| l.starts_with("chat:"))
            .map(String::from);
        chat.unwrap_or_else(|| panic!("no chat line in {stdout}"))
    };
    let plain = line(TinyConfig::default(), "plain");
    assert!(
        plain.contains("kiln's generic JSON") && plain.contains("not set apart"),
        "{plain}"
    );
    let tools = TinyConfig {
        chat_template: Some(tiny_tokenizer::TOOLS_THINK_TEMPLATE.into()),
        ..TinyConfig::default()
    };
    let tools = line(tools, "tools");
    assert!(
        tools.contains("Hermes <tool_call> blocks") && tools.contains("<think> blocks, set apart"),
        "{tools}"
    );
}

#[test]
fn a_chat_template_given_replaces_the_models() {
    let dir = model("template", 512);
    let once = "{{ messages[-1].content }}";
    let twice = "{{ messages[-1].content }}{{ messages[-1].content }}";
    let run = |template: &str| {
        let (_, err, ok) = generate(
            &dir,
            &["--chat", "--max-tokens", "2", "--chat-template", template],
        );
        assert!(ok, "{err}");
        prefill_tokens(&err)
    };
    let (n, n2) = (run(once), run(twice));
    assert!(n > 0 && n2 == 2 * n, "{n} then {n2}");
    let file = dir.join("template.jinja");
    std::fs::write(&file, twice).unwrap();
    assert_eq!(run(file.to_str().unwrap()), n2, "from a file");
    let (_, err, ok) = generate(&dir, &["--chat", "--chat-template", "{% if %}"]);
    assert!(!ok && err.contains("--chat-template"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `--keep-special-tokens` writes the special tokens a reply holds, which are otherwise left
/// out (a logit bias makes every token the special one here); `--stop-token-id` ends the
/// reply at one.
#[test]
fn generate_keeps_special_tokens_when_asked() {
    let dir = std::env::temp_dir().join(format!("kiln-cli-specials-{}", std::process::id()));
    let tc = TinyConfig {
        extra_special_tokens: vec!["<call>".into()],
        ..TinyConfig::default()
    };
    write_tiny_llama(&dir, &tc, 3).unwrap();
    let tokenizer: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("tokenizer.json")).unwrap()).unwrap();
    let id = (tokenizer["added_tokens"].as_array().unwrap().iter())
        .find(|t| t["content"] == "<call>")
        .map(|t| t["id"].to_string())
        .expect("the special token");
    let bias = format!("{id}=100");
    let args = ["--max-tokens", "3", "--ignore-eos", "--logit-bias", &bias];
    let (plain, err, ok) = generate(&dir, &args);
    assert!(ok, "{err}");
    assert_eq!(plain.trim_end_matches('\n'), "");
    let (kept, err, ok) = generate(&dir, &[&args[..], &["--keep-special-tokens"]].concat());
    assert!(ok, "{err}");
    assert_eq!(kept.trim_end_matches('\n'), "<call><call><call>");
    // As a stop token it ends the reply at once, writing nothing.
    let stop = [
        &args[..],
        &["--keep-special-tokens", "--stop-token-id", &id],
    ]
    .concat();
    let (stopped, err, ok) = generate(&dir, &stop);
    assert!(ok, "{err}");
    assert_eq!(stopped.trim_end_matches('\n'), "");
    let (_, err, ok) = generate(&dir, &[&stop[..], &["--min-tokens", "4"]].concat());
    assert!(
        !ok && err.contains("min_tokens"),
        "more than --max-tokens: {err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// `kiln speed` decodes from the prompt length it is given, says so in its JSON, and refuses a
/// length the model's context cannot hold before measuring anything.
#[test]
fn speed_decodes_from_the_context_it_is_given() {
    let dir = model("speed", 512);
    let d = dir.to_str().unwrap();
    let json = dir.join("speed.json");
    let base = [
        "speed",
        "--model",
        d,
        "--concurrency",
        "1,3",
        "--prompt-lens",
        "16",
        "--decode-steps",
        "4",
        "--kv-memory",
        "16000000",
    ];
    let run = |extra: &[&str]| kiln(&[&base[..], extra].concat());
    let out = run(&["--decode-context", "100", "--json", json.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let decode = v["decode"].as_array().unwrap();
    let seen: Vec<_> = decode
        .iter()
        .map(|e| (e["sequences"].as_u64(), e["prompt_tokens"].as_u64()))
        .collect();
    assert_eq!(seen, [(Some(1), Some(100)), (Some(3), Some(100))]);
    // 507 + 4 steps + 2 is one past the 512-token context.
    let out = run(&["--decode-context", "507"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("need 513 tokens a sequence; the context holds 512"),
        "{err}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("| 1 |"));
    std::fs::remove_dir_all(&dir).ok();
}

/// A tmux session running one command, read through `capture-pane`.
struct Tmux {
    name: String,
}

impl Tmux {
    fn start(tag: &str, command: &str) -> Tmux {
        let name = format!("kiln-test-{tag}-{}", std::process::id());
        let status = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-x",
                "160",
                "-y",
                "60",
                "-s",
                &name,
                command,
            ])
            .status()
            .expect("tmux is needed for this test (scripts/setup.sh installs it)");
        assert!(status.success(), "tmux new-session failed");
        Tmux { name }
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", &self.name];
        args.extend_from_slice(keys);
        assert!(Command::new("tmux").args(&args).status().unwrap().success());
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-S", "-200", "-t", &self.name])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until the screen shows `text` `count` times.
    fn wait_for(&self, text: &str, count: usize) -> String {
        self.wait_until(&format!("{text:?} x{count}"), |s| {
            s.matches(text).count() >= count
        })
    }

    /// Waits until the screen shows `count` chat prompts (`> ` at a line's start; tmux drops
    /// the trailing space of an empty one).
    fn wait_prompts(&self, count: usize) -> String {
        self.wait_until(&format!("{count} prompts"), |s| {
            s.lines()
                .filter(|l| *l == ">" || l.starts_with("> "))
                .count()
                >= count
        })
    }

    fn wait_until(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "waited for {what}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.name])
            .status();
    }
}

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
