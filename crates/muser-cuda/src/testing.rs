//! Shared pieces of this crate's unit tests (compiled for tests only): a GPU with the
//! element-wise module, `scale_softcap` as a plain "x[i] *= s" kernel over a range, and
//! deterministic weight rows for the layout tests and their prefix check.

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

/// A layout's `prefix(n_out, k, g)` is exactly the bytes of rows 0..16g: the ranges for every
/// group tile the matrix (`total` bytes), and exchanging two rows past 16g of `src` (rows of
/// `row_bytes`; the same scales, so the same per-matrix exponent) changes bytes outside the
/// prefix only. `repack` gives a matrix's bytes and exponent.
pub(crate) fn check_prefix(
    prefix: impl Fn(usize, usize, usize) -> [(usize, usize); 3],
    repack: impl Fn(&[u8]) -> (Vec<u8>, i32),
    src: &[u8],
    (n_out, k, row_bytes, total): (usize, usize, usize, usize),
) {
    let g = 2;
    let all = prefix(n_out, k, n_out / 16);
    let mut covered: Vec<(usize, usize)> = all.to_vec();
    covered.sort();
    let mut at = 0;
    for (o, n) in covered {
        assert_eq!(o, at, "the parts tile the matrix");
        at += n;
    }
    assert_eq!(at, total);
    let mut swapped = src.to_vec();
    let (a, b, row) = (16 * g, n_out - 1, row_bytes);
    swapped[a * row..(a + 1) * row].copy_from_slice(&src[b * row..(b + 1) * row]);
    swapped[b * row..(b + 1) * row].copy_from_slice(&src[a * row..(a + 1) * row]);
    let ((x, ex), (y, ey)) = (repack(src), repack(&swapped));
    assert_eq!(ex, ey);
    let mut inside = vec![false; x.len()];
    for (o, n) in prefix(n_out, k, g) {
        assert!(n > 0);
        assert_eq!(
            x[o..o + n],
            y[o..o + n],
            "prefix bytes depend on rows < 16g only"
        );
        inside[o..o + n].iter_mut().for_each(|v| *v = true);
    }
    assert!((0..x.len()).any(|i| !inside[i] && x[i] != y[i]));
    assert_eq!(
        prefix(n_out, k, 99),
        all,
        "groups past the matrix are clamped"
    );
}
