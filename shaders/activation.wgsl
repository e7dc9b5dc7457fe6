// The gated activations, appended by the kernel loader to the kernels that apply one: glu.wgsl
// and the matrix kernels' epilogue_glu.wgsl. `gated(gate, up, kind)` is act(gate) * up with act
// SiLU (kind 0, SwiGLU: Llama, Qwen) or GELU with the tanh approximation (kind 1, GeGLU:
// Gemma), or gpt-oss's clamped SwiGLU (kind 2): gate clamped above at 7, up to [-7, 7], then
// gate * sigmoid(1.702 gate) * (up + 1); or exact GELU, x * Phi(x) (kind 3: GPT-NeoX's).

// sqrt(2 / pi)
const GELU_C: f32 = 0.7978845608028654;

// erf(x) to within 1.5e-7 (Abramowitz and Stegun's 7.1.26 rational approximation), odd.
fn erf_approx(x: f32) -> f32 {
    let a = abs(x);
    let t = 1.0 / (1.0 + 0.3275911 * a);
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741
        + t * (-1.453152027 + t * 1.061405429))));
    return sign(x) * (1.0 - poly * exp(-a * a));
}

fn gated(gate: f32, up: f32, kind: u32) -> f32 {
    if (kind == 3u) {
        // 1 / sqrt(2)
        return 0.5 * gate * (1.0 + erf_approx(gate * 0.7071067811865476)) * up;
    }
    if (kind == 1u) {
        // tanh(z) = 1 - 2 / (exp(2z) + 1), with z clamped where tanh is already +-1 in f32 so
        // that exp cannot overflow.
        let z = clamp(GELU_C * (gate + 0.044715 * gate * gate * gate), -15.0, 15.0);
        let t = 1.0 - 2.0 / (exp(2.0 * z) + 1.0);
        return 0.5 * gate * (1.0 + t) * up;
    }
    if (kind == 2u) {
        let g = min(gate, 7.0);
        return g / (1.0 + exp(-1.702 * g)) * (clamp(up, -7.0, 7.0) + 1.0);
    }
    return gate / (1.0 + exp(-gate)) * up;
}
