//! Block dequantization against hand-made blocks, and the llama Q/K row permutation against a
//! direct construction of llama.cpp's reshape/swapaxes.

use half::f16;
use kiln_model::DType;
use kiln_model::gguf::dequant::{dequant_q4_0, dequant_q4_1, dequant_q8_0, to_f32};
use kiln_model::testing::{permute_rows, quantize, unpermute_rows};

fn f16_bytes(x: f32) -> [u8; 2] {
    f16::from_f32(x).to_le_bytes()
}

#[test]
fn q8_0_hand_made_block() {
    let mut block = f16_bytes(0.5).to_vec();
    block.extend((0..32).map(|i| (i as i8 - 16) as u8));
    let out = dequant_q8_0(&block);
    let want: Vec<f32> = (0..32).map(|i| (i as f32 - 16.0) * 0.5).collect();
    assert_eq!(out, want);
    assert_eq!(to_f32(DType::Q8_0, &block), want);
}

#[test]
fn q4_0_hand_made_block() {
    let mut block = f16_bytes(0.25).to_vec();
    // Byte j: low nibble j (element j), high nibble 15 - j (element j + 16).
    block.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
    assert_eq!(block.len(), 18);
    let out = dequant_q4_0(&block);
    for j in 0..16 {
        assert_eq!(out[j], (j as f32 - 8.0) * 0.25, "element {j}");
        assert_eq!(
            out[j + 16],
            ((15 - j) as f32 - 8.0) * 0.25,
            "element {}",
            j + 16
        );
    }
}

#[test]
fn q4_1_hand_made_block() {
    let mut block = f16_bytes(0.5).to_vec();
    block.extend(f16_bytes(-1.0));
    block.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
    assert_eq!(block.len(), 20);
    let out = dequant_q4_1(&block);
    for j in 0..16 {
        assert_eq!(out[j], j as f32 * 0.5 - 1.0);
        assert_eq!(out[j + 16], (15 - j) as f32 * 0.5 - 1.0);
    }
}

#[test]
fn two_blocks_and_quantizer_round_trip() {
    let data: Vec<f32> = (0..64)
        .map(|i| ((i * 37 % 64) as f32 - 32.0) / 20.0)
        .collect();
    for (ty, tol) in [
        (DType::Q8_0, 0.02),
        (DType::Q4_0, 0.21),
        (DType::Q4_1, 0.11),
        (DType::F16, 1e-3),
        (DType::BF16, 1e-2),
    ] {
        let bytes = quantize(ty, &data);
        assert_eq!(bytes.len(), ty.byte_len(64));
        let back = to_f32(ty, &bytes);
        assert_eq!(back.len(), 64);
        for (a, b) in data.iter().zip(&back) {
            assert!((a - b).abs() <= tol, "{ty:?}: {a} vs {b}");
        }
    }
}

/// llama.cpp: `w.reshape(n_head, 2, head_dim/2, cols).swapaxes(1, 2).reshape(rows, cols)`,
/// built directly with explicit indices.
fn llama_cpp_permute(w: &[f32], n_head: usize, head_dim: usize, cols: usize) -> Vec<f32> {
    let half = head_dim / 2;
    let mut out = Vec::with_capacity(w.len());
    for h in 0..n_head {
        for j in 0..half {
            for s in 0..2 {
                let src_row = h * head_dim + s * half + j;
                out.extend_from_slice(&w[src_row * cols..(src_row + 1) * cols]);
            }
        }
    }
    out
}

#[test]
fn qk_permutation_matches_llama_cpp_and_inverts() {
    // Tiny case spelled out: per head, HF rows [a0 a1 b0 b1] become [a0 b0 a1 b1].
    let w: Vec<f32> = (0..8).map(|x| x as f32).collect();
    assert_eq!(permute_rows(&w, 8, 2), vec![0., 2., 1., 3., 4., 6., 5., 7.]);
    assert_eq!(unpermute_rows(&[0., 2., 1., 3., 4., 6., 5., 7.], 8, 2), w);

    let (n_head, head_dim, cols) = (3, 8, 5);
    let rows = n_head * head_dim;
    let w: Vec<f32> = (0..rows * cols).map(|x| x as f32 * 0.5 - 7.0).collect();
    let direct = llama_cpp_permute(&w, n_head, head_dim, cols);
    assert_ne!(direct, w);
    assert_eq!(permute_rows(&w, rows, n_head), direct);
    assert_eq!(unpermute_rows(&direct, rows, n_head), w);
}
