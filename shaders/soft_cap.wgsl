// Gemma 2's soft cap, `cap * tanh(x / cap)` (x itself where cap is 0: no cap), shared by the
// attention kernels (on scores, SOFTCAP) and the matrix kernels' epilogue (on logits).
// tanh's argument is kept within 15, where tanh is 1 to f32's precision, so an exp-based tanh
// cannot overflow. Appended to the kernels that call it.
fn soft_capped(x: f32, cap: f32) -> f32 {
    if (cap <= 0.0) {
        return x;
    }
    return cap * tanh(clamp(x / cap, -15.0, 15.0));
}
