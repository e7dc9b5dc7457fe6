//! Stop strings over streamed text: text that could be the start of a stop string is held
//! back until it can't; on a match the text is cut before the stop string, which is not
//! emitted (unless `include_match`).

#[derive(Clone, Debug, Default)]
pub struct StopMatcher {
    stops: Vec<String>,
    pending: String,
    /// Leading bytes of `pending` that no match may end within: text pushed unsearched
    /// ([`StopMatcher::push_unsearched`]), held as the start of a possible match.
    settled: usize,
    /// Whether the text let out on a match ends with the stop string.
    include: bool,
}

/// What [`StopMatcher::push`] lets out.
#[derive(Debug, PartialEq, Eq)]
pub struct StopOutput {
    pub text: String,
    /// A stop string matched; nothing after it may be emitted.
    pub stopped: bool,
    /// The stop string that matched (the earliest in the text).
    pub matched: Option<String>,
}

impl StopMatcher {
    pub fn new(stops: Vec<String>) -> Self {
        Self {
            stops: stops.into_iter().filter(|s| !s.is_empty()).collect(),
            pending: String::new(),
            settled: 0,
            include: false,
        }
    }

    /// Lets the matched stop string out with the text before it.
    pub fn include_match(&mut self, include: bool) {
        self.include = include;
    }

    pub fn push(&mut self, text: &str) -> StopOutput {
        if self.stops.is_empty() {
            return StopOutput {
                text: text.to_string(),
                stopped: false,
                matched: None,
            };
        }
        self.pending.push_str(text);
        let settled = self.settled;
        if let Some((pos, stop)) = (self.stops.iter())
            .filter_map(|s| {
                // The first match that ends past the settled text starts at `from` or later.
                let mut from = settled.saturating_sub(s.len() - 1);
                while !self.pending.is_char_boundary(from) {
                    from += 1;
                }
                Some((from + self.pending[from..].find(s.as_str())?, s))
            })
            .min_by_key(|(pos, _)| *pos)
        {
            let end = pos + if self.include { stop.len() } else { 0 };
            let out = self.pending[..end].to_string();
            let matched = Some(stop.clone());
            self.pending.clear();
            self.settled = 0;
            return StopOutput {
                text: out,
                stopped: true,
                matched,
            };
        }
        StopOutput {
            text: self.release(),
            stopped: false,
            matched: None,
        }
    }

    /// Lets `text` through without looking for stop strings in it (vLLM's `min_tokens`),
    /// holding back its end where a stop string may start there and end in later text.
    pub fn push_unsearched(&mut self, text: &str) -> String {
        self.pending.push_str(text);
        self.settled = self.pending.len();
        self.release()
    }

    /// The pending text but the longest end that may start a stop string.
    fn release(&mut self) -> String {
        let cut = self.pending.len() - self.longest_partial();
        self.settled = self.settled.saturating_sub(cut);
        self.pending.drain(..cut).collect()
    }

    /// The held-back text, at the end of generation (it did not become a stop string).
    pub fn flush(&mut self) -> String {
        self.settled = 0;
        std::mem::take(&mut self.pending)
    }

    /// Length of the longest suffix of `pending` that is a proper prefix of a stop string.
    fn longest_partial(&self) -> usize {
        (self.stops.iter())
            .map(|s| partial_suffix(&self.pending, s))
            .max()
            .unwrap_or(0)
    }
}

/// Length in bytes of the longest suffix of `text` (on a character boundary) that is a proper
/// prefix of `marker`: text to hold back while `marker` may still be being written.
pub fn partial_suffix(text: &str, marker: &str) -> usize {
    (1..marker.len().min(text.len() + 1))
        .rev()
        .find(|&k| {
            let start = text.len() - k;
            text.is_char_boundary(start) && marker.as_bytes().starts_with(&text.as_bytes()[start..])
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stops: &[&str], pieces: &[&str]) -> (String, bool) {
        let mut m = StopMatcher::new(stops.iter().map(|s| s.to_string()).collect());
        let mut out = String::new();
        for p in pieces {
            let o = m.push(p);
            out += &o.text;
            if o.stopped {
                return (out, true);
            }
        }
        out += &m.flush();
        (out, false)
    }

    #[test]
    fn cuts_before_stop_across_pieces() {
        assert_eq!(
            run(&["END"], &["hello E", "N", "D more"]),
            ("hello ".into(), true)
        );
        assert_eq!(run(&["\n\n", "xyz"], &["a\n", "b"]), ("a\nb".into(), false));
        assert_eq!(
            run(&["stop"], &["no match here"]),
            ("no match here".into(), false)
        );
        assert_eq!(run(&["ab", "b"], &["xab"]), ("x".into(), true));
        assert_eq!(run(&["é!"], &["caf", "é", "?"]), ("café?".into(), false));
    }

    #[test]
    fn names_the_earliest_stop_that_matched() {
        let mut m = StopMatcher::new(vec!["b".into(), "ab".into(), "zz".into()]);
        let o = m.push("xa");
        assert_eq!((o.text.as_str(), o.matched), ("x", None));
        let o = m.push("bc");
        assert_eq!(
            (o.text.as_str(), o.stopped, o.matched.as_deref()),
            ("", true, Some("ab"))
        );
    }

    #[test]
    fn unsearched_text_can_only_start_a_match() {
        let mut m = StopMatcher::new(vec!["xyz".into(), "y".into()]);
        // "y" inside the unsearched text is no stop; "xy" is held as the start of "xyz".
        assert_eq!(m.push_unsearched("ayb xy"), "ayb ");
        let o = m.push("z!");
        assert_eq!((o.text.as_str(), o.matched.as_deref()), ("", Some("xyz")));
        // Not completed: the held text comes out, and a later "y" stops.
        let mut m = StopMatcher::new(vec!["xyz".into(), "y".into()]);
        assert_eq!(m.push_unsearched("xy"), "");
        let o = m.push("q");
        assert_eq!((o.text.as_str(), o.stopped), ("xyq", false));
        let o = m.push("ay");
        assert_eq!((o.text.as_str(), o.matched.as_deref()), ("a", Some("y")));
        // Overlapping: "aa" ending in the searched text, over a settled "aa".
        let mut m = StopMatcher::new(vec!["aa".into()]);
        assert_eq!(m.push_unsearched("baa"), "ba");
        let o = m.push("a");
        assert_eq!((o.text.as_str(), o.stopped), ("", true));
    }

    #[test]
    fn holds_back_only_possible_prefixes() {
        let mut m = StopMatcher::new(vec!["END".into()]);
        assert_eq!(m.push("abcE").text, "abc");
        assert_eq!(m.push("X").text, "EX");
        assert_eq!(m.flush(), "");
    }
}
