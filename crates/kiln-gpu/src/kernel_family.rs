//! Which family of matmul and attention kernels a device runs: configuration (`--kernels`).

use std::fmt;
use std::str::FromStr;

/// Which family of matmul and attention kernels a device runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KernelFamily {
    /// By device type: `cpu` on CPU-backed adapters (lavapipe, SwiftShader), `gpu` elsewhere.
    #[default]
    Auto,
    /// The tiled kernels (`matvec.wgsl`, `matmul.wgsl`, `attention.wgsl`): workgroup memory
    /// and barriers, built for real GPUs.
    Gpu,
    /// The row-wise kernels (`*_rowwise.wgsl`): no workgroup memory, no barriers, one output
    /// row or tile per invocation; faster where a workgroup is a loop over SIMD lanes.
    Cpu,
}

impl KernelFamily {
    /// Whether this choice runs the row-wise kernels on a device of `device_type`.
    pub fn rowwise(self, device_type: wgpu::DeviceType) -> bool {
        match self {
            KernelFamily::Auto => device_type == wgpu::DeviceType::Cpu,
            KernelFamily::Gpu => false,
            KernelFamily::Cpu => true,
        }
    }
}

impl fmt::Display for KernelFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KernelFamily::Auto => "auto",
            KernelFamily::Gpu => "gpu",
            KernelFamily::Cpu => "cpu",
        })
    }
}

impl FromStr for KernelFamily {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(KernelFamily::Auto),
            "gpu" => Ok(KernelFamily::Gpu),
            "cpu" => Ok(KernelFamily::Cpu),
            _ => Err(format!(
                "unknown kernel family `{s}`: expected auto, gpu or cpu"
            )),
        }
    }
}
