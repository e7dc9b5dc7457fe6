//! Where the engine runs. By default on its own wgpu device, apart from the window's: a long
//! prefill does not hold the window's frames, and a lost engine device leaves the window
//! alone. With the `share_device` setting (read at start) the window's device is opened with
//! kiln's features and limits merged into egui's, and the engine runs on it: one device's
//! memory instead of two, but the engine and the window then wait on each other's work.

use std::sync::Arc;

use eframe::egui_wgpu::{self, WgpuSetup, WgpuSetupCreateNew};
use eframe::wgpu;
use kiln_gpu::GpuContext;

/// The largest window texture egui asks for (4K and more).
const MAX_TEXTURE: u32 = 8192;

/// What one device serving both the window and the engine is opened with.
pub fn shared_descriptor(adapter: &wgpu::Adapter) -> wgpu::DeviceDescriptor<'static> {
    let (features, limits) = GpuContext::requirements(adapter);
    let window = wgpu::Limits {
        max_texture_dimension_2d: MAX_TEXTURE,
        ..wgpu::Limits::default()
    };
    wgpu::DeviceDescriptor {
        label: Some("kiln (window and engine)"),
        required_features: features,
        required_limits: limits.or_better_values_from(&window),
        ..Default::default()
    }
}

/// The window's wgpu set-up when it shares its device with the engine.
pub fn shared_setup() -> egui_wgpu::WgpuConfiguration {
    egui_wgpu::WgpuConfiguration {
        wgpu_setup: WgpuSetup::CreateNew(WgpuSetupCreateNew {
            device_descriptor: Arc::new(shared_descriptor),
            ..WgpuSetupCreateNew::without_display_handle()
        }),
        ..Default::default()
    }
}

/// The engine's view of a device opened with [`shared_descriptor`].
pub fn shared_context(
    adapter: &wgpu::Adapter,
    device: &wgpu::Device,
    queue: &wgpu::Queue,
) -> GpuContext {
    let (features, limits) = GpuContext::requirements(adapter);
    GpuContext::from_device(
        adapter.get_info(),
        device.clone(),
        queue.clone(),
        features,
        limits,
    )
}
