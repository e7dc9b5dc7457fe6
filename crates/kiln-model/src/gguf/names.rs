//! GGUF ↔ Hugging Face tensor naming, and the q/k row orders of rotary pairs stored side by
//! side (llama.cpp's for Llama, GLM-4's own).
//!
//! llama.cpp's converter stores llama-architecture `attn_q` / `attn_k` rows with the two rotary
//! halves of every head interleaved (`w.reshape(n_head, 2, head_dim/2, in).swapaxes(1, 2)`);
//! kiln uses HF's rotate-half layout, so those rows are put back on read.

use crate::Architecture;
use crate::models::final_norm_name;

/// Gemma's norms (2 and 3; OLMo 2 and EXAONE 4 have the last two), whose GGUF names mean
/// other roles than Llama's: `ffn_norm` is the norm before the MLP (Llama's
/// `post_attention_layernorm`), and Gemma's HF `post_attention_layernorm` is the norm on the
/// attention's output.
const GEMMA3_NORMS: &[(&str, &str)] = &[
    ("ffn_norm", "pre_feedforward_layernorm"),
    ("post_attention_norm", "post_attention_layernorm"),
    ("post_ffw_norm", "post_feedforward_layernorm"),
];

/// GLM-4's norms on the sub-layers' outputs (its norm before the MLP is Llama's).
const GLM4_NORMS: &[(&str, &str)] = &[
    ("post_attention_norm", "post_self_attn_layernorm"),
    ("post_ffw_norm", "post_mlp_layernorm"),
];

/// Seed-OSS's norm before the MLP, which llama.cpp names as Gemma's norm on the attention's
/// output.
const SEED_OSS_NORMS: &[(&str, &str)] = &[("post_attention_norm", "post_attention_layernorm")];

/// StarCoder2's MLP (without a gate), under Hugging Face's names for it.
const STARCODER2_NAMES: &[(&str, &str)] = &[("ffn_up", "mlp.c_fc"), ("ffn_down", "mlp.c_proj")];

/// Phi-2's attention output and MLP (without a gate), under Hugging Face's names for them.
const PHI2_NAMES: &[(&str, &str)] = &[
    ("attn_output", "self_attn.dense"),
    ("ffn_up", "mlp.fc1"),
    ("ffn_down", "mlp.fc2"),
];

/// Falcon 40B's LayerNorm before its MLP (`ln_mlp`), which kiln names as GPT-NeoX's.
const FALCON_NAMES: &[(&str, &str)] = &[("attn_norm_2", "post_attention_layernorm")];

/// Hunyuan's per-head q/k norms.
const HUNYUAN_NORMS: &[(&str, &str)] = &[
    ("attn_q_norm", "self_attn.query_layernorm"),
    ("attn_k_norm", "self_attn.key_layernorm"),
];

/// Hunyuan's MoE: its per-head q/k norms, router and shared expert.
const HUNYUAN_MOE_NAMES: &[(&str, &str)] = &[
    ("attn_q_norm", "self_attn.query_layernorm"),
    ("attn_k_norm", "self_attn.key_layernorm"),
    ("ffn_gate_inp", "mlp.gate.wg"),
    ("ffn_gate_shexp", "mlp.shared_mlp.gate_proj"),
    ("ffn_up_shexp", "mlp.shared_mlp.up_proj"),
    ("ffn_down_shexp", "mlp.shared_mlp.down_proj"),
];

/// Mixtral's router and experts, under Hugging Face's names for them.
const MIXTRAL_NAMES: &[(&str, &str)] = &[
    ("ffn_gate_inp", "block_sparse_moe.gate"),
    ("ffn_gate_exps", "block_sparse_moe.experts.w1"),
    ("ffn_up_exps", "block_sparse_moe.experts.w3"),
    ("ffn_down_exps", "block_sparse_moe.experts.w2"),
];

/// Qwen2 MoE's shared expert and its gate.
const QWEN2MOE_NAMES: &[(&str, &str)] = &[
    ("ffn_gate_shexp", "mlp.shared_expert.gate_proj"),
    ("ffn_up_shexp", "mlp.shared_expert.up_proj"),
    ("ffn_down_shexp", "mlp.shared_expert.down_proj"),
    ("ffn_gate_inp_shexp", "mlp.shared_expert_gate"),
];

/// Granite's router, experts and shared expert, under Granite's names.
const GRANITEMOE_NAMES: &[(&str, &str)] = &[
    ("ffn_gate_inp", "block_sparse_moe.router.layer"),
    ("ffn_gate_exps", "block_sparse_moe.experts.gate_proj"),
    ("ffn_up_exps", "block_sparse_moe.experts.up_proj"),
    ("ffn_down_exps", "block_sparse_moe.experts.down_proj"),
    ("ffn_gate_shexp", "shared_mlp.gate_proj"),
    ("ffn_up_shexp", "shared_mlp.up_proj"),
    ("ffn_down_shexp", "shared_mlp.down_proj"),
];

/// GLM-4.5's, ERNIE 4.5's and dots.llm1's shared experts.
const SHARED_EXPERTS_NAMES: &[(&str, &str)] = &[
    ("ffn_gate_shexp", "mlp.shared_experts.gate_proj"),
    ("ffn_up_shexp", "mlp.shared_experts.up_proj"),
    ("ffn_down_shexp", "mlp.shared_experts.down_proj"),
];

/// gpt-oss's router, and its norm before the experts.
const GPT_OSS_NAMES: &[(&str, &str)] = &[
    ("ffn_gate_inp", "mlp.router"),
    ("post_attention_norm", "post_attention_layernorm"),
];

/// A layer's tensors whose Hugging Face names have no `.bias` or `.weight` suffix, with their
/// whole GGUF names (after `blk.N.`): the experts' choice biases (llama.cpp's
/// `exp_probs_b.bias`, under `arch`'s name) and gpt-oss's attention sinks.
fn whole_names(arch: Architecture) -> [(&'static str, &'static str); 2] {
    let hf = match arch {
        Architecture::Ernie45Moe => "mlp.moe_statics.e_score_correction_bias",
        _ => "mlp.gate.e_score_correction_bias",
    };
    [
        ("exp_probs_b.bias", hf),
        ("attn_sinks.weight", "self_attn.sinks"),
    ]
}

/// The (GGUF, HF) names of `arch`'s tensors that differ from Llama's (mostly norms).
fn arch_names(arch: Architecture) -> &'static [(&'static str, &'static str)] {
    match arch {
        Architecture::Mixtral => MIXTRAL_NAMES,
        Architecture::Qwen2Moe => QWEN2MOE_NAMES,
        Architecture::GraniteMoe => GRANITEMOE_NAMES,
        Architecture::Glm4Moe | Architecture::Ernie45Moe | Architecture::Dots1 => {
            SHARED_EXPERTS_NAMES
        }
        Architecture::Gemma2
        | Architecture::Gemma3
        | Architecture::Olmo2
        | Architecture::Exaone4 => GEMMA3_NORMS,
        Architecture::Glm4 => GLM4_NORMS,
        Architecture::SeedOss => SEED_OSS_NORMS,
        Architecture::HunyuanDense => HUNYUAN_NORMS,
        Architecture::HunyuanMoe => HUNYUAN_MOE_NAMES,
        Architecture::GptOss => GPT_OSS_NAMES,
        Architecture::Starcoder2 => STARCODER2_NAMES,
        Architecture::Phi2 => PHI2_NAMES,
        Architecture::Falcon => FALCON_NAMES,
        _ => &[],
    }
}

/// Whether `arch`'s GGUF `ffn_up` holds gate and up together (Hugging Face's `gate_up_proj`).
fn fused_gate_up(arch: Architecture) -> bool {
    matches!(arch, Architecture::Phi3 | Architecture::Glm4)
}

/// Maps a GGUF tensor name of an `arch` model to its HF name; unknown names are returned
/// unchanged.
pub fn gguf_to_hf_name(name: &str, arch: Architecture) -> String {
    for (gguf, hf) in whole_names(arch) {
        if let Some(layer) =
            (name.strip_prefix("blk.")).and_then(|rest| rest.strip_suffix(gguf)?.strip_suffix('.'))
        {
            return format!("model.layers.{layer}.{hf}");
        }
    }
    let (base, suffix) = match name.rsplit_once('.') {
        Some((b, s @ ("weight" | "bias"))) => (b, s),
        _ => return name.to_string(),
    };
    let mapped = match base {
        "token_embd" => Some("model.embed_tokens".to_string()),
        "position_embd" => Some("model.embed_positions".to_string()),
        "token_embd_norm" => Some("model.embed_layernorm".to_string()),
        "output_norm" => Some(final_norm_name(arch).to_string()),
        "output" => Some("lm_head".to_string()),
        _ => base.strip_prefix("blk.").and_then(|rest| {
            let (layer, part) = rest.split_once('.')?;
            layer.parse::<usize>().ok()?;
            if let Some((_, hf)) = arch_names(arch).iter().find(|(g, _)| *g == part) {
                return Some(format!("model.layers.{layer}.{hf}"));
            }
            if fused_gate_up(arch) && part == "ffn_up" {
                return Some(format!("model.layers.{layer}.mlp.gate_up_proj"));
            }
            let hf = match part {
                "ffn_gate_inp" => "mlp.gate",
                "ffn_gate_exps" => "mlp.experts.gate_proj",
                "ffn_up_exps" => "mlp.experts.up_proj",
                "ffn_down_exps" => "mlp.experts.down_proj",
                "attn_norm" => "input_layernorm",
                "attn_q" => "self_attn.q_proj",
                "attn_k" => "self_attn.k_proj",
                "attn_v" => "self_attn.v_proj",
                "attn_output" => "self_attn.o_proj",
                "attn_qkv" => "self_attn.qkv_proj",
                "attn_q_norm" => "self_attn.q_norm",
                "attn_k_norm" => "self_attn.k_norm",
                "ffn_norm" => "post_attention_layernorm",
                "ffn_gate" => "mlp.gate_proj",
                "ffn_up" => "mlp.up_proj",
                "ffn_down" => "mlp.down_proj",
                _ => return None,
            };
            Some(format!("model.layers.{layer}.{hf}"))
        }),
    };
    match mapped {
        Some(m) => format!("{m}.{suffix}"),
        None => name.to_string(),
    }
}

/// Maps an HF tensor name of an `arch` model to its GGUF name (inverse of [`gguf_to_hf_name`]).
pub fn hf_to_gguf_name(name: &str, arch: Architecture) -> String {
    for (gguf, hf) in whole_names(arch) {
        if let Some(layer) = (name.strip_prefix("model.layers."))
            .and_then(|rest| rest.strip_suffix(hf)?.strip_suffix('.'))
        {
            return format!("blk.{layer}.{gguf}");
        }
    }
    let (base, suffix) = match name.rsplit_once('.') {
        Some((b, s @ ("weight" | "bias"))) => (b, s),
        _ => return name.to_string(),
    };
    let mapped = match base {
        "model.embed_tokens" => Some("token_embd".to_string()),
        "model.embed_positions" => Some("position_embd".to_string()),
        "model.embed_layernorm" => Some("token_embd_norm".to_string()),
        b if b == final_norm_name(arch) => Some("output_norm".to_string()),
        "lm_head" => Some("output".to_string()),
        _ => base.strip_prefix("model.layers.").and_then(|rest| {
            let (layer, part) = rest.split_once('.')?;
            if let Some((g, _)) = arch_names(arch).iter().find(|(_, hf)| *hf == part) {
                return Some(format!("blk.{layer}.{g}"));
            }
            if fused_gate_up(arch) && part == "mlp.gate_up_proj" {
                return Some(format!("blk.{layer}.ffn_up"));
            }
            let g = match part {
                "mlp.gate" => "ffn_gate_inp",
                "mlp.experts.gate_proj" => "ffn_gate_exps",
                "mlp.experts.up_proj" => "ffn_up_exps",
                "mlp.experts.down_proj" => "ffn_down_exps",
                "input_layernorm" => "attn_norm",
                "self_attn.q_proj" => "attn_q",
                "self_attn.k_proj" => "attn_k",
                "self_attn.v_proj" => "attn_v",
                "self_attn.o_proj" => "attn_output",
                "self_attn.qkv_proj" => "attn_qkv",
                "self_attn.q_norm" => "attn_q_norm",
                "self_attn.k_norm" => "attn_k_norm",
                "post_attention_layernorm" => "ffn_norm",
                "mlp.gate_proj" => "ffn_gate",
                "mlp.up_proj" => "ffn_up",
                "mlp.down_proj" => "ffn_down",
                _ => return None,
            };
            Some(format!("blk.{layer}.{g}"))
        }),
    };
    match mapped {
        Some(m) => format!("{m}.{suffix}"),
        None => name.to_string(),
    }
}

/// Which permutation (if any) a llama-arch GGUF tensor carries: `Some(true)` for Q (n_heads),
/// `Some(false)` for K (n_kv_heads). Applies to the `.weight` and a possible `.bias`.
pub(crate) fn permuted_kind(gguf_name: &str) -> Option<bool> {
    let base = gguf_name.rsplit_once('.')?.0;
    if base.ends_with(".attn_q") {
        Some(true)
    } else if base.ends_with(".attn_k") {
        Some(false)
    } else {
        None
    }
}

/// q or k rows (a weight's or a bias's) stored with each head's rotary pairs side by side,
/// `(2j, 2j + 1)` (llama.cpp's layout for Llama, and GLM's own), where kiln runs them half the
/// rotary width apart, `(j, j + rotary / 2)` (Hugging Face's Llama layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Interleaved {
    pub heads: usize,
    /// The rows of each head that turn (its first ones; GLM's half); `None`: all of them.
    pub rotary: Option<usize>,
    /// The tensor's elements, not its rows, are q or k rows: a gain for each head's
    /// dimensions, stored `[heads, head_dim]` (Command-R+'s q/k LayerNorms).
    pub flat: bool,
}

impl Interleaved {
    /// All of each of `heads` heads.
    pub fn whole(heads: usize) -> Self {
        Interleaved {
            heads,
            rotary: None,
            flat: false,
        }
    }

    /// The q or k rows a tensor of `shape` holds: its rows, or its elements where `flat`.
    pub fn rows(self, shape: &[usize]) -> usize {
        match self.flat {
            true => shape.iter().product(),
            false => shape.first().copied().unwrap_or(1),
        }
    }

    /// The row kiln runs that stored row `r` of a tensor of `rows` rows holds (the rows
    /// having passed [`Self::check`]).
    fn run_row(self, r: usize, rows: usize) -> usize {
        let head_dim = rows / self.heads;
        let (head, within) = (r / head_dim, r % head_dim);
        let rotary = self.rotary.unwrap_or(head_dim);
        if within >= rotary {
            return r;
        }
        let (j, s) = (within / 2, within % 2);
        head * head_dim + s * (rotary / 2) + j
    }

    /// `data`'s `rows` rows (of any width: elements, or a quantized row's bytes) moved from
    /// the stored order to the order kiln runs, or back with `to_stored`.
    pub fn reorder<T: Copy + Default>(self, data: &[T], rows: usize, to_stored: bool) -> Vec<T> {
        reorder_rows(data, rows, to_stored, |r| self.run_row(r, rows))
    }

    /// Why a tensor of `rows` rows cannot be stored so, if it cannot.
    pub fn check(self, rows: usize) -> Result<(), String> {
        let head_dim = rows / self.heads.max(1);
        let rotary = self.rotary.unwrap_or(head_dim);
        if self.heads == 0 || rows % self.heads != 0 || rotary % 2 != 0 || rotary > head_dim {
            return Err(format!(
                "{rows} rows, not divisible into {} heads whose first {rotary} rows turn in pairs",
                self.heads
            ));
        }
        Ok(())
    }
}

/// `data`'s `rows` rows (of any width) moved from a stored order to the order kiln runs, or
/// back with `to_stored`: stored row `r` is row `run_row(r)` as kiln runs it.
pub(crate) fn reorder_rows<T: Copy + Default>(
    data: &[T],
    rows: usize,
    to_stored: bool,
    run_row: impl Fn(usize) -> usize,
) -> Vec<T> {
    let width = data.len() / rows.max(1);
    let mut out = vec![T::default(); data.len()];
    for r in 0..rows {
        let run = run_row(r);
        let (from, to) = if to_stored { (run, r) } else { (r, run) };
        out[to * width..][..width].copy_from_slice(&data[from * width..][..width]);
    }
    out
}

/// HF → GGUF: what llama.cpp's converter does to Q/K rows. `data` is `rows × cols`, row-major.
pub fn permute_rows(data: &[f32], rows: usize, n_heads: usize) -> Vec<f32> {
    Interleaved::whole(n_heads).reorder(data, rows, true)
}

/// GGUF → HF: undoes [`permute_rows`].
pub fn unpermute_rows(data: &[f32], rows: usize, n_heads: usize) -> Vec<f32> {
    Interleaved::whole(n_heads).reorder(data, rows, false)
}
