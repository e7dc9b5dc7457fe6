//! Dequantization of the K-quant super-blocks (256 elements each): Q2_K (sixteen sub-blocks
//! of 16 with 4-bit scales and minimums), Q3_K (sixteen sub-blocks of 16 with signed 6-bit
//! scales), Q4_K and Q5_K (eight sub-blocks of 32 with 6-bit scales
//! and minimums under two f16 factors) and Q6_K (sixteen sub-blocks of 16 with signed 8-bit
//! scales).

use super::dequant::{QK_K, f16_at};

/// Scale and minimum (6 bits each) of sub-block `j` (0..8) from the 12 packed bytes `s`:
/// sub-blocks 0..4 keep theirs in the low 6 bits of bytes j and j+4; sub-blocks 4..8 take a
/// nibble from byte j+4 and their two high bits from the top of bytes j-4 and j.
pub fn scale_min_k4(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

/// Q4_K super-block (144 bytes): f16 `d`, f16 `dmin`, 12 bytes of packed scales/minimums,
/// 128 bytes of nibbles. Each 32 bytes of nibbles hold two sub-blocks: low nibbles the first,
/// high nibbles the second; value = d * scale * q - dmin * min.
pub fn dequant_q4_k(bytes: &[u8]) -> Vec<f32> {
    let mut out = vec![0f32; bytes.len() / 144 * QK_K];
    for (b, o) in bytes.chunks_exact(144).zip(out.chunks_exact_mut(QK_K)) {
        let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
        let scales = &b[4..16];
        for (pair, (qs, o)) in b[16..144]
            .chunks_exact(32)
            .zip(o.chunks_exact_mut(64))
            .enumerate()
        {
            let (s0, m0) = scale_min_k4(2 * pair, scales);
            let (s1, m1) = scale_min_k4(2 * pair + 1, scales);
            let (d0, m0) = (d * s0 as f32, dmin * m0 as f32);
            let (d1, m1) = (d * s1 as f32, dmin * m1 as f32);
            for (l, &q) in qs.iter().enumerate() {
                o[l] = d0 * (q & 0x0F) as f32 - m0;
                o[l + 32] = d1 * (q >> 4) as f32 - m1;
            }
        }
    }
    out
}

/// Q5_K super-block (176 bytes): as Q4_K plus 32 bytes of fifth bits after the scales (element
/// l of sub-block j takes bit j of byte l), then the 128 nibble bytes.
pub fn dequant_q5_k(bytes: &[u8]) -> Vec<f32> {
    let mut out = vec![0f32; bytes.len() / 176 * QK_K];
    for (b, o) in bytes.chunks_exact(176).zip(out.chunks_exact_mut(QK_K)) {
        let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
        let scales = &b[4..16];
        let qh = &b[16..48];
        for (pair, (qs, o)) in b[48..176]
            .chunks_exact(32)
            .zip(o.chunks_exact_mut(64))
            .enumerate()
        {
            let (s0, m0) = scale_min_k4(2 * pair, scales);
            let (s1, m1) = scale_min_k4(2 * pair + 1, scales);
            let (d0, m0) = (d * s0 as f32, dmin * m0 as f32);
            let (d1, m1) = (d * s1 as f32, dmin * m1 as f32);
            for (l, &q) in qs.iter().enumerate() {
                let h0 = (qh[l] >> (2 * pair)) & 1;
                let h1 = (qh[l] >> (2 * pair + 1)) & 1;
                o[l] = d0 * ((q & 0x0F) | h0 << 4) as f32 - m0;
                o[l + 32] = d1 * ((q >> 4) | h1 << 4) as f32 - m1;
            }
        }
    }
    out
}

/// Q6_K super-block (210 bytes): 128 bytes of low nibbles, 64 bytes of high 2-bit pairs, 16
/// signed 8-bit sub-block scales, then f16 `d`; value = d * scale * (q - 32). Each half of 128
/// elements uses 64 low bytes (elements l and l+64 share byte l, l+32 and l+96 byte l+32) and
/// 32 high bytes (bit pairs 0..4 for l, l+32, l+64, l+96).
pub fn dequant_q6_k(bytes: &[u8]) -> Vec<f32> {
    let mut out = vec![0f32; bytes.len() / 210 * QK_K];
    for (b, o) in bytes.chunks_exact(210).zip(out.chunks_exact_mut(QK_K)) {
        let d = f16_at(b, 208);
        for half in 0..2 {
            let ql = &b[64 * half..64 * half + 64];
            let qh = &b[128 + 32 * half..128 + 32 * half + 32];
            let sc = &b[192 + 8 * half..192 + 8 * half + 8];
            let o = &mut o[128 * half..128 * half + 128];
            for l in 0..32 {
                let is = l / 16;
                let q = [
                    (ql[l] & 0x0F) | (qh[l] & 3) << 4,
                    (ql[l + 32] & 0x0F) | ((qh[l] >> 2) & 3) << 4,
                    (ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4,
                    (ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4,
                ];
                for (k, &q) in q.iter().enumerate() {
                    let s = sc[is + 2 * k] as i8 as f32;
                    o[l + 32 * k] = d * s * (q as i32 - 32) as f32;
                }
            }
        }
    }
    out
}

/// Q3_K's scale of sub-block `i` (0..16), -32..31, from the 12 packed bytes `s`: its low
/// nibble is nibble `i / 8` of byte `i % 8`, its two high bits bits `2 * (i / 4)` of byte
/// `8 + i % 4`.
pub fn scale_q3_k(i: usize, s: &[u8]) -> i32 {
    let lo = (s[i % 8] >> (4 * (i / 8))) & 0x0F;
    let hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
    (lo | hi << 4) as i32 - 32
}

/// Q3_K super-block (110 bytes): 32 bytes of high bits (`hmask`), 64 bytes of low bit pairs
/// (`qs`), 12 bytes of packed scales, then f16 `d`. Element i: half h = i / 128, quarter j =
/// (i % 128) / 32, l = i % 32: its low pair at bit 2j of qs[32h + l], its high bit bit 4h + j
/// of hmask[l], its scale sub-block 8h + 2j + l / 16; value = d * scale * (q - 4), the pair
/// and the high bit making q (0..7).
pub fn dequant_q3_k(bytes: &[u8]) -> Vec<f32> {
    let mut out = vec![0f32; bytes.len() / 110 * QK_K];
    for (b, o) in bytes.chunks_exact(110).zip(out.chunks_exact_mut(QK_K)) {
        let (hmask, qs, scales, d) = (&b[..32], &b[32..96], &b[96..108], f16_at(b, 108));
        for (i, o) in o.iter_mut().enumerate() {
            let (h, j, l) = (i / 128, (i % 128) / 32, i % 32);
            let low = (qs[32 * h + l] >> (2 * j)) & 3;
            let high = (hmask[l] >> (4 * h + j)) & 1;
            let q = (low | high << 2) as i32 - 4;
            *o = d * scale_q3_k(8 * h + 2 * j + l / 16, scales) as f32 * q as f32;
        }
    }
    out
}

/// Q2_K super-block (84 bytes): 16 bytes of sub-block scales (low nibble) and minimums (high
/// nibble), 64 bytes of bit pairs (`qs`, laid out as Q3_K's), f16 `d`, f16 `dmin`. Element i:
/// half h = i / 128, quarter j = (i % 128) / 32, l = i % 32: its pair at bit 2j of qs[32h + l],
/// its sub-block 8h + 2j + l / 16; value = d * scale * q - dmin * min.
pub fn dequant_q2_k(bytes: &[u8]) -> Vec<f32> {
    let mut out = vec![0f32; bytes.len() / 84 * QK_K];
    for (b, o) in bytes.chunks_exact(84).zip(out.chunks_exact_mut(QK_K)) {
        let (scales, qs, d, dmin) = (&b[..16], &b[16..80], f16_at(b, 80), f16_at(b, 82));
        for (i, o) in o.iter_mut().enumerate() {
            let (h, j, l) = (i / 128, (i % 128) / 32, i % 32);
            let q = (qs[32 * h + l] >> (2 * j)) & 3;
            let sc = scales[8 * h + 2 * j + l / 16];
            *o = d * (sc & 0x0F) as f32 * q as f32 - dmin * (sc >> 4) as f32;
        }
    }
    out
}
