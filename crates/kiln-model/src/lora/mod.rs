//! LoRA adapters: each adapted matrix `W` (out x in) of the model gets a pair `A` (r x in)
//! and `B` (out x r) whose product, scaled, is added to `W`'s: `y = W x + scale * B (A x)`.
//! kiln applies them at run time, per request, to the projections of the decoder layers; the
//! base weights stay as they are. Two file formats: PEFT's folders (`peft`) and llama.cpp's
//! GGUF adapter files (`gguf`); each is read into a [`Source`], which [`LoraAdapter::load`]
//! checks against the model and reads. An adapter read from a file may let go of its values
//! and read them again when next needed (`held.rs`).

mod gguf;
mod held;
mod peft;

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use held::Held;

use crate::storage::Storage;
use crate::{ModelConfig, ModelError, ModelTensors, Op, Weights};

/// One adapted matrix: `A` (rank x cols) and `B` (rows x rank), B already scaled.
#[derive(Debug, Clone, PartialEq)]
pub struct LoraPair {
    pub rank: usize,
    pub a: Vec<f32>,
    pub b: Vec<f32>,
}

/// An adapter's pairs, by the adapted tensor's name as the model names it
/// (`model.layers.0.self_attn.q_proj.weight`).
pub type LoraPairs = HashMap<String, LoraPair>;

/// A loaded adapter, checked against the model it adapts. Clones share its values (and
/// whether they are held).
#[derive(Clone)]
pub struct LoraAdapter {
    /// The name requests select it by.
    pub name: String,
    pub path: PathBuf,
    /// The largest rank of its pairs.
    pub rank: usize,
    /// Each adapted tensor's rank, by name: what the adapter adapts, known while its values
    /// are let go.
    pub ranks: HashMap<String, usize>,
    /// A hash of the adapter's values: prefix-cache keys of its requests include it, so no
    /// request reuses KV computed under another adapter (or none).
    pub fingerprint: u64,
    held: Arc<Held>,
}

impl std::fmt::Debug for LoraAdapter {
    /// Its name, folder, rank and how many matrices it adapts, not its values.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoraAdapter")
            .field("name", &self.name)
            .field("path", &self.path)
            .field("rank", &self.rank)
            .field("matrices", &self.ranks.len())
            .finish()
    }
}

impl LoraAdapter {
    /// Reads the adapter at `path` (a PEFT folder, or a GGUF adapter file) and checks every
    /// pair against `config`'s layers.
    pub fn load(name: &str, path: &Path, config: &ModelConfig) -> Result<Self, ModelError> {
        let source = match path.is_file() {
            true => gguf::read(Storage::map(path)?, path.display().to_string(), config)?,
            false => peft::read(path)?,
        };
        let pairs = Self::check(source, config)?;
        let again = Some(config.clone());
        Ok(Self::new(name, path, pairs, again))
    }

    /// An adapter given as a GGUF adapter file's bytes (`file` names it in errors).
    pub fn from_gguf_bytes(
        name: &str,
        file: &str,
        bytes: Vec<u8>,
        config: &ModelConfig,
    ) -> Result<Self, ModelError> {
        let source = gguf::read(Storage::Owned(bytes), file.to_string(), config)?;
        let pairs = Self::check(source, config)?;
        Ok(Self::new(name, Path::new(file), pairs, None))
    }

    /// An adapter given as a PEFT folder's two files: `adapter_config.json`'s text and
    /// `adapter_model.safetensors`' bytes (`folder` names them in errors).
    pub fn from_peft_bytes(
        name: &str,
        folder: &str,
        adapter_config: &str,
        safetensors: Vec<u8>,
        config: &ModelConfig,
    ) -> Result<Self, ModelError> {
        let source = peft::from_files(adapter_config, Storage::Owned(safetensors), |f| {
            format!("{folder}/{f}")
        })?;
        let pairs = Self::check(source, config)?;
        Ok(Self::new(name, Path::new(folder), pairs, None))
    }

    /// An adapter of `pairs` as they are (B already scaled), held for good: for tests and
    /// adapters made in memory.
    pub fn from_pairs(name: &str, pairs: LoraPairs) -> Self {
        Self::new(name, Path::new(""), pairs, None)
    }

    /// The adapter of `pairs`, which `again` (the model they were checked against) lets it
    /// read again from `path` once let go.
    fn new(name: &str, path: &Path, pairs: LoraPairs, again: Option<ModelConfig>) -> Self {
        // By the adapted tensor, so the same adapter has one fingerprint in either format.
        let mut names: Vec<&String> = pairs.keys().collect();
        names.sort_unstable();
        let mut h = DefaultHasher::new();
        for n in names {
            n.hash(&mut h);
            for v in pairs[n].a.iter().chain(&pairs[n].b) {
                v.to_bits().hash(&mut h);
            }
        }
        Self {
            name: name.to_string(),
            path: path.to_path_buf(),
            rank: pairs.values().map(|p| p.rank).max().unwrap_or(0),
            ranks: (pairs.iter()).map(|(n, p)| (n.clone(), p.rank)).collect(),
            fingerprint: h.finish(),
            held: Arc::new(Held::new(pairs, again)),
        }
    }

    /// The same adapter under another name (sharing its values).
    pub fn renamed(&self, name: &str) -> Self {
        Self {
            name: name.to_string(),
            ..self.clone()
        }
    }

    /// Checks `source`'s pairs against `config`'s layers and reads them.
    fn check(source: Source, config: &ModelConfig) -> Result<LoraPairs, ModelError> {
        let Source {
            mut weights,
            file,
            mut pairs,
            scale,
        } = source;
        // GPT-NeoX's, Falcon's, GPT-2's, StarCoder's, BLOOM's, MPT's, GPT-J's, InternLM2's and
        // EXAONE's adapters name their own projections (q/k/v's rows by head or by group, GPT-2's stored transposed).
        if let a @ (crate::Architecture::GptNeox
        | crate::Architecture::Falcon
        | crate::Architecture::Gpt2
        | crate::Architecture::Starcoder
        | crate::Architecture::Bloom
        | crate::Architecture::Mpt
        | crate::Architecture::GptJ
        | crate::Architecture::InternLm2
        | crate::Architecture::Exaone) = config.architecture
        {
            return Err(ModelError::Unsupported {
                file,
                reason: format!("LoRA adapters on {} (not built)", a.gguf_name()),
            });
        }
        if let Some(lone) =
            (weights.names().into_iter()).find(|n| !pairs.iter().any(|(_, a, b)| n == a || n == b))
        {
            return Err(ModelError::corrupt(
                &file,
                format!("tensor \"{lone}\" has no A (lora_A, .lora_a) to pair with"),
            ));
        }
        if pairs.is_empty() {
            return Err(ModelError::corrupt(&file, "no LoRA pairs (lora_A tensors)"));
        }
        pairs.sort_unstable();
        let targets = targets(config);
        // B's rows are q's or k's: stored as the model's are (GLM-4's rotary pairs side by
        // side), put back alike.
        let layouts: HashMap<_, _> = crate::models::interleaved_rows(config)
            .into_iter()
            .collect();
        let mut out = HashMap::new();
        for (base, a_name, b_name) in pairs {
            let Some(&(rows, cols)) = targets.get(base.as_str()) else {
                return Err(ModelError::Unsupported {
                    file,
                    reason: format!(
                        "\"{a_name}\" adapts {base}, which is not a projection of the model's decoder layers (kiln adapts those only)"
                    ),
                });
            };
            let a_shape = weights.shape(&a_name)?;
            let b_shape = weights.shape(&b_name)?;
            let rank = a_shape.first().copied().unwrap_or(0);
            if a_shape != [rank, cols] || b_shape != [rows, rank] || rank == 0 {
                return Err(ModelError::Mismatch {
                    file,
                    reason: format!(
                        "\"{a_name}\" is {a_shape:?} and its B {b_shape:?}; {base} is [{rows}, {cols}], so they must be [r, {cols}] and [{rows}, r]"
                    ),
                });
            }
            // Granite multiplies what o_proj and down_proj add to the residual stream; their
            // adapters' share is multiplied alike.
            let into_residual =
                base.ends_with("self_attn.o_proj.weight") || base.ends_with("mlp.down_proj.weight");
            let s = scale.of(rank)
                * if into_residual {
                    config.residual_scale()
                } else {
                    1.0
                };
            if let Some(&il) = layouts.get(&base) {
                weights.set_interleaved(&b_name, il);
            }
            let a = weights.read_f32(&a_name)?;
            let b: Vec<f32> = (weights.read_f32(&b_name)?.iter()).map(|v| v * s).collect();
            out.insert(base, LoraPair { rank, a, b });
        }
        Ok(out)
    }

    /// Its pairs: held, or read again from its file where they were let go (an error if the
    /// file no longer gives the same values).
    pub fn pairs(&self) -> Result<Arc<LoraPairs>, ModelError> {
        self.held.get(|config| {
            let again = Self::load(&self.name, &self.path, config)?;
            if again.fingerprint != self.fingerprint {
                return Err(ModelError::Mismatch {
                    file: self.path.display().to_string(),
                    reason: format!(
                        "LoRA adapter `{}` changed since it was loaded; load it again",
                        self.name
                    ),
                });
            }
            again.pairs()
        })
    }

    /// Lets go of its values where its file can give them again ([`Self::pairs`] reads
    /// them then); whether it did. An adapter given as bytes keeps them.
    pub fn let_go(&self) -> bool {
        self.held.let_go()
    }

    /// Whether its values are in memory.
    pub fn is_held(&self) -> bool {
        self.held.is_held()
    }

    /// The prefix-cache salt of a request through this adapter with its own `salt`.
    pub fn salt(&self, salt: Option<&str>) -> String {
        format!("{}\u{1f}lora {:016x}", salt.unwrap_or(""), self.fingerprint)
    }
}

/// The matrices an adapter may adapt: every projection of the decoder layers, by name, with
/// their (rows, cols).
fn targets(config: &ModelConfig) -> HashMap<String, (usize, usize)> {
    let mut t = HashMap::new();
    for layer in ModelTensors::for_config(config).layers {
        for w in layer.ops.iter().flat_map(Op::matrices) {
            t.insert(w.name.clone(), (w.shape[0], w.shape[1]));
        }
    }
    t
}

/// An adapter file's pairs, read but not yet checked against the model.
struct Source {
    weights: Weights,
    /// The file named in errors about its tensors.
    file: String,
    /// Each pair: the adapted tensor's name as the model names it, then A's and B's names in
    /// `weights`.
    pairs: Vec<(String, String, String)>,
    scale: Scale,
}

/// How a pair's B is scaled, by its rank `r`.
enum Scale {
    /// `alpha / r`.
    Alpha(f64),
    /// rsLoRA's `alpha / sqrt(r)`.
    RsLora(f64),
    /// 1: llama.cpp's rule for an adapter file without an alpha.
    One,
}

impl Scale {
    fn of(&self, r: usize) -> f32 {
        (match *self {
            Scale::Alpha(alpha) => alpha / r as f64,
            Scale::RsLora(alpha) => alpha / (r as f64).sqrt(),
            Scale::One => 1.0,
        }) as f32
    }
}
