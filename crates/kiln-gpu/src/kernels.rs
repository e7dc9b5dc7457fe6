//! The kernel table: one WGSL file per kernel under `shaders/`, compiled once per device and
//! cached by name.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A compiled compute pipeline and the name of its WGSL file.
pub struct Kernel {
    pub name: &'static str,
    pub pipeline: wgpu::ComputePipeline,
}

impl Kernel {
    /// A bind group whose binding `i` is the whole of `buffers[i]`.
    pub fn bind(&self, device: &wgpu::Device, buffers: &[&wgpu::Buffer]) -> wgpu::BindGroup {
        let entries: Vec<_> = buffers
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry { binding: i as u32, resource: b.as_entire_binding() })
            .collect();
        device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(self.name),
            layout: &self.pipeline.get_bind_group_layout(0),
            entries: &entries,
        })
    }
}

macro_rules! kernel_table {
    ($($name:literal),* $(,)?) => {
        const SOURCES: &[(&str, &str)] = &[
            $(($name, include_str!(concat!("../../../shaders/", $name, ".wgsl")))),*
        ];
    };
}

kernel_table!(
    "embedding",
    "matmul",
    "matvec",
    "matvec_rowwise",
    "matmul_rowwise",
    "rope_kv",
    "attention",
    "attention_rowwise",
    "silu_mul",
    "gather_rmsnorm",
    "sample",
);

/// Compiles kernels on first use and hands out shared handles afterwards.
pub struct Kernels {
    device: wgpu::Device,
    cache: Mutex<HashMap<&'static str, Arc<Kernel>>>,
    /// Use the row-wise kernels (`*_rowwise.wgsl`: no workgroup memory, no barriers, one output
    /// row or tile per invocation) for matmul and attention instead of the tiled ones. The
    /// default on CPU-backed adapters, where a workgroup is a loop over SIMD lanes and barriers
    /// cost more than shared loads save.
    pub rowwise: bool,
}

impl Kernels {
    pub fn new(ctx: &crate::GpuContext) -> Self {
        Self {
            device: ctx.device.clone(),
            cache: Mutex::new(HashMap::new()),
            rowwise: ctx.info.device_type == wgpu::DeviceType::Cpu,
        }
    }

    /// The same, with the kernel family chosen by the caller (tests use both).
    pub fn with_rowwise(ctx: &crate::GpuContext, rowwise: bool) -> Self {
        Self { rowwise: rowwise, ..Self::new(ctx) }
    }

    /// The kernel of `shaders/{name}.wgsl`. Panics on an unknown name (a programming error).
    pub fn get(&self, name: &str) -> Arc<Kernel> {
        let mut cache = self.cache.lock().expect("kernel cache poisoned");
        let (name, source) = *SOURCES
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("no kernel named {name}"));
        cache
            .entry(name)
            .or_insert_with(|| {
                let module = self.device.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(name),
                    source: wgpu::ShaderSource::Wgsl(source.into()),
                });
                let pipeline = self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(name),
                    layout: None,
                    module: &module,
                    entry_point: Some("main"),
                    compilation_options: Default::default(),
                    cache: None,
                });
                Arc::new(Kernel { name, pipeline })
            })
            .clone()
    }
}
