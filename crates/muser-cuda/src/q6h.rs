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

use half::f16;
use muser_quant::BlockQ6K;

use crate::error::CudaError;
use crate::q4h::{frag, per_group, quant_at};

const QK: usize = 256;
const Q6K_BYTES: usize = 210;
const LO_PIECE: usize = 2048;
const HI_PIECE: usize = 1024;
const SCALE_PIECE: usize = 512;

/// Where the high-bit pair of register p sits in a tile's word (before the odd tile's shift).
const HI_AT: [usize; 4] = [4, 8, 12, 0];

/// A repacked matrix: the bytes and its power-of-two exponent E (outputs times 2^-E).
pub struct Q6h {
    pub bytes: Vec<u8>,
    pub exp: i32,
}

/// Bytes of a Q6H matrix.
pub fn bytes(n_out: usize, k: usize) -> usize {
    n_out / 16 * (k / QK) * (LO_PIECE + HI_PIECE + SCALE_PIECE)
}

/// Where the high bits and the `dsc` part start.
pub fn part_offsets(n_out: usize, k: usize) -> (usize, usize) {
    let pieces = n_out / 16 * (k / QK);
    (pieces * LO_PIECE, pieces * (LO_PIECE + HI_PIECE))
}

/// The bytes of the first `groups` row groups (16 rows each) of a matrix: one `(offset, length)`
/// per part (low bits, high bits, `dsc`), what a decode matmul's first blocks read.
pub fn prefix(n_out: usize, k: usize, groups: usize) -> [(usize, usize); 3] {
    let per = groups.min(n_out / 16) * (k / QK);
    let (h, d) = part_offsets(n_out, k);
    [
        (0, per * LO_PIECE),
        (h, per * HI_PIECE),
        (d, per * SCALE_PIECE),
    ]
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
pub fn repack(src: &[u8], n_out: usize, k: usize) -> Result<Q6h, CudaError> {
    let exp = exponent(src, n_out, k)?;
    let nsb = k / QK;
    let scale = 2f32.powi(exp);
    let mut out = vec![0u8; bytes(n_out, k)];
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
                let d = b.d.to_f32();
                for sb in 0..16 {
                    // d·sc is exact in f32 (11 × 8 bits); the power of two too.
                    let dsc = f16::from_f32(d * f32::from(b.scales[sb]) * scale);
                    let o = ((s * 16 + r) * 16 + sb) * 2;
                    dsc_out[o..o + 2].copy_from_slice(&dsc.to_le_bytes());
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
pub fn logical(bytes_in: &[u8], n_out: usize, k: usize) -> Result<Logical, CudaError> {
    shape(n_out, k)?;
    if bytes_in.len() != bytes(n_out, k) {
        return Err(CudaError::Invalid(format!(
            "Q6H: {} bytes for a {n_out} × {k} matrix (expected {})",
            bytes_in.len(),
            bytes(n_out, k)
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
                    let o = dsc_base + (((g * nsb + s) * 16 + r) * 16 + sb) * 2;
                    l.dsc[(16 * g + r) * (k / 16) + 16 * s + sb] =
                        f16::from_le_bytes([bytes_in[o], bytes_in[o + 1]]);
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
        let h = repack(&src, n_out, k).expect("repack");
        assert_eq!(h.bytes.len() * 8, n_out * k * 7, "7 bits per weight");
        let l = logical(&h.bytes, n_out, k).expect("logical");
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
        assert!(repack(&src, 16, 512).is_err());
        assert!(repack(&src[..209], 16, 256).is_err());
        assert!(repack(&src, 24, 256).is_err());
        assert!(logical(&[0u8; 3], 16, 256).is_err());
    }

    /// `prefix(g)` is exactly the bytes of rows 0..16g (`testing::check_prefix`).
    #[test]
    fn a_prefix_holds_exactly_the_first_row_groups() {
        let (n_out, k) = (64, 512);
        let rep = |src: &[u8]| {
            let h = repack(src, n_out, k).expect("repack");
            (h.bytes, h.exp)
        };
        let src = rows(n_out, k, 11);
        let dims = (n_out, k, k / 256 * 210, bytes(n_out, k));
        crate::testing::check_prefix(prefix, rep, &src, dims);
    }
}
