//! `kiln generate`: the server's sampling options, structured outputs, a thinking budget,
//! special tokens kept or stopped at, and a chat template given in place of the model's.

use std::path::Path;

use kiln_model::testing::{TinyConfig, tiny_tokenizer, write_tiny_llama};

use super::{kiln, model};

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
