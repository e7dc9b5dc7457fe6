//! The MLPs' activations in f64, and the error function exact GELU needs.

use kiln_model::Activation;

/// The MLP's activation of one value, in f64 (of its gate, or of its one product where it
/// has no gate).
pub fn activation(act: Activation, g: f64) -> f64 {
    match act {
        Activation::Silu => g / (1.0 + (-g).exp()),
        Activation::GeluTanh => {
            let c = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * g * (1.0 + (c * (g + 0.044715 * g * g * g)).tanh())
        }
        Activation::Gelu => 0.5 * g * (1.0 + erf(g / std::f64::consts::SQRT_2)),
        Activation::Relu2 => g.max(0.0) * g.max(0.0),
        Activation::ClampedSwiglu => gated(act, g, 0.0),
    }
}

/// A gated MLP's activation of gate `g` and up `u`, in f64.
pub fn gated(act: Activation, g: f64, u: f64) -> f64 {
    match act {
        Activation::ClampedSwiglu => {
            let (g, u) = (g.min(7.0), u.clamp(-7.0, 7.0));
            g / (1.0 + (-1.702 * g).exp()) * (u + 1.0)
        }
        _ => activation(act, g) * u,
    }
}

/// The error function to f64's precision: `2/sqrt(pi) e^(-x^2) sum_n 2^n x^(2n+1) / (2n+1)!!`,
/// a series of positive terms (nothing cancels); past |x| = 6 it is ±1 within 2e-17.
pub fn erf(x: f64) -> f64 {
    if x.abs() > 6.0 {
        return x.signum();
    }
    let x2 = x * x;
    let (mut term, mut sum) = (x, x);
    for n in 1..400 {
        term *= 2.0 * x2 / (2 * n + 1) as f64;
        sum += term;
        if term.abs() <= 1e-17 * sum.abs() {
            break;
        }
    }
    2.0 / std::f64::consts::PI.sqrt() * (-x2).exp() * sum
}

#[cfg(test)]
mod tests {
    use super::erf;

    /// Against values of erf known to 16 digits, and its symmetry.
    #[test]
    fn erf_matches_known_values() {
        for (x, want) in [
            (0.0, 0.0),
            (0.1, 0.1124629160182849),
            (0.5, 0.5204998778130465),
            (1.0, 0.8427007929497149),
            (2.0, 0.9953222650189527),
            (3.0, 0.9999779095030014),
            (4.5, 0.9999999998033839),
        ] {
            assert!((erf(x) - want).abs() < 1e-15, "erf({x}) = {}", erf(x));
            assert!((erf(-x) + want).abs() < 1e-15);
        }
    }
}
