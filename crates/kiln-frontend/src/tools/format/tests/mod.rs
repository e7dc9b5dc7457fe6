//! The tool-call formats' detection, grammars, parsing and call ids.

use super::*;
use crate::grammar_testing::{accepts_ids, tiny_tokenizer_with};

#[test]
fn hermes_replies_split_into_text_and_calls() {
    let f = ToolFormat::Hermes;
    let text = "Let me look.\n<tool_call>\n{\"name\": \"get\", \"arguments\": {\"a\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"put\", \"arguments\": {}}\n</tool_call>";
    let (content, calls) = f.parse(text);
    assert_eq!(content.as_deref(), Some("Let me look."));
    assert_eq!(
        calls,
        vec![
            ("get".into(), r#"{"a": 1}"#.into()),
            ("put".into(), "{}".into())
        ]
    );
    assert_eq!(
        f.parse("no calls here"),
        (Some("no calls here".into()), vec![])
    );
    // An unterminated or malformed block is text, not a call.
    let cut = "<tool_call>\n{\"name\": \"get\", \"argu";
    assert_eq!(f.parse(cut), (Some(cut.into()), vec![]));
    let bad = "<tool_call>\n{\"name\": \"get\"}\n</tool_call>";
    assert_eq!(f.parse(bad), (Some(bad.into()), vec![]));
}

#[test]
fn llama3_replies_are_one_bare_call() {
    let f = ToolFormat::Llama3;
    let (content, calls) = f.parse(" {\"name\": \"get\", \"parameters\": {\"city\": \"Oslo\"}}");
    assert_eq!(content, None);
    assert_eq!(calls, vec![("get".into(), r#"{"city": "Oslo"}"#.into())]);
    assert_eq!(
        f.parse("Oslo is cold."),
        (Some("Oslo is cold.".into()), vec![])
    );
}

#[test]
fn grammars_name_the_offered_tools() {
    let offered = [("get", json!({"type": "object"}))];
    let Grammar::Lark(g) = ToolFormat::Hermes.calls_grammar(&offered, false, true) else {
        panic!("Hermes calls are a Lark grammar");
    };
    assert!(g.starts_with("start: call (\"\\n\" call)*\ncall: \"<tool_call>\\n\" body"));
    assert!(g.contains(r#""const":"get""#), "{g}");
    let Grammar::JsonSchema(s) = ToolFormat::Llama3.calls_grammar(&offered, false, true) else {
        panic!("Llama 3 calls are a JSON schema");
    };
    assert_eq!(s["required"], json!(["name", "parameters"]));
}

/// The tiny tokenizer, with Mistral's opener as one more special token when `opener`.
fn tiny_tokenizer(opener: bool) -> kiln_model::Tokenizer {
    let specials: &[&str] = if opener { &[MISTRAL_OPEN] } else { &[] };
    tiny_tokenizer_with(specials)
}

/// Whether `grammar` lets the tiny tokenizer's tokens of `text` through, then EOS.
fn accepts(grammar: &Grammar, text: &str) -> bool {
    accepts_ids(&tiny_tokenizer(false), grammar, &[], text)
}

#[test]
fn auto_lets_text_through_but_holds_an_opened_call_to_the_schema() {
    let offered = [(
        "get",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}),
    )];
    let call =
        "<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
    let hermes = ToolFormat::Hermes.calls_grammar(&offered, true, true);
    assert!(accepts(&hermes, "It is cold in Oslo.\nBring a coat."));
    assert!(accepts(&hermes, ""));
    assert!(accepts(&hermes, call));
    assert!(accepts(&hermes, &format!("Let me look.\n{call}\n{call}")));
    // Once opened, a call must be one of the offered tools with valid arguments.
    assert!(!accepts(&hermes, "<tool_call>\n{\"name\": \"put\""));
    assert!(!accepts(
        &hermes,
        "<tool_call>\n{\"name\": \"get\", \"arguments\": {}}"
    ));
    assert!(!accepts(&hermes, "Hm <tool_call> oops"));
    // Without parallel calls, one call ends the reply.
    let single = ToolFormat::Hermes.calls_grammar(&offered, true, false);
    assert!(accepts(&single, call));
    assert!(!accepts(&single, &format!("{call}\n<")));
    // Required: no text at all.
    let required = ToolFormat::Hermes.calls_grammar(&offered, false, true);
    assert!(accepts(&required, call));
    assert!(!accepts(&required, "It is"));

    let llama = ToolFormat::Llama3.calls_grammar(&offered, true, true);
    assert!(accepts(&llama, "Oslo is cold."));
    assert!(accepts(
        &llama,
        r#"{"name": "get", "parameters": {"city": "Oslo"}}"#
    ));
    assert!(!accepts(&llama, r#"{"name": "get", "parameters": {"town""#));
}

#[test]
fn mistral_calls_are_an_array_after_the_opener() {
    let f = ToolFormat::Mistral { open: None };
    let calls =
        r#"[{"name": "get", "arguments": {"city": "Oslo"}}, {"name": "put", "arguments": {}}]"#;
    let want = vec![
        ("get".to_string(), r#"{"city": "Oslo"}"#.to_string()),
        ("put".to_string(), "{}".to_string()),
    ];
    // With the opener as text, or with it a special token the decoded text leaves out.
    assert_eq!(
        f.parse(&format!("{MISTRAL_OPEN}{calls}")),
        (None, want.clone())
    );
    assert_eq!(f.parse(&format!(" {calls}\n")), (None, want));
    for text in [
        "Oslo is cold.",
        "[1] is a footnote",
        "[]",
        r#"[{"name": "get"}]"#,
        "[TOOL_CALLS][{\"name\": \"get\", \"argu",
    ] {
        assert_eq!(f.parse(text), (Some(text.into()), vec![]), "{text}");
    }
}

#[test]
fn the_format_is_read_from_the_template() {
    let detect = |src: &str, tok: &kiln_model::Tokenizer| {
        let t = ChatTemplate::new(src, "", "", "test").unwrap();
        ToolFormat::detect(Some(&t), tok)
    };
    let (plain, with_opener) = (tiny_tokenizer(false), tiny_tokenizer(true));
    let mistral = "{% if tools %}[AVAILABLE_TOOLS]{% endif %}[TOOL_CALLS][";
    assert_eq!(detect(mistral, &plain), ToolFormat::Mistral { open: None });
    let open = with_opener.token_to_id(MISTRAL_OPEN);
    assert_eq!(detect(mistral, &with_opener), ToolFormat::Mistral { open });
    // The later `[TOOL_CALLS]name[ARGS]{..}` form, and templates without tools.
    let later = "{% if tools %}{% endif %}[TOOL_CALLS]{{ name }}[ARGS]";
    let (open, args) = (None, None);
    assert_eq!(
        detect(later, &plain),
        ToolFormat::MistralArgs { open, args }
    );
    let both = tiny_tokenizer_with(&[MISTRAL_OPEN, MISTRAL_ARGS]);
    let (open, args) = (
        both.token_to_id(MISTRAL_OPEN),
        both.token_to_id(MISTRAL_ARGS),
    );
    assert!(open.is_some() && args.is_some());
    assert_eq!(detect(later, &both), ToolFormat::MistralArgs { open, args });
    assert!(ToolFormat::MistralArgs { open, args }.keeps_special_tokens());
    assert!(!ToolFormat::Mistral { open }.keeps_special_tokens());
    assert_eq!(detect("[TOOL_CALLS][", &plain), ToolFormat::Generic);
    let hermes = "{% if tools %}<tool_call>{% endif %}";
    assert_eq!(detect(hermes, &plain), ToolFormat::Hermes);
}

#[test]
fn mistral_call_ids_are_nine_letters_and_digits() {
    let f = ToolFormat::Mistral { open: None };
    let fits = |id: &str| id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric());
    let id = f.new_call_id();
    assert!(fits(&id), "{id}");
    assert_ne!(id, f.new_call_id());
    // An id that fits is kept; another maps to one that does, the same each time.
    assert_eq!(f.template_call_id("abcDEF123"), "abcDEF123");
    let mapped = f.template_call_id("call-00000000deadbeef");
    assert!(fits(&mapped), "{mapped}");
    assert_eq!(mapped, f.template_call_id("call-00000000deadbeef"));
    assert_ne!(mapped, f.template_call_id("call-00000000deadbeee"));
    assert!(fits(&f.template_call_id("")));
    // Other formats take ids as they are.
    assert_eq!(ToolFormat::Hermes.template_call_id("call_1"), "call_1");
    assert!(ToolFormat::Hermes.new_call_id().starts_with("call-"));
}

#[test]
fn mistral_grammars_hold_calls_after_the_opener_text_or_token() {
    let offered = [(
        "get",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}),
    )];
    let body = r#"[{"name": "get", "arguments": {"city": "Oslo"}}]"#;
    let two = r#"[{"name": "get", "arguments": {"city": "Oslo"}}, {"name": "get", "arguments": {"city": "Rome"}}]"#;
    // The opener written as text (a tokenizer without it).
    let text = ToolFormat::Mistral { open: None };
    let auto = text.calls_grammar(&offered, true, true);
    assert!(accepts(&auto, "It is cold in Oslo."));
    assert!(accepts(&auto, "[1] is a footnote."));
    assert!(accepts(&auto, &format!("{MISTRAL_OPEN}{body}")));
    assert!(accepts(&auto, &format!("{MISTRAL_OPEN}{two}")));
    assert!(accepts(&auto, &format!("{MISTRAL_OPEN} {body}")));
    assert!(!accepts(&auto, &format!("{MISTRAL_OPEN}[]")));
    assert!(!accepts(&auto, r#"[TOOL_CALLS][{"name": "put""#));
    assert!(!accepts(
        &auto,
        r#"[TOOL_CALLS][{"name": "get", "arguments": {}}]"#
    ));
    // An answer cannot pass for calls without the opener.
    assert!(!accepts(&auto, body));
    assert!(!accepts(&auto, &format!(" {body}")));
    let single = text.calls_grammar(&offered, false, false);
    assert!(accepts(&single, &format!("{MISTRAL_OPEN}{body}")));
    assert!(!accepts(&single, &format!("{MISTRAL_OPEN}{two}")));
    assert!(!accepts(&single, "It is cold."));

    // The opener a special token: only that token opens the calls, never its text.
    let tok = tiny_tokenizer(true);
    let open = tok.token_to_id(MISTRAL_OPEN).unwrap();
    assert!(tok.is_special(open));
    let special = ToolFormat::Mistral { open: Some(open) };
    let auto = special.calls_grammar(&offered, true, true);
    assert!(accepts_ids(&tok, &auto, &[open], body));
    assert!(accepts_ids(&tok, &auto, &[open], two));
    assert!(accepts_ids(&tok, &auto, &[], "It is cold in Oslo."));
    assert!(!accepts_ids(&tok, &auto, &[open], "It is cold."));
    assert!(!accepts_ids(&tok, &auto, &[], body));
    let required = special.calls_grammar(&offered, false, true);
    assert!(accepts_ids(&tok, &required, &[open], two));
    // The opener's text in ordinary tokens (the tokenizer reads the whole text as the
    // special token) does not open calls.
    let bracket = tok.encode("[", false).unwrap();
    let spelled = format!("{}{body}", &MISTRAL_OPEN[1..]);
    assert!(!accepts_ids(&tok, &required, &bracket, &spelled));
    assert!(!accepts_ids(&tok, &auto, &bracket, &spelled));
    assert!(!accepts_ids(&tok, &required, &[], "It is"));
}

#[test]
fn later_mistral_replies_are_text_then_named_calls() {
    let f = ToolFormat::MistralArgs {
        open: None,
        args: None,
    };
    let text = "Let me look.[TOOL_CALLS]get[ARGS]{\"city\": \"Oslo\"}[TOOL_CALLS]put[ARGS]{}";
    let want = vec![
        ("get".to_string(), r#"{"city": "Oslo"}"#.to_string()),
        ("put".to_string(), "{}".to_string()),
    ];
    assert_eq!(f.parse(text), (Some("Let me look.".into()), want.clone()));
    let calls_only = &text["Let me look.".len()..];
    assert_eq!(f.parse(calls_only), (None, want));
    // Arguments that hold the markers' text are still one call.
    let tricky = r#"[TOOL_CALLS]say[ARGS]{"s": "[TOOL_CALLS]x[ARGS]{}"}"#;
    let said = vec![("say".into(), r#"{"s": "[TOOL_CALLS]x[ARGS]{}"}"#.into())];
    assert_eq!(f.parse(tricky), (None, said));
    for text in [
        "Oslo is cold.",
        "[TOOL_CALLS]get",
        "[TOOL_CALLS]get[ARGS]{\"city\": ",
        "[TOOL_CALLS]get[ARGS][1]",
        "[TOOL_CALLS][ARGS]{}",
        "[TOOL_CALLS]get[ARGS]{} and more",
    ] {
        assert_eq!(f.parse(text), (Some(text.into()), vec![]), "{text}");
    }
}

/// Whether `grammar` lets `parts` (token ids, or text in `tok`'s tokens) through, then EOS.
fn accepts_parts(tok: &kiln_model::Tokenizer, grammar: &Grammar, parts: &[Part]) -> bool {
    let eos = kiln_model::testing::tiny_tokenizer::eos_id();
    let factory = kiln_engine::ConstraintFactory::new(tok, &[eos], tok.vocab_size()).unwrap();
    let mut c = factory.compile(grammar).unwrap();
    for part in parts {
        let ids = match part {
            Part::Id(id) => vec![*id],
            Part::Text(t) => tok.encode(t, false).unwrap(),
        };
        for t in ids {
            if !c.allows(t).unwrap() {
                return false;
            }
            c.consume(t).unwrap();
        }
    }
    c.allows(eos).unwrap()
}

enum Part<'a> {
    Id(u32),
    Text(&'a str),
}

#[test]
fn later_mistral_grammars_hold_each_call_to_its_tool() {
    let offered = [
        (
            "get",
            json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}),
        ),
        ("put", json!({"type": "object"})),
    ];
    let oslo = r#"{"city": "Oslo"}"#;
    // The markers as text (a tokenizer without them).
    let f = ToolFormat::MistralArgs {
        open: None,
        args: None,
    };
    let auto = f.calls_grammar(&offered, true, true);
    let call = format!("[TOOL_CALLS]get[ARGS]{oslo}");
    assert!(accepts(&auto, "It is cold in Oslo."));
    assert!(accepts(&auto, ""));
    assert!(accepts(&auto, &call));
    assert!(accepts(
        &auto,
        &format!("Let me look.{call}[TOOL_CALLS]put[ARGS]{{}}")
    ));
    assert!(!accepts(&auto, "[TOOL_CALLS]drop[ARGS]{}"));
    assert!(!accepts(&auto, "[TOOL_CALLS]get[ARGS]{}"));
    assert!(!accepts(&auto, &format!("{call} and more text")));
    let single = f.calls_grammar(&offered, true, false);
    assert!(accepts(&single, &call));
    assert!(!accepts(&single, &format!("{call}{call}")));
    let required = f.calls_grammar(&offered, false, true);
    assert!(accepts(&required, &format!("{call}{call}")));
    assert!(!accepts(&required, &format!("Hm.{call}")));

    // The markers special tokens: only those tokens mark a call, never their text.
    let tok = tiny_tokenizer_with(&[MISTRAL_OPEN, MISTRAL_ARGS]);
    let open = tok.token_to_id(MISTRAL_OPEN).unwrap();
    let args = tok.token_to_id(MISTRAL_ARGS).unwrap();
    let f = ToolFormat::MistralArgs {
        open: Some(open),
        args: Some(args),
    };
    use Part::{Id, Text};
    let auto = f.calls_grammar(&offered, true, true);
    let get = [Id(open), Text("get"), Id(args), Text(oslo)];
    assert!(accepts_parts(&tok, &auto, &get));
    assert!(accepts_parts(&tok, &auto, &[Text("It is cold.")]));
    assert!(accepts_parts(&tok, &auto, &[]));
    let text_then_two = [
        Text("Let me look."),
        Id(open),
        Text("get"),
        Id(args),
        Text(oslo),
        Id(open),
        Text("put"),
        Id(args),
        Text("{}"),
    ];
    assert!(accepts_parts(&tok, &auto, &text_then_two));
    // The markers' text in ordinary tokens does not open a call.
    let spelled = [Text("["), Text(&call[1..])];
    assert!(!accepts_parts(&tok, &auto, &spelled));
    assert!(!accepts_parts(
        &tok,
        &auto,
        &[Id(open), Text("get"), Id(args), Text("{}")]
    ));
    let spelled_args = [Id(open), Text("get"), Text("["), Text("ARGS]"), Text(oslo)];
    assert!(!accepts_parts(&tok, &auto, &spelled_args));
    let required = f.calls_grammar(&offered, false, false);
    assert!(accepts_parts(&tok, &required, &get));
    assert!(!accepts_parts(&tok, &required, &text_then_two));
    assert!(!accepts_parts(&tok, &required, &[Text("It is")]));
}

mod glm;
mod harmony;
mod pythonic;
