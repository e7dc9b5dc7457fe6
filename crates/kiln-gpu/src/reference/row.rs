//! What the forward pass does to one row, accumulating in f64: its product with a matrix,
//! RMSNorm and LayerNorm, and the rotary embedding's turn of one head.

/// `y = W x` for `W` of shape `(rows, x.len())`.
pub fn matvec(w: &[f32], x: &[f32]) -> Vec<f32> {
    w.chunks(x.len())
        .map(|row| {
            row.iter()
                .zip(x)
                .map(|(a, b)| *a as f64 * *b as f64)
                .sum::<f64>() as f32
        })
        .collect()
}

pub fn rmsnorm(x: &[f32], gain: &[f32], eps: f32) -> Vec<f32> {
    let ms = x.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / x.len() as f64;
    let inv = 1.0 / (ms + eps as f64).sqrt();
    x.iter()
        .zip(gain)
        .map(|(v, g)| (*v as f64 * inv) as f32 * g)
        .collect()
}

/// `(x - mean(x)) / sqrt(var(x) + eps) * gain`: a LayerNorm without a bias (Cohere's); see
/// [`layernorm_bias`].
pub fn layernorm(x: &[f32], gain: &[f32], eps: f32) -> Vec<f32> {
    let n = x.len() as f64;
    let mean = x.iter().map(|v| *v as f64).sum::<f64>() / n;
    let var = x.iter().map(|v| (*v as f64 - mean).powi(2)).sum::<f64>() / n;
    let inv = 1.0 / (var + eps as f64).sqrt();
    x.iter()
        .zip(gain)
        .map(|(v, g)| ((*v as f64 - mean) * inv) as f32 * g)
        .collect()
}

/// A LayerNorm plus `bias` where there is one (StableLM's).
pub fn layernorm_bias(x: &[f32], gain: &[f32], bias: Option<&[f32]>, eps: f32) -> Vec<f32> {
    let mut y = layernorm(x, gain, eps);
    if let Some(b) = bias {
        y.iter_mut().zip(b).for_each(|(y, b)| *y += b);
    }
    y
}

/// Rotates one head in place (HF rotate_half layout), in f64, with cos and sin multiplied by
/// `scale` (LongRoPE's attention factor; 1 otherwise).
pub fn rope(head: &mut [f32], pos: usize, inv_freq: &[f64], scale: f64) {
    let half = head.len() / 2;
    for i in 0..half {
        let (s, c) = (pos as f64 * inv_freq[i]).sin_cos();
        let (s, c) = (s * scale, c * scale);
        let (x1, x2) = (head[i] as f64, head[i + half] as f64);
        head[i] = (x1 * c - x2 * s) as f32;
        head[i + half] = (x2 * c + x1 * s) as f32;
    }
}
