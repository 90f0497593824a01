//! muser-quant: ggml's quantized block formats and their reference math.
//!
//! Owns: for each supported type (F32, F16, BF16, Q8_0, Q5_0, Q4_K, Q5_K, Q6_K, and the
//! activation formats Q8_K and Q8_1) the `#[repr(C)]` block struct, dequantize to f32 (bit
//! for bit what gguf-py computes), dequantize to f64 (the exact value the format defines,
//! for the f64 oracle), quantize from f32, and the dot product ggml's CPU backend pairs it
//! with (`vec_dot_type`). One module per format; this file is the type-erased front over
//! raw tensor bytes that the engine and the forge use.
//!
//! Kernels: every dot product has a scalar reference (`vec_dot_ref`) that never goes away
//! and an AVX2 path chosen at run time ([`simd_level`], `MUSER_SIMD=scalar|avx2|auto`).
//! The AVX2 paths are bit-identical to the references (integer sums in SIMD, float steps in
//! the reference's order), so results do not depend on the machine.
//!
//! Alignment: blocks holding only f16 and bytes need 2-byte alignment, Q8_K (f32 scale)
//! needs 4. Every block size of a type found in GGUF files is even and tensors start at the
//! file's alignment (32 by default), so any row of such a tensor casts; a misaligned slice
//! is reported as [`QuantError::Misaligned`], never copied silently.

pub mod a16;
#[cfg(target_arch = "x86_64")]
mod a16_avx2;
#[cfg(target_arch = "x86_64")]
mod a16_avx512;
mod a16_dispatch;
#[cfg(target_arch = "x86_64")]
mod a16_fmt;
mod a16_unpack;
pub mod a8;
#[cfg(target_arch = "x86_64")]
mod a8_avx2;
#[cfg(target_arch = "x86_64")]
mod a8_avx512;
mod a8_dispatch;
pub mod a8_repack;
#[cfg(target_arch = "x86_64")]
mod a8_repack_avx512;
mod a8_unpack;
pub mod bf16;
pub mod f16;
pub mod f32;
pub mod prefetch;
pub mod q4_k;
pub mod q5_0;
pub mod q5_k;
pub mod q6_k;
pub mod q8_0;
pub mod q8_1;
pub mod q8_k;
pub mod simd;
pub mod tile_shape;

#[cfg(target_arch = "x86_64")]
mod avx2;
mod common;
mod env_setting;
mod kquant;
mod lanes;
#[cfg(test)]
mod testutil;

use bytemuck::Pod;

pub use muser_gguf::{GgmlType, QK_K};
pub use prefetch::{init_prefetch, prefetch_mode, Prefetch};
pub use q4_k::BlockQ4K;
pub use q5_0::BlockQ5_0;
pub use q5_k::BlockQ5K;
pub use q6_k::BlockQ6K;
pub use q8_0::BlockQ8_0;
pub use q8_1::BlockQ8_1;
pub use q8_k::BlockQ8K;
pub use simd::{avx2_available, detected_level, init_simd, simd_level, SimdLevel};
pub use tile_shape::{init_tile_tokens, tile_rows_a8, tile_tokens, tile_tokens_a8};

/// Errors of the type-erased front.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum QuantError {
    /// Muser has no kernel for this type and operation.
    #[error("{op} is not supported for tensor type {ty}")]
    Unsupported { ty: GgmlType, op: &'static str },
    /// A buffer has the wrong length.
    #[error("{ty}: {what}: expected {expected}, got {got}")]
    Length {
        ty: GgmlType,
        what: &'static str,
        expected: usize,
        got: usize,
    },
    /// A length is not a whole number of blocks.
    #[error("{ty}: {what} ({len}) is not a multiple of {unit}")]
    NotBlockMultiple {
        ty: GgmlType,
        what: &'static str,
        len: usize,
        unit: usize,
    },
    /// A byte slice is not aligned for the block struct.
    #[error("{ty}: {what} at address {addr:#x} is not aligned to {align} bytes")]
    Misaligned {
        ty: GgmlType,
        what: &'static str,
        align: usize,
        addr: usize,
    },
    /// `MUSER_SIMD` asks for something this CPU cannot do, or is not a known value.
    #[error("SIMD selection: {reason}")]
    Simd { reason: String },
    /// A kernel setting (`MUSER_CPU_PREFETCH`, `MUSER_CPU_TILE_TOKENS`) is not a known value.
    #[error("kernel setting: {reason}")]
    Setting { reason: String },
}

/// Whether Muser can dequantize/quantize this type (and, for weight types, dot it).
pub fn is_supported(ty: GgmlType) -> bool {
    use GgmlType::*;
    matches!(
        ty,
        F32 | F16 | BF16 | Q8_0 | Q5_0 | Q4_K | Q5_K | Q6_K | Q8_K | Q8_1
    )
}

/// The activation type ggml's CPU backend pairs with weight type `ty` in dot products.
pub fn vec_dot_type(ty: GgmlType) -> Result<GgmlType, QuantError> {
    use GgmlType::*;
    match ty {
        F32 => Ok(F32),
        F16 => Ok(F16),
        BF16 => Ok(BF16),
        Q8_0 | Q5_0 => Ok(Q8_0),
        Q4_K | Q5_K | Q6_K => Ok(Q8_K),
        _ => Err(QuantError::Unsupported { ty, op: "vec_dot" }),
    }
}

fn cast<'a, T: Pod>(ty: GgmlType, what: &'static str, b: &'a [u8]) -> Result<&'a [T], QuantError> {
    let size = std::mem::size_of::<T>();
    if !b.len().is_multiple_of(size) {
        return Err(QuantError::NotBlockMultiple {
            ty,
            what,
            len: b.len(),
            unit: size,
        });
    }
    bytemuck::try_cast_slice(b).map_err(|_| QuantError::Misaligned {
        ty,
        what,
        align: std::mem::align_of::<T>(),
        addr: b.as_ptr() as usize,
    })
}

fn cast_mut<'a, T: Pod>(
    ty: GgmlType,
    what: &'static str,
    b: &'a mut [u8],
) -> Result<&'a mut [T], QuantError> {
    let size = std::mem::size_of::<T>();
    if !b.len().is_multiple_of(size) {
        return Err(QuantError::NotBlockMultiple {
            ty,
            what,
            len: b.len(),
            unit: size,
        });
    }
    let addr = b.as_ptr() as usize;
    bytemuck::try_cast_slice_mut(b).map_err(|_| QuantError::Misaligned {
        ty,
        what,
        align: std::mem::align_of::<T>(),
        addr,
    })
}

/// Check that `n_elems` is whole blocks and `n_bytes` is exactly their encoding.
fn check_sizes(
    ty: GgmlType,
    n_elems: usize,
    n_bytes: usize,
    what: &'static str,
) -> Result<(), QuantError> {
    let bs = ty.block_size();
    if !n_elems.is_multiple_of(bs) {
        return Err(QuantError::NotBlockMultiple {
            ty,
            what: "element count",
            len: n_elems,
            unit: bs,
        });
    }
    let expected = n_elems / bs * ty.type_size();
    if n_bytes != expected {
        return Err(QuantError::Length {
            ty,
            what,
            expected,
            got: n_bytes,
        });
    }
    Ok(())
}

/// Dequantize `src` (whole blocks of `ty`) into `dst` (f32, gguf-py's values bit for bit).
pub fn dequantize(ty: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<(), QuantError> {
    if !is_supported(ty) {
        return Err(QuantError::Unsupported {
            ty,
            op: "dequantize",
        });
    }
    check_sizes(ty, dst.len(), src.len(), "source bytes")?;
    use GgmlType::*;
    let w = "source";
    match ty {
        F32 => f32::dequantize_row(cast(ty, w, src)?, dst),
        F16 => f16::dequantize_row(cast(ty, w, src)?, dst),
        BF16 => bf16::dequantize_row(cast(ty, w, src)?, dst),
        Q8_0 => q8_0::dequantize_row(cast(ty, w, src)?, dst),
        Q5_0 => q5_0::dequantize_row(cast(ty, w, src)?, dst),
        Q4_K => q4_k::dequantize_row(cast(ty, w, src)?, dst),
        Q5_K => q5_k::dequantize_row(cast(ty, w, src)?, dst),
        Q6_K => q6_k::dequantize_row(cast(ty, w, src)?, dst),
        Q8_K => q8_k::dequantize_row(cast(ty, w, src)?, dst),
        Q8_1 => q8_1::dequantize_row(cast(ty, w, src)?, dst),
        _ => {
            return Err(QuantError::Unsupported {
                ty,
                op: "dequantize",
            })
        }
    }
    Ok(())
}

/// Dequantize `src` into the exact values in f64 (no rounding: the f64 oracle's input).
pub fn dequantize_f64(ty: GgmlType, src: &[u8], dst: &mut [f64]) -> Result<(), QuantError> {
    if !is_supported(ty) {
        return Err(QuantError::Unsupported {
            ty,
            op: "dequantize_f64",
        });
    }
    check_sizes(ty, dst.len(), src.len(), "source bytes")?;
    use GgmlType::*;
    let w = "source";
    match ty {
        F32 => f32::dequantize_row_f64(cast(ty, w, src)?, dst),
        F16 => f16::dequantize_row_f64(cast(ty, w, src)?, dst),
        BF16 => bf16::dequantize_row_f64(cast(ty, w, src)?, dst),
        Q8_0 => q8_0::dequantize_row_f64(cast(ty, w, src)?, dst),
        Q5_0 => q5_0::dequantize_row_f64(cast(ty, w, src)?, dst),
        Q4_K => q4_k::dequantize_row_f64(cast(ty, w, src)?, dst),
        Q5_K => q5_k::dequantize_row_f64(cast(ty, w, src)?, dst),
        Q6_K => q6_k::dequantize_row_f64(cast(ty, w, src)?, dst),
        Q8_K => q8_k::dequantize_row_f64(cast(ty, w, src)?, dst),
        Q8_1 => q8_1::dequantize_row_f64(cast(ty, w, src)?, dst),
        _ => {
            return Err(QuantError::Unsupported {
                ty,
                op: "dequantize_f64",
            })
        }
    }
    Ok(())
}

/// Quantize `src` into `dst` (`dst.len() == ty.bytes_for(src.len())`). Q8_0, Q5_0, Q8_K,
/// BF16 and F16 follow ggml's reference quantizers bit for bit, Q8_1 ggml-cuda's kernel;
/// Q4_K/Q5_K/Q6_K use this crate's own quantizers (see their modules).
pub fn quantize(ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<(), QuantError> {
    if !is_supported(ty) {
        return Err(QuantError::Unsupported { ty, op: "quantize" });
    }
    check_sizes(ty, src.len(), dst.len(), "destination bytes")?;
    use GgmlType::*;
    let w = "destination";
    match ty {
        F32 => f32::quantize_row(src, cast_mut(ty, w, dst)?),
        F16 => f16::quantize_row(src, cast_mut(ty, w, dst)?),
        BF16 => bf16::quantize_row(src, cast_mut(ty, w, dst)?),
        Q8_0 => q8_0::quantize_row(src, cast_mut(ty, w, dst)?),
        Q5_0 => q5_0::quantize_row(src, cast_mut(ty, w, dst)?),
        Q4_K => q4_k::quantize_row(src, cast_mut(ty, w, dst)?),
        Q5_K => q5_k::quantize_row(src, cast_mut(ty, w, dst)?),
        Q6_K => q6_k::quantize_row(src, cast_mut(ty, w, dst)?),
        Q8_K => q8_k::quantize_row(src, cast_mut(ty, w, dst)?),
        Q8_1 => q8_1::quantize_row(src, cast_mut(ty, w, dst)?),
        _ => return Err(QuantError::Unsupported { ty, op: "quantize" }),
    }
    Ok(())
}

/// Quantize an activation row into a `vec_dot_type` the way ggml's CPU backend does on an
/// x86 AVX2/AVX-512 build (`from_float` of the type traits): Q8_0 with ggml-cpu's x86
/// `quantize_row_q8_0` ([`q8_0::quantize_row_x86`]: `id = 127/amax`, ties to even — checked
/// against the compiled ggml function), Q8_K with `quantize_row_q8_K_ref` (what x86 calls),
/// F16/BF16/F32 as [`quantize`]. Other types: as [`quantize`]. (ggml's repacked AVX2 GEMV
/// path for Q4_K quantizes with its own `ggml_quantize_mat_q8_K_4x8`, not reproduced here.)
pub fn quantize_activation(ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<(), QuantError> {
    if ty == GgmlType::Q8_0 {
        check_sizes(ty, src.len(), dst.len(), "destination bytes")?;
        q8_0::quantize_row_x86(src, cast_mut(ty, "destination", dst)?);
        return Ok(());
    }
    quantize(ty, src, dst)
}

/// Dot product of one weight row `w` (whole blocks of `ty`) with an activation row `act`
/// already in [`vec_dot_type`]`(ty)`, at the process-wide SIMD level.
pub fn vec_dot(ty: GgmlType, w: &[u8], act: &[u8]) -> Result<f32, QuantError> {
    vec_dot_at(simd_level(), ty, w, act)
}

/// [`vec_dot`] at an explicit SIMD level (for A/B tests and benchmarks).
///
/// # Panics
/// If `level` is not available on this CPU.
pub fn vec_dot_at(level: SimdLevel, ty: GgmlType, w: &[u8], act: &[u8]) -> Result<f32, QuantError> {
    let vty = vec_dot_type(ty)?;
    let ts = ty.type_size();
    if !w.len().is_multiple_of(ts) {
        return Err(QuantError::NotBlockMultiple {
            ty,
            what: "weight bytes",
            len: w.len(),
            unit: ts,
        });
    }
    let n = w.len() / ts * ty.block_size();
    check_sizes(vty, n, act.len(), "activation bytes")?;
    use GgmlType::*;
    let (ww, wa) = ("weights", "activations");
    Ok(match ty {
        F32 => f32::vec_dot_at(level, cast(ty, ww, w)?, cast(vty, wa, act)?),
        F16 => f16::vec_dot_at(level, cast(ty, ww, w)?, cast(vty, wa, act)?),
        BF16 => bf16::vec_dot_at(level, cast(ty, ww, w)?, cast(vty, wa, act)?),
        Q8_0 => q8_0::vec_dot_at(level, cast(ty, ww, w)?, cast(vty, wa, act)?),
        Q5_0 => q5_0::vec_dot_at(level, cast(ty, ww, w)?, cast(vty, wa, act)?),
        Q4_K => q4_k::vec_dot_at(level, cast(ty, ww, w)?, cast(vty, wa, act)?),
        Q5_K => q5_k::vec_dot_at(level, cast(ty, ww, w)?, cast(vty, wa, act)?),
        Q6_K => q6_k::vec_dot_at(level, cast(ty, ww, w)?, cast(vty, wa, act)?),
        _ => return Err(QuantError::Unsupported { ty, op: "vec_dot" }),
    })
}

/// Matrix–vector product: `out[r] = w_row_r · act` for the `out.len()` rows stored back to
/// back in `w` (each a whole number of blocks of `ty`), at the process-wide SIMD level.
/// Single-threaded; split `w`/`out` by rows to parallelize. Same numbers as [`vec_dot`] row
/// by row, with the checks and dispatch done once.
pub fn matvec(ty: GgmlType, w: &[u8], act: &[u8], out: &mut [f32]) -> Result<(), QuantError> {
    matvec_at(simd_level(), ty, w, act, out)
}

/// [`matvec`] at an explicit SIMD level.
///
/// # Panics
/// If `level` is not available on this CPU.
pub fn matvec_at(
    level: SimdLevel,
    ty: GgmlType,
    w: &[u8],
    act: &[u8],
    out: &mut [f32],
) -> Result<(), QuantError> {
    let vty = vec_dot_type(ty)?;
    if out.is_empty() {
        return if w.is_empty() {
            Ok(())
        } else {
            Err(QuantError::Length {
                ty,
                what: "weight bytes for 0 rows",
                expected: 0,
                got: w.len(),
            })
        };
    }
    if !w.len().is_multiple_of(out.len()) {
        return Err(QuantError::NotBlockMultiple {
            ty,
            what: "weight bytes per row",
            len: w.len(),
            unit: out.len(),
        });
    }
    let row = w.len() / out.len();
    let ts = ty.type_size();
    if !row.is_multiple_of(ts) {
        return Err(QuantError::NotBlockMultiple {
            ty,
            what: "row bytes",
            len: row,
            unit: ts,
        });
    }
    check_sizes(
        vty,
        row / ts * ty.block_size(),
        act.len(),
        "activation bytes",
    )?;
    simd::require(level);
    fn rows<W: Pod, A: Pod>(
        ty: GgmlType,
        vty: GgmlType,
        w: &[u8],
        row: usize,
        act: &[u8],
        out: &mut [f32],
        dot: impl Fn(&[W], &[A]) -> f32,
    ) -> Result<(), QuantError> {
        let a: &[A] = cast(vty, "activations", act)?;
        for (o, wr) in out.iter_mut().zip(w.chunks_exact(row)) {
            *o = dot(cast(ty, "weights", wr)?, a);
        }
        Ok(())
    }
    use GgmlType::*;
    match ty {
        F32 => rows(ty, vty, w, row, act, out, |x, y| {
            f32::vec_dot_at(level, x, y)
        }),
        F16 => rows(ty, vty, w, row, act, out, |x, y| {
            f16::vec_dot_at(level, x, y)
        }),
        BF16 => rows(ty, vty, w, row, act, out, |x, y| {
            bf16::vec_dot_at(level, x, y)
        }),
        Q8_0 => rows(ty, vty, w, row, act, out, |x, y| {
            q8_0::vec_dot_at(level, x, y)
        }),
        Q5_0 => rows(ty, vty, w, row, act, out, |x, y| {
            q5_0::vec_dot_at(level, x, y)
        }),
        Q4_K => rows(ty, vty, w, row, act, out, |x, y| {
            q4_k::vec_dot_at(level, x, y)
        }),
        Q5_K => rows(ty, vty, w, row, act, out, |x, y| {
            q5_k::vec_dot_at(level, x, y)
        }),
        Q6_K => rows(ty, vty, w, row, act, out, |x, y| {
            q6_k::vec_dot_at(level, x, y)
        }),
        _ => Err(QuantError::Unsupported { ty, op: "vec_dot" }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every block struct's size equals ggml's type size.
    #[test]
    fn block_sizes_match_gguf_table() {
        use std::mem::size_of;
        assert_eq!(size_of::<BlockQ8_0>(), GgmlType::Q8_0.type_size());
        assert_eq!(size_of::<BlockQ5_0>(), GgmlType::Q5_0.type_size());
        assert_eq!(size_of::<BlockQ4K>(), GgmlType::Q4_K.type_size());
        assert_eq!(size_of::<BlockQ5K>(), GgmlType::Q5_K.type_size());
        assert_eq!(size_of::<BlockQ6K>(), GgmlType::Q6_K.type_size());
        assert_eq!(size_of::<BlockQ8K>(), GgmlType::Q8_K.type_size());
        assert_eq!(size_of::<BlockQ8_1>(), GgmlType::Q8_1.type_size());
        assert_eq!(size_of::<half::f16>(), GgmlType::F16.type_size());
        assert_eq!(size_of::<half::bf16>(), GgmlType::BF16.type_size());
        // Alignment: 2 for every GGUF weight block, 4 for Q8_K.
        assert_eq!(std::mem::align_of::<BlockQ4K>(), 2);
        assert_eq!(std::mem::align_of::<BlockQ6K>(), 2);
        assert_eq!(std::mem::align_of::<BlockQ8_0>(), 2);
        assert_eq!(std::mem::align_of::<BlockQ5_0>(), 2);
        assert_eq!(std::mem::align_of::<BlockQ8K>(), 4);
    }

    #[test]
    fn supported_set_and_vec_dot_types() {
        for ty in GgmlType::ALL {
            let sup = is_supported(ty);
            let mut out = vec![0f32; ty.block_size()];
            let src = vec![0u8; ty.type_size()];
            let r = dequantize(ty, &src, &mut out);
            assert_eq!(r.is_ok(), sup, "{ty}");
            if let Ok(v) = vec_dot_type(ty) {
                assert!(sup && is_supported(v));
                assert_eq!(v.block_size() % ty.block_size(), 0);
            }
        }
        assert_eq!(vec_dot_type(GgmlType::Q6_K), Ok(GgmlType::Q8_K));
        assert_eq!(vec_dot_type(GgmlType::Q5_0), Ok(GgmlType::Q8_0));
        assert!(vec_dot_type(GgmlType::Q8_K).is_err());
    }

    #[test]
    fn errors_are_typed() {
        let mut out = vec![0f32; 256];
        let e = dequantize(GgmlType::Q4_K, &[0u8; 143], &mut out).unwrap_err();
        assert!(
            matches!(
                e,
                QuantError::Length {
                    expected: 144,
                    got: 143,
                    ..
                }
            ),
            "{e}"
        );
        let mut out = vec![0f32; 100];
        let e = dequantize(GgmlType::Q4_K, &[0u8; 144], &mut out).unwrap_err();
        assert!(matches!(e, QuantError::NotBlockMultiple { .. }), "{e}");
        // Misaligned: a u16-aligned buffer offset by one byte.
        let buf = vec![0u16; 200];
        let bytes: &[u8] = bytemuck::cast_slice(&buf);
        let mut out = vec![0f32; 256];
        let e = dequantize(GgmlType::Q4_K, &bytes[1..145], &mut out).unwrap_err();
        assert!(matches!(e, QuantError::Misaligned { align: 2, .. }), "{e}");
        let e = vec_dot(GgmlType::Q4_K, &bytes[..144], &bytes[..100]).unwrap_err();
        assert!(matches!(e, QuantError::Length { expected: 292, .. }), "{e}");
        let e = quantize(GgmlType::Q2_K, &[0f32; 256], &mut [0u8; 84]).unwrap_err();
        assert!(matches!(e, QuantError::Unsupported { .. }), "{e}");
    }

    #[test]
    fn gguf_rows_at_block_offsets_always_cast() {
        // A 32-byte aligned tensor of 3 rows × 2 blocks: every row start casts.
        #[repr(C, align(32))]
        struct Aligned([u8; 6 * 210]);
        let t = Aligned([0u8; 6 * 210]);
        for ty in [
            GgmlType::Q6_K,
            GgmlType::Q4_K,
            GgmlType::Q5_0,
            GgmlType::Q8_0,
        ] {
            let row = 2 * ty.type_size();
            let mut out = vec![0f32; 2 * ty.block_size()];
            for r in 0..3 {
                let src = &t.0[r * row..(r + 1) * row];
                assert!(dequantize(ty, src, &mut out).is_ok(), "{ty} row {r}");
            }
        }
    }

    #[test]
    fn matvec_matches_row_dots() {
        let rows = 5;
        let x: Vec<f32> = (0..256 * 2 * rows)
            .map(|i| ((i * 31 % 97) as f32 - 48.0) / 20.0)
            .collect();
        let a: Vec<f32> = (0..512)
            .map(|i| ((i * 17 % 61) as f32 - 30.0) / 15.0)
            .collect();
        for ty in [
            GgmlType::Q4_K,
            GgmlType::Q6_K,
            GgmlType::Q8_0,
            GgmlType::F16,
        ] {
            let vty = vec_dot_type(ty).unwrap();
            let wlen = ty.bytes_for(x.len() as u64).unwrap() as usize;
            let alen = vty.bytes_for(512).unwrap() as usize;
            let mut w32 = vec![0u32; wlen.div_ceil(4)];
            let mut a32 = vec![0u32; alen.div_ceil(4)];
            let w = &mut bytemuck::cast_slice_mut::<u32, u8>(&mut w32)[..wlen];
            let act = &mut bytemuck::cast_slice_mut::<u32, u8>(&mut a32)[..alen];
            quantize(ty, &x, w).unwrap();
            quantize_activation(vty, &a, act).unwrap();
            let mut out = vec![0f32; rows];
            matvec(ty, w, act, &mut out).unwrap();
            let row = wlen / rows;
            for (r, o) in out.iter().enumerate() {
                let d = vec_dot(ty, &w[r * row..(r + 1) * row], act).unwrap();
                assert_eq!(o.to_bits(), d.to_bits(), "{ty} row {r}");
            }
            let e = matvec(ty, w, act, &mut out[..3]).unwrap_err();
            assert!(matches!(e, QuantError::NotBlockMultiple { .. }), "{e}");
        }
    }

    #[test]
    fn type_erased_dot_matches_typed() {
        let x: Vec<f32> = (0..512)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
            .collect();
        let a: Vec<f32> = (0..512)
            .map(|i| ((i * 53 % 89) as f32 - 44.0) / 30.0)
            .collect();
        for ty in [
            GgmlType::Q4_K,
            GgmlType::Q5_K,
            GgmlType::Q6_K,
            GgmlType::Q8_0,
            GgmlType::Q5_0,
            GgmlType::F16,
            GgmlType::BF16,
            GgmlType::F32,
        ] {
            let vty = vec_dot_type(ty).unwrap();
            let wlen = ty.bytes_for(512).unwrap() as usize;
            let alen = vty.bytes_for(512).unwrap() as usize;
            // Allocate through u32 so Q8_K activation bytes are 4-byte aligned.
            let mut w32 = vec![0u32; wlen.div_ceil(4)];
            let mut a32 = vec![0u32; alen.div_ceil(4)];
            let wbytes = &mut bytemuck::cast_slice_mut::<u32, u8>(&mut w32)[..wlen];
            let abytes = &mut bytemuck::cast_slice_mut::<u32, u8>(&mut a32)[..alen];
            quantize(ty, &x, wbytes).unwrap();
            quantize(vty, &a, abytes).unwrap();
            let s = vec_dot_at(SimdLevel::Scalar, ty, wbytes, abytes).unwrap();
            let mut xd = vec![0f64; 512];
            let mut ad = vec![0f64; 512];
            dequantize_f64(ty, wbytes, &mut xd).unwrap();
            dequantize_f64(vty, abytes, &mut ad).unwrap();
            let exact: f64 = xd.iter().zip(&ad).map(|(p, q)| p * q).sum();
            assert!((f64::from(s) - exact).abs() < 1e-3, "{ty}: {s} vs {exact}");
            if avx2_available() {
                let v = vec_dot_at(SimdLevel::Avx2, ty, wbytes, abytes).unwrap();
                assert_eq!(v.to_bits(), s.to_bits(), "{ty}");
            }
        }
    }
}
