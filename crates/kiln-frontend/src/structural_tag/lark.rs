//! A structural tag as a grammar in llguidance's Lark syntax.
//!
//! Free text is a terminal that cannot contain the strings that end it (the triggers, the
//! enclosing tag's end, `any_text`'s excludes). Text up to a trigger or an end is a lazy
//! lexeme, which ends where that string first does: so a trigger, once written, commits the
//! output to one of its tags, and a tag's content cannot run past its end.

use kiln_core::{compact_schema, lark_string, regex_escape};

use super::{Structure, Tag, trigger_of};

/// The Lark grammar of `s`.
pub(super) fn grammar(s: &Structure) -> String {
    let mut g = Lark::default();
    let start = g.expr(s, None);
    format!("start: {start}\n{}", g.rules.concat())
}

/// The rules written so far, each numbered.
#[derive(Default)]
struct Lark {
    rules: Vec<String>,
    n: usize,
}

impl Lark {
    /// A new rule `prefix_N` (`options` such as `[lazy]`), by name.
    fn rule(&mut self, prefix: &str, options: &str, body: &str) -> String {
        self.n += 1;
        let name = format!("{prefix}_{}", self.n);
        self.rules.push(format!("{name}{options}: {body}\n"));
        name
    }

    /// A terminal of any text without `avoid`'s strings.
    fn free_text(&mut self, avoid: &[&str]) -> String {
        let body = match avoid {
            [] => "/(?s:.*)/".to_string(),
            _ => {
                let alts: Vec<String> = avoid.iter().map(|a| regex_escape(a)).collect();
                format!("/(?s:.*)/ & ~/(?s:.*)({})(?s:.*)/", alts.join("|"))
            }
        };
        self.rule("TEXT", "", &body)
    }

    /// `free` text up to and with `end` (a lazy lexeme), or to the end of the output.
    fn text_to(&mut self, free: &str, end: Option<&str>) -> String {
        match end {
            Some(e) => self.rule("text", "[lazy]", &format!("{free} {}", lark_string(e))),
            None => free.to_string(),
        }
    }

    /// The expression of `s` followed by `end` (its tag's end; `None`: the output's end,
    /// or the next part of a sequence).
    fn expr(&mut self, s: &Structure, end: Option<&str>) -> String {
        let then = |e: String| match end {
            Some(t) => format!("{e} {}", lark_string(t)),
            None => e,
        };
        match s {
            Structure::Const(t) => then(lark_string(t)),
            Structure::JsonSchema(schema) => {
                let json = format!("%json {}", compact_schema(schema.clone()));
                then(self.rule("json", "", &json))
            }
            Structure::Regex(r) => then(self.rule("pattern", "", &format!("/{}/", slashes(r)))),
            Structure::AnyText { excludes } => {
                let mut avoid: Vec<&str> = excludes.iter().map(String::as_str).collect();
                avoid.extend(end);
                let free = self.free_text(&avoid);
                self.text_to(&free, end)
            }
            Structure::Sequence(parts) => {
                let last = parts.len() - 1;
                let exprs: Vec<String> = (parts.iter().enumerate())
                    .map(|(i, p)| self.expr(p, if i == last { end } else { None }))
                    .collect();
                exprs.join(" ")
            }
            Structure::Or(parts) => {
                let exprs: Vec<String> = parts.iter().map(|p| self.expr(p, end)).collect();
                format!("({})", exprs.join(" | "))
            }
            Structure::Tag(t) => {
                let tag = self.tag(t, lark_string(&t.begin));
                then(tag)
            }
            Structure::Triggered {
                triggers,
                tags,
                at_least_one,
                stop_after_first,
            } => {
                let mut avoid: Vec<&str> = triggers.iter().map(String::as_str).collect();
                avoid.extend(end);
                let free = self.free_text(&avoid);
                // Text up to each trigger, made once per trigger that opens a tag.
                let mut leads: Vec<(&str, String)> = Vec::new();
                let mut alts = Vec::new();
                for t in tags {
                    let trigger = trigger_of(&t.begin, triggers).expect("checked when read");
                    let lead = match leads.iter().find(|(k, _)| *k == trigger) {
                        Some((_, lead)) => lead.clone(),
                        None => {
                            let body = format!("{free} {}", lark_string(trigger));
                            let lead = self.rule("lead", "[lazy]", &body);
                            leads.push((trigger, lead.clone()));
                            lead
                        }
                    };
                    let rest = &t.begin[trigger.len()..];
                    let head = match rest {
                        "" => lead,
                        r => format!("{lead} {}", lark_string(r)),
                    };
                    alts.push(self.tag(t, head));
                }
                let tag = self.rule("tags", "", &alts.join(" | "));
                let tail = self.text_to(&free, end);
                match (at_least_one, stop_after_first) {
                    (false, false) => format!("{tag}* {tail}"),
                    (true, false) => format!("{tag}+ {tail}"),
                    (false, true) => format!("({} | {tail})", then(tag)),
                    (true, true) => then(tag),
                }
            }
            Structure::Separated {
                tags,
                separator,
                at_least_one,
                stop_after_first,
            } => {
                let alts: Vec<String> = (tags.iter())
                    .map(|t| self.tag(t, lark_string(&t.begin)))
                    .collect();
                let tag = self.rule("tags", "", &alts.join(" | "));
                let list = match stop_after_first {
                    true => tag,
                    false => format!("{tag} ({} {tag})*", lark_string(separator)),
                };
                match at_least_one {
                    true => then(list),
                    false => then(format!("({list})?")),
                }
            }
        }
    }

    /// A tag after `head` (its begin, or the text and trigger that open it): its content,
    /// then its end.
    fn tag(&mut self, t: &Tag, head: String) -> String {
        let content = self.expr(&t.content, Some(&t.end));
        self.rule("tag", "", &format!("{head} {content}"))
    }
}

/// A regular expression as the body of a Lark `/regex/`: its unescaped slashes escaped, its
/// line breaks written as escapes.
fn slashes(r: &str) -> String {
    let mut out = String::with_capacity(r.len());
    let mut escaped = false;
    for c in r.chars() {
        match c {
            '/' if !escaped => out.push_str("\\/"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
        escaped = c == '\\' && !escaped;
    }
    out
}
