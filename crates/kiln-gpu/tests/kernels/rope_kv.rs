//! RoPE with the KV-cache write (`rope_kv`), without a q/k norm, with one over each head
//! (before or after the rotation), with one over all of q and all of k and with a LayerNorm
//! of each head with its own gain, into f16, f32, fp8 and q8_0 caches.

use super::*;

/// The q/k norm before the rotation.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Norm {
    None,
    /// Over each head (Qwen3, Gemma 3).
    Heads,
    /// Over all of q and all of k (OLMo 2).
    Whole,
    /// Over each head once it has turned (Hunyuan).
    HeadsAfter,
    /// A LayerNorm of each head, each with its own gain (Command-R+).
    HeadLayerNorms,
}

/// RoPE and the KV write, for every cache type, at positions up to the end of a 32768-token
/// context against the rotation in f64 (of the checkpoint's order: the kernel's heads are in
/// the rotary pair layout). The f64-built table keeps the error at f32 rounding;
/// angles computed in f32 (`pos * inv_freq`, then `sin`/`cos`) are off by up to ~2e-3 rad at
/// the far positions, 200x the tolerance here.
#[test]
fn rope_kv_rotates_and_writes_cache() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    check_rope_kv(
        &ctx,
        &k,
        (6, 2, 20),
        &[
            (Norm::None, KvDtype::F16),
            (Norm::None, KvDtype::F32),
            (Norm::Heads, KvDtype::F16),
            (Norm::Whole, KvDtype::F16),
            (Norm::None, KvDtype::Fp8),
            (Norm::Heads, KvDtype::Fp8),
            (Norm::HeadsAfter, KvDtype::F16),
            (Norm::HeadLayerNorms, KvDtype::F16),
            (Norm::HeadLayerNorms, KvDtype::F32),
        ],
    );
    // q8_0 needs rows of whole pairs of groups: 2 heads of 32.
    check_rope_kv(
        &ctx,
        &k,
        (4, 2, 32),
        &[
            (Norm::None, KvDtype::Q8),
            (Norm::Heads, KvDtype::Q8),
            (Norm::Whole, KvDtype::Q8),
            (Norm::HeadsAfter, KvDtype::Q8),
            (Norm::HeadLayerNorms, KvDtype::Q8),
        ],
    );
}

fn check_rope_kv(
    ctx: &kiln_gpu::GpuContext,
    k: &Kernels,
    (nh, nkv, d): (usize, usize, usize),
    cases: &[(Norm, KvDtype)],
) {
    let ctx = ctx.clone();
    let mut r = rng(5);
    // 5 blocks of slots.
    let (t, slots, max_pos) = (9, 80, 32768);
    let width = (nh + 2 * nkv) * d;
    let mut qkv = randn(&mut r, t * width, 1.0);
    // Rows whose heads have means far from 0, so a LayerNorm that left the mean in would show.
    qkv.iter_mut()
        .enumerate()
        .for_each(|(i, v)| *v += (i / d % 5) as f32 - 2.0);
    // Values of V beyond fp8's range (saturated there) and below its normals.
    for (i, v) in [(0, 1000.0), (1, -600.0), (2, 3e-3), (3, -1e-5)] {
        qkv[i * width + (nh + nkv) * d + 3 * i] = v;
    }
    let mut positions: Vec<u32> = (0..t - 2)
        .map(|_| r.random_range(0..max_pos as u32))
        .collect();
    positions.extend([0, max_pos as u32 - 1]);
    let mut slot_ids: Vec<u32> = (0..slots as u32).collect();
    slot_ids.shuffle(&mut r);
    slot_ids.truncate(t);
    let rope = kiln_model::LayerRope {
        inv_freq: (0..d / 2)
            .map(|i| 1.0 / 10000f64.powf(2.0 * i as f64 / d as f64))
            .collect(),
        attention_factor: 1.0,
    };
    let step = step_buffer(&ctx, t as u32, 1, 0);
    let table = ops::rope_table(&rope, d / 2, max_pos);
    let (pb, sb, fb) = (
        buf_u32(&ctx, &positions),
        buf_u32(&ctx, &slot_ids),
        buf_f32(&ctx, &table),
    );
    // The q gain, then the k gain: head_dim each, or as wide as q and k (the kernel's in the
    // rotary pair layout, as q and k are).
    let head_gains = randn(&mut r, 2 * d, 1.0);
    let whole_gains = randn(&mut r, (nh + nkv) * d, 1.0);
    let head_gain_b = buf_f32(&ctx, &pair_layout(&head_gains, d));
    let whole_gain_b = buf_f32(&ctx, &pair_layout(&whole_gains, d));
    for &(qk_norm, dtype) in cases {
        let mut want = qkv.clone();
        let mut want_k = vec![0f32; slots * nkv * d];
        let mut want_v = vec![0f32; slots * nkv * d];
        for i in 0..t {
            let row = &mut want[i * width..(i + 1) * width];
            let mut x: Vec<f32> = (row[..(nh + nkv) * d].chunks(d))
                .flat_map(|h| checkpoint_layout(h, d))
                .collect();
            let (q, k) = x.split_at_mut(nh * d);
            let norm = |v: &mut [f32], g: &[f32]| {
                v.chunks_mut(g.len())
                    .for_each(|c| c.copy_from_slice(&reference::rmsnorm(c, g, 1e-6)))
            };
            match qk_norm {
                Norm::None | Norm::HeadsAfter => {}
                Norm::Heads => {
                    norm(q, &head_gains[..d]);
                    norm(k, &head_gains[d..]);
                }
                Norm::Whole => {
                    norm(q, &whole_gains[..nh * d]);
                    norm(k, &whole_gains[nh * d..]);
                }
                Norm::HeadLayerNorms => {
                    let heads = q.chunks_mut(d).chain(k.chunks_mut(d));
                    for (h, g) in heads.zip(whole_gains.chunks(d)) {
                        h.copy_from_slice(&reference::layernorm(h, g, 1e-6));
                    }
                }
            }
            for x in x.chunks_mut(d) {
                reference::rope(x, positions[i] as usize, &rope.inv_freq, 1.0);
            }
            if qk_norm == Norm::HeadsAfter {
                let (q, k) = x.split_at_mut(nh * d);
                norm(q, &head_gains[..d]);
                norm(k, &head_gains[d..]);
            }
            for (h, x) in row[..(nh + nkv) * d].chunks_mut(d).zip(x.chunks(d)) {
                h.copy_from_slice(&pair_layout(x, d));
            }
            let s = slot_ids[i] as usize;
            want_k[s * nkv * d..(s + 1) * nkv * d].copy_from_slice(&row[nh * d..(nh + nkv) * d]);
            want_v[s * nkv * d..(s + 1) * nkv * d].copy_from_slice(&row[(nh + nkv) * d..]);
        }
        let qb = buf_f32(&ctx, &qkv);
        let layout = KvLayout::new(1, nkv, d, dtype);
        let words = layout.buffer_bytes(slots / kiln_core::BLOCK_SIZE) as usize / 4;
        let (kc, vc) = (
            ctx.storage("k", words as u64 * 4),
            ctx.storage("v", words as u64 * 4),
        );
        let rotary = ops::Rotary {
            heads: (nh, nkv, d),
            kv_dtype: dtype,
            max_positions: max_pos,
            positions: &pb,
            slot_mapping: &sb,
            rope: &fb,
            k_cache: &kc,
            v_cache: &vc,
        };
        let l = ops::rope_kv(
            &ctx,
            k,
            &step,
            &rotary,
            &qb,
            match qk_norm {
                Norm::None => None,
                Norm::Heads | Norm::HeadsAfter => Some(ops::QkNorm {
                    gains: &head_gain_b,
                    eps: 1e-6,
                    whole: false,
                    layer_norm: false,
                    after: qk_norm == Norm::HeadsAfter,
                }),
                Norm::Whole | Norm::HeadLayerNorms => Some(ops::QkNorm {
                    gains: &whole_gain_b,
                    eps: 1e-6,
                    whole: qk_norm == Norm::Whole,
                    layer_norm: qk_norm == Norm::HeadLayerNorms,
                    after: false,
                }),
            },
        );
        run_launches(&ctx, &[&l], t as u32, 0);
        assert_close(
            &format!("rope q/k {dtype} qk_norm {qk_norm:?}"),
            &read_f32(&ctx, &qb, want.len()),
            &want,
            1e-5,
            0.0,
        );
        let (got_k, got_v) = (
            layout.decode(&read_u32(&ctx, &kc, words)),
            layout.decode(&read_u32(&ctx, &vc, words)),
        );
        if dtype == KvDtype::Q8 {
            // Each value within half a step of its group (the group's largest magnitude over
            // 127, as f16) of the exact one, plus K's 1e-5 from the rotation.
            for (what, got, want) in [("k", &got_k, &want_k), ("v", &got_v, &want_v)] {
                for (i, (g, w)) in got.chunks(32).zip(want.chunks(32)).enumerate() {
                    let step = w.iter().fold(0f32, |m, v| m.max(v.abs())) / 127.0;
                    for (a, b) in g.iter().zip(w) {
                        assert!(
                            (a - b).abs() <= 0.501 * step + 1e-5,
                            "{what} cache q8_0 qk_norm {qk_norm:?}: group {i}: {a} vs {b} (step {step})"
                        );
                    }
                }
            }
            continue;
        }
        // f16: one rounding of a value that is itself within 1e-5 of the reference.
        let (kw, vw) = match dtype {
            KvDtype::F16 => (f16_round(&want_k), f16_round(&want_v)),
            _ => (want_k.clone(), want_v.clone()),
        };
        if dtype == KvDtype::Fp8 {
            // V is copied unchanged, so its codes are exactly the host's encoding (ties to
            // even, saturation, subnormals); K is rotated first, so a value within 1e-5 of a
            // tie may round either way: within half a step (1/16 relative, 2^-10 below the
            // normals) of the exact value.
            assert_eq!(
                read_u32(&ctx, &vc, words),
                layout.encode(&want_v),
                "v cache fp8 qk_norm {qk_norm:?}: codes"
            );
            assert_close(
                &format!("k cache fp8 qk_norm {qk_norm:?}"),
                &got_k,
                &kw,
                1e-5 + 2f32.powi(-10),
                1.0 / 16.0,
            );
            continue;
        }
        let rtol = if dtype == KvDtype::F16 { 1e-3 } else { 0.0 };
        assert_close(&format!("k cache {dtype}"), &got_k, &kw, 1e-5, rtol);
        assert_close(&format!("v cache {dtype}"), &got_v, &vw, 0.0, rtol);
    }
}
