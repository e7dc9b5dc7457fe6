//! Hidden states for embeddings: a request that asks for one gets, with its first token, the
//! final norm's output at its prompt's last token; the model's output matrix applied to it
//! gives the CPU reference's logits there. Asked beside another request (so its sampler row
//! is not the first) and in a batch with prompts of other lengths.

use super::*;

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
    for family in FAMILIES {
        let mut e = engine(&ctx, &model, on(config(32, true), family, KvDtype::F16));
        let other = request(9, tokens(23, 12, vocab), 6);
        let asks: Vec<Request> = (prompts.iter().enumerate())
            .map(|(i, p)| Request {
                return_hidden: true,
                ..request(i as u64, p.clone(), 1)
            })
            .collect();
        let out = run(&mut e, [vec![other], asks].concat());
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
