//! Reference K-quant encoders (f32 → Q2_K / Q3_K / Q4_K / Q5_K / Q6_K super-blocks) for the test GGUF writer:
//! per sub-block min/max, 6-bit (or signed 8-bit) sub-block scales under an f16 factor, round to
//! nearest.

use half::f16;

fn round_q(v: f32, max: i32) -> u8 {
    (v.round() as i32).clamp(0, max) as u8
}

/// Q4_K (`fifth_bit` false) or Q5_K (true) encoding of 256 values.
pub fn q45_k(x: &[f32], fifth_bit: bool) -> Vec<u8> {
    let levels = if fifth_bit { 31.0 } else { 15.0 };
    // Per sub-block: step and (non-negative) amount subtracted, value = step * q - offset.
    let mut steps = [0f32; 8];
    let mut offsets = [0f32; 8];
    for (j, sub) in x.chunks(32).enumerate() {
        let min = sub.iter().cloned().fold(0f32, f32::min);
        let max = sub.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        steps[j] = (max - min) / levels;
        offsets[j] = -min;
    }
    let d = steps.iter().cloned().fold(0f32, f32::max) / 63.0;
    let dmin = offsets.iter().cloned().fold(0f32, f32::max) / 63.0;
    let (d, dmin) = (f16::from_f32(d), f16::from_f32(dmin));
    let (df, dminf) = (d.to_f32(), dmin.to_f32());
    let mut sc = [0u8; 8];
    let mut mn = [0u8; 8];
    for j in 0..8 {
        sc[j] = if df > 0.0 {
            round_q(steps[j] / df, 63)
        } else {
            0
        };
        mn[j] = if dminf > 0.0 {
            round_q(offsets[j] / dminf, 63)
        } else {
            0
        };
    }
    let mut packed = [0u8; 12];
    for j in 0..4 {
        packed[j] = sc[j] | (sc[j + 4] >> 4) << 6;
        packed[j + 4] = mn[j] | (mn[j + 4] >> 4) << 6;
        packed[j + 8] = (sc[j + 4] & 0x0F) | (mn[j + 4] & 0x0F) << 4;
    }
    let max_q = levels as i32;
    let q: Vec<u8> = x
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let (step, off) = (df * sc[i / 32] as f32, dminf * mn[i / 32] as f32);
            if step > 0.0 {
                round_q((v + off) / step, max_q)
            } else {
                0
            }
        })
        .collect();
    let mut out = d.to_le_bytes().to_vec();
    out.extend(dmin.to_le_bytes());
    out.extend(packed);
    if fifth_bit {
        let mut qh = [0u8; 32];
        for (i, &v) in q.iter().enumerate() {
            qh[i % 32] |= ((v >> 4) & 1) << (i / 32);
        }
        out.extend(qh);
    }
    for pair in 0..4 {
        let base = 64 * pair;
        out.extend((0..32).map(|l| (q[base + l] & 0x0F) | (q[base + 32 + l] & 0x0F) << 4));
    }
    out
}

/// Q6_K encoding of 256 values.
pub fn q6_k(x: &[f32]) -> Vec<u8> {
    let mut steps = [0f32; 16];
    for (j, sub) in x.chunks(16).enumerate() {
        let amax = sub.iter().fold(0f32, |m, v| m.max(v.abs()));
        steps[j] = amax / 31.0;
    }
    let d = f16::from_f32(steps.iter().cloned().fold(0f32, f32::max) / 127.0);
    let df = d.to_f32();
    let sc: Vec<i8> = steps
        .iter()
        .map(|&s| {
            if df > 0.0 {
                (s / df).round().clamp(-128.0, 127.0) as i8
            } else {
                0
            }
        })
        .collect();
    let q: Vec<u8> = x
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let step = df * sc[i / 16] as f32;
            if step != 0.0 {
                ((v / step).round() as i32 + 32).clamp(0, 63) as u8
            } else {
                32
            }
        })
        .collect();
    let mut ql = [0u8; 128];
    let mut qh = [0u8; 64];
    for half in 0..2 {
        let q = &q[128 * half..];
        for l in 0..32 {
            ql[64 * half + l] = (q[l] & 0x0F) | (q[l + 64] & 0x0F) << 4;
            ql[64 * half + l + 32] = (q[l + 32] & 0x0F) | (q[l + 96] & 0x0F) << 4;
            qh[32 * half + l] =
                (q[l] >> 4) | (q[l + 32] >> 4) << 2 | (q[l + 64] >> 4) << 4 | (q[l + 96] >> 4) << 6;
        }
    }
    let mut out = ql.to_vec();
    out.extend(qh);
    out.extend(sc.iter().map(|&s| s as u8));
    out.extend(d.to_le_bytes());
    out
}

/// Signed sub-block steps as 6-bit multiples (-32..31) of an f16 factor (Q3_K's and IQ4_XS's
/// scales): the factor, and each step's multiple.
pub fn signed_scales(steps: &[f32]) -> (f16, Vec<i32>) {
    let d = f16::from_f32(steps.iter().fold(0f32, |m, s| m.max(s.abs())) / 31.0);
    let df = d.to_f32();
    let sc = steps
        .iter()
        .map(|&s| match df > 0.0 {
            true => ((s / df).round() as i32).clamp(-32, 31),
            false => 0,
        })
        .collect();
    (d, sc)
}

/// Q3_K encoding of 256 values: each sub-block of 16 a signed step (its largest magnitude at
/// -4 steps), the steps as 6-bit multiples of an f16 `d`, values rounded to -4..3 steps.
pub fn q3_k(x: &[f32]) -> Vec<u8> {
    let steps: Vec<f32> = x
        .chunks(16)
        .map(|sub| {
            sub.iter()
                .fold(0f32, |m, &v| if v.abs() > m.abs() { v } else { m })
                / -4.0
        })
        .collect();
    let (d, sc) = signed_scales(&steps);
    let df = d.to_f32();
    let mut out = vec![0u8; 110];
    for (i, &v) in x.iter().enumerate() {
        let step = df * sc[i / 16] as f32;
        let q = match step != 0.0 {
            true => ((v / step).round() as i32).clamp(-4, 3) + 4,
            false => 4,
        } as u8;
        let (h, j, l) = (i / 128, (i % 128) / 32, i % 32);
        out[32 + 32 * h + l] |= (q & 3) << (2 * j);
        out[l] |= (q >> 2) << (4 * h + j);
    }
    for (i, &s) in sc.iter().enumerate() {
        let u = (s + 32) as u8;
        out[96 + i % 8] |= (u & 0x0F) << (4 * (i / 8));
        out[96 + 8 + i % 4] |= (u >> 4) << (2 * (i / 4));
    }
    out[108..110].copy_from_slice(&d.to_le_bytes());
    out
}

/// Q2_K encoding of 256 values: each sub-block of 16 its minimum (at most 0) and a step to its
/// maximum over 3 levels, both as 4-bit multiples of the f16 `dmin` and `d`.
pub fn q2_k(x: &[f32]) -> Vec<u8> {
    let (mut steps, mut offsets) = ([0f32; 16], [0f32; 16]);
    for (j, sub) in x.chunks(16).enumerate() {
        let min = sub.iter().cloned().fold(0f32, f32::min);
        let max = sub.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        steps[j] = (max - min) / 3.0;
        offsets[j] = -min;
    }
    let d = f16::from_f32(steps.iter().cloned().fold(0f32, f32::max) / 15.0);
    let dmin = f16::from_f32(offsets.iter().cloned().fold(0f32, f32::max) / 15.0);
    let (df, dminf) = (d.to_f32(), dmin.to_f32());
    let sc: Vec<u8> = (0..16)
        .map(|j| {
            let s = if df > 0.0 {
                round_q(steps[j] / df, 15)
            } else {
                0
            };
            let m = if dminf > 0.0 {
                round_q(offsets[j] / dminf, 15)
            } else {
                0
            };
            s | m << 4
        })
        .collect();
    let mut out = sc.clone();
    out.resize(84, 0);
    for (i, &v) in x.iter().enumerate() {
        let s = sc[i / 16];
        let (step, off) = (df * (s & 0x0F) as f32, dminf * (s >> 4) as f32);
        let q = if step > 0.0 {
            round_q((v + off) / step, 3)
        } else {
            0
        };
        let (h, j, l) = (i / 128, (i % 128) / 32, i % 32);
        out[16 + 32 * h + l] |= q << (2 * j);
    }
    out[80..82].copy_from_slice(&d.to_le_bytes());
    out[82..84].copy_from_slice(&dmin.to_le_bytes());
    out
}
