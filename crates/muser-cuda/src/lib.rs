//! Muser's CUDA backend runtime: everything that touches the CUDA driver, and nothing that
//! knows about models.
//!
//! - `device`: probing and opening a GPU (the driver library is loaded at run time, so builds
//!   and CI work without CUDA), device buffers, events and bounded waits;
//! - `compile`: the kernel modules (`.cu` families) and their NVRTC compilation, with each
//!   module's identity (SHA-256 over compiler version, options and source);
//! - `kernel_id`: the typed kernel list (`Kernel`: module and symbol, defined once);
//! - `registry`: the kernels compiled at init into one registry (route identity =
//!   SHA-256 over every compiled module's identity);
//! - `launch`: kernel argument packing and launches;
//! - `host`: page-locked host staging of a step's inputs and logit rows (`PinnedHost`);
//! - `graph`: stream capture into CUDA graphs, parallel branches, replay;
//! - `arena`: the device weight arena (one allocation, tensors as offsets);
//! - `profile`: the phase profiler on CUDA events;
//! - `prefetch`: the decode graph's L2 prefetch branch (`MUSER_CUDA_L2_PREFETCH`);
//! - `probe`: timing probes (a kernel's launches duplicated, `MUSER_CUDA_PROBE_DUP`);
//! - `sched`: the accelerator scheduler (the one owner of the device queue);
//! - `step`: the per-step parameters kernels read from device memory (`StepParams`);
//! - `q6pad`, `q4h`, `q6h`: weight layouts repacked at upload for the kernels that read them;
//! - `h16`: the f16 route's activation format and arithmetic, host side (references);
//! - `norm_bound`: the host mirror of the clustered f16 norm's shift from a bound
//!   (`MUSER_CUDA_NORM_BOUND`) and the tests that it always equals the exact shift.
//!
//! Kernel sources live in `src/kernels/*.cu` (one family per file) and are embedded with
//! `include_str!`. The model layer (`muser-engine`) composes these pieces into a forward pass.

pub mod arena;
pub mod attn_h16;
pub mod compile;
pub mod device;
pub mod error;
pub mod graph;
pub mod h16;
pub mod h16_switches;
pub mod host;
pub mod kernel_id;
pub mod launch;
pub mod norm_bound;
pub mod plan_h16;
pub mod prefetch;
pub mod probe;
pub mod profile;
pub mod q4h;
pub mod q6h;
pub mod q6pad;
pub mod registry;
pub mod scales;
pub mod sched;
pub mod step;
pub mod step_switches;
#[cfg(test)]
mod testing;

pub use arena::{Arena, ArenaSlice};
pub use device::{DeviceBuffer, Gpu, GpuInfo, Stream};
pub use error::CudaError;
pub use graph::{Graph, GraphMode};
pub use host::PinnedHost;
pub use launch::KArgs;
pub use plan_h16::{HWeights, MmtShape, MmwSplit};
pub use registry::{
    Kernel, Math, Module, PackedPlan, Registry, MMQ_ROWS, MMV_PAIR_MAX_TOKENS, MMV_PAIR_ROWS,
    MMV_ROWS, SMEM_OPTIN_MAX,
};
pub use step::{StepParams, MAX_BATCH};

pub use cudarc::driver::CudaFunction;
