//! The GPU device: adapter selection, the features and limits kiln asks for, and readback.
//!
//! The device's lost and uncaptured-error callbacks only record what happened in
//! [`DeviceFaults`]; the engine reads it after each step (a lost device is rebuilt, an
//! uncaptured error fails the step).
//!
//! Everything here is async and never blocks, so the same code runs in a browser tab.
//! Native callers drive the futures with `pollster::block_on`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::GpuError;

/// What wgpu's callbacks reported about a device: that it is lost (for good), and errors no
/// error scope caught (the work they belong to produced nothing reliable).
#[derive(Debug, Default)]
pub struct DeviceFaults {
    lost: Mutex<Option<String>>,
    errors: Mutex<Vec<String>>,
}

impl DeviceFaults {
    /// Why the device was lost, once it is.
    pub fn lost(&self) -> Option<String> {
        self.lost.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Records a loss (from the callback, or from a test's fault injection). The first reason
    /// is kept.
    pub fn mark_lost(&self, reason: impl Into<String>) {
        self.lost
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(reason.into());
    }

    /// Takes the uncaptured errors recorded since the last call.
    pub fn take_errors(&self) -> Vec<String> {
        std::mem::take(&mut *self.errors.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn push_error(&self, e: String) {
        let mut v = self.errors.lock().unwrap_or_else(|e| e.into_inner());
        if v.len() < 16 {
            v.push(e);
        }
    }
}

/// A device's own memory, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceMemory {
    pub total: u64,
    /// What this process may still take of it (Vulkan's `VK_EXT_memory_budget`: the budget
    /// less what the process uses), where the driver tells it.
    pub free: Option<u64>,
}

/// An opened device with the facts the kernels need about it.
#[derive(Clone)]
pub struct GpuContext {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    pub features: wgpu::Features,
    pub limits: wgpu::Limits,
    /// Filled by the device's callbacks once [`Self::watch_device`] installed them.
    pub faults: Arc<DeviceFaults>,
    /// Bytes of the storage buffers made through this context so far ([`Self::storage`];
    /// never lowered when one is dropped: what a piece of work allocates is a difference).
    pub allocated: Arc<AtomicU64>,
    /// Zeroed buffers bound where a kernel's binding has nothing to read, one per size.
    pub placeholders: Arc<Mutex<HashMap<u64, wgpu::Buffer>>>,
    /// The side of the cooperative matrices `matmul_coop.wgsl` runs on (16 or 8), where the
    /// device was opened with them ([`Self::cooperative_matrix_size`]).
    pub cooperative_matrix: Option<u32>,
}

impl GpuContext {
    /// Opens the best adapter of the backends allowed by `WGPU_BACKEND` (all by default).
    pub async fn new() -> Result<Self, GpuError> {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
        if wgpu::Backends::from_env().is_none() {
            // The GL backend compiles shaders slowly at first dispatch; prefer the native APIs.
            desc.backends = wgpu::Backends::PRIMARY;
        }
        let instance = wgpu::Instance::new(desc);
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::from_env()
                    .unwrap_or(wgpu::PowerPreference::HighPerformance),
                force_fallback_adapter: false,
                compatible_surface: None,
                apply_limit_buckets: false,
            })
            .await
            .map_err(|e| GpuError::NoAdapter(e.to_string()))?;
        Self::from_adapter(adapter).await
    }

    /// Opens a device on `adapter` with kiln's [`Self::requirements`].
    pub async fn from_adapter(adapter: wgpu::Adapter) -> Result<Self, GpuError> {
        let (mut features, limits) = Self::requirements(&adapter);
        let cooperative = Self::cooperative_matrix_size(&adapter);
        let experimental = if cooperative.is_some() {
            features |= wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
            // SAFETY: wgpu's cooperative matrices are experimental (its own checks may miss a
            // misuse); kiln uses them in `matmul_coop.wgsl` only, whose results the kernel
            // tests compare with the CPU reference on every adapter that offers them.
            unsafe { wgpu::ExperimentalFeatures::enabled() }
        } else {
            wgpu::ExperimentalFeatures::disabled()
        };
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("kiln"),
                required_features: features,
                required_limits: limits.clone(),
                experimental_features: experimental,
                memory_hints: wgpu::MemoryHints::Performance,
                trace: wgpu::Trace::Off,
            })
            .await
            .map_err(|e| GpuError::Device(e.to_string()))?;
        let mut ctx = Self::from_device(adapter.get_info(), device, queue, features, limits);
        ctx.cooperative_matrix = cooperative;
        Ok(ctx)
    }

    /// The side of the square cooperative matrices (f16 inputs, f32 accumulation, a
    /// subgroup's) kiln can use on `adapter`: 16 where it lists 16 x 16 x 16 (NVIDIA, AMD),
    /// else 8 where it lists 8 x 8 x 8 (Apple, lavapipe); none without shader-f16 and
    /// subgroups, or where the subgroup size may vary (`matmul_coop.wgsl` counts on four
    /// subgroups of a fixed size), or in the browser; nor a side whose tiles the workgroup
    /// memory cannot hold.
    pub fn cooperative_matrix_size(adapter: &wgpu::Adapter) -> Option<u32> {
        let needed = wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX
            | wgpu::Features::SHADER_F16
            | wgpu::Features::SUBGROUP;
        let info = adapter.get_info();
        if cfg!(target_arch = "wasm32")
            || !adapter.features().contains(needed)
            || info.subgroup_min_size != info.subgroup_max_size
        {
            return None;
        }
        let listed = adapter.cooperative_matrix_properties();
        let workgroup_bytes = adapter.limits().max_compute_workgroup_storage_size;
        [16, 8].into_iter().find(|&side| {
            crate::ops::coop_workgroup_bytes(side) <= workgroup_bytes
                && listed.iter().any(|m| {
                    (m.m_size, m.n_size, m.k_size) == (side, side, side)
                        && m.ab_type == wgpu::CooperativeScalarType::F16
                        && m.cr_type == wgpu::CooperativeScalarType::F32
                })
        })
    }

    /// What kiln asks of a device on `adapter`: the adapter's own storage and uniform binding
    /// limits (the defaults are small), and shader-f16 and subgroups when present.
    pub fn requirements(adapter: &wgpu::Adapter) -> (wgpu::Features, wgpu::Limits) {
        let info = adapter.get_info();
        let supported = adapter.limits();
        // Subgroups only where a subgroup is at least 4 wide (matvec_subgroup.wgsl's bound),
        // and not in the browser: there the WGSL goes to the browser's compiler as written, which
        // wants `enable subgroups;`, a directive naga (native) does not parse yet.
        let subgroups = if info.subgroup_min_size >= 4 && !cfg!(target_arch = "wasm32") {
            wgpu::Features::SUBGROUP
        } else {
            wgpu::Features::empty()
        };
        // Timestamp queries for the kernel profile only.
        let wanted = wgpu::Features::SHADER_F16 | wgpu::Features::TIMESTAMP_QUERY | subgroups;
        let features = adapter.features() & wanted;
        let limits = wgpu::Limits {
            max_storage_buffer_binding_size: supported.max_storage_buffer_binding_size,
            max_buffer_size: supported.max_buffer_size,
            max_uniform_buffer_binding_size: supported.max_uniform_buffer_binding_size,
            max_storage_buffers_per_shader_stage: supported
                .max_storage_buffers_per_shader_stage
                .min(16),
            max_compute_workgroup_storage_size: supported.max_compute_workgroup_storage_size,
            max_compute_invocations_per_workgroup: supported.max_compute_invocations_per_workgroup,
            max_compute_workgroup_size_x: supported.max_compute_workgroup_size_x,
            max_compute_workgroups_per_dimension: supported.max_compute_workgroups_per_dimension,
            ..wgpu::Limits::downlevel_defaults()
        };
        (features, limits)
    }

    /// A context over a device opened with at least [`Self::requirements`] (`features` and
    /// `limits` are those requirements): kiln's own, or one it shares (a desktop window's).
    pub fn from_device(
        info: wgpu::AdapterInfo,
        device: wgpu::Device,
        queue: wgpu::Queue,
        features: wgpu::Features,
        limits: wgpu::Limits,
    ) -> Self {
        let ctx = Self {
            device,
            queue,
            info,
            features,
            limits,
            faults: Default::default(),
            allocated: Default::default(),
            placeholders: Default::default(),
            cooperative_matrix: None,
        };
        ctx.watch_device();
        ctx
    }

    /// Installs the device-lost and uncaptured-error callbacks, which record into
    /// [`Self::faults`] instead of panicking (wgpu's default for uncaptured errors).
    pub fn watch_device(&self) {
        let f = self.faults.clone();
        self.device
            .set_device_lost_callback(move |reason, message| {
                f.mark_lost(format!("{reason:?}: {message}"));
            });
        let f = self.faults.clone();
        self.device
            .on_uncaptured_error(Arc::new(move |e: wgpu::Error| f.push_error(e.to_string())));
    }

    /// Whether the adapter runs on the host's CPU (lavapipe, SwiftShader).
    pub fn cpu_adapter(&self) -> bool {
        self.info.device_type == wgpu::DeviceType::Cpu
    }

    /// Largest buffer a single storage binding may cover, in bytes.
    pub fn max_binding(&self) -> u64 {
        self.limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size)
    }

    /// The device's own memory (its largest device-local heap) where the backend tells it
    /// (Vulkan); `None` elsewhere (Metal, DX12 and WebGPU through wgpu do not).
    pub fn device_memory(&self) -> Option<DeviceMemory> {
        #[cfg(any(target_os = "linux", target_os = "windows"))]
        {
            use ash::vk;
            // SAFETY: reads the physical device's memory properties and keeps no handle; the
            // budget query is made only where the instance has Vulkan 1.1 and the device the
            // extension.
            let hal = unsafe { self.device.as_hal::<wgpu::hal::api::Vulkan>() }?;
            let instance = hal.shared_instance();
            let phd = hal.raw_physical_device();
            let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
            let with_budget = instance.instance_api_version() >= vk::API_VERSION_1_1
                && (hal.enabled_device_extensions()).contains(&ash::ext::memory_budget::NAME);
            let props = if with_budget {
                let mut p2 = vk::PhysicalDeviceMemoryProperties2::default().push_next(&mut budget);
                unsafe {
                    (instance.raw_instance()).get_physical_device_memory_properties2(phd, &mut p2)
                };
                p2.memory_properties
            } else {
                unsafe {
                    instance
                        .raw_instance()
                        .get_physical_device_memory_properties(phd)
                }
            };
            let (i, heap) = (props.memory_heaps_as_slice().iter().enumerate())
                .filter(|(_, h)| h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
                .max_by_key(|(_, h)| h.size)?;
            Some(DeviceMemory {
                total: heap.size,
                free: with_budget
                    .then(|| budget.heap_budget[i].saturating_sub(budget.heap_usage[i])),
            })
        }
        #[cfg(not(any(target_os = "linux", target_os = "windows")))]
        None
    }

    /// A storage buffer of `bytes` bytes (rounded up to 16), zero-filled; it can be bound as a
    /// uniform buffer too (the subgroup matrix kernel reads the head of x through one).
    pub fn storage(&self, label: &str, bytes: u64) -> wgpu::Buffer {
        let size = bytes.max(16).next_multiple_of(16);
        self.allocated.fetch_add(size, Ordering::Relaxed);
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::UNIFORM
                | wgpu::BufferUsages::COPY_DST
                | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        })
    }

    /// A zeroed storage buffer of `bytes` bytes for bindings that read nothing, shared by
    /// every kernel that binds one of that size (kernels never write it).
    pub fn placeholder(&self, bytes: u64) -> wgpu::Buffer {
        let mut p = self.placeholders.lock().unwrap_or_else(|e| e.into_inner());
        (p.entry(bytes)
            .or_insert_with(|| self.storage("placeholder", bytes)))
        .clone()
    }

    /// A storage buffer initialised with `data`.
    pub fn storage_init(&self, label: &str, data: &[u8]) -> wgpu::Buffer {
        let buffer = self.storage(label, data.len() as u64);
        self.write(&buffer, 0, data);
        buffer
    }

    /// A uniform buffer initialised with `data`.
    pub fn uniform_init(&self, label: &str, data: &[u8]) -> wgpu::Buffer {
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: (data.len() as u64).max(16).next_multiple_of(16),
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.write(&buffer, 0, data);
        buffer
    }

    /// Queues a write of `data` at `offset`, padding the tail to a multiple of 4 bytes.
    pub fn write(&self, buffer: &wgpu::Buffer, offset: u64, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        if data.len().is_multiple_of(4) {
            self.queue.write_buffer(buffer, offset, data);
        } else {
            let mut padded = data.to_vec();
            padded.resize(data.len().next_multiple_of(4), 0);
            self.queue.write_buffer(buffer, offset, &padded);
        }
    }

    /// Copies `bytes` bytes of `buffer` from `offset` back to the host, after all work
    /// submitted so far.
    pub async fn read(
        &self,
        buffer: &wgpu::Buffer,
        offset: u64,
        bytes: u64,
    ) -> Result<Vec<u8>, GpuError> {
        let size = bytes.next_multiple_of(4);
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = self.device.create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(buffer, offset, &staging, 0, size);
        self.queue.submit([encoder.finish()]);
        let mut out = self.map_read(&staging).await?;
        out.truncate(bytes as usize);
        Ok(out)
    }

    /// Maps a `MAP_READ` buffer whose copy has been submitted, and returns its contents.
    pub async fn map_read(&self, staging: &wgpu::Buffer) -> Result<Vec<u8>, GpuError> {
        self.map_read_after(staging, None).await
    }

    /// [`Self::map_read`] of a buffer that `submission` fills: waits for that submission
    /// only, not for any submitted after it (the next step may already be running).
    pub async fn map_read_after(
        &self,
        staging: &wgpu::Buffer,
        submission: Option<wgpu::SubmissionIndex>,
    ) -> Result<Vec<u8>, GpuError> {
        let (tx, rx) = flume::bounded(1);
        staging.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: submission,
                timeout: None,
            })
            .map_err(|e| GpuError::Device(e.to_string()))?;
        #[cfg(target_arch = "wasm32")]
        let _ = submission;
        rx.recv_async()
            .await
            .map_err(|_| GpuError::Device("readback was dropped".into()))?
            .map_err(|e| GpuError::Device(e.to_string()))?;
        let data = staging
            .get_mapped_range(..)
            .map_err(|e| GpuError::Device(e.to_string()))?
            .to_vec();
        staging.unmap();
        Ok(data)
    }

    /// One line naming the adapter, its backend and driver.
    pub fn describe(&self) -> String {
        format!(
            "{} ({:?}, {} {})",
            self.info.name, self.info.backend, self.info.driver, self.info.driver_info
        )
    }
}
