// The gated activations, appended by the kernel loader to the kernels that apply one: glu.wgsl
// and the matrix kernels' epilogue_glu.wgsl. act(gate) is SiLU (SwiGLU: Llama, Qwen) or GELU
// with the tanh approximation (GeGLU: Gemma); `gelu` picks the second.

// sqrt(2 / pi)
const GELU_C: f32 = 0.7978845608028654;

fn activation(x: f32, gelu: bool) -> f32 {
    if (gelu) {
        // tanh(z) = 1 - 2 / (exp(2z) + 1), with z clamped where tanh is already +-1 in f32 so
        // that exp cannot overflow.
        let z = clamp(GELU_C * (x + 0.044715 * x * x * x), -15.0, 15.0);
        let t = 1.0 - 2.0 / (exp(2.0 * z) + 1.0);
        return 0.5 * x * (1.0 + t);
    }
    return x / (1.0 + exp(-x));
}
