//! The kernel profile (`kiln speed --profile`): every step timed operation by operation gives
//! the same outputs as steps recorded in one pass, and counts each layer's operations once a
//! step.

use kiln_engine::Overlap;

use super::overlap::{run_outcomes, workload};
use super::*;

#[test]
fn kernel_profile_times_every_operation_and_changes_no_output() {
    let (_dir, model) = tiny(&TinyConfig::default(), 22);
    let ctx = gpu();
    let (vocab, layers) = (model.config.vocab_size, model.config.num_layers as f64);
    for family in FAMILIES {
        for overlap in [Overlap::Off, Overlap::On] {
            let ec = on(
                EngineConfig {
                    overlap,
                    ..config(20, true)
                },
                family,
                KvDtype::F16,
            );
            let what = format!("kernels {family}, overlap {overlap:?}");
            let want = run_outcomes(&mut engine(&ctx, &model, ec.clone()), workload(vocab));
            let mut profiled = engine(&ctx, &model, ec);
            profiled.runner().set_profiling(true).unwrap();
            let got = run_outcomes(&mut profiled, workload(vocab));
            assert_eq!(got, want, "{what}: outputs with the profile on");

            let p = profiled.runner().take_profile();
            let steps = profiled.num_steps() as u32;
            // Overlapped, a step recorded before the previous one is read goes untimed.
            match overlap {
                Overlap::Off => assert_eq!(p.steps, steps, "{what}: steps timed"),
                _ => assert!(p.steps > 0 && p.steps <= steps, "{what}: {} steps", p.steps),
            }
            let attention = p
                .operations
                .iter()
                .find(|o| o.label.starts_with("attention"));
            let attention = attention.unwrap_or_else(|| panic!("{what}: no attention in {p:?}"));
            assert_eq!(attention.per_step, layers, "{what}: attentions a step");
            let products = p
                .operations
                .iter()
                .filter(|o| o.label.starts_with("matmul"));
            // Per layer: QKV, output, gate/up, down; and the LM head.
            let per_step: f64 = products.map(|o| o.per_step).sum();
            assert_eq!(per_step, 4.0 * layers + 1.0, "{what}: products a step");
            assert!(p.ms_per_step() > 0.0, "{what}: no device time");
            assert!(p.operations.iter().all(|o| o.ms_per_step >= 0.0));
            assert_eq!(
                profiled.runner().take_profile().steps,
                0,
                "{what}: taken twice"
            );
        }
    }
}
