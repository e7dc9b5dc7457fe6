//! Causal attention on the CPU: each head's scores over the keys up to a position (its
//! window, soft cap, ALiBi bias and sink as the layer has them), and the values they weigh,
//! with K and V rounded as the KV cache holds them where the model says so.

use super::{CpuModel, alibi_slope, soft_cap};

impl CpuModel {
    /// Causal attention of every position's query over the keys and values up to it (within
    /// layer `i`'s window), each head's softmax with its sink logit where there are `sinks`.
    pub(super) fn attention(
        &self,
        i: usize,
        qkv: &[Vec<f32>],
        sinks: Option<&[f32]>,
    ) -> Vec<Vec<f32>> {
        let c = &self.config;
        let (nh, nkv, d) = (c.num_heads, c.num_kv_heads, c.head_dim);
        let window = c.layer_window(i);
        let held: Vec<Vec<f32>> = match self.kv {
            Some(dtype) => (qkv.iter())
                .map(|row| {
                    // K rounded in the order the cache holds it (the rotary pair layout),
                    // which decides q8_0's groups.
                    let k = &row[nh * d..(nh + nkv) * d];
                    let paired = |r| crate::ops::paired_row(r, d, c.rotary_dim());
                    let stored: Vec<f32> = (0..k.len()).map(|r| k[paired(r)]).collect();
                    let mut held = dtype.round(&[&stored[..], &row[(nh + nkv) * d..]].concat());
                    let mut k_held = vec![0f32; k.len()];
                    for (r, v) in held[..k.len()].iter().enumerate() {
                        k_held[paired(r)] = *v;
                    }
                    held[..k.len()].copy_from_slice(&k_held);
                    held
                })
                .collect(),
            None => qkv.iter().map(|row| row[nh * d..].to_vec()).collect(),
        };
        let k_at = |j: usize, kvh: usize| &held[j][kvh * d..(kvh + 1) * d];
        let v_at = |j: usize, kvh: usize| &held[j][(nkv + kvh) * d..(nkv + kvh + 1) * d];
        (0..qkv.len())
            .map(|pos| {
                let mut attn = vec![0f32; nh * d];
                for head in 0..nh {
                    let kvh = head / (nh / nkv);
                    let q = &qkv[pos][head * d..(head + 1) * d];
                    let first = window.map_or(0, |w| (pos + 1).saturating_sub(w));
                    let slope = c.alibi.map_or(0.0, |max| alibi_slope(head, nh, max));
                    let scores: Vec<f64> = (first..=pos)
                        .map(|j| {
                            let s = q
                                .iter()
                                .zip(k_at(j, kvh))
                                .map(|(a, b)| *a as f64 * *b as f64)
                                .sum::<f64>()
                                * c.attention_scale() as f64;
                            let s = c.attn_softcap.map_or(s, |cap| soft_cap(s, cap));
                            s - slope * (pos - j) as f64
                        })
                        .collect();
                    let sink = sinks.map(|s| s[head] as f64);
                    let m = (scores.iter().chain(&sink)).fold(f64::NEG_INFINITY, |a, &b| a.max(b));
                    let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
                    let z: f64 = e.iter().sum::<f64>() + sink.map_or(0.0, |s| (s - m).exp());
                    for x in 0..d {
                        attn[head * d + x] = (first..=pos)
                            .map(|j| e[j - first] / z * v_at(j, kvh)[x] as f64)
                            .sum::<f64>() as f32;
                    }
                }
                attn
            })
            .collect()
    }
}
