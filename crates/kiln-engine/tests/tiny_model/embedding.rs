//! Hidden states for embeddings: a request that asks for one gets, with its first token, the
//! final norm's output at its prompt's last token; the model's output matrix applied to it
//! gives the CPU reference's logits there. Asked beside another request (so its sampler row
//! is not the first) and in a batch with prompts of other lengths, with steps overlapped and
//! not.

use super::*;
use kiln_engine::Overlap;

#[test]
fn the_hidden_state_at_the_last_prompt_token_gives_the_reference_logits() {
    let (_dir, model) = tiny(&TinyConfig::default(), 5);
    let cpu = CpuModel::load(&model.config, &model.weights).unwrap();
    let (h, vocab) = (model.config.hidden_size, model.config.vocab_size);
    let output = ["lm_head.weight", "model.embed_tokens.weight"]
        .into_iter()
        .find(|n| model.weights.contains(n))
        .unwrap();
    let w = model.weights.read_f32(output).unwrap();
    let ctx = gpu();
    let prompts = [tokens(21, 37, vocab), tokens(22, 5, vocab)];
    let runs = FAMILIES.map(|f| (f, Overlap::Off)).into_iter();
    for (family, overlap) in runs.chain([(KernelFamily::Cpu, Overlap::On)]) {
        let ec = EngineConfig {
            overlap,
            ..on(config(32, true), family, KvDtype::F16)
        };
        let mut e = engine(&ctx, &model, ec);
        // The other request decodes first, so the asks come in while steps overlap.
        e.add_request(request(9, tokens(23, 12, vocab), 8)).unwrap();
        let mut out: BTreeMap<u64, Vec<SampledToken>> = BTreeMap::new();
        let mut step = |e: &mut kiln_engine::Engine| {
            for u in pollster::block_on(e.step()).unwrap() {
                out.entry(u.id).or_default().extend(u.token);
            }
        };
        for _ in 0..3 {
            step(&mut e);
        }
        for (i, p) in prompts.iter().enumerate() {
            let ask = Request {
                return_hidden: true,
                ..request(i as u64, p.clone(), 1)
            };
            e.add_request(ask).unwrap();
        }
        while e.has_unfinished() {
            step(&mut e);
        }
        assert_eq!(e.num_overlapped_steps() > 0, overlap == Overlap::On);
        assert!(out[&9].iter().all(|t| t.hidden.is_none()), "{family}");
        for (i, p) in prompts.iter().enumerate() {
            let hidden = out[&(i as u64)][0].hidden.clone().expect("a hidden state");
            assert_eq!(hidden.len(), h);
            let want = cpu.forward(p).pop().unwrap();
            let got: Vec<f32> = (0..vocab)
                .map(|j| (0..h).map(|k| w[j * h + k] * hidden[k]).sum())
                .collect();
            let scale = want.iter().fold(1f32, |m, v| m.max(v.abs()));
            let worst = (got.iter().zip(&want))
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(
                worst < 5e-3 * scale,
                "{family}, prompt {i}: {worst} of {scale}"
            );
        }
    }
}
