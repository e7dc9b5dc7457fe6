//! What the app keeps on disk, in `kiln-desktop/` under the platform's data directory (or
//! `--data-dir`): one JSON file per chat in `chats/`, and the app's settings in
//! `settings.json`. Every change is written at once; a file that cannot be read is reported,
//! not overwritten.

use std::path::{Path, PathBuf};

use kiln_engine::KvDtype;
use kiln_frontend::GenerationParams;

use crate::reply_format::{FormatKind, ReplyFormat};
use serde::{Deserialize, Serialize};

/// How a reply went: shown under it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ReplyStats {
    pub prompt_tokens: usize,
    /// Prompt tokens served from the prefix cache.
    pub cached_tokens: usize,
    pub generated: usize,
    /// Send to first token.
    pub ttft_s: f64,
    /// First token to last.
    pub decode_s: f64,
    /// `stop`, `length` or `stopped` (the stop button).
    pub end: String,
    /// Earlier messages left out of the prompt to fit the model's context.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub left_out: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl ReplyStats {
    pub fn tokens_per_s(&self) -> f64 {
        self.generated.saturating_sub(1) as f64 / self.decode_s.max(1e-9)
    }

    pub fn line(&self) -> String {
        let end = match self.end.as_str() {
            "length" => " · cut at the token limit",
            "stopped" => " · stopped",
            _ => "",
        };
        let left_out = match self.left_out {
            0 => String::new(),
            1 => " · 1 earlier message left out to fit the context".into(),
            n => format!(" · {n} earlier messages left out to fit the context"),
        };
        format!(
            "{:.1} tokens/s · {:.2} s to first token · {} tokens · {} prompt tokens, {} from cache{left_out}{end}",
            self.tokens_per_s(),
            self.ttft_s,
            self.generated,
            self.prompt_tokens,
            self.cached_tokens
        )
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Message {
    /// `user` or `assistant`.
    pub role: String,
    /// The message; of a reply from a model that reasons, its answer.
    pub text: String,
    /// A reply's reasoning (a `<think>` block), apart from its answer.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reasoning: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<ReplyStats>,
    /// A regenerated reply's other versions, in order; the one shown (the fields above) is
    /// number `version` of them all, counting from 0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<Version>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub version: usize,
}

/// One version of a reply that was regenerated.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Version {
    pub text: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reasoning: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<ReplyStats>,
}

impl Message {
    /// How many versions the reply has (1 unless regenerated).
    pub fn version_count(&self) -> usize {
        self.versions.len() + 1
    }

    /// Every version, the one shown in its place.
    pub fn all_versions(&self) -> Vec<Version> {
        let mut all = self.versions.clone();
        let shown = Version {
            text: self.text.clone(),
            reasoning: self.reasoning.clone(),
            stats: self.stats.clone(),
        };
        all.insert(self.version.min(all.len()), shown);
        all
    }

    /// Shows version `index` (counting from 0) in place of the one shown.
    pub fn show_version(&mut self, index: usize) {
        let mut all = self.all_versions();
        if index >= all.len() {
            return;
        }
        let v = all.remove(index);
        (self.text, self.reasoning, self.stats) = (v.text, v.reasoning, v.stats);
        self.versions = all;
        self.version = index;
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Chat {
    pub id: String,
    pub title: String,
    #[serde(default)]
    pub system: String,
    /// The chat's sampling knobs; unset ones take the model's own defaults (its generation
    /// config, then kiln's).
    #[serde(default)]
    pub sampling: GenerationParams,
    /// Free text, or JSON (held to by a grammar).
    #[serde(default, skip_serializing_if = "is_text")]
    pub format: ReplyFormat,
    /// The LoRA adapter the chat's replies run through, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lora: Option<String>,
    /// At most this many tokens of a reply's reasoning (the request field
    /// `thinking_token_budget`); unset: no bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<usize>,
    /// Messages the last reply's prompt left out to fit the context (kept while the rest
    /// fits, so the replies after a cut extend one prompt the prefix cache holds).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub context_cut: usize,
    #[serde(default)]
    pub messages: Vec<Message>,
}

fn is_text(f: &ReplyFormat) -> bool {
    f.kind == FormatKind::Text
}

impl Default for Chat {
    fn default() -> Chat {
        Chat::new()
    }
}

impl Chat {
    pub fn new() -> Chat {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default();
        Chat {
            id: format!("{stamp}-{:04x}", rand::random::<u16>()),
            title: "New chat".into(),
            system: String::new(),
            sampling: GenerationParams::default(),
            format: ReplyFormat::default(),
            lora: None,
            thinking_budget: None,
            context_cut: 0,
            messages: Vec::new(),
        }
    }

    /// The chat as an OpenAI chat-completions request body for `model`: the system prompt,
    /// the messages, the chat's sampling settings, reply format and thinking budget, to
    /// replay against `kiln serve` or any OpenAI-compatible server.
    pub fn to_request(&self, model: &str) -> serde_json::Value {
        let system = (!self.system.is_empty()).then_some(("system", self.system.as_str()));
        let messages: Vec<serde_json::Value> = (system.into_iter())
            .chain(
                self.messages
                    .iter()
                    .map(|m| (m.role.as_str(), m.text.as_str())),
            )
            .map(|(role, content)| serde_json::json!({"role": role, "content": content}))
            .collect();
        let mut body = serde_json::json!({"model": model, "messages": messages});
        if let Ok(serde_json::Value::Object(knobs)) = serde_json::to_value(&self.sampling) {
            body.as_object_mut().unwrap().extend(knobs);
        }
        if let Ok(Some(rf)) = self.format.response_format() {
            body["response_format"] = rf;
        }
        if let Some(n) = self.thinking_budget {
            body["thinking_token_budget"] = n.into();
        }
        body
    }

    /// The chat as Markdown, for export.
    pub fn to_markdown(&self) -> String {
        let mut out = format!("# {}\n\n", self.title);
        if !self.system.is_empty() {
            out += &format!("**system**: {}\n\n", self.system);
        }
        for m in &self.messages {
            out += &format!("**{}**:\n\n{}\n\n", m.role, m.text);
        }
        out
    }
}

/// The app's settings.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(default)]
pub struct Settings {
    pub last_model: Option<PathBuf>,
    /// Most recent first.
    pub recent_models: Vec<PathBuf>,
    pub dark: bool,
    pub font_size: f32,
    /// GPU memory for the KV cache, in MiB.
    pub kv_memory_mib: u64,
    /// The KV cache's element type (by its name in files: f16, q8_0, fp8 or f32).
    #[serde(with = "kv_dtype_name")]
    pub kv_dtype: KvDtype,
    /// Guesses of each decode's next tokens from the chat so far (speculative decoding by
    /// prompt lookup); 0: off.
    pub speculative_tokens: usize,
    /// Disk space for KV blocks kept between sessions (in the data directory's `kv-cache`),
    /// in MiB; 0: off.
    pub kv_disk_mib: u64,
    /// LoRA adapters the engine has room for (each of rank up to `lora_rank`), loaded from
    /// the model panel; 0: none (and no cost).
    pub lora_slots: usize,
    pub lora_rank: usize,
    /// Seconds without replies after which the engine gives its GPU memory back (it sleeps
    /// until the next message); 0: never.
    pub sleep_after_idle_s: u64,
    /// Where the local API listens when switched on.
    pub api_port: u16,
    /// Web pages of any origin may call the local API from a browser (CORS).
    pub api_cors: bool,
    /// Run the engine on the window's wgpu device (read at start).
    pub share_device: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            last_model: None,
            recent_models: Vec::new(),
            dark: true,
            font_size: 14.0,
            kv_memory_mib: 256,
            kv_dtype: KvDtype::F16,
            speculative_tokens: 0,
            kv_disk_mib: 2048,
            sleep_after_idle_s: 0,
            lora_slots: 0,
            lora_rank: 16,
            api_port: 8000,
            api_cors: false,
            share_device: false,
        }
    }
}

impl Settings {
    /// Records `path` as the last model opened.
    pub fn opened(&mut self, path: &Path) {
        self.recent_models.retain(|p| p != path);
        self.recent_models.insert(0, path.to_path_buf());
        self.recent_models.truncate(8);
        self.last_model = Some(path.to_path_buf());
    }
}

pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// The store under `dir`, or under the platform's data directory.
    pub fn open(dir: Option<PathBuf>) -> anyhow::Result<Store> {
        let dir = match dir {
            Some(d) => d,
            None => dirs::data_dir()
                .ok_or_else(|| {
                    anyhow::anyhow!("this platform has no data directory; pass --data-dir")
                })?
                .join("kiln-desktop"),
        };
        std::fs::create_dir_all(dir.join("chats"))
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
        Ok(Store { dir })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn chat_path(&self, id: &str) -> PathBuf {
        self.dir.join("chats").join(format!("{id}.json"))
    }

    /// The saved chats, oldest first, and a line for each file that could not be read.
    pub fn load_chats(&self) -> (Vec<Chat>, Vec<String>) {
        let (mut chats, mut errors) = (Vec::new(), Vec::new());
        let Ok(entries) = std::fs::read_dir(self.dir.join("chats")) else {
            return (chats, errors);
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        paths.sort();
        for p in paths {
            let read = std::fs::read(&p)
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice::<Chat>(&b).map_err(|e| e.to_string()));
            match read {
                Ok(c) => chats.push(c),
                Err(e) => errors.push(format!("{}: {e}", p.display())),
            }
        }
        (chats, errors)
    }

    pub fn save_chat(&self, chat: &Chat) -> anyhow::Result<()> {
        write_json(&self.chat_path(&chat.id), chat)
    }

    pub fn delete_chat(&self, id: &str) -> anyhow::Result<()> {
        let p = self.chat_path(id);
        match std::fs::remove_file(&p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(anyhow::anyhow!("cannot delete {}: {e}", p.display()))
            }
            _ => Ok(()),
        }
    }

    /// The settings; defaults when there are none yet, an error when the file is unreadable.
    pub fn load_settings(&self) -> anyhow::Result<Settings> {
        let p = self.dir.join("settings.json");
        match std::fs::read(&p) {
            Ok(b) => serde_json::from_slice(&b)
                .map_err(|e| anyhow::anyhow!("{}: {e} (defaults used)", p.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Settings::default()),
            Err(e) => Err(anyhow::anyhow!("{}: {e} (defaults used)", p.display())),
        }
    }

    pub fn save_settings(&self, s: &Settings) -> anyhow::Result<()> {
        write_json(&self.dir.join("settings.json"), s)
    }
}

/// Writes through a temporary file, so a crash never leaves half a file.
fn write_json<T: Serialize>(path: &Path, value: &T) -> anyhow::Result<()> {
    let tmp = path.with_extension("json.tmp");
    let bytes = serde_json::to_vec_pretty(value)?;
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
}

/// A KV cache type in the settings file by its name (`q8_0`), as `--kv-dtype` takes it.
mod kv_dtype_name {
    use kiln_engine::KvDtype;
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(d: &KvDtype, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(d.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<KvDtype, D::Error> {
        String::deserialize(d)?.parse().map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chats_and_settings_round_trip_and_bad_files_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(Some(dir.path().to_path_buf())).unwrap();
        let mut chat = Chat::new();
        chat.title = "Rust".into();
        chat.sampling.temperature = Some(0.5);
        chat.messages.push(Message {
            role: "user".into(),
            text: "hi".into(),
            ..Message::default()
        });
        store.save_chat(&chat).unwrap();
        std::fs::write(dir.path().join("chats/broken.json"), "{").unwrap();
        let (chats, errors) = store.load_chats();
        assert_eq!(chats, vec![chat.clone()]);
        assert_eq!(errors.len(), 1);
        assert!(errors[0].contains("broken.json"), "{errors:?}");
        store.delete_chat(&chat.id).unwrap();
        assert!(store.load_chats().0.is_empty());

        let mut s = store.load_settings().unwrap();
        assert_eq!(s, Settings::default());
        s.opened(Path::new("/m/a.gguf"));
        s.opened(Path::new("/m/b.gguf"));
        s.opened(Path::new("/m/a.gguf"));
        store.save_settings(&s).unwrap();
        let back = store.load_settings().unwrap();
        assert_eq!(
            back.recent_models,
            vec![PathBuf::from("/m/a.gguf"), "/m/b.gguf".into()]
        );
        assert_eq!(back.last_model, Some("/m/a.gguf".into()));

        // The KV cache type by the name `--kv-dtype` takes; an unknown one is reported.
        s.kv_dtype = KvDtype::Q8;
        store.save_settings(&s).unwrap();
        let text = std::fs::read_to_string(dir.path().join("settings.json")).unwrap();
        assert!(text.contains(r#""kv_dtype": "q8_0""#), "{text}");
        assert_eq!(store.load_settings().unwrap().kv_dtype, KvDtype::Q8);
        std::fs::write(
            dir.path().join("settings.json"),
            text.replace(r#""q8_0""#, r#""q3""#),
        )
        .unwrap();
        let e = format!("{:#}", store.load_settings().unwrap_err());
        assert!(e.contains("unknown KV cache type `q3`"), "{e}");
    }
}
