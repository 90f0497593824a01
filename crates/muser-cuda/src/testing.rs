//! Shared pieces of this crate's device unit tests (compiled for tests only): a GPU with the
//! element-wise module, and `scale_softcap` as a plain "x[i] *= s" kernel over a range.

use crate::device::{Gpu, Stream};
use crate::error::CudaError;
use crate::launch::{launch, Dims, KArgs};
use crate::{Kernel, Math, Module, Registry};

/// The GPU and a registry of the element-wise module, or `None` (after printing the loud skip
/// line) on a machine without a CUDA device.
pub(crate) fn elementwise_gpu() -> Option<(Gpu, Registry)> {
    if !matches!(Gpu::probe(), Ok(Some(_))) {
        eprintln!("skipping: no CUDA device");
        return None;
    }
    let gpu = Gpu::open(0).expect("open GPU");
    let reg = Registry::build_modules(&gpu, &[Module::Elementwise]).expect("registry");
    Some((gpu, reg))
}

/// `x[i] *= scale` for `len` f32 values at device address `x`, on `s` (`scale_softcap` with no
/// cap, one row).
pub(crate) fn scale(
    reg: &Registry,
    s: Stream,
    x: u64,
    scale: f32,
    len: usize,
) -> Result<(), CudaError> {
    let dims = Dims {
        grid: ((len as u32).div_ceil(256), 1, 1),
        block: 256,
        smem: 0,
    };
    let args = KArgs::new().ptr(x).f32(scale).f32(0.0).int(len).int(1);
    launch(reg.get(Kernel::ScaleSoftcap, Math::Strict), dims, s, args)
}
