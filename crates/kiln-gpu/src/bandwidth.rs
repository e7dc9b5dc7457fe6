//! The device's memory bandwidth, the ceiling decode is measured against: a decode step must
//! read every weight once, so its best time is the bytes it reads over this.
//!
//! Two measurements, because neither is a fair ceiling everywhere: buffer-to-buffer copies
//! (fast paths on CPU adapters such as lavapipe, but slow on some GPU drivers: a fifth of the
//! card's bandwidth on an H200's Vulkan driver) and a kernel that only reads
//! (`shaders/read_bandwidth.wgsl`). The ceiling is the larger.

use std::time::{Duration, Instant};

use crate::{GpuContext, Kernels};

/// Bytes per second.
#[derive(Clone, Copy, Debug)]
pub struct Bandwidth {
    /// Bytes read plus bytes written per second by `copy_buffer_to_buffer`.
    pub copy: f64,
    /// Bytes read per second by a compute kernel.
    pub read: f64,
}

impl Bandwidth {
    /// What a memory-bound kernel can hope for: the larger of the two.
    pub fn ceiling(&self) -> f64 {
        self.copy.max(self.read)
    }

    /// Measures both on `ctx` (a few hundred MiB of scratch memory, under a second on a GPU).
    pub fn measure(ctx: &GpuContext, kernels: &Kernels) -> Self {
        const REPEATS: u64 = 8;
        let bytes = (512u64 << 20)
            .min(ctx.limits.max_buffer_size)
            .min(ctx.max_binding())
            / 16
            * 16;
        let src = ctx.storage("bandwidth src", bytes);
        let dst = ctx.storage("bandwidth dst", bytes);
        let copy = best_of(ctx, |enc| {
            for _ in 0..REPEATS {
                enc.copy_buffer_to_buffer(&src, 0, &dst, 0, bytes);
            }
        });
        let sink = ctx.storage("bandwidth sink", 16);
        let kernel = kernels.get("read_bandwidth");
        let bind = kernel.bind(&ctx.device, &[&src, &sink]);
        let read = best_of(ctx, |enc| {
            for _ in 0..REPEATS {
                let mut pass = enc.begin_compute_pass(&Default::default());
                pass.set_pipeline(&kernel.pipeline);
                pass.set_bind_group(0, &bind, &[]);
                pass.dispatch_workgroups(4096, 1, 1);
            }
        });
        let per_s = |b: u64, t: Duration| b as f64 / t.as_secs_f64().max(1e-9);
        Bandwidth {
            copy: per_s(2 * REPEATS * bytes, copy),
            read: per_s(REPEATS * bytes, read),
        }
    }
}

/// The shortest of four timed submissions of what `record` encodes, after one untimed.
fn best_of(ctx: &GpuContext, record: impl Fn(&mut wgpu::CommandEncoder)) -> Duration {
    let once = || {
        let t = Instant::now();
        let mut enc = ctx.device.create_command_encoder(&Default::default());
        record(&mut enc);
        ctx.queue.submit([enc.finish()]);
        ctx.device
            .poll(wgpu::PollType::wait_indefinitely())
            .expect("poll");
        t.elapsed()
    };
    once();
    (0..4).map(|_| once()).min().unwrap_or(Duration::MAX)
}
