//! Shared set-up for the kernel benchmarks: the device and random buffers.

use kiln_gpu::{GpuContext, StepUniform};

pub fn gpu() -> GpuContext {
    pollster::block_on(GpuContext::new())
        .unwrap_or_else(|e| panic!("benchmarks need a GPU adapter: {e}"))
}

/// Deterministic pseudo-random values in [-scale, scale).
pub fn values(n: usize, seed: u32, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2654435761).wrapping_add(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s as f32 / u32::MAX as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

pub fn step_buffer(ctx: &GpuContext, tokens: u32, seqs: u32, samples: u32) -> wgpu::Buffer {
    ctx.uniform_init(
        "step",
        bytemuck::bytes_of(&StepUniform {
            num_tokens: tokens,
            num_seqs: seqs,
            num_samples: samples,
            num_prev: 0,
        }),
    )
}

/// Records `record` `reps` times into one pass, submits and waits for the GPU.
pub fn run(ctx: &GpuContext, reps: usize, record: &dyn Fn(&mut wgpu::ComputePass<'_>)) {
    let mut enc = ctx.device.create_command_encoder(&Default::default());
    {
        let mut pass = enc.begin_compute_pass(&Default::default());
        for _ in 0..reps {
            record(&mut pass);
        }
    }
    ctx.queue.submit([enc.finish()]);
    ctx.device
        .poll(wgpu::PollType::wait_indefinitely())
        .expect("poll");
    let e = ctx.faults.take_errors();
    assert!(e.is_empty(), "{e:?}");
}
