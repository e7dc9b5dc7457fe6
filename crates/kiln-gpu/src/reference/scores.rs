//! What the attention scores gain besides the product of query and key: Gemma 2's soft cap,
//! and ALiBi's biases (BLOOM, MPT).

/// `cap * tanh(x / cap)`: Gemma 2's soft cap.
pub fn soft_cap(x: f64, cap: f32) -> f64 {
    let cap = cap as f64;
    cap * (x / cap).tanh()
}

/// ALiBi's slope of query head `h` of `n` with bias maximum `max`: the first `m` heads (the
/// largest power of two at most `n`) at `2^(-max (h + 1) / m)`, the others between them, at
/// `2^(-max (2 (h - m) + 1) / 2m)`, as BLOOM and MPT compute them.
pub fn alibi_slope(h: usize, n: usize, max: f32) -> f64 {
    let m = 1usize << n.ilog2();
    let max = max as f64;
    match h < m {
        true => (-max * (h + 1) as f64 / m as f64).exp2(),
        false => (-max * (2 * (h - m) + 1) as f64 / (2 * m) as f64).exp2(),
    }
}
