//! A local engine for one user at a time, shared by `generate`, `chat` and `embed`: the model
//! and its front end, the engine on the machine's GPU, one reply streamed as it is generated,
//! and with `--kv-disk-dir` the KV cache's blocks kept in files between runs (`local_disk.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use kiln_engine::{
    Constraint, Engine, EngineConfig, FinishReason, Grammar, GrammarCompiler, KvSize, LoraRef,
    Request,
};
use kiln_frontend::{Frontend, GenSpec, ReasoningFormat};
use kiln_gpu::GpuContext;
use kiln_model::LoraAdapter;

use crate::local_disk::LocalDisk;

#[derive(clap::Args)]
pub struct LocalArgs {
    /// Model folder, GGUF file or Hugging Face repo id (default: the SmolLM2-135M-Instruct GGUF).
    #[arg(long)]
    model: Option<String>,
    /// Bytes of GPU memory for the KV cache.
    #[arg(long, default_value_t = 256 << 20)]
    kv_memory: u64,
    /// Longest sequence (default: the model's context length, or what the KV cache holds if
    /// less); more than either is an error.
    #[arg(long)]
    max_model_len: Option<usize>,
    /// A chat template instead of the model's: a file, or the Jinja template itself.
    #[arg(long)]
    chat_template: Option<String>,
    /// Keep the KV cache's blocks in files here: a later run whose prompt starts the same
    /// reads them back instead of computing them. They come back through a CPU tier as large
    /// as --kv-memory.
    #[arg(long)]
    kv_disk_dir: Option<std::path::PathBuf>,
    /// Most bytes the KV disk tier keeps, least recently used removed first.
    #[arg(long, default_value_t = 16 << 30, requires = "kv_disk_dir")]
    kv_disk_bytes: u64,
    /// Run through this LoRA adapter: a folder as PEFT saves one (adapter_config.json,
    /// adapter_model.safetensors), or llama.cpp's GGUF adapter file.
    #[arg(long)]
    lora: Option<std::path::PathBuf>,
    #[command(flatten)]
    device: crate::device_args::DeviceArgs,
}

pub struct Local {
    pub engine: Engine,
    pub frontend: Frontend,
    /// How the model sets its reasoning apart (a grammar holds after it).
    pub reasoning: ReasoningFormat,
    /// The grammar compiler, built on first use.
    constraints: GrammarCompiler,
    next_id: u64,
    /// Blocks kept in files (`--kv-disk-dir`).
    disk: Option<LocalDisk>,
    /// The LoRA adapter every request runs through (`--lora`).
    lora: Option<LoraRef>,
}

/// How a reply ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// End of sequence, a stop token or a stop string.
    Stop,
    /// `max_tokens` or the context was reached.
    Length,
    /// The user pressed the stop key.
    Interrupted,
}

/// How one finished reply ended and what it took (its text went to the caller as it came).
pub struct Reply {
    pub end: End,
    pub prompt_tokens: usize,
    /// Prompt tokens found in the prefix cache (not computed again).
    pub cached_tokens: usize,
    pub generated: usize,
    /// Prompt in to first token.
    pub prefill_s: f64,
    /// First token to last.
    pub decode_s: f64,
    /// Guesses of next tokens the reply's steps computed and those confirmed (speculative
    /// decoding; both 0 without it).
    pub guesses: (u64, u64),
    /// Blocks of the prompt read back from disk (`--kv-disk-dir`).
    pub disk_blocks: usize,
}

impl Reply {
    /// The speed line printed after a reply.
    pub fn speed_line(&self) -> String {
        let decoded = self.generated.saturating_sub(1);
        let cached = match (self.cached_tokens, self.disk_blocks) {
            (0, _) => String::new(),
            (n, 0) => format!(", {n} cached"),
            (n, b) => format!(", {n} cached ({b} blocks from disk)"),
        };
        let guesses = match self.guesses {
            (0, _) => String::new(),
            (made, confirmed) => format!("; guesses: {confirmed} of {made} confirmed"),
        };
        format!(
            "prefill: {} tokens{cached} in {:.2} s ({:.1} tokens/s); decode: {} tokens in {:.2} s ({:.1} tokens/s){guesses}",
            self.prompt_tokens,
            self.prefill_s,
            self.prompt_tokens as f64 / self.prefill_s.max(1e-9),
            decoded,
            self.decode_s,
            decoded as f64 / self.decode_s.max(1e-9)
        )
    }
}

impl Local {
    /// Loads the model and uploads it; prints the adapter.
    pub fn open(a: &LocalArgs) -> anyhow::Result<Local> {
        let model_path = crate::model_path::resolve(a.model.as_deref())?;
        let model = crate::model_path::load_with_template(
            Some(&model_path.to_string_lossy()),
            a.chat_template.as_deref(),
        )?;
        let ctx = pollster::block_on(GpuContext::new())?;
        eprintln!("adapter: {}", ctx.describe());
        let (frontend, config, weights) = Frontend::split(model);
        let lora = match &a.lora {
            Some(dir) => vec![Arc::new(LoraAdapter::load("lora", dir, &config)?)],
            None => Vec::new(),
        };
        let mut engine = crate::model_path::build_engine(
            &ctx,
            &config,
            &weights,
            a.device.apply(EngineConfig {
                max_num_seqs: 1,
                kv: KvSize::Bytes(a.kv_memory),
                cpu_kv_bytes: if a.kv_disk_dir.is_some() {
                    a.kv_memory
                } else {
                    0
                },
                max_model_len: a.max_model_len,
                lora,
                ..EngineConfig::default()
            }),
        )?;
        let disk = match &a.kv_disk_dir {
            Some(dir) => Some(LocalDisk::open(
                dir.clone(),
                a.kv_disk_bytes,
                &model_path,
                &mut engine,
            )?),
            None => None,
        };
        Ok(Local {
            lora: engine.lora_ref("lora"),
            engine,
            reasoning: ReasoningFormat::detect(frontend.chat_template.as_ref()),
            frontend,
            constraints: GrammarCompiler::default(),
            next_id: 0,
            disk,
        })
    }

    /// The engine request of `spec` (through the adapter, if there is one).
    fn request(
        &self,
        spec: &GenSpec,
        id: u64,
        prompt: Vec<u32>,
        max_tokens: usize,
        seed: u64,
    ) -> Request {
        Request {
            lora: self.lora,
            ..self.frontend.request(spec, id, prompt, max_tokens, seed, 0)
        }
    }

    /// The embeddings of `inputs` (token ids, checked) with `spec` (the front end's
    /// embedding spec), by input index: each input's prefill, batched as the engine fits them.
    pub fn embed(
        &mut self,
        spec: &GenSpec,
        inputs: Vec<Vec<u32>>,
    ) -> anyhow::Result<std::collections::HashMap<u64, Vec<f32>>> {
        let first = self.next_id;
        let count = inputs.len() as u64;
        for prompt in inputs {
            let request = self.request(spec, self.next_id, prompt, 1, 0);
            self.next_id += 1;
            if let Some(d) = &mut self.disk {
                let salt = self.engine.cache_salt(&request)?;
                d.restore(&mut self.engine, &request.prompt, salt.as_deref());
            }
            self.engine.add_request(request)?;
        }
        let mut out = std::collections::HashMap::new();
        while self.engine.has_unfinished() {
            let updates = pollster::block_on(self.engine.step())?;
            if let Some(d) = &mut self.disk {
                d.after_step(&mut self.engine);
            }
            for u in updates {
                if let Some(h) = u.token.and_then(|t| t.hidden) {
                    out.insert(u.id - first, kiln_frontend::unit_length(h));
                }
            }
        }
        if let Some(d) = &mut self.disk {
            d.save(&mut self.engine);
        }
        anyhow::ensure!(
            out.len() as u64 == count,
            "the engine returned {} embeddings for {count} inputs",
            out.len()
        );
        Ok(out)
    }

    /// A matcher for `grammar` after the reasoning of a prompt that `opened` it.
    fn compile(&self, grammar: &Grammar) -> anyhow::Result<Constraint> {
        let f = &self.frontend;
        (self.constraints)
            .compile(grammar, &f.tokenizer, &f.eos_token_ids, f.vocab_size)
            .map_err(|e| anyhow::anyhow!("{e}"))
    }

    /// Generates one reply to `prompt`, under `grammar` if given and with at most `budget`
    /// tokens of reasoning if given, writing its text to `out` as it comes; `interrupt` set
    /// by another thread stops it at the next step.
    pub fn reply(
        &mut self,
        prompt: Vec<u32>,
        (spec, grammar, budget): (&GenSpec, Option<&Grammar>, Option<usize>),
        max_tokens: usize,
        interrupt: &AtomicBool,
        out: &mut dyn FnMut(&str) -> std::io::Result<()>,
    ) -> anyhow::Result<Reply> {
        let id = self.next_id;
        self.next_id += 1;
        let prompt_tokens = prompt.len();
        let seed = spec.seed.unwrap_or_else(rand::random);
        let opened = (self.reasoning).opened_by_ids(&self.frontend.tokenizer, &prompt);
        let request = self.request(spec, id, prompt, max_tokens, seed);
        let salt = self.engine.cache_salt(&request)?;
        let disk_blocks = match &mut self.disk {
            Some(d) => d.restore(&mut self.engine, &request.prompt, salt.as_deref()),
            None => 0,
        };
        match (self.reasoning).constrain(grammar.cloned(), opened, budget) {
            Some(g) => {
                let c = self.compile(&g)?;
                self.engine.add_constrained_request(request, c)?
            }
            None => self.engine.add_request(request)?,
        }
        let mut stream = spec.text_stream();
        let (mut generated, mut cached_tokens, mut end) = (0, 0, End::Stop);
        let start = Instant::now();
        let before = self.engine.stats();
        let mut first = None;
        while self.engine.has_unfinished() {
            if interrupt.swap(false, Ordering::SeqCst) {
                self.engine.abort(id);
                end = End::Interrupted;
                break;
            }
            let updates = pollster::block_on(self.engine.step())?;
            if let Some(d) = &mut self.disk {
                d.after_step(&mut self.engine);
            }
            for u in updates {
                cached_tokens = u.num_cached_tokens;
                let token = u.token.as_ref().map(|t| t.token_id);
                if token.is_some() {
                    generated += 1;
                    first.get_or_insert_with(Instant::now);
                }
                let piece = stream.update(&self.frontend.tokenizer, &u)?;
                out(&piece.text)?;
                if piece.stopped {
                    // Later tokens of this step (confirmed guesses) come after the stop.
                    self.engine.abort(id);
                    break;
                }
                if u.finished == Some(FinishReason::Length) {
                    end = End::Length;
                }
            }
        }
        if let Some((_, why)) = (self.engine.take_failures().into_iter()).find(|(f, _)| *f == id) {
            anyhow::bail!("the reply failed: {why}");
        }
        let now = Instant::now();
        if let Some(d) = &mut self.disk {
            d.save(&mut self.engine);
        }
        let first = first.unwrap_or(now);
        let after = self.engine.stats();
        let guesses = (
            after.spec_draft_tokens - before.spec_draft_tokens,
            after.spec_accepted_tokens - before.spec_accepted_tokens,
        );
        Ok(Reply {
            end,
            prompt_tokens,
            cached_tokens,
            generated,
            prefill_s: (first - start).as_secs_f64(),
            decode_s: (now - first).as_secs_f64(),
            guesses,
            disk_blocks,
        })
    }
}
