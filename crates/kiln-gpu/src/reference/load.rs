//! The reference model's weights read from a checkpoint as the GPU holds them: each
//! layer's operations ([`kiln_model::Op`]) turned into [`Step`]s with their tensors, the
//! embeddings, the final norm and the LM head.

use half::f16;
use kiln_model::{ModelConfig, ModelError, ModelTensors, Op, Tensor, Weights};

use super::step::Step;
use super::{CpuModel, experts};

fn f16_round(v: Vec<f32>) -> Vec<f32> {
    v.into_iter().map(|x| f16::from_f32(x).to_f32()).collect()
}

impl CpuModel {
    pub fn load(config: &ModelConfig, w: &Weights) -> Result<Self, ModelError> {
        // As the GPU holds them: kept-quantized types exactly, everything else through f16.
        let get = |n: &str| {
            let v = w.read_f32(n)?;
            Ok::<_, ModelError>(
                if crate::WeightFormat::for_dtype(w.dtype(n)?) == crate::WeightFormat::F16 {
                    f16_round(v)
                } else {
                    v
                },
            )
        };
        let tensors = ModelTensors::for_config(config);
        let read = |t: &Tensor| w.read_f32(&t.name);
        let norm = |t: &Tensor| config.read_gain(w, &t.name);
        let mut layers = Vec::new();
        for layer in &tensors.layers {
            let mut steps = Vec::new();
            for op in &layer.ops {
                steps.push(match op {
                    Op::NormedProject {
                        src,
                        norm: n,
                        weights,
                        bias,
                        dst,
                    } => {
                        // A stack (q, k, v; gate, up) read whole, fused or not.
                        let mut w = Vec::new();
                        for t in weights {
                            w.extend(get(&t.name)?);
                        }
                        let bias = match bias {
                            Some(parts) => {
                                let mut b = Vec::new();
                                for t in parts {
                                    b.extend(read(t)?);
                                }
                                Some(b)
                            }
                            None => None,
                        };
                        Step::NormedProject {
                            src: *src,
                            norm: n.as_ref().map(norm).transpose()?,
                            w,
                            bias,
                            dst: *dst,
                        }
                    }
                    Op::Rotary {
                        qk_norm,
                        norm_after,
                    } => Step::Rotary {
                        qk_norm: match qk_norm {
                            Some([q, k]) => Some((norm(q)?, norm(k)?)),
                            None => None,
                        },
                        norm_after: *norm_after,
                    },
                    Op::Attention { sinks } => Step::Attention {
                        sinks: sinks.as_ref().map(read).transpose()?,
                    },
                    Op::Project {
                        src,
                        weight,
                        bias,
                        dst,
                    } => Step::Project {
                        src: *src,
                        w: get(&weight.name)?,
                        bias: bias.as_ref().map(read).transpose()?,
                        dst: *dst,
                    },
                    Op::AddNormed { src, norm: n } => Step::AddNormed {
                        src: *src,
                        norm: norm(n)?,
                    },
                    Op::LayerNorm { norm: n, bias, dst } => Step::LayerNorm {
                        norm: norm(n)?,
                        bias: bias.as_ref().map(read).transpose()?,
                        dst: *dst,
                    },
                    Op::GatedActivation => Step::GatedActivation,
                    Op::Activation => Step::Activation,
                    Op::Experts(e) => {
                        let all = |ts: &[Tensor]| -> Result<Vec<f32>, ModelError> {
                            let mut v = Vec::new();
                            for t in ts {
                                v.extend(get(&t.name)?);
                            }
                            Ok(v)
                        };
                        let opt = |t: &Option<Tensor>| t.as_ref().map(|t| get(&t.name)).transpose();
                        let biases = |ts: &Option<Vec<Tensor>>| -> Result<_, ModelError> {
                            let Some(ts) = ts else { return Ok(None) };
                            let mut v = Vec::new();
                            for t in ts {
                                v.extend(read(t)?);
                            }
                            Ok(Some(v))
                        };
                        Step::Experts(experts::Experts {
                            moe: config.moe.expect("a layer with experts has a MoE config"),
                            norm: norm(&e.norm)?,
                            router: get(&e.router.name)?,
                            router_bias: e.router_bias.as_ref().map(read).transpose()?,
                            choice_bias: opt(&e.choice_bias)?,
                            shared_gate: opt(&e.shared_gate)?,
                            gate_up: all(&e.gate_up)?,
                            down: all(&e.down)?,
                            gate_up_bias: biases(&e.gate_up_bias)?,
                            down_bias: biases(&e.down_bias)?,
                        })
                    }
                });
            }
            layers.push(steps);
        }
        let embed = get(&tensors.embed.name)?;
        let lm_head = match tensors.lm_head.as_ref().filter(|t| w.contains(&t.name)) {
            Some(t) => get(&t.name)?,
            None => embed.clone(),
        };
        Ok(Self {
            config: config.clone(),
            embed,
            positions: tensors.positions.as_ref().map(read).transpose()?,
            embed_norm: match &tensors.embed_norm {
                Some([g, b]) => Some([read(g)?, read(b)?]),
                None => None,
            },
            layers,
            norm: norm(&tensors.final_norm)?,
            norm_bias: tensors.final_norm_bias.as_ref().map(read).transpose()?,
            lm_head,
            lm_head_bias: tensors.lm_head_bias.as_ref().map(read).transpose()?,
            kv: None,
        })
    }
}
