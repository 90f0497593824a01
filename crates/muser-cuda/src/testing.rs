//! Shared pieces of this crate's unit tests (compiled for tests only): a GPU with the
//! element-wise module, `scale_softcap` as a plain "x[i] *= s" kernel over a range, and
//! deterministic weight rows for the layout tests.

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

/// `n_out` rows of `k` deterministic values, the rows of five magnitudes (so a per-matrix
/// scale matters), quantized by `quantize_row` into blocks of `T`: the tensor's bytes.
pub(crate) fn quantized_rows<T: bytemuck::Pod>(
    n_out: usize,
    k: usize,
    seed: u32,
    quantize_row: fn(&[f32], &mut [T]),
) -> Vec<u8> {
    let mut s = seed;
    let x: Vec<f32> = (0..n_out * k)
        .map(|i| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            ((s >> 8) as f32 / (1u32 << 24) as f32 - 0.5) * (1.0 + (i / k % 5) as f32) * 0.03
        })
        .collect();
    let mut blocks = vec![T::zeroed(); n_out * k / 256];
    for (xr, br) in x.chunks(k).zip(blocks.chunks_mut(k / 256)) {
        quantize_row(xr, br);
    }
    bytemuck::cast_slice::<T, u8>(&blocks).to_vec()
}
