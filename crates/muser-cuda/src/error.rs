//! Typed errors of the CUDA backend. Every variant names what failed (the driver call, the
//! kernel module with its NVRTC log, the graph that missed its deadline).

use cudarc::driver::DriverError;

#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    #[error("no CUDA device: {0}")]
    NoDevice(String),
    #[error("CUDA driver call {op} failed: {source}")]
    Driver {
        op: &'static str,
        #[source]
        source: DriverError,
    },
    #[error("NVRTC failed to compile kernel module '{module}' ({options}):\n{log}")]
    Compile {
        module: String,
        options: String,
        log: String,
    },
    #[error("loading kernel '{kernel}' from module '{module}' failed: {source}")]
    Load {
        module: String,
        kernel: String,
        #[source]
        source: DriverError,
    },
    #[error(
        "GPU work '{label}' did not finish within {secs} s (deadline); the device may be hung"
    )]
    Deadline { label: String, secs: f64 },
    #[error("not enough device memory: need {need} bytes ({what}), {free} free of {total}")]
    OutOfMemory {
        what: String,
        need: u64,
        free: u64,
        total: u64,
    },
    #[error("graph capture of '{label}' failed: {reason}")]
    Capture { label: String, reason: String },
    #[error("phase profile is inconsistent: {0}")]
    Profile(String),
    #[error("{0}")]
    Invalid(String),
}

/// `map_err` helper: attach the driver call's name.
pub(crate) fn drv(op: &'static str) -> impl FnOnce(DriverError) -> CudaError {
    move |source| CudaError::Driver { op, source }
}
