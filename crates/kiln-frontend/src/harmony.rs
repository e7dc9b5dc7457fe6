//! gpt-oss's harmony format: a reply is messages, each a header (`<|start|>` and the role,
//! then `<|channel|>` and the channel, perhaps a recipient and `<|constrain|>`) and a body
//! after `<|message|>`, ended by `<|end|>` (another message follows) or by the end of the
//! reply (`<|return|>` or `<|call|>`, which the detokenizer skips). The prompt ends with
//! `<|start|>assistant`, so a reply starts at its first message's `<|channel|>`. The
//! `analysis` channel's bodies are its reasoning; the other channels' (`final`, and
//! `commentary`'s preambles) its answer. A message to a function (a recipient
//! `to=functions.NAME` in its header, before or after the channel) is a tool call: it goes
//! into the answer as [`CALL`], the function's name, `<|message|>` and its arguments, one
//! form whichever way the model wrote the header, for the harmony tool format to read
//! (`tools::format::harmony`).

use kiln_core::{Grammar, ReasoningTags, lark_string, regex_escape};

const START: &str = "<|start|>";
pub(crate) const CHANNEL: &str = "<|channel|>";
pub(crate) const MESSAGE: &str = "<|message|>";
pub(crate) const END: &str = ReasoningTags::Harmony.close();
const CONSTRAIN: &str = "<|constrain|>";
/// What a recipient is written after in a header.
const TO: &str = " to=";
/// The recipient prefix of the functions a request offers.
const FUNCTIONS: &str = "functions.";
/// How a call stands in the answer: then its function's name, [`MESSAGE`], its arguments.
pub(crate) const CALL: &str = "<|channel|>commentary to=functions.";

/// The channel whose bodies are reasoning.
const REASONING: &str = "analysis";

/// The whole of a reply as far as it is known: its reasoning and its answer, each only
/// growing as `text` does (a body's tail that may be the start of `<|end|>` is held back
/// until the text tells, or `last` says the reply ends). A reply that does not start as a
/// message is all answer.
pub(crate) fn split(text: &str, last: bool) -> (String, String) {
    let (mut reasoning, mut content) = (String::new(), String::new());
    let opens = |m: &str| text.starts_with(m) || (!last && m.starts_with(text));
    if !opens(CHANNEL) && !opens(START) && !opens(TO) {
        content.push_str(text);
        return (reasoning, content);
    }
    let mut rest = text;
    while let Some(i) = rest.find(MESSAGE) {
        let header = &rest[..i];
        let body = &rest[i + MESSAGE.len()..];
        let (body, next) = match body.find(END) {
            Some(j) => (&body[..j], Some(&body[j + END.len()..])),
            None if last => (body, None),
            None => (&body[..body.len() - crate::partial_suffix(body, END)], None),
        };
        match (function(header), channel(header) == REASONING) {
            (Some(name), _) => {
                content.push_str(CALL);
                content.push_str(name);
                content.push_str(MESSAGE);
                content.push_str(body);
            }
            (None, true) => reasoning.push_str(body),
            (None, false) => content.push_str(body),
        }
        match next {
            Some(n) => rest = n,
            None => break,
        }
    }
    (reasoning, content)
}

/// Whether the reply's text so far is in its reasoning: in an `analysis` message's header or
/// body, or before its first header says which channel.
pub(crate) fn in_reasoning(text: &str) -> bool {
    let header = match text.rfind(START) {
        Some(i) => &text[i..],
        None => text,
    };
    match header.find(CHANNEL) {
        Some(i) => {
            let name = &header[i + CHANNEL.len()..];
            name.starts_with(REASONING) || REASONING.starts_with(name)
        }
        None => true,
    }
}

/// A header's channel: the word after `<|channel|>` (before a recipient or a constraint).
fn channel(header: &str) -> &str {
    let Some(i) = header.find(CHANNEL) else {
        return "";
    };
    let rest = &header[i + CHANNEL.len()..];
    let end = rest.find([' ', '<']).unwrap_or(rest.len());
    &rest[..end]
}

/// The function a header addresses (its recipient after `functions.`), if it does.
fn function(header: &str) -> Option<&str> {
    let at = header.find(TO)? + TO.len();
    let name = header[at..].strip_prefix(FUNCTIONS)?;
    Some(&name[..name.find([' ', '<']).unwrap_or(name.len())])
}

/// What a constrained reply must match: `grammar` in a `final` message, after any
/// reasoning; a grammar already framed in messages (a tools grammar, see [`framed`]) as it is.
pub(crate) fn final_answer(grammar: Grammar) -> Grammar {
    match grammar {
        Grammar::Within { .. } => grammar,
        g => framed(g, false, Some(&format!("{CHANNEL}final{MESSAGE}"))),
    }
}

/// Any answer, after any reasoning: what a reasoning budget holds when no grammar is asked
/// for. The message after an `analysis` one is not another (a spent budget ends the
/// reasoning, not only its message); the reply is messages from its start.
pub(crate) fn any_answer() -> Grammar {
    let next = format!(
        "start: /({}[^<]*)?{}(final|commentary)[^<]*({}[^<]*)?{}(?s:.*)/\n",
        regex_escape(TO),
        regex_escape(CHANNEL),
        regex_escape(CONSTRAIN),
        regex_escape(MESSAGE)
    );
    framed(Grammar::Lark(next), false, None)
}

/// `answer` after the messages a reply may write first, each ended by `<|end|>` and the next
/// one's start: its reasoning (an `analysis` message), then, where `preamble`, a
/// `commentary` message to no one; and after `header` where the answer's message does not
/// write its own.
pub(crate) fn framed(answer: Grammar, preamble: bool, header: Option<&str>) -> Grammar {
    let start = lark_string("<|start|>assistant");
    let message = |channel: &str| {
        let head = format!("{CHANNEL}{channel}{MESSAGE}");
        format!("/{}(?s:.*){}/", regex_escape(&head), regex_escape(END))
    };
    let (before, rule) = match preamble {
        true => (
            format!("(preamble {start})? "),
            format!("preamble[lazy]: {}\n", message("commentary")),
        ),
        false => (String::new(), String::new()),
    };
    let header = header.map_or(String::new(), |h| lark_string(h) + " ");
    let frame = format!(
        "start: (thought {start})? {before}{header}@answer\nthought[lazy]: {}\n{rule}",
        message(REASONING)
    );
    Grammar::Within {
        frame,
        grammar: Box::new(answer),
    }
}

/// Whether a chat template writes the harmony format.
pub(crate) fn template_writes(source: &str) -> bool {
    source.contains(CHANNEL) && source.contains(MESSAGE)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a reasoning budget counts from is the header of a reasoning message.
    #[test]
    fn the_budgets_opening_tag_is_a_reasoning_header() {
        let header = format!("{CHANNEL}{REASONING}{MESSAGE}");
        assert_eq!(ReasoningTags::Harmony.open(), header);
    }

    /// `text` pushed a character at a time, then the end: what each call lets out, joined;
    /// and each call's output only grows.
    fn replay(text: &str) -> (String, String) {
        let mut shown = (String::new(), String::new());
        for end in 1..=text.len() {
            if !text.is_char_boundary(end) {
                continue;
            }
            let (r, c) = split(&text[..end], false);
            assert!(r.starts_with(&shown.0) && c.starts_with(&shown.1), "{end}");
            shown = (r, c);
        }
        let (r, c) = split(text, true);
        assert!(r.starts_with(&shown.0) && c.starts_with(&shown.1));
        (r, c)
    }

    #[test]
    fn analysis_is_reasoning_and_the_final_channel_the_answer() {
        let text = "<|channel|>analysis<|message|>User asks 2+2 <|x. Easy.<|end|>\
                    <|start|>assistant<|channel|>final<|message|>It is 4.";
        assert_eq!(
            replay(text),
            ("User asks 2+2 <|x. Easy.".into(), "It is 4.".into())
        );
        // A commentary preamble is answer text.
        let preamble = "<|channel|>commentary<|message|>Checking.<|end|>\
                        <|start|>assistant<|channel|>final<|message|>Done.";
        assert_eq!(replay(preamble), ("".into(), "Checking.Done.".into()));
        // Cut inside the reasoning: all of it reasoning, the tail that may be `<|end|>` let
        // out at the end.
        assert_eq!(
            replay("<|channel|>analysis<|message|>Hmm <|en"),
            ("Hmm <|en".into(), "".into())
        );
        assert_eq!(
            split("<|channel|>analysis<|message|>Hmm <|en", false).0,
            "Hmm "
        );
        // A reply that is no message: all answer, let out as it comes.
        assert_eq!(replay("Plain text."), ("".into(), "Plain text.".into()));
        assert_eq!(split("<|chan", false), (String::new(), String::new()));
        assert_eq!(split("<|chan", true), (String::new(), "<|chan".into()));
    }

    /// A message to a function, its recipient after the channel or before it (in the role's
    /// place, where the reply may start): the same call in the answer.
    #[test]
    fn calls_stand_in_the_answer_in_one_form() {
        let want = (
            "Need weather.".to_string(),
            format!("{CALL}get_weather<|message|>{{\"city\":\"Oslo\"}}"),
        );
        let after = "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant\
                     <|channel|>commentary to=functions.get_weather <|constrain|>json\
                     <|message|>{\"city\":\"Oslo\"}";
        assert_eq!(replay(after), want);
        let before = "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant \
                      to=functions.get_weather<|channel|>commentary json<|message|>{\"city\":\"Oslo\"}";
        assert_eq!(replay(before), want);
        let first = " to=functions.get_weather<|channel|>commentary json<|message|>{}";
        assert_eq!(replay(first).1, format!("{CALL}get_weather<|message|>{{}}"));
        // Another recipient (a built-in tool kiln does not offer) is not a call.
        let browse = "<|channel|>analysis to=browser.search<|message|>q";
        assert_eq!(replay(browse), ("q".into(), "".into()));
        assert_eq!(function("<|channel|>commentary to=functions.f"), Some("f"));
        assert_eq!(function("<|channel|>commentary"), None);
    }

    #[test]
    fn the_reply_is_in_its_reasoning_until_a_header_names_another_channel() {
        assert!(in_reasoning(""));
        assert!(in_reasoning("<|channel|>ana"));
        assert!(in_reasoning("<|channel|>analysis<|message|>x"));
        assert!(!in_reasoning("<|channel|>final<|message|>x"));
        assert!(in_reasoning(
            "<|channel|>analysis<|message|>x<|end|><|start|>assistant"
        ));
        assert!(!in_reasoning(
            "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>f"
        ));
    }

    #[test]
    fn channel_names_stop_at_a_recipient_or_a_constraint() {
        assert_eq!(channel("assistant<|channel|>final"), "final");
        assert_eq!(
            channel("<|channel|>commentary to=functions.f <|constrain|>json"),
            "commentary"
        );
        assert_eq!(channel("assistant"), "");
    }
}
