//! The 4-bit types whose sixteen levels are not evenly spaced: MXFP4 (E2M1 floats under a
//! power-of-two scale), IQ4_NL (fixed levels under an f16 scale a block of 32) and IQ4_XS (the
//! same levels in super-blocks of 256 with a 6-bit scale per 32). Each block's nibbles are laid
//! out as Q4_0's: byte j of 16 holds element j in its low nibble and element j + 16 in its high.

use super::dequant::{QK, QK_K, f16_at};

/// The E2M1 values of MXFP4's nibbles, doubled (so that they are integers): 0, 0.5, 1, 1.5, 2,
/// 3, 4, 6 and their negatives.
pub const MXFP4_VALUES: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// Half an MXFP4 block's scale, 2^(e - 127) / 2 (halved because [`MXFP4_VALUES`] are doubled).
pub fn mxfp4_half_scale(e: u8) -> f32 {
    // 2^(e - 128): a normal f32 from e = 2, a subnormal's bit below.
    f32::from_bits(match e {
        0 | 1 => 0x0020_0000 << e,
        _ => (e as u32 - 1) << 23,
    })
}

/// MXFP4 block (17 bytes): the scale's exponent `e`, then 16 bytes of nibbles as Q4_0's
/// (element j low, j + 16 high); value = MXFP4_VALUES[q] * 2^(e - 128).
pub fn dequant_mxfp4(bytes: &[u8]) -> Vec<f32> {
    let mut out = vec![0f32; bytes.len() / 17 * QK];
    for (b, o) in bytes.chunks_exact(17).zip(out.chunks_exact_mut(QK)) {
        let d = mxfp4_half_scale(b[0]);
        for (j, &q) in b[1..17].iter().enumerate() {
            o[j] = MXFP4_VALUES[(q & 0x0F) as usize] as f32 * d;
            o[j + 16] = MXFP4_VALUES[(q >> 4) as usize] as f32 * d;
        }
    }
    out
}

/// IQ4_NL's and IQ4_XS's sixteen levels (before the scale).
pub const IQ4_VALUES: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// 16 nibble bytes (as Q4_0's) into 32 values: IQ4_VALUES[q] * d.
fn iq4_levels(qs: &[u8], d: f32, o: &mut [f32]) {
    for (j, &q) in qs.iter().enumerate() {
        o[j] = IQ4_VALUES[(q & 0x0F) as usize] as f32 * d;
        o[j + 16] = IQ4_VALUES[(q >> 4) as usize] as f32 * d;
    }
}

/// IQ4_NL block (18 bytes): f16 `d`, then 16 nibble bytes; value = IQ4_VALUES[q] * d.
pub fn dequant_iq4_nl(bytes: &[u8]) -> Vec<f32> {
    let mut out = vec![0f32; bytes.len() / 18 * QK];
    for (b, o) in bytes.chunks_exact(18).zip(out.chunks_exact_mut(QK)) {
        iq4_levels(&b[2..18], f16_at(b, 0), o);
    }
    out
}

/// IQ4_XS's scale of sub-block `ib` (0..8), -32..31: its low nibble nibble `ib % 2` of
/// `scales_l[ib / 2]`, its two high bits bits `2 * ib` of the u16 `scales_h`.
pub fn scale_iq4_xs(ib: usize, scales_h: u16, scales_l: &[u8]) -> i32 {
    let lo = (scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0F;
    let hi = ((scales_h >> (2 * ib)) & 3) as u8;
    (lo | hi << 4) as i32 - 32
}

/// IQ4_XS super-block (136 bytes): f16 `d`, u16 `scales_h`, 4 bytes `scales_l`, then 8
/// sub-blocks of 16 nibble bytes; value = d * scale * IQ4_VALUES[q].
pub fn dequant_iq4_xs(bytes: &[u8]) -> Vec<f32> {
    let mut out = vec![0f32; bytes.len() / 136 * QK_K];
    for (b, o) in bytes.chunks_exact(136).zip(out.chunks_exact_mut(QK_K)) {
        let (d, scales_h) = (f16_at(b, 0), u16::from_le_bytes([b[2], b[3]]));
        for (ib, (qs, o)) in b[8..]
            .chunks_exact(16)
            .zip(o.chunks_exact_mut(QK))
            .enumerate()
        {
            iq4_levels(qs, d * scale_iq4_xs(ib, scales_h, &b[4..8]) as f32, o);
        }
    }
    out
}
