//! A mixture of experts on the CPU, as the GPU runs it: the router's softmax and choice of
//! experts ([`route`]), then each chosen expert's gated MLP, weighted and summed
//! ([`Experts::forward`]).

use kiln_model::{Activation, Moe};

use super::{activation, matvec, rmsnorm};

/// One token's experts and their weights from its router `logits`: the softmax's
/// `experts_per_token` most likely (the lower index first among equals), their
/// probabilities renormalized over the chosen ones where `moe.normalize`.
pub fn route(logits: &[f32], moe: &Moe) -> Vec<(usize, f32)> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let exp: Vec<f64> = logits.iter().map(|&l| (l as f64 - max).exp()).collect();
    let sum: f64 = exp.iter().sum();
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
    order.truncate(moe.experts_per_token);
    let chosen: f64 = order.iter().map(|&e| exp[e]).sum();
    let scale = if moe.normalize { chosen } else { sum };
    order
        .into_iter()
        .map(|e| (e, (exp[e] / scale) as f32))
        .collect()
}

/// A layer's experts, their matrices row-major as the files hold them.
pub(super) struct Experts {
    pub moe: Moe,
    pub norm: Vec<f32>,
    /// (experts, hidden).
    pub router: Vec<f32>,
    /// Every expert's gate (intermediate, hidden), then every expert's up.
    pub gate_up: Vec<f32>,
    /// Every expert's down (hidden, intermediate).
    pub down: Vec<f32>,
}

impl Experts {
    /// What the experts add to residual row `x`.
    pub fn forward(&self, x: &[f32], eps: f32, act: Activation) -> Vec<f32> {
        let (h, ff, n) = (x.len(), self.moe.intermediate_size, self.moe.experts);
        let xn = rmsnorm(x, &self.norm, eps);
        let mut out = vec![0f32; h];
        for (e, weight) in route(&matvec(&self.router, &xn), &self.moe) {
            let gate = matvec(&self.gate_up[e * ff * h..][..ff * h], &xn);
            let up = matvec(&self.gate_up[(n + e) * ff * h..][..ff * h], &xn);
            let a: Vec<f32> = (gate.iter().zip(&up))
                .map(|(&g, &u)| (activation(act, g as f64) * u as f64) as f32)
                .collect();
            let y = matvec(&self.down[e * h * ff..][..h * ff], &a);
            out.iter_mut().zip(y).for_each(|(o, y)| *o += weight * y);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_picks_the_likeliest_and_weighs_them() {
        let moe = |normalize| Moe {
            experts: 4,
            experts_per_token: 2,
            intermediate_size: 1,
            normalize,
        };
        let logits = [0.0, 2.0, 1.0, 2.0];
        let r = route(&logits, &moe(true));
        assert_eq!((r[0].0, r[1].0), (1, 3), "ties: the lower index first");
        assert!((r[0].1 - 0.5).abs() < 1e-6 && (r[1].1 - 0.5).abs() < 1e-6);
        let r = route(&logits, &moe(false));
        let total: f64 = logits.iter().map(|&l| (l as f64).exp()).sum();
        assert!((r[0].1 as f64 - 2f64.exp() / total).abs() < 1e-6);
    }
}
