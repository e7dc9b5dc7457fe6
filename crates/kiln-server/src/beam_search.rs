//! Beam search, as vLLM serves it (`use_beam_search` with `n` beams, `length_penalty`,
//! `early_stopping`): every step asks the engine for one token after each live beam, with the
//! `2n` most likely next tokens and their log-probabilities, and keeps the `n` best
//! extensions; a beam that writes EOS is done. The steps' requests of a beam share its
//! prefix with the step before, so the prefix cache serves all but its last block.
//!
//! Beams are ranked by their summed log-probability over their generated length (EOS not
//! counted) to the power `length_penalty` (1: the mean; 0: the sum). Other sampling fields
//! and features that do not apply to it are refused by name.

use futures_util::future::try_join_all;
use kiln_frontend::{GenSpec, GenerationParams, MAX_TOP_LOGPROBS};

use crate::api::BeamFields;
use crate::error::ApiError;
use crate::state::Shared;

/// A request's beam search.
#[derive(Clone, Copy, Debug)]
pub struct BeamSearch {
    pub width: usize,
    pub length_penalty: f32,
    /// Stop once `width` beams are done, rather than at `max_tokens`.
    pub early_stopping: bool,
}

/// One beam: its generated tokens (with EOS at the end where it wrote one) and their summed
/// log-probability.
#[derive(Clone, Debug)]
pub struct Beam {
    pub tokens: Vec<u32>,
    pub logprob: f32,
    /// Whether it wrote EOS.
    pub done: bool,
}

/// The fields beam search does not apply, each set in a way that would change something.
fn unused(p: &GenerationParams) -> Option<&'static str> {
    [
        ("top_p", p.top_p.is_some_and(|v| v != 1.0)),
        ("top_k", p.top_k.is_some_and(|v| v > 0)),
        ("min_p", p.min_p.is_some_and(|v| v != 0.0)),
        (
            "presence_penalty",
            p.presence_penalty.is_some_and(|v| v != 0.0),
        ),
        (
            "frequency_penalty",
            p.frequency_penalty.is_some_and(|v| v != 0.0),
        ),
        (
            "repetition_penalty",
            p.repetition_penalty.is_some_and(|v| v != 1.0),
        ),
        ("stop", p.stop.is_some()),
        (
            "stop_token_ids",
            p.stop_token_ids.as_ref().is_some_and(|s| !s.is_empty()),
        ),
        ("min_tokens", p.min_tokens.is_some_and(|v| v > 0)),
        (
            "logit_bias",
            p.logit_bias.as_ref().is_some_and(|b| !b.is_empty()),
        ),
        ("prompt_logprobs", p.prompt_logprobs.is_some()),
        ("seed", p.seed.is_some()),
    ]
    .into_iter()
    .find_map(|(name, set)| set.then_some(name))
}

impl BeamSearch {
    /// The beam search `fields` ask for (`None` without `use_beam_search`); `others`: the
    /// route's own fields that beam search does not serve, each with whether it is set.
    /// Refuses what it cannot serve, naming the field.
    pub fn requested(
        fields: &BeamFields,
        params: &GenerationParams,
        others: &[(&'static str, bool)],
    ) -> Result<Option<Self>, ApiError> {
        let BeamFields {
            use_beam_search,
            length_penalty,
            early_stopping,
        } = *fields;
        let others = others.iter().find(|(_, set)| *set).map(|(name, _)| *name);
        if use_beam_search != Some(true) {
            for (name, set) in [
                ("length_penalty", length_penalty.is_some()),
                ("early_stopping", early_stopping.is_some()),
            ] {
                if set {
                    return Err(ApiError::bad_param(
                        name,
                        format!("`{name}` applies to beam search only (`use_beam_search`)"),
                    ));
                }
            }
            return Ok(None);
        }
        if let Some(name) = others.or_else(|| unused(params)) {
            return Err(ApiError::bad_param(
                name,
                format!("`{name}` does not apply to beam search (`use_beam_search`)"),
            ));
        }
        let width = params.n.unwrap_or(1) as usize;
        let max = MAX_TOP_LOGPROBS as usize / 2;
        if !(1..=max).contains(&width) {
            return Err(ApiError::bad_param(
                "n",
                format!(
                    "beam search takes n of 1 to {max} beams (the engine reports at most {MAX_TOP_LOGPROBS} likeliest tokens, two per beam), not {width}"
                ),
            ));
        }
        let length_penalty = length_penalty.unwrap_or(1.0);
        if !length_penalty.is_finite() {
            return Err(ApiError::bad_param(
                "length_penalty",
                "length_penalty must be a finite number",
            ));
        }
        Ok(Some(Self {
            width,
            length_penalty,
            early_stopping: early_stopping.unwrap_or(false),
        }))
    }

    /// The best `width` beams after `prompt`, best first, at most `max_tokens` tokens each.
    pub async fn run(
        &self,
        st: &Shared,
        prompt: &[u32],
        max_tokens: usize,
        spec: &GenSpec,
    ) -> Result<Vec<Beam>, ApiError> {
        let alternatives = 2 * self.width as u32;
        // One token after a beam, greedy (the token drawn is not used), with the most
        // likely next tokens.
        let step = GenSpec {
            n: 1,
            logprobs: Some(alternatives),
            ignore_eos: true,
            sampling: kiln_engine::SamplingParams {
                top_logprobs: alternatives,
                ..spec.sampling
            },
            ..spec.clone()
        };
        let eos = &st.model.eos_token_ids;
        let mut live = vec![Beam {
            tokens: Vec::new(),
            logprob: 0.0,
            done: false,
        }];
        let mut done: Vec<Beam> = Vec::new();
        for _ in 0..max_tokens {
            let next = live.iter().map(|b| {
                let tokens = [prompt, &b.tokens].concat();
                let step = &step;
                async move {
                    let mut seqs = st.submit(&tokens, 1, step, Vec::new(), false)?;
                    let (_, d) = seqs.remove(0).collect().await?;
                    Ok::<_, ApiError>(d.logprobs.into_iter().next().map(|t| t.top))
                }
            });
            let tops = try_join_all(next).await?;
            let mut grown = Vec::new();
            for (b, top) in live.iter().zip(tops) {
                for (id, lp) in top.unwrap_or_default() {
                    let beam = Beam {
                        tokens: [&b.tokens[..], &[id]].concat(),
                        logprob: b.logprob + lp,
                        done: !spec.ignore_eos && eos.contains(&id),
                    };
                    match beam.done {
                        true => done.push(beam),
                        false => grown.push(beam),
                    }
                }
            }
            self.rank(&mut grown);
            grown.truncate(self.width);
            live = grown;
            if live.is_empty() || (self.early_stopping && done.len() >= self.width) {
                break;
            }
        }
        done.extend(live);
        self.rank(&mut done);
        done.truncate(self.width);
        Ok(done)
    }

    /// Sorts `beams` best first.
    fn rank(&self, beams: &mut [Beam]) {
        let score = |b: &Beam| {
            let len = b.tokens.len() - b.done as usize;
            b.logprob / (len.max(1) as f32).powf(self.length_penalty)
        };
        beams.sort_by(|a, b| score(b).total_cmp(&score(a)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beam(tokens: &[u32], logprob: f32, done: bool) -> Beam {
        Beam {
            tokens: tokens.to_vec(),
            logprob,
            done,
        }
    }

    #[test]
    fn beams_rank_by_log_probability_over_length() {
        let search = |length_penalty| BeamSearch {
            width: 2,
            length_penalty,
            early_stopping: false,
        };
        // A short beam of -2 against a long one of -3 (EOS not counted in its length).
        let mut beams = vec![
            beam(&[1, 2], -2.0, false),
            beam(&[1, 2, 3, 4, 0], -3.0, true),
        ];
        search(0.0).rank(&mut beams);
        assert_eq!(beams[0].logprob, -2.0, "the sum alone");
        search(1.0).rank(&mut beams);
        assert_eq!(beams[0].logprob, -3.0, "per token: -0.75 against -1");
    }
}
