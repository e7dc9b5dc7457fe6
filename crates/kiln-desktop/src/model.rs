//! Opening a model: read the file or folder, split off the front end, and start the engine on
//! its own thread (kiln-server's engine loop: it batches every chat's requests, supervises the
//! device and rebuilds the engine after a lost one). Runs on a background thread; progress and
//! the result come back as [`LoadEvent`]s, so the window stays responsive.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kiln_engine::disk_tier::{DiskTierConfig, model_files_id};
use kiln_engine::{EngineConfig, KvDtype, KvSize, LoraCapacity, Speculation};
use kiln_frontend::Frontend;
use kiln_gpu::GpuContext;
use kiln_model::Model;
use kiln_server::EngineHandle;

/// What the model panel shows.
#[derive(Clone, Debug)]
pub struct ModelInfo {
    pub name: String,
    pub path: PathBuf,
    pub architecture: String,
    pub parameters: u64,
    /// Bytes of tensors in the file.
    pub file_bytes: u64,
    /// The stored tensor types, as `count type`.
    pub quantization: String,
    pub context: usize,
}

/// Asks the window for a new frame (from any thread).
pub type Wake = Arc<dyn Fn() + Send + Sync>;

/// A model ready to chat with.
pub struct Loaded {
    pub frontend: Arc<Frontend>,
    pub engine: Arc<EngineHandle>,
    pub info: ModelInfo,
    /// Called when a reply has news, so the window draws only then.
    pub wake: Wake,
    /// The grammar compiler for replies held to a format, built on first use.
    pub constraints: kiln_engine::GrammarCompiler,
}

pub enum LoadEvent {
    /// `fraction` of `stage` done.
    Progress {
        stage: &'static str,
        fraction: f32,
    },
    Done(Result<Loaded, String>),
}

/// How the engine of a model being opened is set up.
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// GPU memory for the KV cache.
    pub kv_bytes: u64,
    /// The KV cache's element type.
    pub kv_dtype: KvDtype,
    /// Guesses per decode (speculative decoding by prompt lookup; 0: off).
    pub guesses: usize,
    /// The folder and size of the KV cache kept on disk (`None`: off). Its blocks come
    /// back through a CPU tier as large as the GPU's KV cache.
    pub kv_disk: Option<(PathBuf, u64)>,
    /// Room for LoRA adapters loaded while the model is open.
    pub lora: Option<LoraCapacity>,
}

/// Starts loading `path` with `options`, on `shared` (the window's device) or on a device
/// of its own; `repaint` is called after each event.
pub fn load(
    path: PathBuf,
    options: EngineOptions,
    shared: Option<GpuContext>,
    repaint: impl Fn() + Send + Sync + 'static,
) -> flume::Receiver<LoadEvent> {
    let (tx, rx) = flume::unbounded();
    let repaint: Wake = Arc::new(repaint);
    std::thread::Builder::new()
        .name("kiln-load".into())
        .spawn(move || {
            let r = open(&path, options, shared, &tx, &repaint).map_err(|e| format!("{e:#}"));
            let _ = tx.send(LoadEvent::Done(r));
            repaint();
        })
        .expect("a thread starts");
    rx
}

fn open(
    path: &Path,
    options: EngineOptions,
    shared: Option<GpuContext>,
    tx: &flume::Sender<LoadEvent>,
    repaint: &Wake,
) -> anyhow::Result<Loaded> {
    let _ = tx.send(LoadEvent::Progress {
        stage: "reading",
        fraction: 0.0,
    });
    repaint();
    let model = Model::load(path)?;
    let c = &model.config;
    let (file_bytes, types) = model.weights.stored_bytes();
    let info = ModelInfo {
        name: path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| model.source.clone()),
        path: path.to_path_buf(),
        architecture: c.architecture.gguf_name().to_string(),
        parameters: c.param_count() as u64,
        file_bytes,
        quantization: types
            .iter()
            .map(|(t, n)| format!("{n} {t}"))
            .collect::<Vec<_>>()
            .join(", "),
        context: c.max_position_embeddings,
    };
    let (frontend, config, weights) = Frontend::split(model);
    let kv_disk = match options.kv_disk {
        Some((dir, max_bytes)) => Some(DiskTierConfig {
            dir,
            max_bytes,
            model_id: model_files_id(path)?,
        }),
        None => None,
    };
    let ec = EngineConfig {
        max_num_seqs: 16,
        kv: KvSize::Bytes(options.kv_bytes),
        kv_dtype: options.kv_dtype,
        cpu_kv_bytes: if kv_disk.is_some() {
            options.kv_bytes
        } else {
            0
        },
        speculation: (options.guesses > 0).then(|| Speculation::prompt_lookup(options.guesses)),
        lora_capacity: options.lora,
        ..EngineConfig::default()
    };
    let wake = repaint.clone();
    let (tx, repaint) = (tx.clone(), repaint.clone());
    // The engine's own device unless it shares the window's (see `device.rs`).
    let factory: kiln_server::EngineFactory = Box::new(move || {
        let ctx = match &shared {
            Some(ctx) => ctx.clone(),
            None => pollster::block_on(GpuContext::new())?,
        };
        let mut progress = |done: usize, total: usize| {
            let _ = tx.send(LoadEvent::Progress {
                stage: "uploading",
                fraction: done as f32 / total.max(1) as f32,
            });
            repaint();
        };
        Ok(kiln_engine::Engine::new(
            &ctx,
            &config,
            &weights,
            ec.clone(),
            &mut progress,
        )?)
    });
    let engine = EngineHandle::spawn(factory, None, kv_disk)?;
    Ok(Loaded {
        frontend: Arc::new(frontend),
        engine: Arc::new(engine),
        info,
        wake,
        constraints: Default::default(),
    })
}
