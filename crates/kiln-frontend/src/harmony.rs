//! gpt-oss's harmony format: a reply is messages, each a header (`<|start|>` and the role,
//! then `<|channel|>` and the channel, perhaps a recipient and `<|constrain|>`) and a body
//! after `<|message|>`, ended by `<|end|>` (another message follows) or by the end of the
//! reply (`<|return|>` or `<|call|>`, which the detokenizer skips). The prompt ends with
//! `<|start|>assistant`, so a reply starts at its first message's `<|channel|>`. The
//! `analysis` channel's bodies are its reasoning; the other channels' (`final`, and
//! `commentary`, which tool calls are written in: not read as calls here) its answer.

const START: &str = "<|start|>";
const CHANNEL: &str = "<|channel|>";
const MESSAGE: &str = "<|message|>";
const END: &str = "<|end|>";

/// The channel whose bodies are reasoning.
const REASONING: &str = "analysis";

/// The whole of a reply as far as it is known: its reasoning and its answer, each only
/// growing as `text` does (a body's tail that may be the start of `<|end|>` is held back
/// until the text tells, or `last` says the reply ends). A reply that does not start as a
/// message is all answer.
pub(crate) fn split(text: &str, last: bool) -> (String, String) {
    let (mut reasoning, mut content) = (String::new(), String::new());
    let opens = |m: &str| text.starts_with(m) || (!last && m.starts_with(text));
    if !opens(CHANNEL) && !opens(START) {
        content.push_str(text);
        return (reasoning, content);
    }
    let mut rest = text;
    while let Some(i) = rest.find(MESSAGE) {
        let channel = channel(&rest[..i]);
        let body = &rest[i + MESSAGE.len()..];
        let (body, next) = match body.find(END) {
            Some(j) => (&body[..j], Some(&body[j + END.len()..])),
            None if last => (body, None),
            None => (&body[..body.len() - crate::partial_suffix(body, END)], None),
        };
        match channel == REASONING {
            true => reasoning.push_str(body),
            false => content.push_str(body),
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

/// Whether a chat template writes the harmony format.
pub(crate) fn template_writes(source: &str) -> bool {
    source.contains(CHANNEL) && source.contains(MESSAGE)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // A tool call's commentary: its arguments are answer text (not read as a call).
        let call = "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant\
                    <|channel|>commentary to=functions.get_weather <|constrain|>json\
                    <|message|>{\"city\":\"Oslo\"}";
        assert_eq!(
            replay(call),
            ("Need weather.".into(), "{\"city\":\"Oslo\"}".into())
        );
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
