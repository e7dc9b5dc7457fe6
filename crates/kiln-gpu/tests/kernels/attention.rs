//! Paged attention over prefill and decode sequences in one dispatch: both kernel families,
//! split contexts, every query tile size, every cache type, sliding windows, soft caps,
//! attention sinks and ALiBi's biases.

use super::*;

/// Several sequences in one dispatch: a prefill chunk on top of cached context that crosses
/// block boundaries, decode rows with long contexts, and a fresh prompt. The GPU family both
/// whole and with the context split in runs (flash-decoding: contexts of 1 to 5 runs here),
/// its query tiles of 1 to 16 tokens starting anywhere in a segment and ending where it ends;
/// the row-wise family with a row a lane and with 8 rows a subgroup (blocks of rows that
/// start mid-token and span tokens, and 16 heads a KV head, two blocks a token);
/// and with sliding windows of 40 and 20 keys, shorter than most contexts here; and with
/// gpt-oss's sinks (a logit per head in each softmax, added once to split runs); and with
/// ALiBi's biases (BLOOM's and MPT's), on 6 heads (slopes of two series: 4 heads at the
/// first's, 2 between them) and 16.
#[test]
fn paged_attention_mixes_prefill_and_decode() {
    let ctx = gpu();
    // (row-wise family, its subgroup attention, split steps up to)
    for (rowwise, subgroups, split_tokens) in [
        (false, false, 0),
        (false, false, 64),
        (true, true, 0),
        (true, false, 0),
    ] {
        let mut k = Kernels::with_rowwise(&ctx, rowwise);
        if rowwise && subgroups {
            // lavapipe has subgroups of 8: the kernel CPU adapters get must be the one tested.
            assert!(k.rowwise_subgroups, "no subgroup row-wise attention here");
        }
        k.rowwise_subgroups = subgroups;
        use KvDtype::{F16, F32, Fp8, Q8};
        // (cache, query heads / KV heads x head_dim, window, soft cap)
        let mut cases = vec![
            (F16, (6, 2, 24), None, None),
            (F32, (6, 2, 24), None, None),
            (Fp8, (6, 2, 24), None, None),
            // 16 query heads of 64 on one KV head: every output slot of a GPU-family
            // invocation.
            (F16, (16, 1, 64), None, None),
            // Query tiles of 16 tokens (one head per KV head), of 2 (Llama 3 8B's 4 heads of
            // 128 per KV head) and of 1 (Gemma 3's 4 heads of 256).
            (F32, (4, 4, 32), None, None),
            (F16, (8, 2, 128), Some(20), None),
            (F16, (4, 1, 256), None, None),
            (F16, (6, 2, 24), Some(40), None),
            (Fp8, (8, 2, 128), Some(20), None),
            // q8_0: groups of 32 with their scales after each block's rows; heads of one
            // group, of two pairs of groups, and of three groups (a pair split between two
            // heads).
            (Q8, (8, 2, 128), Some(20), None),
            (Q8, (6, 2, 32), None, None),
            (Q8, (4, 2, 96), None, None),
            // Gemma 2's soft cap on the scores (these scores are about N(0, 1): the cap bends
            // them).
            (F16, (8, 2, 128), Some(20), Some(1.5)),
            (F32, (6, 2, 24), None, Some(0.7)),
        ];
        let sinks = cases.len();
        // gpt-oss's sinks: its 8 query heads of 64 per KV head, with and without its window.
        cases.extend([
            (F16, (8, 1, 64), Some(40), None),
            (F32, (16, 2, 64), None, None),
            (F16, (6, 2, 24), None, None),
        ]);
        let alibi = cases.len();
        cases.extend([(F16, (6, 6, 24), None, None), (Q8, (16, 4, 64), None, None)]);
        for (i, (dtype, heads, window, softcap)) in cases.into_iter().enumerate() {
            let (sinks, alibi) = (i >= sinks && i < alibi, (i >= alibi).then_some(8.0));
            let scores = (window, softcap, sinks, alibi);
            check_attention(&ctx, &k, dtype, split_tokens, heads, scores);
        }
    }
}

fn check_attention(
    ctx: &kiln_gpu::GpuContext,
    k: &Kernels,
    dtype: KvDtype,
    split_tokens: u32,
    (nh, nkv, d): (usize, usize, usize),
    (window, softcap, with_sinks, alibi): (Option<usize>, Option<f32>, bool, Option<f32>),
) {
    let ctx = ctx.clone();
    let mut r = rng(6);
    let bs = kiln_core::BLOCK_SIZE;
    let num_blocks = 40;
    // (cached tokens before this step, query tokens this step)
    let seqs = [
        (13usize, 21usize),
        (99, 1),
        (0, 5),
        (70, 1),
        (16, 17),
        (300, 1),
    ];
    let kv_width = nkv * d;
    // The reference reads what the cache holds: values rounded to f16, fp8 or q8_0 for those
    // caches.
    let layout = KvLayout::new(1, nkv, d, dtype);
    let held = |v: Vec<f32>| layout.decode(&layout.encode(&v));
    let kc = held(randn(&mut r, num_blocks * bs * kv_width, 1.0));
    let vc = held(randn(&mut r, num_blocks * bs * kv_width, 1.0));
    let mut free: Vec<u32> = (0..num_blocks as u32).collect();
    free.shuffle(&mut r);
    let (mut positions, mut token_seq, mut seq_info, mut tables) = (vec![], vec![], vec![], vec![]);
    let mut per_seq_tables = vec![];
    for (s, &(cached, q)) in seqs.iter().enumerate() {
        let ctx_len = cached + q;
        let table: Vec<u32> = (0..ctx_len.div_ceil(bs))
            .map(|_| free.pop().unwrap())
            .collect();
        seq_info.extend([
            positions.len() as u32,
            q as u32,
            ctx_len as u32,
            tables.len() as u32,
        ]);
        tables.extend_from_slice(&table);
        per_seq_tables.push(table);
        for i in 0..q {
            positions.push((cached + i) as u32);
            token_seq.push(s as u32);
        }
    }
    let t = positions.len();
    let stride = (nh + 2 * nkv) * d;
    let qkv = randn(&mut r, t * stride, 1.0);
    // Sinks about as large as the scores, some well above them (a head that mostly rests).
    let sinks = with_sinks.then(|| randn(&mut r, nh, 2.0));
    let step = step_buffer(&ctx, t as u32, seqs.len() as u32, 0);
    let bufs = (
        buf_u32(&ctx, &positions),
        buf_u32(&ctx, &token_seq),
        buf_u32(&ctx, &seq_info),
        buf_u32(&ctx, &tables),
    );
    let (kb, vb) = (
        buf_u32(&ctx, &layout.encode(&kc)),
        buf_u32(&ctx, &layout.encode(&vc)),
    );
    let (qb, out) = (
        buf_f32(&ctx, &qkv),
        ctx.storage("out", (t * nh * d * 4) as u64),
    );
    let l = ops::attention(
        &ctx,
        k,
        &step,
        (nh, nkv, d),
        ops::Scores {
            window,
            scale: 1.0 / (d as f32).sqrt(),
            softcap,
            sinks: sinks.clone(),
            alibi,
        },
        dtype,
        AttentionBuffers {
            positions: &bufs.0,
            token_seq: &bufs.1,
            seq_info: &bufs.2,
            block_tables: &bufs.3,
            qkv: &qb,
            k_cache: &kb,
            v_cache: &vb,
            out: &out,
            runs: &ctx.storage("runs", ops::attention_runs_bytes(split_tokens, nh, d)),
        },
        split_tokens,
    )
    .unwrap();
    let mut want = vec![0f32; t * nh * d];
    for i in 0..t {
        let table = &per_seq_tables[token_seq[i] as usize];
        let n_keys = positions[i] as usize + 1;
        let first = window.map_or(0, |w| n_keys.saturating_sub(w));
        let slot = |j: usize| table[j / bs] as usize * bs + j % bs;
        for h in 0..nh {
            let kvh = h / (nh / nkv);
            let q = &qkv[i * stride + h * d..i * stride + (h + 1) * d];
            let scores: Vec<f64> = (first..n_keys)
                .map(|j| {
                    let kr = &kc[slot(j) * kv_width + kvh * d..][..d];
                    q.iter()
                        .zip(kr)
                        .map(|(a, b)| *a as f64 * *b as f64)
                        .sum::<f64>()
                        / (d as f64).sqrt()
                })
                .map(|s| softcap.map_or(s, |c| kiln_gpu::reference::soft_cap(s, c)))
                .zip(first..n_keys)
                .map(|(s, j)| {
                    let slope = alibi.map_or(0.0, |m| kiln_gpu::reference::alibi_slope(h, nh, m));
                    s - slope * (n_keys - 1 - j) as f64
                })
                .collect();
            let sink = sinks.as_ref().map(|s| s[h] as f64);
            let m = scores.iter().chain(&sink).cloned().fold(f64::MIN, f64::max);
            let z: f64 = scores.iter().chain(&sink).map(|s| (s - m).exp()).sum();
            for e in 0..d {
                want[i * nh * d + h * d + e] = (first..n_keys)
                    .map(|j| {
                        (scores[j - first] - m).exp() / z
                            * vc[slot(j) * kv_width + kvh * d + e] as f64
                    })
                    .sum::<f64>() as f32;
            }
        }
    }
    // As many sampled rows as tokens: the launch for decoding steps (the subgroup row-wise
    // kernel with a workgroup per token's heads of a KV head), here on every segment.
    for samples in [0, t as u32] {
        ctx.queue
            .write_buffer(&out, 0, bytemuck::cast_slice(&vec![0f32; want.len()]));
        run(&ctx, |p| l.record(p, t as u32, samples));
        assert_close(
            &format!(
                "attention rowwise={} split {split_tokens} samples {samples} kv {dtype} heads {nh}/{nkv}x{d} window {window:?} softcap {softcap:?} sinks {with_sinks} alibi {alibi:?}",
                k.rowwise
            ),
            &read_f32(&ctx, &out, want.len()),
            &want,
            1e-4,
            1e-3,
        );
    }
}
