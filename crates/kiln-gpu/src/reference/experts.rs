//! A mixture of experts on the CPU, as the GPU runs it: the router's scores and choice of
//! experts ([`route`]), then each chosen expert's gated MLP, weighted and summed, and a gated
//! shared expert's gate ([`Experts::forward`]).

use kiln_model::{Activation, Moe, Scoring};

use super::{gated, matvec, rmsnorm};

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Part `i` of `w` values of the biases `b`, if any.
fn bias(b: &Option<Vec<f32>>, i: usize, w: usize) -> Option<&[f32]> {
    b.as_ref().map(|b| &b[i * w..][..w])
}

/// `v += b`, where there is a bias.
fn add(v: &mut [f32], b: Option<&[f32]>) {
    if let Some(b) = b {
        v.iter_mut().zip(b).for_each(|(v, b)| *v += b);
    }
}

/// One token's experts and their weights from its router `logits`: scored by the softmax
/// or each logit's sigmoid ([`Scoring`]), the `experts_per_token` best (the lower index first
/// among equals) by their scores, or by their scores plus `choice_bias`; weighted by their
/// scores (renormalized over the chosen ones where `moe.normalize`), times `moe.scale`.
pub fn route(logits: &[f32], choice_bias: Option<&[f32]>, moe: &Moe) -> Vec<(usize, f32)> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = logits.iter().map(|&l| (l as f64 - max).exp()).sum();
    let score: Vec<f64> = (logits.iter())
        .map(|&l| match moe.scoring {
            Scoring::Sigmoid => sigmoid(l as f64),
            Scoring::Softmax => (l as f64 - max).exp() / sum,
        })
        .collect();
    let choice: Vec<f32> = match choice_bias {
        Some(b) => (score.iter().zip(b)).map(|(&s, &b)| s as f32 + b).collect(),
        None => logits.to_vec(),
    };
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| choice[b].total_cmp(&choice[a]).then(a.cmp(&b)));
    order.truncate(moe.experts_per_token);
    let total = match moe.normalize {
        true => order.iter().map(|&e| score[e]).sum(),
        false => 1.0,
    };
    order
        .into_iter()
        .map(|e| (e, (score[e] / total * moe.scale as f64) as f32))
        .collect()
}

/// A layer's experts, their matrices row-major as the files hold them.
pub(super) struct Experts {
    pub moe: Moe,
    pub norm: Vec<f32>,
    /// (experts, hidden).
    pub router: Vec<f32>,
    /// A bias on the router's logits (experts).
    pub router_bias: Option<Vec<f32>>,
    /// Each expert's bias in the choice (sigmoid scoring).
    pub choice_bias: Option<Vec<f32>>,
    /// A gated shared expert's gate, (hidden).
    pub shared_gate: Option<Vec<f32>>,
    /// Every expert's gate (intermediate, hidden), then every expert's up.
    pub gate_up: Vec<f32>,
    /// Every expert's down (hidden, intermediate).
    pub down: Vec<f32>,
    /// Every expert's gate bias (intermediate), then every expert's up bias.
    pub gate_up_bias: Option<Vec<f32>>,
    /// Every expert's down bias (hidden).
    pub down_bias: Option<Vec<f32>>,
}

impl Experts {
    /// What the routed experts add to residual row `x`, and the factor of a gated shared
    /// expert's activations.
    pub fn forward(&self, x: &[f32], eps: f32, act: Activation) -> (Vec<f32>, Option<f32>) {
        let (h, ff, n) = (x.len(), self.moe.intermediate_size, self.moe.experts);
        let xn = rmsnorm(x, &self.norm, eps);
        let mut out = vec![0f32; h];
        let mut logits = matvec(&self.router, &xn);
        add(&mut logits, self.router_bias.as_deref());
        for (e, weight) in route(&logits, self.choice_bias.as_deref(), &self.moe) {
            let mut gate = matvec(&self.gate_up[e * ff * h..][..ff * h], &xn);
            let mut up = matvec(&self.gate_up[(n + e) * ff * h..][..ff * h], &xn);
            add(&mut gate, bias(&self.gate_up_bias, e, ff));
            add(&mut up, bias(&self.gate_up_bias, n + e, ff));
            let a: Vec<f32> = (gate.iter().zip(&up))
                .map(|(&g, &u)| gated(act, g as f64, u as f64) as f32)
                .collect();
            let mut y = matvec(&self.down[e * h * ff..][..h * ff], &a);
            add(&mut y, bias(&self.down_bias, e, h));
            out.iter_mut().zip(y).for_each(|(o, y)| *o += weight * y);
        }
        let gate = (self.shared_gate.as_ref()).map(|g| sigmoid(matvec(g, &xn)[0] as f64) as f32);
        (out, gate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_picks_the_likeliest_and_weighs_them() {
        let moe = |normalize| Moe::softmax(4, 2, 1, normalize);
        let logits = [0.0, 2.0, 1.0, 2.0];
        let r = route(&logits, None, &moe(true));
        assert_eq!((r[0].0, r[1].0), (1, 3), "ties: the lower index first");
        assert!((r[0].1 - 0.5).abs() < 1e-6 && (r[1].1 - 0.5).abs() < 1e-6);
        let r = route(&logits, None, &moe(false));
        let total: f64 = logits.iter().map(|&l| (l as f64).exp()).sum();
        assert!((r[0].1 as f64 - 2f64.exp() / total).abs() < 1e-6);
    }

    #[test]
    fn biased_routing_chooses_with_the_bias_and_weighs_without() {
        let moe = |normalize| Moe {
            scoring: Scoring::Sigmoid,
            choice_bias: true,
            scale: 2.5,
            ..Moe::softmax(4, 2, 1, normalize)
        };
        let logits = [0.0, 2.0, 1.0, -1.0];
        // Expert 3's bias lifts it over expert 1, the likeliest by its logit.
        let bias = [0.0, 0.0, 0.0, 1.0];
        let r = route(&logits, Some(&bias), &moe(false));
        assert_eq!((r[0].0, r[1].0), (3, 1));
        let s = |l: f64| 1.0 / (1.0 + (-l).exp());
        assert!((r[0].1 as f64 - 2.5 * s(-1.0)).abs() < 1e-6);
        let r = route(&logits, Some(&bias), &moe(true));
        let sum = s(-1.0) + s(2.0);
        assert!((r[1].1 as f64 - 2.5 * s(2.0) / sum).abs() < 1e-6);
    }
}
