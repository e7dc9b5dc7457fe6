//! Whether the engine overlaps consecutive steps (`step.rs`), as configuration.

use std::fmt;
use std::str::FromStr;

/// Whether each step is scheduled and submitted while the one before it runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Overlap {
    /// On, except on CPU-backed adapters (lavapipe, SwiftShader): there the "device" runs on
    /// the host's own cores, and overlapping measured slower, not faster (BENCHMARKS.md).
    #[default]
    Auto,
    On,
    Off,
}

impl Overlap {
    /// Whether steps overlap, on a CPU-backed adapter or not.
    pub fn enabled(self, cpu_adapter: bool) -> bool {
        match self {
            Overlap::Auto => !cpu_adapter,
            Overlap::On => true,
            Overlap::Off => false,
        }
    }
}

impl fmt::Display for Overlap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Overlap::Auto => "auto",
            Overlap::On => "on",
            Overlap::Off => "off",
        })
    }
}

impl FromStr for Overlap {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Overlap::Auto),
            "on" => Ok(Overlap::On),
            "off" => Ok(Overlap::Off),
            _ => Err(format!("unknown overlap `{s}`: expected auto, on or off")),
        }
    }
}
