//! Opening the browser's WebGPU device, and what JavaScript may ask about it.

use std::sync::Mutex;

use js_sys::{Array, Object};
use kiln_gpu::GpuContext;
use wasm_bindgen::prelude::*;

use crate::{err, set};

/// Why the device was lost or the last uncaptured GPU error; set from wgpu's callbacks, which
/// must be `Send`, so they only record it here and JavaScript reads it.
pub(crate) static DEVICE_LOST: Mutex<Option<String>> = Mutex::new(None);
pub(crate) static GPU_ERROR: Mutex<Option<String>> = Mutex::new(None);

/// An opened GPU device.
#[wasm_bindgen]
pub struct WebGpu {
    pub(crate) ctx: GpuContext,
    adapter_features: wgpu::Features,
    adapter_limits: wgpu::Limits,
}

/// Opens the browser's WebGPU adapter. `default_limits`: ask only for WebGPU's default limits
/// (128 MiB per storage binding, 256 invocations per workgroup, 16 KiB of workgroup storage,
/// 8 storage buffers per stage) instead of the adapter's own. shader-f16 is never required.
#[wasm_bindgen]
pub async fn open_gpu(default_limits: bool) -> Result<WebGpu, JsValue> {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::PRIMARY;
    let instance = wgpu::Instance::new(desc);
    let adapter = instance
        .request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            force_fallback_adapter: false,
            compatible_surface: None,
            apply_limit_buckets: false,
        })
        .await
        .map_err(|e| err(format!("no WebGPU adapter: {e}")))?;
    let adapter_features = adapter.features();
    let adapter_limits = adapter.limits();
    let ctx = if default_limits {
        let info = adapter.get_info();
        let limits = wgpu::Limits::default();
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("kiln"),
                required_features: wgpu::Features::empty(),
                required_limits: limits.clone(),
                experimental_features: wgpu::ExperimentalFeatures::disabled(),
                memory_hints: wgpu::MemoryHints::Performance,
                trace: wgpu::Trace::Off,
            })
            .await
            .map_err(|e| err(format!("requesting a device: {e}")))?;
        GpuContext {
            device,
            queue,
            info,
            features: wgpu::Features::empty(),
            limits,
            faults: Default::default(),
            allocated: Default::default(),
            placeholders: Default::default(),
            cooperative_matrix: None,
        }
    } else {
        GpuContext::from_adapter(adapter).await.map_err(err)?
    };
    *DEVICE_LOST.lock().unwrap() = None;
    *GPU_ERROR.lock().unwrap() = None;
    ctx.device.set_device_lost_callback(|reason, message| {
        *DEVICE_LOST.lock().unwrap() = Some(format!("{reason:?}: {message}"));
    });
    ctx.device
        .on_uncaptured_error(std::sync::Arc::new(|e: wgpu::Error| {
            let mut slot = GPU_ERROR.lock().unwrap();
            if slot.is_none() {
                *slot = Some(e.to_string());
            }
        }));
    Ok(WebGpu {
        ctx,
        adapter_features,
        adapter_limits,
    })
}

fn feature_names(f: wgpu::Features) -> Array {
    f.iter()
        .filter_map(|x| x.as_str())
        .map(JsValue::from_str)
        .collect()
}

#[wasm_bindgen]
impl WebGpu {
    /// The adapter's name, e.g. "SwiftShader Device (Subzero)".
    #[wasm_bindgen(getter)]
    pub fn adapter_name(&self) -> String {
        self.ctx.info.name.clone()
    }

    /// A line naming the adapter, backend and driver.
    pub fn describe(&self) -> String {
        let i = &self.ctx.info;
        let mut s = format!("{} ({:?}", i.name, i.backend);
        for part in [&i.driver, &i.driver_info] {
            if !part.is_empty() {
                s.push_str(", ");
                s.push_str(part);
            }
        }
        s.push(')');
        s
    }

    /// The adapter's features (WebGPU names).
    pub fn adapter_features(&self) -> Array {
        feature_names(self.adapter_features)
    }

    /// The features the device was opened with.
    pub fn device_features(&self) -> Array {
        feature_names(self.ctx.features)
    }

    /// The limits that matter to kiln: `{adapter: {...}, device: {...}}`.
    pub fn limits(&self) -> Object {
        let one = |l: &wgpu::Limits| {
            let o = Object::new();
            set(
                &o,
                "maxStorageBufferBindingSize",
                l.max_storage_buffer_binding_size as f64,
            );
            set(&o, "maxBufferSize", l.max_buffer_size as f64);
            set(
                &o,
                "maxStorageBuffersPerShaderStage",
                l.max_storage_buffers_per_shader_stage,
            );
            set(
                &o,
                "maxComputeWorkgroupStorageSize",
                l.max_compute_workgroup_storage_size,
            );
            set(
                &o,
                "maxComputeInvocationsPerWorkgroup",
                l.max_compute_invocations_per_workgroup,
            );
            o
        };
        let o = Object::new();
        set(&o, "adapter", one(&self.adapter_limits));
        set(&o, "device", one(&self.ctx.limits));
        o
    }

    /// Why the device was lost, if it was.
    pub fn lost(&self) -> Option<String> {
        DEVICE_LOST.lock().unwrap().clone()
    }

    /// The first uncaptured GPU error (validation, out of memory), if any.
    pub fn error(&self) -> Option<String> {
        GPU_ERROR.lock().unwrap().clone()
    }
}
