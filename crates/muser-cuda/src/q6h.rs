//! Q6_K rows repacked for the f16 tensor-core kernels ("Q6H", `mvh_q6h_*` in matvec_h16.cu; the
//! f16 route, docs/cuda.md). Owns the layout and the numerics it fixes (host side).
//!
//! What a kernel computes from a Q6H matrix, per row r and sub-block b (16 values) of GGUF's
//! Q6_K (`d·sc·(q − 32)`, q unsigned 6-bit): `dsc = f16(2^E · d·sc)` (exact f32 product, one
//! rounding; E one power of two per matrix putting the largest |dsc| in [16, 32), as Q4H), each
//! weight `f16(q · dsc)` times the f16 activation, and the −32 offset as `ndm = −32·dsc` (exact)
//! times the f16 sum of the sub-block's 16 activations — inside `mma.sync.m16n8k16` with f32
//! accumulation — and the result times `2^-E`.
//!
//! Layout (`n_out` a multiple of 16, `k` of 256; row group G, super-block s, as Q4H):
//! - low nibbles `[ng][nsb][4 loads j][32 lanes][16 bytes]`: exactly Q4H's quant layout
//!   (`q4h::frag`) holding `q & 15`;
//! - high bits `[ng][nsb][4 loads][32 lanes][2 words]`: word h holds tiles 2h (shift 0) and
//!   2h + 1 (shift 2); for register p the first value's two bits `q >> 4` sit at
//!   `[4, 8, 12, 0][p] + shift`, the second's 16 places higher;
//! - `dsc` as f16 `[ng][nsb][16 rows][16 sub-blocks]`.
//!
//! 7 bits per weight (Q6_K: 6.56). Invariant: [`logical`] recovers every quant and `dsc`.
//!
//! [`Scales::U8`] (`MUSER_CUDA_Q6H_SCALES=u8`) stores the same numbers in 6.5625 bits per
//! weight: the third section is `[16 rows][16 bytes: sc + 128]` then `[8 row pairs (r, r + 8)][2
//! f16: d' = 2^E·d]` (288 bytes per (G, s) instead of 512). The kernels (formats_h16.cuh,
//! `Q6H_U8`) rebuild `dsc` as `f16(sc·d')` (the exact product rounded once, IEEE's signed zero);
//! [`repack`] writes this layout only where that equals the f16 layout's `dsc` bit for bit in
//! every sub-block — otherwise a typed error naming the row.

use half::f16;
use muser_quant::BlockQ6K;

use crate::error::CudaError;
use crate::q4h::{frag, per_group, quant_at};
pub use crate::scales::Scales;

const QK: usize = 256;
const Q6K_BYTES: usize = 210;
const LO_PIECE: usize = 2048;
const HI_PIECE: usize = 1024;

/// Where the high-bit pair of register p sits in a tile's word (before the odd tile's shift).
const HI_AT: [usize; 4] = [4, 8, 12, 0];

/// A repacked matrix: the bytes and its power-of-two exponent E (outputs times 2^-E).
pub struct Q6h {
    pub bytes: Vec<u8>,
    pub exp: i32,
}

/// `MUSER_CUDA_Q6H_SCALES=auto|f16|u8` ([`Scales::choice_from_env`]); None (auto) means f16
/// for Q6H: u8 measured slower (crate::h16_switches, `q6h_scales`).
pub fn scales_from_env() -> Result<Option<Scales>, CudaError> {
    Scales::choice_from_env("MUSER_CUDA_Q6H_SCALES")
}

/// Bytes of one (row group, super-block) piece of the scale section.
const fn scale_piece(sc: Scales) -> usize {
    match sc {
        Scales::F16 => 512,
        Scales::U8 => 288,
    }
}

/// Bytes of a Q6H matrix.
pub fn bytes(n_out: usize, k: usize, sc: Scales) -> usize {
    n_out / 16 * (k / QK) * (LO_PIECE + HI_PIECE + scale_piece(sc))
}

/// Where the high bits and the scale section start.
pub fn part_offsets(n_out: usize, k: usize) -> (usize, usize) {
    let pieces = n_out / 16 * (k / QK);
    (pieces * LO_PIECE, pieces * (LO_PIECE + HI_PIECE))
}

/// The bytes of the first `groups` row groups (16 rows each) of a matrix: one `(offset, length)`
/// per part (low bits, high bits, scales), what a decode matmul's first blocks read.
pub fn prefix(n_out: usize, k: usize, groups: usize, sc: Scales) -> [(usize, usize); 3] {
    let per = groups.min(n_out / 16) * (k / QK);
    let (h, d) = part_offsets(n_out, k);
    [
        (0, per * LO_PIECE),
        (h, per * HI_PIECE),
        (d, per * scale_piece(sc)),
    ]
}

/// What the u8 kernels compute for a scale byte's value `sc` times `d'`: the exact product
/// (8 × 11 bits, exact in f32, a zero one signed as IEEE's) rounded once (formats_h16.cuh
/// `bytes_times`).
fn times_u8(sc: i8, d: f16) -> f16 {
    f16::from_f32(f32::from(sc) * d.to_f32())
}

/// One block's factors: the f16 layout's `dsc` (d·sc exact in f32, the power of two too: one
/// rounding) and the u8 layout's base d' = f16(2^E·d).
fn factors(b: &BlockQ6K, scale: f32) -> ([f16; 16], f16) {
    let d = b.d.to_f32();
    (
        b.scales.map(|c| f16::from_f32(d * f32::from(c) * scale)),
        f16::from_f32(d * scale),
    )
}

/// Whether the u8 kernels' factors from (sc, d') are `dsc`, bit for bit, in all 16 sub-blocks.
fn u8_exact(b: &BlockQ6K, dsc: &[f16; 16], dp: f16) -> bool {
    (0..16).all(|sb| times_u8(b.scales[sb], dp).to_bits() == dsc[sb].to_bits())
}

fn u8_inexact(row: usize, s: usize, b: &BlockQ6K, exp: i32) -> CudaError {
    CudaError::Invalid(format!(
        "Q6H with 8-bit scales (MUSER_CUDA_Q6H_SCALES=u8): row {row}, super-block {s}: d = {:e} \
         times 2^{exp} does not give the f16 layout's factors exactly (MUSER_CUDA_Q6H_SCALES=f16 \
         keeps the f16 scales)",
        b.d.to_f32()
    ))
}

/// Whether every block of a Q6_K matrix can take the u8 layout (what [`repack`] with
/// [`Scales::U8`] checks, without repacking): the first inexact row, if any, as an error.
pub fn u8_check(src: &[u8], n_out: usize, k: usize) -> Result<(), CudaError> {
    let exp = exponent(src, n_out, k)?;
    let scale = 2f32.powi(exp);
    crate::q4h::per_block(src, Q6K_BYTES, k / QK, |row, s, blk| {
        let b: BlockQ6K = bytemuck::pod_read_unaligned(blk);
        let (dsc, dp) = factors(&b, scale);
        if u8_exact(&b, &dsc, dp) {
            Ok(())
        } else {
            Err(u8_inexact(row, s, &b, exp))
        }
    })
}

fn shape(n_out: usize, k: usize) -> Result<(), CudaError> {
    if n_out == 0 || !n_out.is_multiple_of(16) || k == 0 || !k.is_multiple_of(QK) {
        return Err(CudaError::Invalid(format!(
            "Q6H: a {n_out} × {k} matrix (rows must be a positive multiple of 16, row length of \
             {QK})"
        )));
    }
    Ok(())
}

/// High-bit byte offset of (group, super-block, load, lane): two little-endian words.
fn hi_at(nsb: usize, g: usize, s: usize, j: usize, lane: usize) -> usize {
    ((g * nsb + s) * 4 + j) * 256 + lane * 8
}

/// The matrix's power of two E: the largest |d·sc| times 2^E in [16, 32) (0 for an all-zero
/// matrix). The upload plan reads it before the repack.
pub fn exponent(src: &[u8], n_out: usize, k: usize) -> Result<i32, CudaError> {
    shape(n_out, k)?;
    if src.len() != n_out * (k / QK) * Q6K_BYTES {
        return Err(CudaError::Invalid(format!(
            "Q6H: {} bytes for {n_out} rows of {k} Q6_K values (expected {})",
            src.len(),
            n_out * (k / QK) * Q6K_BYTES
        )));
    }
    use rayon::prelude::*;
    // The blocks in parallel: a maximum is the same in any order (f32::max skips NaN either way).
    let max = src
        .par_chunks_exact(Q6K_BYTES)
        .map(|blk| {
            let b: BlockQ6K = bytemuck::pod_read_unaligned(blk);
            let d = b.d.to_f32().abs();
            b.scales
                .iter()
                .fold(0f32, |m, &c| m.max(d * f32::from(c).abs()))
        })
        .reduce(|| 0f32, f32::max);
    Ok(crate::q4h::exp_for(max))
}

/// Repack `n_out` GGUF Q6_K rows of `k` values (`src` = the tensor's bytes) into Q6H.
pub fn repack(src: &[u8], n_out: usize, k: usize, layout: Scales) -> Result<Q6h, CudaError> {
    let exp = exponent(src, n_out, k)?;
    let nsb = k / QK;
    let scale = 2f32.powi(exp);
    let mut out = vec![0u8; bytes(n_out, k, layout)];
    let (hi_base, dsc_base) = part_offsets(n_out, k);
    // Group g's pieces: low nibbles, high bits, dsc (offsets within the group's part of each).
    let fill = |g: usize, [lo, hi_out, dsc_out]: [&mut [u8]; 3]| -> Result<(), CudaError> {
        for s in 0..nsb {
            let rows: Vec<BlockQ6K> = (0..16)
                .map(|r| {
                    let at = ((16 * g + r) * nsb + s) * Q6K_BYTES;
                    bytemuck::pod_read_unaligned(&src[at..at + Q6K_BYTES])
                })
                .collect();
            let quants: Vec<[u8; QK]> = rows.iter().map(BlockQ6K::quants).collect();
            for j in 0..4 {
                for lane in 0..32 {
                    let at = quant_at(nsb, 0, s, j, lane);
                    let mut hw = [0u32; 2];
                    for i in 0..4 {
                        let mut word = 0u32;
                        for (p, hi) in HI_AT.iter().enumerate() {
                            let (r, v) = frag(j, i, lane, p);
                            let (a, b) = (quants[r][v], quants[r][v + 1]);
                            word |= u32::from(a & 15) << (4 * p);
                            word |= u32::from(b & 15) << (16 + 4 * p);
                            let at_hi = hi + 2 * (i % 2);
                            hw[i / 2] |= u32::from(a >> 4) << at_hi;
                            hw[i / 2] |= u32::from(b >> 4) << (16 + at_hi);
                        }
                        lo[at + 4 * i..at + 4 * i + 4].copy_from_slice(&word.to_le_bytes());
                    }
                    let h = hi_at(nsb, 0, s, j, lane);
                    hi_out[h..h + 4].copy_from_slice(&hw[0].to_le_bytes());
                    hi_out[h + 4..h + 8].copy_from_slice(&hw[1].to_le_bytes());
                }
            }
            for (r, b) in rows.iter().enumerate() {
                let (dsc, dp) = factors(b, scale);
                match layout {
                    Scales::F16 => {
                        for (sb, v) in dsc.iter().enumerate() {
                            let o = ((s * 16 + r) * 16 + sb) * 2;
                            dsc_out[o..o + 2].copy_from_slice(&v.to_le_bytes());
                        }
                    }
                    Scales::U8 => {
                        if !u8_exact(b, &dsc, dp) {
                            return Err(u8_inexact(16 * g + r, s, b, exp));
                        }
                        let o = s * 288 + r * 16;
                        for (sb, &c) in b.scales.iter().enumerate() {
                            dsc_out[o + sb] = (c as u8) ^ 0x80; // sc + 128
                        }
                        // Rows r and r + 8 share a word: (d'_r, d'_{r+8}).
                        let o = s * 288 + 256 + (r % 8) * 4 + (r / 8) * 2;
                        dsc_out[o..o + 2].copy_from_slice(&dp.to_le_bytes());
                    }
                }
            }
        }
        Ok(())
    };
    per_group(&mut out, [hi_base, dsc_base], n_out / 16, fill)?;
    Ok(Q6h { bytes: out, exp })
}

/// A Q6H matrix read back: quants `[n_out][k]` (0..=63) and `dsc` `[n_out][k/16]` (times 2^E).
pub struct Logical {
    pub q: Vec<u8>,
    pub dsc: Vec<f16>,
}

/// Read a Q6H matrix back into rows (the inverse of the layout; tests and references).
/// The u8 layout's factors as its kernels compute them.
pub fn logical(
    bytes_in: &[u8],
    n_out: usize,
    k: usize,
    layout: Scales,
) -> Result<Logical, CudaError> {
    shape(n_out, k)?;
    if bytes_in.len() != bytes(n_out, k, layout) {
        return Err(CudaError::Invalid(format!(
            "Q6H: {} bytes for a {n_out} × {k} matrix (expected {})",
            bytes_in.len(),
            bytes(n_out, k, layout)
        )));
    }
    let nsb = k / QK;
    let (hi_base, dsc_base) = part_offsets(n_out, k);
    let word = |at: usize| {
        u32::from_le_bytes([
            bytes_in[at],
            bytes_in[at + 1],
            bytes_in[at + 2],
            bytes_in[at + 3],
        ])
    };
    let mut l = Logical {
        q: vec![0; n_out * k],
        dsc: vec![f16::ZERO; n_out * k / 16],
    };
    for g in 0..n_out / 16 {
        for s in 0..nsb {
            for j in 0..4 {
                for lane in 0..32 {
                    let at = quant_at(nsb, g, s, j, lane);
                    let h = hi_base + hi_at(nsb, g, s, j, lane);
                    let hw = [word(h), word(h + 4)];
                    for i in 0..4 {
                        let w = word(at + 4 * i);
                        for (p, hi) in HI_AT.iter().enumerate() {
                            let (r, v) = frag(j, i, lane, p);
                            let at_hi = hi + 2 * (i % 2);
                            let row = (16 * g + r) * k + QK * s + v;
                            l.q[row] =
                                (((w >> (4 * p)) & 15) | (((hw[i / 2] >> at_hi) & 3) << 4)) as u8;
                            l.q[row + 1] = (((w >> (16 + 4 * p)) & 15)
                                | (((hw[i / 2] >> (16 + at_hi)) & 3) << 4))
                                as u8;
                        }
                    }
                }
            }
            for r in 0..16 {
                for sb in 0..16 {
                    let idx = (16 * g + r) * (k / 16) + 16 * s + sb;
                    l.dsc[idx] = match layout {
                        Scales::F16 => {
                            let o = dsc_base + (((g * nsb + s) * 16 + r) * 16 + sb) * 2;
                            f16::from_le_bytes([bytes_in[o], bytes_in[o + 1]])
                        }
                        Scales::U8 => {
                            let piece = dsc_base + (g * nsb + s) * 288;
                            let sc = (bytes_in[piece + r * 16 + sb] ^ 0x80) as i8;
                            let o = piece + 256 + (r % 8) * 4 + (r / 8) * 2;
                            times_u8(sc, f16::from_le_bytes([bytes_in[o], bytes_in[o + 1]]))
                        }
                    };
                }
            }
        }
    }
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::*;
    use muser_quant::q6_k;

    fn rows(n_out: usize, k: usize, seed: u32) -> Vec<u8> {
        crate::testing::quantized_rows::<BlockQ6K>(n_out, k, seed, q6_k::quantize_row)
    }

    /// `logical(repack(x))` gives back GGUF's 6-bit quants and the scaled sub-block scales.
    #[test]
    fn the_layout_holds_the_quants_and_the_scaled_sub_block_scales() {
        let (n_out, k) = (32, 512);
        let src = rows(n_out, k, 3);
        let h = repack(&src, n_out, k, Scales::F16).expect("repack");
        assert_eq!(h.bytes.len() * 8, n_out * k * 7, "7 bits per weight");
        let l = logical(&h.bytes, n_out, k, Scales::F16).expect("logical");
        let mut max = 0f32;
        for r in 0..n_out {
            for s in 0..k / QK {
                let at = (r * (k / QK) + s) * Q6K_BYTES;
                let b: BlockQ6K = bytemuck::pod_read_unaligned(&src[at..at + Q6K_BYTES]);
                let q0 = r * k + QK * s;
                assert_eq!(
                    &l.q[q0..q0 + QK],
                    &b.quants()[..],
                    "quants of row {r}, block {s}"
                );
                for sb in 0..16 {
                    let want = f64::from(b.d.to_f32()) * f64::from(b.scales[sb]) * 2f64.powi(h.exp);
                    let got = l.dsc[r * (k / 16) + 16 * s + sb];
                    assert_eq!(got, f16::from_f64(want), "dsc {r}/{s}/{sb}");
                    max = max.max(got.to_f32().abs());
                }
            }
        }
        assert!((16.0..=32.0).contains(&max), "largest |dsc| {max}");
    }

    #[test]
    fn bad_shapes_are_refused() {
        let src = rows(16, 256, 1);
        for sc in [Scales::F16, Scales::U8] {
            assert!(repack(&src, 16, 512, sc).is_err());
            assert!(repack(&src[..209], 16, 256, sc).is_err());
            assert!(repack(&src, 24, 256, sc).is_err());
            assert!(logical(&[0u8; 3], 16, 256, sc).is_err());
        }
    }

    /// `prefix(g)` is exactly the bytes of rows 0..16g (`testing::check_prefix`).
    #[test]
    fn a_prefix_holds_exactly_the_first_row_groups() {
        let (n_out, k) = (64, 512);
        for sc in [Scales::F16, Scales::U8] {
            let rep = |src: &[u8]| {
                let h = repack(src, n_out, k, sc).expect("repack");
                (h.bytes, h.exp)
            };
            let src = rows(n_out, k, 11);
            let dims = (n_out, k, k / 256 * 210, bytes(n_out, k, sc));
            let pre = |n, k, g| prefix(n, k, g, sc);
            crate::testing::check_prefix(pre, rep, &src, dims);
        }
    }

    /// The u8 layout holds the same quants and gives the same `dsc`, bit for bit, as the f16
    /// layout (what its kernels compute: `logical`), in 6.5625 bits per weight.
    #[test]
    fn the_u8_layout_gives_the_f16_layouts_factors() {
        let (n_out, k) = (48, 768);
        let src = rows(n_out, k, 5);
        let f = repack(&src, n_out, k, Scales::F16).expect("f16");
        let u = repack(&src, n_out, k, Scales::U8).expect("u8");
        assert_eq!(f.exp, u.exp);
        assert_eq!(
            u.bytes.len() * 128,
            n_out * k * 105,
            "6.5625 bits per weight"
        );
        let (lf, lu) = (
            logical(&f.bytes, n_out, k, Scales::F16).expect("logical f16"),
            logical(&u.bytes, n_out, k, Scales::U8).expect("logical u8"),
        );
        assert_eq!(lf.q, lu.q);
        let bits = |v: &[f16]| v.iter().map(|h| h.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&lf.dsc), bits(&lu.dsc));
        // Negative and positive scales both present.
        assert!(lu.dsc.iter().any(|h| h.to_f32() < 0.0) && lu.dsc.iter().any(|h| h.to_f32() > 0.0));
        assert!(u8_check(&src, n_out, k).is_ok());
    }

    /// A block the u8 layout cannot hold exactly (a d below f16's normals once scaled by 2^-E)
    /// is a typed error naming the row, in the repack and in `u8_check`.
    #[test]
    fn a_block_the_u8_layout_cannot_hold_exactly_is_refused() {
        let (n_out, k) = (16, 256);
        let mut src = rows(n_out, k, 3);
        // Every row d = 2^-4; row 0 d = 1024 with scale 127 (E = −12); row 5 d = 2^-4·(1 +
        // 2^-10), whose d' lies below f16's normals and loses its last bit.
        for (row, blk) in src.chunks_exact_mut(Q6K_BYTES).enumerate() {
            let mut b: BlockQ6K = bytemuck::pod_read_unaligned(blk);
            b.d = match row {
                0 => f16::from_f32(1024.0),
                5 => f16::from_bits(0x2C01),
                _ => f16::from_f32(0.0625),
            };
            b.scales[0] = 127;
            blk.copy_from_slice(bytemuck::bytes_of(&b));
        }
        assert!(repack(&src, n_out, k, Scales::F16).is_ok());
        let e = repack(&src, n_out, k, Scales::U8).err().expect("refused");
        assert!(e.to_string().contains("row 5, super-block 0"), "{e}");
        let e = u8_check(&src, n_out, k).expect_err("refused");
        assert!(e.to_string().contains("row 5, super-block 0"), "{e}");
    }
}
