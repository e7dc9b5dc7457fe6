//! Reference quantizers (f32 → every supported block type, plus plain float encodings), used by
//! the test GGUF writer. Inverse of `gguf::dequant`; simple round-to-nearest, not llama.cpp's
//! error-minimizing search (files from llama.cpp's quantizer are tested separately).

use half::{bf16, f16};

use super::kquant_enc;
use crate::gguf::dequant::{DType, QK, QK_K};
use crate::gguf::nonlinear::{IQ4_VALUES, MXFP4_VALUES, mxfp4_half_scale};

/// Encodes `data` as `dtype` (block types need a length that is a multiple of 32).
pub fn quantize(dtype: DType, data: &[f32]) -> Vec<u8> {
    match dtype {
        DType::F32 => data.iter().flat_map(|x| x.to_le_bytes()).collect(),
        DType::F16 => data
            .iter()
            .flat_map(|&x| f16::from_f32(x).to_le_bytes())
            .collect(),
        DType::BF16 => data
            .iter()
            .flat_map(|&x| bf16::from_f32(x).to_le_bytes())
            .collect(),
        DType::Q8_0 => data.chunks(QK).flat_map(q8_0_block).collect(),
        DType::Q4_0 => data.chunks(QK).flat_map(q4_0_block).collect(),
        DType::Q4_1 => data.chunks(QK).flat_map(q4_1_block).collect(),
        DType::Q5_0 => data.chunks(QK).flat_map(|b| q5_block(b, false)).collect(),
        DType::Q5_1 => data.chunks(QK).flat_map(|b| q5_block(b, true)).collect(),
        DType::Q2_K => data.chunks(QK_K).flat_map(kquant_enc::q2_k).collect(),
        DType::Q3_K => data.chunks(QK_K).flat_map(kquant_enc::q3_k).collect(),
        DType::Q4_K => data
            .chunks(QK_K)
            .flat_map(|b| kquant_enc::q45_k(b, false))
            .collect(),
        DType::Q5_K => data
            .chunks(QK_K)
            .flat_map(|b| kquant_enc::q45_k(b, true))
            .collect(),
        DType::Q6_K => data.chunks(QK_K).flat_map(kquant_enc::q6_k).collect(),
        DType::MXFP4 => data.chunks(QK).flat_map(mxfp4_block).collect(),
        DType::IQ4_NL => data.chunks(QK).flat_map(iq4_nl_block).collect(),
        DType::IQ4_XS => data.chunks(QK_K).flat_map(iq4_xs_block).collect(),
    }
}

fn q8_0_block(x: &[f32]) -> Vec<u8> {
    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut out = f16::from_f32(d).to_le_bytes().to_vec();
    out.extend(
        x.iter()
            .map(|v| ((v * id).round().clamp(-127.0, 127.0) as i8) as u8),
    );
    out
}

fn pack_nibbles(q: &[u8]) -> impl Iterator<Item = u8> + '_ {
    (0..QK / 2).map(move |j| q[j] | (q[j + QK / 2] << 4))
}

fn q4_0_block(x: &[f32]) -> Vec<u8> {
    // The value with the largest magnitude maps to -8 exactly.
    let max = x
        .iter()
        .fold(0f32, |m, &v| if v.abs() > m.abs() { v } else { m });
    let d = max / -8.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let q: Vec<u8> = x
        .iter()
        .map(|v| ((v * id + 8.5) as i32).clamp(0, 15) as u8)
        .collect();
    let mut out = f16::from_f32(d).to_le_bytes().to_vec();
    out.extend(pack_nibbles(&q));
    out
}

fn q4_1_block(x: &[f32]) -> Vec<u8> {
    let min = x.iter().cloned().fold(f32::INFINITY, f32::min);
    let max = x.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    let d = (max - min) / 15.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let q: Vec<u8> = x
        .iter()
        .map(|v| (((v - min) * id + 0.5) as i32).clamp(0, 15) as u8)
        .collect();
    let mut out = f16::from_f32(d).to_le_bytes().to_vec();
    out.extend(f16::from_f32(min).to_le_bytes());
    out.extend(pack_nibbles(&q));
    out
}

/// Q5_0: symmetric, the largest magnitude maps to -16; Q5_1: min/max over 31 steps.
fn q5_block(x: &[f32], with_min: bool) -> Vec<u8> {
    let (d, m) = if with_min {
        let min = x.iter().cloned().fold(f32::INFINITY, f32::min);
        let max = x.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        ((max - min) / 31.0, min)
    } else {
        let max = x
            .iter()
            .fold(0f32, |m, &v| if v.abs() > m.abs() { v } else { m });
        (max / -16.0, 0.0)
    };
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let q: Vec<u8> = x
        .iter()
        .map(|v| {
            let q = if with_min {
                (v - m) * id + 0.5
            } else {
                v * id + 16.5
            };
            (q as i32).clamp(0, 31) as u8
        })
        .collect();
    let mut out = f16::from_f32(d).to_le_bytes().to_vec();
    if with_min {
        out.extend(f16::from_f32(m).to_le_bytes());
    }
    let qh = q
        .iter()
        .enumerate()
        .fold(0u32, |h, (j, &v)| h | (((v >> 4) & 1) as u32) << j);
    out.extend(qh.to_le_bytes());
    let low: Vec<u8> = q.iter().map(|v| v & 0x0F).collect();
    out.extend(pack_nibbles(&low));
    out
}

/// MXFP4: the exponent that puts the largest magnitude within the top value's step (6 * 2^(e -
/// 127) covers it), each value then the nearest of the sixteen.
fn mxfp4_block(x: &[f32]) -> Vec<u8> {
    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    // floor(log2(amax)) - 2 + 127: amax / 2^(e - 127) lies in [4, 8), near the top value 6.
    let e = if amax > 0.0 {
        (amax.log2().floor() as i32 + 125).clamp(0, 254) as u8
    } else {
        0
    };
    let d = mxfp4_half_scale(e);
    let nearest = |v: f32| {
        (0..16u8)
            .min_by(|&a, &b| {
                let ea = (MXFP4_VALUES[a as usize] as f32 * d - v).abs();
                let eb = (MXFP4_VALUES[b as usize] as f32 * d - v).abs();
                ea.total_cmp(&eb)
            })
            .unwrap_or(0)
    };
    let q: Vec<u8> = x.iter().map(|&v| nearest(v)).collect();
    let mut out = vec![e];
    out.extend(pack_nibbles(&q));
    out
}

/// The signed step that puts the largest magnitude of `x` on IQ4's outermost level, -127.
fn iq4_step(x: &[f32]) -> f32 {
    x.iter()
        .fold(0f32, |m, &v| if v.abs() > m.abs() { v } else { m })
        / -127.0
}

/// The nibbles (Q4_0's layout) of the IQ4 levels nearest to `x / d`.
fn iq4_nibbles(x: &[f32], d: f32) -> Vec<u8> {
    let q: Vec<u8> = x
        .iter()
        .map(|&v| {
            let t = if d != 0.0 { v / d } else { 0.0 };
            (0..16u8)
                .min_by(|&a, &b| {
                    let ea = (IQ4_VALUES[a as usize] as f32 - t).abs();
                    let eb = (IQ4_VALUES[b as usize] as f32 - t).abs();
                    ea.total_cmp(&eb)
                })
                .unwrap_or(0)
        })
        .collect();
    pack_nibbles(&q).collect()
}

fn iq4_nl_block(x: &[f32]) -> Vec<u8> {
    let d = f16::from_f32(iq4_step(x));
    let mut out = d.to_le_bytes().to_vec();
    out.extend(iq4_nibbles(x, d.to_f32()));
    out
}

/// IQ4_XS: each sub-block of 32 its signed step, the steps as 6-bit multiples of an f16 `d`.
fn iq4_xs_block(x: &[f32]) -> Vec<u8> {
    let steps: Vec<f32> = x.chunks(QK).map(iq4_step).collect();
    let (d, sc) = kquant_enc::signed_scales(&steps);
    let df = d.to_f32();
    let (mut scales_h, mut scales_l) = (0u16, [0u8; 4]);
    for (ib, &s) in sc.iter().enumerate() {
        let u = (s + 32) as u8;
        scales_l[ib / 2] |= (u & 0x0F) << (4 * (ib % 2));
        scales_h |= ((u >> 4) as u16) << (2 * ib);
    }
    let mut out = d.to_le_bytes().to_vec();
    out.extend(scales_h.to_le_bytes());
    out.extend(scales_l);
    for (sub, &s) in x.chunks(QK).zip(&sc) {
        out.extend(iq4_nibbles(sub, df * s as f32));
    }
    out
}
