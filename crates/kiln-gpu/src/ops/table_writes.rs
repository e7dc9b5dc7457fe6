//! The launch that applies a step's writes to what the runner keeps between steps, as runs of
//! words (`shaders/table_writes.wgsl`): the block-table rows
//! ([`kiln_core::SeqInBatch::table_row`]) and the penalty store (`penalty_store.rs`).

use crate::{GpuContext, Grid, Kernels, Launch};

/// A step's writes as runs of consecutive words: a count, a `(first word, length, offset)`
/// header per run, then the runs' words (the format of `table_writes.wgsl`).
#[derive(Default)]
pub struct Runs {
    headers: Vec<[u32; 3]>,
    words: Vec<u32>,
}

impl Runs {
    /// Appends `words` at word `first` of the target, joining the previous run when it ends
    /// there.
    pub fn push(&mut self, first: u32, words: impl IntoIterator<Item = u32>) {
        let at = self.words.len();
        self.words.extend(words);
        let n = (self.words.len() - at) as u32;
        match self.headers.last_mut() {
            Some([f, len, start]) if *f + *len == first && (*start + *len) as usize == at => {
                *len += n;
            }
            _ => self.headers.push([first, n, at as u32]),
        }
    }

    /// Makes room for `words` more words.
    pub fn reserve(&mut self, words: usize) {
        self.words.reserve(words);
    }

    pub fn len(&self) -> usize {
        self.headers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.headers.is_empty()
    }

    /// Words of the encoded list.
    pub fn encoded_len(&self) -> usize {
        1 + 3 * self.headers.len() + self.words.len()
    }

    /// Queues the list into `buffer` as `table_writes.wgsl` reads it: the count and headers,
    /// then the words (two writes, so the words are not copied once more).
    pub fn write(&self, ctx: &GpuContext, buffer: &wgpu::Buffer) {
        let words_at = (1 + 3 * self.headers.len()) as u32;
        let mut head = Vec::with_capacity(words_at as usize);
        head.push(self.headers.len() as u32);
        head.extend((self.headers.iter()).flat_map(|&[f, n, at]| [f, n, words_at + at]));
        ctx.write(buffer, 0, bytemuck::cast_slice(&head));
        ctx.write(
            buffer,
            words_at as u64 * 4,
            bytemuck::cast_slice(&self.words),
        );
    }
}

/// Workgroups of the launch (`WORKGROUPS` in the shader).
const WORKGROUPS: u32 = 16;

/// Copies each run of `writes` ([`Runs::write`]) into `block_tables` (or any buffer of
/// u32 words kept between steps).
pub fn table_writes(
    ctx: &GpuContext,
    kernels: &Kernels,
    writes: &wgpu::Buffer,
    block_tables: &wgpu::Buffer,
) -> Launch {
    Launch::new(
        &ctx.device,
        kernels.get("table_writes"),
        &[writes, block_tables],
        Grid::Fixed([WORKGROUPS, 1, 1]),
    )
}
