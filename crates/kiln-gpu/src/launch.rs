//! One recorded dispatch: a pipeline, its bind group (built once, reused every step) and a
//! rule for the grid size, which depends on the step's token and sample counts; and
//! [`Recorded`], what a step records as one unit (a launch, or an operation's few).

use std::sync::Arc;

use crate::Kernel;

/// How many workgroups a launch needs for a step of `tokens` tokens and `samples` samples.
pub enum Grid {
    /// `ceil(tokens / per)` x `y`.
    Tokens { per: u32, y: u32 },
    /// `ceil(samples / per)` x `y`.
    Samples { per: u32, y: u32 },
    /// `tokens` x `y` x `z`.
    TokensZ { y: u32, z: u32 },
    /// A fixed grid, independent of the step.
    Fixed([u32; 3]),
    /// `x` x `ceil(rows / per)`, rows being tokens or samples (tiled matmul).
    Tiles { x: u32, per: u32, samples: bool },
    /// `ceil(tokens * width / per)` workgroups, folded into two dimensions.
    Elements { width: u32, per: u32 },
    /// `x` x (`ceil(tokens / per)` + `groups`) x `z`: enough tiles of `per` rows for the
    /// step's tokens in as many as `groups` groups (a grouped product's).
    Grouped {
        x: u32,
        per: u32,
        groups: u32,
        z: u32,
    },
    /// `grid` on steps of `tokens.start` to `tokens.end - 1` tokens; nothing on others.
    Within {
        tokens: std::ops::Range<u32>,
        grid: Box<Grid>,
    },
}

impl Grid {
    pub fn size(&self, tokens: u32, samples: u32) -> [u32; 3] {
        match *self {
            Grid::Within {
                tokens: ref range,
                ref grid,
            } if range.contains(&tokens) => grid.size(tokens, samples),
            Grid::Within { .. } => [0, 0, 0],
            Grid::Grouped { x, per, groups, z } => [x, tokens.div_ceil(per) + groups, z],
            Grid::Tokens { per, y } => [tokens.div_ceil(per), y, 1],
            Grid::Samples { per, y } => [samples.div_ceil(per), y, 1],
            Grid::TokensZ { y, z } => [tokens, y, z],
            Grid::Fixed(g) => g,
            Grid::Tiles { x, per, samples: s } => {
                [x, if s { samples } else { tokens }.div_ceil(per), 1]
            }
            Grid::Elements { width, per } => {
                let groups = (tokens * width).div_ceil(per);
                let x = groups.min(32768);
                [x, groups.div_ceil(x.max(1)), 1]
            }
        }
    }
}

pub struct Launch {
    pub kernel: Arc<Kernel>,
    pub bind_group: wgpu::BindGroup,
    pub grid: Grid,
}

impl Launch {
    pub fn new(
        device: &wgpu::Device,
        kernel: Arc<Kernel>,
        buffers: &[&wgpu::Buffer],
        grid: Grid,
    ) -> Self {
        Self::with_extra(device, kernel, buffers, &[], grid)
    }

    /// The same, with bindings past `buffers` given by number (a range of a buffer, or a
    /// binding the kernel's numbering skips to).
    pub fn with_extra(
        device: &wgpu::Device,
        kernel: Arc<Kernel>,
        buffers: &[&wgpu::Buffer],
        extra: &[(u32, wgpu::BufferBinding<'_>)],
        grid: Grid,
    ) -> Self {
        let bind_group = kernel.bind_with(device, buffers, extra);
        Self {
            kernel,
            bind_group,
            grid,
        }
    }
}

/// One operation's launches, as a step records them.
pub trait Recorded {
    /// Records the dispatches for a step of `tokens` tokens and `samples` sampled rows into
    /// `pass`; returns how many.
    fn record(&self, pass: &mut wgpu::ComputePass<'_>, tokens: u32, samples: u32) -> u32;

    /// What the kernel profile calls it (`ModelRunner::set_profiling`); operations of one
    /// label add up.
    fn label(&self) -> String;
}

impl Recorded for Launch {
    /// Records nothing when the grid is empty.
    fn record(&self, pass: &mut wgpu::ComputePass<'_>, tokens: u32, samples: u32) -> u32 {
        let [x, y, z] = self.grid.size(tokens, samples);
        if x == 0 || y == 0 || z == 0 {
            return 0;
        }
        pass.set_pipeline(&self.kernel.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups(x, y, z);
        1
    }

    fn label(&self) -> String {
        self.kernel.name.to_string()
    }
}
