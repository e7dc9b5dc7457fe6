//! The q8_0 KV cache's numbers: each run of 32 consecutive elements of a slot's K (or V) row
//! (a group) as signed bytes times one f16 scale, the group's largest magnitude over 127 (the
//! numbers of a GGUF Q8_0 block). Where they sit in the cache is `KvLayout`'s; the kernels
//! (`shaders/kv_codec.wgsl`) quantize and dequantize the same way.

use half::f16;

/// Elements per scale.
pub const GROUP: usize = 32;

/// The scale of a group: its largest magnitude times 1 / 127 (as the kernels compute it),
/// rounded to f16.
pub fn scale(group: &[f32]) -> f16 {
    f16::from_f32(group.iter().fold(0f32, |m, v| m.max(v.abs())) * (1.0 / 127.0))
}

/// `v` in steps of `scale`, ties to even, within +-127 (0 for a group of zeros).
pub fn quantize(v: f32, scale: f16) -> i8 {
    let s = scale.to_f32();
    if s == 0.0 {
        return 0;
    }
    (v / s).round_ties_even().clamp(-127.0, 127.0) as i8
}

/// `values` (a whole number of groups) as the cache gives them back.
pub fn round(values: &[f32]) -> Vec<f32> {
    values
        .chunks(GROUP)
        .flat_map(|g| {
            let s = scale(g);
            g.iter().map(move |&v| quantize(v, s) as f32 * s.to_f32())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_keep_their_largest_value_and_half_a_step_elsewhere() {
        let g: Vec<f32> = (0..GROUP).map(|i| (i as f32 - 11.3) * 0.37).collect();
        let s = scale(&g).to_f32();
        let r = round(&g);
        for (a, b) in g.iter().zip(&r) {
            assert!((a - b).abs() <= s / 2.0 * 1.001, "{a} -> {b} (step {s})");
        }
        let max = g.iter().fold(0f32, |m, v| m.max(v.abs()));
        assert!((r.iter().fold(0f32, |m, v| m.max(v.abs())) - max).abs() < max * 1e-3);
        assert_eq!(round(&[0.0; GROUP]), vec![0.0; GROUP]);
        // A second group with its own scale: tiny values keep their precision.
        let mixed: Vec<f32> = [vec![100.0; GROUP], vec![0.01; GROUP]].concat();
        assert!((round(&mixed)[GROUP] - 0.01).abs() < 1e-6);
    }
}
