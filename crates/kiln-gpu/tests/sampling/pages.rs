//! Penalty lists read through their rows' page tables, as the runner keeps them between steps.

use super::penalties::penalised;
use super::*;

/// Lists of one to eight pages, each page elsewhere in the pool: every entry is read through
/// its row's page table (argmax, chosen and top-5 log-probs of the penalised logits, and in
/// raw mode the chosen token's logit before its penalty, kept per pool entry).
#[test]
fn lists_spanning_pages_are_read_through_their_page_tables() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let vocab = 1499;
    let mut r = rng(31);
    let mut rows = Vec::new();
    for (i, n) in [1, 127, 128, 129, 300, 700, 1000, 1499]
        .into_iter()
        .enumerate()
    {
        let l = randn(&mut r, vocab, 2.0);
        let mut ids: Vec<u32> = (0..vocab as u32).collect();
        ids.shuffle(&mut r);
        let list = ids[..n]
            .iter()
            .map(|&token_id| PenaltyToken {
                token_id,
                output_count: r.random_range(0..3),
                seen: r.random_bool(0.9),
                bias: if r.random_bool(0.2) {
                    r.random_range(-1.0..1.0)
                } else {
                    0.0
                },
            })
            .collect();
        let params = SamplingParams {
            repetition_penalty: 1.6,
            presence_penalty: 0.8,
            frequency_penalty: 0.4,
            top_logprobs: 5,
            logprobs_mode: [LogprobsMode::Processed, LogprobsMode::Raw][i % 2],
            ..SamplingParams::greedy()
        };
        rows.push((l, with_list(params, 0, list)));
    }
    let out = sample(&ctx, &k, vocab, &rows);
    for ((l, s), o) in rows.iter().zip(&out) {
        let n = s.penalties.len;
        let pl = penalised(l, s);
        let rank = ranked(&pl);
        assert_eq!(o.id as usize, rank[0], "list of {n}: argmax");
        let lp = match s.params.logprobs_mode {
            LogprobsMode::Processed => log_softmax(&pl, 0.0),
            LogprobsMode::Raw => log_softmax(l, 0.0),
        };
        let want = lp[o.id as usize];
        assert!(
            (o.logprob as f64 - want).abs() < 1e-4,
            "list of {n}: logprob {} vs {want}",
            o.logprob
        );
        if s.params.logprobs_mode == LogprobsMode::Processed {
            for (j, &(id, _)) in o.top.iter().take(5).enumerate() {
                assert_eq!(id as usize, rank[j], "list of {n}: top-{j}");
            }
        }
    }
}
