//! The kernel profile ([`ModelRunner::set_profiling`]): each operation of a step recorded in a
//! compute pass of its own whose start and end the device timestamps, the times read back
//! once the step is finished and summed by the operation's label (the products of every layer
//! with one shape and format add up, as do the attentions). Device time per operation, launch
//! overheads between passes excluded: where the step's time goes, on any adapter with
//! timestamp queries (lavapipe and the Vulkan drivers of GPUs have them).
//!
//! With the profile on, steps overlap less: reading a step's times waits for every step
//! submitted, and a step recorded while the previous one's times are still unread is
//! recorded as usual, untimed.

use super::ModelRunner;
use crate::{GpuContext, GpuError, Recorded};

/// One label's share of the profiled steps.
#[derive(Clone, Debug, PartialEq)]
pub struct OperationTime {
    pub label: String,
    /// Operations of this label per step (layers times its count in a layer).
    pub per_step: f64,
    /// Device milliseconds per step, all of them together.
    pub ms_per_step: f64,
}

/// Device time per operation over the steps profiled since profiling was turned on or last
/// taken ([`ModelRunner::take_profile`]), the slowest first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelProfile {
    pub steps: u32,
    pub operations: Vec<OperationTime>,
}

impl KernelProfile {
    /// Device milliseconds per step, every operation together.
    pub fn ms_per_step(&self) -> f64 {
        self.operations.iter().map(|o| o.ms_per_step).sum()
    }
}

pub(super) struct Profiler {
    queries: wgpu::QuerySet,
    /// Operations a step may time (two queries each).
    capacity: usize,
    resolve: wgpu::Buffer,
    read: wgpu::Buffer,
    /// The labels of the step whose times `read` will hold, until they are read.
    pending: Option<Vec<String>>,
    /// Per label: operations and nanoseconds, summed over `steps`.
    totals: Vec<(String, u64, f64)>,
    steps: u32,
}

impl Profiler {
    pub fn new(ctx: &GpuContext, capacity: usize) -> Result<Self, GpuError> {
        if !ctx.features.contains(wgpu::Features::TIMESTAMP_QUERY) {
            return Err(GpuError::Device(format!(
                "the kernel profile needs timestamp queries, which {} does not offer",
                ctx.describe()
            )));
        }
        let queries = ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("kernel profile"),
            ty: wgpu::QueryType::Timestamp,
            count: 2 * capacity as u32,
        });
        let bytes = 16 * capacity as u64;
        let buffer = |label, usage| {
            ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: bytes,
                usage,
                mapped_at_creation: false,
            })
        };
        use wgpu::BufferUsages as U;
        Ok(Self {
            queries,
            capacity,
            resolve: buffer("profile resolve", U::QUERY_RESOLVE | U::COPY_SRC),
            read: buffer("profile read", U::MAP_READ | U::COPY_DST),
            pending: None,
            totals: Vec::new(),
            steps: 0,
        })
    }

    /// Records `units` each in a pass of its own, timed, unless the previous step's times are
    /// still unread (then in one pass, untimed). Returns the dispatches recorded.
    pub fn record(
        &mut self,
        encoder: &mut wgpu::CommandEncoder,
        units: &[&dyn Recorded],
        tokens: u32,
        samples: u32,
    ) -> u32 {
        if self.pending.is_some() || units.len() > self.capacity {
            return record_in_one_pass(encoder, units, tokens, samples);
        }
        let mut dispatches = 0;
        for (i, unit) in units.iter().enumerate() {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: &self.queries,
                    beginning_of_pass_write_index: Some(2 * i as u32),
                    end_of_pass_write_index: Some(2 * i as u32 + 1),
                }),
            });
            dispatches += unit.record(&mut pass, tokens, samples);
        }
        let n = units.len() as u32;
        encoder.resolve_query_set(&self.queries, 0..2 * n, &self.resolve, 0);
        encoder.copy_buffer_to_buffer(&self.resolve, 0, &self.read, 0, 16 * u64::from(n));
        self.pending = Some(units.iter().map(|u| u.label()).collect());
        dispatches
    }

    /// Adds the times of the step recorded last, waiting for every step submitted (the step
    /// after it may have been submitted since, its times unrecorded).
    pub async fn collect(&mut self, ctx: &GpuContext) -> Result<(), GpuError> {
        let Some(labels) = self.pending.take() else {
            return Ok(());
        };
        let data = ctx.map_read(&self.read).await?;
        let ticks: &[u64] = bytemuck::cast_slice(&data);
        let period = f64::from(ctx.queue.get_timestamp_period());
        for (i, label) in labels.into_iter().enumerate() {
            let ns = ticks[2 * i + 1].saturating_sub(ticks[2 * i]) as f64 * period;
            match self.totals.iter_mut().find(|t| t.0 == label) {
                Some(t) => {
                    t.1 += 1;
                    t.2 += ns;
                }
                None => self.totals.push((label, 1, ns)),
            }
        }
        self.steps += 1;
        Ok(())
    }

    /// The profile so far, which starts again.
    pub fn take(&mut self) -> KernelProfile {
        let steps = std::mem::take(&mut self.steps);
        let per = f64::from(steps.max(1));
        let mut operations: Vec<OperationTime> = (self.totals.drain(..))
            .map(|(label, count, ns)| OperationTime {
                label,
                per_step: count as f64 / per,
                ms_per_step: ns / 1e6 / per,
            })
            .collect();
        operations.sort_by(|a, b| b.ms_per_step.total_cmp(&a.ms_per_step));
        KernelProfile { steps, operations }
    }
}

/// Records `units` into one compute pass; returns the dispatches recorded.
pub(super) fn record_in_one_pass(
    encoder: &mut wgpu::CommandEncoder,
    units: &[&dyn Recorded],
    tokens: u32,
    samples: u32,
) -> u32 {
    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
        label: Some("forward"),
        timestamp_writes: None,
    });
    units
        .iter()
        .map(|u| u.record(&mut pass, tokens, samples))
        .sum()
}

impl ModelRunner {
    /// Turns the kernel profile on (or off, dropping what it holds). An error where the
    /// adapter has no timestamp queries.
    pub fn set_profiling(&self, on: bool) -> Result<(), GpuError> {
        let profiler = match on {
            true => Some(Profiler::new(&self.ctx, self.most_operations())?),
            false => None,
        };
        *self.profiler.borrow_mut() = profiler;
        Ok(())
    }

    /// Device time per operation over the steps finished since profiling was turned on or
    /// this was last called (empty when profiling is off).
    pub fn take_profile(&self) -> KernelProfile {
        (self.profiler.borrow_mut().as_mut())
            .map(Profiler::take)
            .unwrap_or_default()
    }

    /// Operations a step records at most: the previous tokens' launch, the block-table and
    /// penalty-list writes, the embedding's, the layers', the final norm, the LM head and
    /// sampling.
    fn most_operations(&self) -> usize {
        let layers: usize = self.layers.iter().map(|l| l.stages(true).count()).sum();
        layers + self.embed.len() + 6
    }

    /// Adds the times of the step recorded last to the profile.
    pub(super) async fn collect_profile(&self) -> Result<(), GpuError> {
        let profiler = self.profiler.borrow_mut().take();
        if let Some(mut p) = profiler {
            let collected = p.collect(&self.ctx).await;
            *self.profiler.borrow_mut() = Some(p);
            collected?;
        }
        Ok(())
    }
}
