//! Text files attached to a message (dropped on the window or picked with "Attach file..."):
//! each goes into the message as a fenced block under its name, so the chat keeps exactly
//! what the model read. Model files and folders dropped on the window open instead.

use std::path::Path;

/// Largest file attached (the prompt's own limit, the model's context, applies after).
pub const MAX_BYTES: u64 = 1 << 20;

/// A file's name and its text.
#[derive(Clone, Debug, PartialEq)]
pub struct Attachment {
    pub name: String,
    pub text: String,
}

/// Whether a dropped path is a model to open rather than a file to attach: a folder (a
/// Hugging Face model), a GGUF file or safetensors weights.
pub fn is_model(path: &Path) -> bool {
    path.is_dir()
        || (path.extension()).is_some_and(|e| {
            e.eq_ignore_ascii_case("gguf") || e.eq_ignore_ascii_case("safetensors")
        })
}

/// Reads `path` as text to attach; the error names the file and why.
pub fn read(path: &Path) -> Result<Attachment, String> {
    let name = (path.file_name()).map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let fail = |why: String| format!("Cannot attach {}: {why}", path.display());
    let size = std::fs::metadata(path)
        .map_err(|e| fail(e.to_string()))?
        .len();
    if size > MAX_BYTES {
        return Err(fail(format!(
            "{size} bytes, more than the {MAX_BYTES} a message may attach"
        )));
    }
    let bytes = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
    let text = String::from_utf8(bytes).map_err(|_| {
        fail("not UTF-8 text (attach text files: code, Markdown, plain text)".into())
    })?;
    if text.contains('\0') {
        return Err(fail("it holds NUL bytes (not a text file)".into()));
    }
    Ok(Attachment { name, text })
}

/// The message `input` with each attachment after it: its name, then its text in a fence
/// longer than any run of backticks inside it.
pub fn compose(input: &str, attachments: &[Attachment]) -> String {
    let mut out = input.trim().to_string();
    for a in attachments {
        let longest = (a.text.split(|c| c != '`').map(str::len).max()).unwrap_or(0);
        let fence = "`".repeat(longest.max(2) + 1);
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        let body = a.text.strip_suffix('\n').unwrap_or(&a.text);
        out.push_str(&format!("{}:\n{fence}\n{body}\n{fence}", a.name));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_outgrow_the_backticks_inside() {
        let a = |name: &str, text: &str| Attachment {
            name: name.into(),
            text: text.into(),
        };
        let m = compose(
            " Look: ",
            &[a("a.md", "x ```rust\ny\n```\n"), a("b.txt", "plain")],
        );
        assert_eq!(
            m,
            "Look:\n\na.md:\n````\nx ```rust\ny\n```\n````\n\nb.txt:\n```\nplain\n```"
        );
        assert_eq!(compose("", &[a("c", "z")]), "c:\n```\nz\n```");
    }

    #[test]
    fn reads_text_and_refuses_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("notes.txt");
        std::fs::write(&text, "hello\n").unwrap();
        assert_eq!(
            read(&text).unwrap(),
            Attachment {
                name: "notes.txt".into(),
                text: "hello\n".into()
            }
        );
        let binary = dir.path().join("blob.bin");
        std::fs::write(&binary, [0xff, 0xfe, 0x00]).unwrap();
        assert!(read(&binary).unwrap_err().contains("blob.bin"));
        let big = dir.path().join("big.txt");
        std::fs::write(&big, vec![b'a'; MAX_BYTES as usize + 1]).unwrap();
        assert!(read(&big).unwrap_err().contains("more than"));
        assert!(is_model(dir.path()) && is_model(Path::new("m.GGUF")) && !is_model(&text));
    }
}
