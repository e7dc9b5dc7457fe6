//! RoPE with the KV-cache write (`rope_kv`), with and without the per-head q/k norm, into f16,
//! f32, fp8 and q8_0 caches.

use super::*;

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
            (false, KvDtype::F16),
            (false, KvDtype::F32),
            (true, KvDtype::F16),
            (false, KvDtype::Fp8),
            (true, KvDtype::Fp8),
        ],
    );
    // q8_0 needs rows of whole pairs of groups: 2 heads of 32.
    check_rope_kv(
        &ctx,
        &k,
        (4, 2, 32),
        &[(false, KvDtype::Q8), (true, KvDtype::Q8)],
    );
}

fn check_rope_kv(
    ctx: &kiln_gpu::GpuContext,
    k: &Kernels,
    (nh, nkv, d): (usize, usize, usize),
    cases: &[(bool, KvDtype)],
) {
    let ctx = ctx.clone();
    let mut r = rng(5);
    // 5 blocks of slots.
    let (t, slots, max_pos) = (9, 80, 32768);
    let width = (nh + 2 * nkv) * d;
    let mut qkv = randn(&mut r, t * width, 1.0);
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
    // Qwen3's per-head q/k norm first, or not: the q gain, then the k gain (the kernel's in the
    // rotary pair layout, as q and k are).
    let gains = randn(&mut r, 2 * d, 1.0);
    let gain_b = buf_f32(&ctx, &pair_layout(&gains, d));
    for &(qk_norm, dtype) in cases {
        let mut want = qkv.clone();
        let mut want_k = vec![0f32; slots * nkv * d];
        let mut want_v = vec![0f32; slots * nkv * d];
        for i in 0..t {
            let row = &mut want[i * width..(i + 1) * width];
            for (head, h) in row[..(nh + nkv) * d].chunks_mut(d).enumerate() {
                let mut x = checkpoint_layout(h, d);
                if qk_norm {
                    let g = &gains[if head < nh { 0 } else { d }..][..d];
                    x = reference::rmsnorm(&x, g, 1e-6);
                }
                reference::rope(&mut x, positions[i] as usize, &rope.inv_freq, 1.0);
                h.copy_from_slice(&pair_layout(&x, d));
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
            qk_norm.then_some((&gain_b, 1e-6)),
        );
        run_launches(&ctx, &[&l], t as u32, 0);
        assert_close(
            &format!("rope q/k {dtype} qk_norm {qk_norm}"),
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
                            "{what} cache q8_0 qk_norm {qk_norm}: group {i}: {a} vs {b} (step {step})"
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
                "v cache fp8 qk_norm {qk_norm}: codes"
            );
            assert_close(
                &format!("k cache fp8 qk_norm {qk_norm}"),
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
