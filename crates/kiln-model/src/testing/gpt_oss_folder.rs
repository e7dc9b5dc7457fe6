//! gpt-oss as transformers saves it, for `scripts/transformers_reference.py` (kiln itself
//! reads gpt-oss from GGUF, written from the same values beside it): the router under
//! `mlp.router`, each layer's experts stacked and transposed, gate and up columns
//! interleaved (`mlp.experts.gate_up_proj`: experts x hidden x 2 intermediate, its bias
//! experts x 2 intermediate; `down_proj`: experts x intermediate x hidden), the sinks and
//! every other tensor under kiln's names.

use super::NamedTensor;
use crate::ModelConfig;

/// `tensors` (kiln's names, each expert's matrices apart) as a gpt-oss folder holds them.
pub(super) fn folder_tensors(mc: &ModelConfig, tensors: Vec<NamedTensor>) -> Vec<NamedTensor> {
    let moe = mc.moe.expect("gpt-oss has experts");
    let (h, ff, experts) = (mc.hidden_size, moe.intermediate_size, moe.experts);
    let take = |name: &str| -> Vec<f32> {
        let t = tensors.iter().find(|t| t.name == name);
        t.expect("the layer's tensor").data.clone()
    };
    let mut out: Vec<NamedTensor> = (tensors.iter())
        .filter(|t| !t.name.contains(".experts."))
        .cloned()
        .collect();
    for i in 0..mc.num_layers {
        let l = format!("model.layers.{i}.mlp.experts");
        let part = |e: usize, kind: &str, what: &str| take(&format!("{l}.{e}.{kind}_proj.{what}"));
        let (mut gate_up, mut gate_up_bias, mut down, mut down_bias) =
            (vec![], vec![], vec![], vec![]);
        for e in 0..experts {
            let (g, u, d) = (
                part(e, "gate", "weight"),
                part(e, "up", "weight"),
                part(e, "down", "weight"),
            );
            // gate_up[e][k][2j] = gate[j][k], [2j + 1] = up[j][k]; down[e][j][k] = down[k][j].
            for k in 0..h {
                gate_up.extend((0..ff).flat_map(|j| [g[j * h + k], u[j * h + k]]));
            }
            let (gb, ub) = (part(e, "gate", "bias"), part(e, "up", "bias"));
            gate_up_bias.extend(gb.iter().zip(&ub).flat_map(|(&g, &u)| [g, u]));
            for j in 0..ff {
                down.extend((0..h).map(|k| d[k * ff + j]));
            }
            down_bias.extend(part(e, "down", "bias"));
        }
        let t = |name: &str, shape: Vec<usize>, data: Vec<f32>| NamedTensor {
            name: format!("{l}.{name}"),
            shape,
            data,
        };
        out.extend([
            t("gate_up_proj", vec![experts, h, 2 * ff], gate_up),
            t("gate_up_proj_bias", vec![experts, 2 * ff], gate_up_bias),
            t("down_proj", vec![experts, ff, h], down),
            t("down_proj_bias", vec![experts, h], down_bias),
        ]);
    }
    out
}
