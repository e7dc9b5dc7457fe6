//! A mixture of experts' launches: the router's product (the norm fused in, a gated shared
//! expert's gate rows after the router's), the routing (each token's experts and weights),
//! the shared expert's gate, and the experts' two products, each a token's experts at a time
//! or, for steps of many tokens, grouped by expert.

use kiln_model::Tensor;
use kiln_model::models::Experts;

use super::upload::Upload;
use super::{LayerContext, RowOrder, Step};
use crate::GpuError;
use crate::ops::{self, Matmul, MatmulArgs, OutputMap};

/// The launches of `e`, after the operations before it made `mlp_rows` rows of a shared
/// expert's activations (its gate and up; none without one).
pub(super) fn steps(
    l: &LayerContext,
    up: &mut Upload,
    e: &Experts,
    mlp_rows: usize,
) -> Result<Vec<Step>, GpuError> {
    let (ctx, c, b) = (l.ctx, l.config, l.bufs);
    let (eps, step) = (c.rms_norm_eps, &l.inputs.step);
    let mut steps = Vec::new();
    let (Some(moe), Some(eb)) = (c.moe, b.experts.as_ref()) else {
        return Err(GpuError::Shape {
            op: "layer",
            detail: "experts without a mixture of experts' config".into(),
        });
    };
    let gain = up.gains(&[&e.norm], RowOrder::Stacked)?;
    // The router's rows, and a gated shared expert's after them.
    let router: Vec<&Tensor> = [&e.router].into_iter().chain(&e.shared_gate).collect();
    let (rw, stride) = up.stack(&router, RowOrder::Stacked)?;
    let router_bias = match &e.router_bias {
        Some(_) if e.shared_gate.is_some() => {
            return Err(GpuError::Shape {
                op: "layer",
                detail: "a router bias with a shared expert's gate".into(),
            });
        }
        Some(t) => Some(up.vector_buffer(t)?),
        None => None,
    };
    steps.push(Step::Matmul(Matmul::new(
        ctx,
        l.kernels,
        step,
        MatmulArgs {
            x: &b.x,
            w: &rw,
            bias: router_bias.as_ref(),
            y: &eb.logits,
            ldy: stride,
            out_offset: 0,
            norm: Some((&gain, eps)),
            accumulate: false,
            sample_rows: false,
            map: OutputMap::Identity,
            pairs: None,
        },
    )?));
    let routing = ops::Routing {
        ids: &eb.ids,
        weights: &eb.weights,
    };
    let logits = || ops::RouterLogits {
        logits: &eb.logits,
        stride: stride as usize,
    };
    let choice_bias = match &e.choice_bias {
        Some(t) => Some(up.vector_buffer(t)?),
        None => None,
    };
    let bias = choice_bias.as_ref();
    let route = ops::moe_route(ctx, l.kernels, step, &moe, logits(), bias, &routing);
    steps.push(Step::Launch(route?));
    if e.shared_gate.is_some() {
        // The shared expert's activations, which the operations before made.
        let act = (&b.act, mlp_rows / 2);
        let gate = ops::moe_shared_gate(ctx, l.kernels, step, logits(), moe.experts, act);
        steps.push(Step::Launch(gate));
    }
    let slots = moe.experts_per_token;
    let (gu, _) = up.stack(&e.gate_up.iter().collect::<Vec<_>>(), RowOrder::GateUp)?;
    let gate_up_bias = match &e.gate_up_bias {
        Some(ts) => Some(up.vectors(ts, true)?),
        None => None,
    };
    let down_bias = match &e.down_bias {
        Some(ts) => Some(up.vectors(ts, false)?),
        None => None,
    };
    let gate_up = ops::ExpertProduct {
        x: &b.x,
        norm: Some((&gain, eps)),
        w: &gu,
        rows_per_expert: 2 * moe.intermediate_size,
        y: &eb.act,
        glu: Some(c.activation),
        scale: 1.0,
        bias: gate_up_bias.as_ref(),
    };
    let (dw, _) = up.stack(&e.down.iter().collect::<Vec<_>>(), RowOrder::Stacked)?;
    let down = ops::ExpertProduct {
        x: &eb.act,
        norm: None,
        w: &dw,
        rows_per_expert: c.hidden_size,
        y: &b.x,
        glu: None,
        // Into the residual stream, scaled as any sub-layer's output.
        scale: c.residual_scale(),
        bias: down_bias.as_ref(),
    };
    // Steps of many tokens list them by expert and run the grouped product
    // where it is built; the others (and every step elsewhere) a token's
    // experts at a time.
    let from = match &eb.groups {
        Some(_) => (l.kernels.moe_grouped_from).unwrap_or_else(|| ops::grouped_from(moe.experts)),
        None => u32::MAX,
    };
    let mut products = Vec::new();
    for a in [gate_up, down] {
        let per_token = (slots, from);
        let launches = ops::expert_matvec(ctx, l.kernels, step, per_token, &routing, a.clone());
        products.extend(launches?);
        if let Some(g) = &eb.groups {
            if a.glu.is_some() {
                products.push(ops::moe_group(ctx, l.kernels, step, from, &routing, g)?);
            }
            products.extend(ops::expert_matmul(ctx, l.kernels, from, &routing, g, a)?);
        }
    }
    steps.extend(products.into_iter().map(Step::Launch));
    Ok(steps)
}
