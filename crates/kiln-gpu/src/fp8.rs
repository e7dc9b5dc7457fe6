//! 8-bit floats in the E4M3 format, as the fp8 KV cache holds them: a sign bit, 4 exponent
//! bits (bias 7) and 3 mantissa bits; exponent 0 holds the subnormals (multiples of 2^-9).
//! The largest finite value is 448; the code 0x7f (and 0xff) is NaN in this format, and
//! kiln never writes it: larger magnitudes saturate to +-448, as a cache without a scale
//! must. `shaders/kv_fp8.wgsl` encodes and decodes the same way, bit for bit.

/// The largest magnitude E4M3 holds.
pub const MAX: f32 = 448.0;

/// The nearest E4M3 code to `x` (ties to even), magnitudes beyond [`MAX`] saturated. NaN
/// encodes as zero.
pub fn encode(x: f32) -> u8 {
    let sign = if x.is_sign_negative() { 0x80 } else { 0 };
    let a = x.abs().min(MAX);
    if a.is_nan() {
        return 0;
    }
    if a < 2f32.powi(-6) {
        // Subnormals: a multiple of 2^-9; 8 of them is the smallest normal, code 0x08.
        return sign | (a * 512.0).round_ties_even() as u8;
    }
    // The f32's exponent and top 3 mantissa bits, rounded to nearest even, rebiased.
    let bits = a.to_bits();
    let rounded = (bits + 0x7ffff + ((bits >> 20) & 1)) >> 20;
    sign | (rounded - (120 << 3)) as u8
}

/// The value of an E4M3 code (0x7f and 0xff, NaN, read as 480: kiln never writes them).
pub fn decode(b: u8) -> f32 {
    let mag = (b & 0x7f) as u32;
    let v = if mag < 8 {
        mag as f32 / 512.0
    } else {
        f32::from_bits((mag << 20) + (120 << 23))
    };
    if b & 0x80 != 0 { -v } else { v }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips() {
        for b in (0..=0xffu8).filter(|b| b & 0x7f != 0x7f) {
            let v = decode(b);
            // -0.0 encodes as 0x80, as it decodes from it.
            assert_eq!(encode(v), b, "code {b:#04x} = {v}");
        }
        assert_eq!(decode(0x7e), MAX);
        assert_eq!(decode(0x01), 2f32.powi(-9));
        assert_eq!(decode(0x08), 2f32.powi(-6));
        assert_eq!(decode(0x38), 1.0);
    }

    #[test]
    fn rounds_to_nearest_even_and_saturates() {
        // Between neighbouring codes: below, at and above the midpoint.
        for b in (0..0x7eu8).chain(0x80..0xfe) {
            let (lo, hi) = (decode(b), decode(b + 1));
            let mid = (lo + hi) / 2.0;
            let even = if b % 2 == 0 { b } else { b + 1 };
            assert_eq!(encode(mid), even, "tie between {lo} and {hi}");
            let below = f32::from_bits(mid.to_bits() - 1);
            let above = f32::from_bits(mid.to_bits() + 1);
            let (near_lo, near_hi) = if lo.abs() < hi.abs() {
                (below, above)
            } else {
                (above, below)
            };
            assert_eq!(encode(near_lo), b, "just off {mid} toward {lo}");
            assert_eq!(encode(near_hi), b + 1, "just off {mid} toward {hi}");
        }
        assert_eq!(encode(1e6), 0x7e);
        assert_eq!(encode(-470.0), 0xfe);
        assert_eq!(encode(f32::INFINITY), 0x7e);
        assert_eq!(encode(1e-30), 0);
    }
}
