//! The paged KV cache: per layer one K and one V buffer of `num_blocks * BLOCK_SIZE` slots of
//! `(num_kv_heads, head_dim)` elements (their type and layout are [`KvLayout`]'s), plus the CPU tier, a host-memory pool of blocks that the
//! scheduler fills with cold blocks (`swap_out`) and restores from (`swap_in`).
//!
//! A block's slots are contiguous in every layer's buffer, so moving a block is `2 * layers`
//! buffer copies of `block_bytes` each. Copies out and in are recorded into the step's command
//! encoder ahead of the forward pass, outs first, so a block evicted and refilled in the same
//! step is saved before it is overwritten.

use kiln_core::BlockCopy;

use crate::{GpuContext, GpuError, KvLayout};

pub struct KvCache {
    pub k: Vec<wgpu::Buffer>,
    pub v: Vec<wgpu::Buffer>,
    pub layout: KvLayout,
    pub num_blocks: usize,
    /// Bytes of one block in one layer's K (or V) buffer.
    pub block_bytes: u64,
    /// CPU tier: one entry per CPU block, `2 * layers * block_bytes` bytes once filled.
    cpu: Vec<Vec<u8>>,
}

/// A swap-out recorded into a step, to be read back once the step is submitted.
pub struct PendingSwapOut {
    staging: wgpu::Buffer,
    blocks: Vec<u32>,
}

impl KvCache {
    pub fn new(
        ctx: &GpuContext,
        layout: KvLayout,
        num_blocks: usize,
        num_cpu_blocks: usize,
    ) -> Result<Self, GpuError> {
        if let Some(detail) = layout.unfit() {
            return Err(GpuError::Shape {
                op: "kv cache",
                detail,
            });
        }
        let max_blocks = layout.max_blocks(ctx.max_binding());
        if num_blocks == 0 || num_blocks > max_blocks {
            return Err(GpuError::Capacity {
                what: "KV blocks (one layer's K must fit one storage binding)",
                needed: num_blocks,
                max: max_blocks,
            });
        }
        let bytes = layout.buffer_bytes(num_blocks);
        let k = (0..layout.layers)
            .map(|_| ctx.storage("k_cache", bytes))
            .collect();
        let v = (0..layout.layers)
            .map(|_| ctx.storage("v_cache", bytes))
            .collect();
        Ok(Self {
            k,
            v,
            layout,
            num_blocks,
            block_bytes: layout.block_bytes(),
            cpu: vec![Vec::new(); num_cpu_blocks],
        })
    }

    /// Bytes of one block across all layers, K and V.
    pub fn bytes_per_block(&self) -> u64 {
        self.layout.bytes_per_block()
    }

    fn buffers(&self) -> impl Iterator<Item = &wgpu::Buffer> {
        self.k.iter().chain(self.v.iter())
    }

    fn check(&self, c: &BlockCopy) -> Result<(), GpuError> {
        if c.gpu_block as usize >= self.num_blocks || c.cpu_block as usize >= self.cpu.len() {
            return Err(GpuError::Batch(format!("block copy {c:?} out of range")));
        }
        Ok(())
    }

    /// Records the copies of `swap_out` (GPU to a staging buffer) and then of `swap_in` (CPU
    /// tier to GPU) into `encoder`.
    pub fn record_swaps(
        &self,
        ctx: &GpuContext,
        encoder: &mut wgpu::CommandEncoder,
        swap_out: &[BlockCopy],
        swap_in: &[BlockCopy],
    ) -> Result<Option<PendingSwapOut>, GpuError> {
        let per_block = self.bytes_per_block();
        let pending = if swap_out.is_empty() {
            None
        } else {
            for c in swap_out {
                self.check(c)?;
            }
            let gpu: Vec<u32> = swap_out.iter().map(|c| c.gpu_block).collect();
            Some(PendingSwapOut {
                staging: self.copy_out(ctx, encoder, &gpu, "kv swap out")?,
                blocks: swap_out.iter().map(|c| c.cpu_block).collect(),
            })
        };
        if !swap_in.is_empty() {
            let mut upload = Vec::with_capacity((per_block as usize) * swap_in.len());
            for c in swap_in {
                self.check(c)?;
                let data = &self.cpu[c.cpu_block as usize];
                if data.len() as u64 != per_block {
                    return Err(GpuError::Batch(format!(
                        "CPU block {} restored before it was stored",
                        c.cpu_block
                    )));
                }
                upload.extend_from_slice(data);
            }
            let staging = ctx.storage_init("kv swap in", &upload);
            for (i, c) in swap_in.iter().enumerate() {
                for (j, buf) in self.buffers().enumerate() {
                    let src = i as u64 * per_block + j as u64 * self.block_bytes;
                    encoder.copy_buffer_to_buffer(
                        &staging,
                        src,
                        buf,
                        c.gpu_block as u64 * self.block_bytes,
                        self.block_bytes,
                    );
                }
            }
        }
        Ok(pending)
    }

    /// Records copies of GPU `blocks` into a new mappable staging buffer, each as
    /// `bytes_per_block` bytes: every layer's K slots, then every layer's V slots.
    fn copy_out(
        &self,
        ctx: &GpuContext,
        encoder: &mut wgpu::CommandEncoder,
        blocks: &[u32],
        label: &str,
    ) -> Result<wgpu::Buffer, GpuError> {
        let per_block = self.bytes_per_block();
        let staging = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: per_block * blocks.len() as u64,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        for (i, &b) in blocks.iter().enumerate() {
            if b as usize >= self.num_blocks {
                return Err(GpuError::Batch(format!("GPU block {b} out of range")));
            }
            for (j, buf) in self.buffers().enumerate() {
                let dst = i as u64 * per_block + j as u64 * self.block_bytes;
                encoder.copy_buffer_to_buffer(
                    buf,
                    b as u64 * self.block_bytes,
                    &staging,
                    dst,
                    self.block_bytes,
                );
            }
        }
        Ok(staging)
    }

    /// Reads GPU blocks back in the CPU tier's layout, for sending to another server.
    pub async fn read_blocks(&self, ctx: &GpuContext, blocks: &[u32]) -> Result<Vec<u8>, GpuError> {
        if blocks.is_empty() {
            return Ok(Vec::new());
        }
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        let staging = self.copy_out(ctx, &mut encoder, blocks, "kv export")?;
        ctx.queue.submit([encoder.finish()]);
        ctx.map_read(&staging).await
    }

    /// Fills CPU-tier block `id` with a block received from another server (as
    /// [`Self::read_blocks`] lays it out).
    pub fn fill_cpu(&mut self, id: u32, data: &[u8]) -> Result<(), GpuError> {
        let slot = self
            .cpu
            .get_mut(id as usize)
            .ok_or_else(|| GpuError::Batch(format!("CPU block {id} out of range")))?;
        if data.len() as u64 != self.layout.bytes_per_block() {
            return Err(GpuError::Batch(format!(
                "a received KV block has {} bytes, this cache's blocks {}",
                data.len(),
                self.layout.bytes_per_block()
            )));
        }
        *slot = data.to_vec();
        Ok(())
    }

    /// The bytes of CPU-tier block `id` (as [`Self::read_blocks`] lays them out), `None` if
    /// it was never filled.
    pub fn cpu_block(&self, id: u32) -> Option<&[u8]> {
        let data = self.cpu.get(id as usize)?;
        (data.len() as u64 == self.layout.bytes_per_block()).then_some(&data[..])
    }

    /// Stores the blocks of a submitted swap-out into the CPU tier.
    pub async fn finish_swap_out(
        &mut self,
        ctx: &GpuContext,
        pending: PendingSwapOut,
    ) -> Result<(), GpuError> {
        let data = ctx.map_read(&pending.staging).await?;
        let per_block = self.bytes_per_block() as usize;
        for (i, cpu_block) in pending.blocks.iter().enumerate() {
            self.cpu[*cpu_block as usize] = data[i * per_block..(i + 1) * per_block].to_vec();
        }
        Ok(())
    }
}
