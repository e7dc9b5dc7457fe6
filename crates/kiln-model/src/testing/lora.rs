//! Tiny random LoRA adapters in PEFT's layout or as llama.cpp's GGUF adapter files, and the
//! same tiny model with an adapter merged
//! into its weights (`W + scale * B A`, computed here in plain loops), so a test can check
//! an adapter applied at run time against a model that has it built in.

use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::gguf_builder::GgufBuilder;
use super::gguf_writer::stored_type;
use super::{
    DType, MetaValue, NamedTensor, TinyConfig, io, quantize, safetensors_bytes, tiny_tensors,
    write_folder_files,
};
use crate::gguf::dequant::to_f32;
use crate::gguf::names::{hf_to_gguf_name, permute_rows};
use crate::{ModelConfig, ModelError};

/// Every projection of a Llama-like layer, as PEFT's `target_modules` names them.
pub const LLAMA_PROJECTIONS: [&str; 7] = [
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
];

/// A random adapter: which modules it adapts (`q_proj`, `down_proj`, `qkv_proj`, ...), its
/// rank (the MLP's modules get `rank + 2`, as a `rank_pattern` would give them), `alpha`
/// and the seed of its values.
#[derive(Debug, Clone)]
pub struct TinyLora {
    pub modules: Vec<String>,
    pub rank: usize,
    pub alpha: f32,
    pub rslora: bool,
    pub seed: u64,
}

/// One adapted tensor's pair: the tensor's name and shape, A (rank x cols), B (rows x rank).
struct Pair {
    name: String,
    shape: Vec<usize>,
    a: Vec<f32>,
    b: Vec<f32>,
}

impl TinyLora {
    /// The rank of the pair adapting tensor `name`.
    fn rank_of(&self, name: &str) -> usize {
        match name.contains(".mlp.") {
            true => self.rank + 2,
            false => self.rank,
        }
    }

    fn scale(&self, rank: usize) -> f32 {
        match self.rslora {
            true => self.alpha / (rank as f32).sqrt(),
            false => self.alpha / rank as f32,
        }
    }

    /// The pair of each adapted tensor of `mc`.
    fn pairs(&self, mc: &ModelConfig) -> Vec<Pair> {
        let mut rng = StdRng::seed_from_u64(self.seed);
        let mut out = Vec::new();
        for (name, shape) in crate::validate::expected_tensors(mc) {
            let adapted = (self.modules.iter()).any(|m| {
                name.starts_with("model.layers.") && name.ends_with(&format!(".{m}.weight"))
            });
            if !adapted {
                continue;
            }
            let r = self.rank_of(&name);
            let mut draw =
                |n: usize| -> Vec<f32> { (0..n).map(|_| rng.random_range(-0.3..0.3)).collect() };
            let a = draw(r * shape[1]);
            let b = draw(shape[0] * r);
            out.push(Pair { name, shape, a, b });
        }
        out
    }

    /// Writes the adapter for `mc` as PEFT saves one (`adapter_config.json`,
    /// `adapter_model.safetensors` in `dtype`).
    pub fn write(&self, dir: &Path, mc: &ModelConfig, dtype: DType) -> Result<(), ModelError> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let mut tensors = Vec::new();
        let mut ranks = serde_json::Map::new();
        for Pair { name, shape, a, b } in self.pairs(mc) {
            let module = name.trim_end_matches(".weight");
            let r = self.rank_of(&name);
            if r != self.rank {
                ranks.insert(module.to_string(), json!(r));
            }
            let peft = format!("base_model.model.{module}");
            tensors.push(NamedTensor {
                name: format!("{peft}.lora_A.weight"),
                shape: vec![r, shape[1]],
                data: a,
            });
            tensors.push(NamedTensor {
                name: format!("{peft}.lora_B.weight"),
                shape: vec![shape[0], r],
                data: b,
            });
        }
        let config = json!({
            "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": self.rank,
            "lora_alpha": self.alpha, "use_rslora": self.rslora, "use_dora": false,
            "bias": "none", "fan_in_fan_out": false, "modules_to_save": null,
            "target_modules": self.modules, "rank_pattern": ranks, "alpha_pattern": {},
            "lora_dropout": 0.0, "base_model_name_or_path": "tiny",
        });
        let p = dir.join("adapter_config.json");
        std::fs::write(&p, serde_json::to_vec_pretty(&config).expect("json")).map_err(io(&p))?;
        let p = dir.join("adapter_model.safetensors");
        std::fs::write(&p, safetensors_bytes(&tensors, dtype)).map_err(io(&p))
    }

    /// Writes the adapter for `mc` as llama.cpp's converter writes one: a GGUF file of
    /// `general.type` `adapter` with `adapter.lora.alpha`, each pair named after its GGUF
    /// tensor (`blk.0.attn_q.weight.lora_a`), B's rows of a Llama model's Q and K interleaved
    /// as the model's are, in `dtype` (F32 where a row holds no whole block). An rsLoRA
    /// adapter, which the format cannot say, is written with its scale in B and no alpha
    /// (scale 1).
    pub fn write_gguf(
        &self,
        path: &Path,
        mc: &ModelConfig,
        dtype: DType,
    ) -> Result<(), ModelError> {
        let arch = mc.architecture;
        let mut g = GgufBuilder::new();
        g.meta(
            "general.architecture",
            MetaValue::String(arch.gguf_name().into()),
        )
        .meta("general.type", MetaValue::String("adapter".into()))
        .meta("adapter.type", MetaValue::String("lora".into()));
        if !self.rslora {
            g.meta("adapter.lora.alpha", MetaValue::F32(self.alpha));
        }
        for Pair {
            name,
            shape,
            a,
            mut b,
        } in self.pairs(mc)
        {
            let r = self.rank_of(&name);
            if self.rslora {
                let s = self.scale(r);
                b.iter_mut().for_each(|v| *v *= s);
            }
            let heads = match (arch.gguf_permutes_qk(), name.rsplit('.').nth(1)) {
                (true, Some("q_proj")) => Some(mc.num_heads),
                (true, Some("k_proj")) => Some(mc.num_kv_heads),
                _ => None,
            };
            if let Some(h) = heads {
                b = permute_rows(&b, shape[0], h);
            }
            let t = hf_to_gguf_name(&name, arch);
            let (a_shape, b_shape) = ([r, shape[1]], [shape[0], r]);
            g.tensor(
                &format!("{t}.lora_a"),
                &a_shape,
                &a,
                stored_type(&a_shape, dtype),
            );
            g.tensor(
                &format!("{t}.lora_b"),
                &b_shape,
                &b,
                stored_type(&b_shape, dtype),
            );
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io(dir))?;
        }
        g.write(path)
    }

    /// Writes the tiny model `cfg` of `seed` (as [`super::write_tiny_llama`] does) with this
    /// adapter merged into its weights, in f32. `dtype` is the adapter file's, whose rounding
    /// the merged values take too.
    pub fn write_merged(
        &self,
        dir: &Path,
        cfg: &TinyConfig,
        seed: u64,
        dtype: DType,
    ) -> Result<ModelConfig, ModelError> {
        let mc = write_folder_files(dir, cfg)?;
        let mut tensors = tiny_tensors(&mc, seed);
        let round = |v: Vec<f32>| to_f32(dtype, &quantize(dtype, &v));
        for Pair { name, shape, a, b } in self.pairs(&mc) {
            let (rows, cols, r) = (shape[0], shape[1], self.rank_of(&name));
            let (a, b, s) = (round(a), round(b), self.scale(r));
            let w = tensors.iter_mut().find(|t| t.name == name).expect("tensor");
            for i in 0..rows {
                for j in 0..cols {
                    let delta: f32 = (0..r).map(|k| b[i * r + k] * a[k * cols + j]).sum();
                    w.data[i * cols + j] += s * delta;
                }
            }
        }
        let p = dir.join("model.safetensors");
        std::fs::write(&p, safetensors_bytes(&tensors, DType::F32)).map_err(io(&p))?;
        Ok(mc)
    }
}
