//! Q4_K rows repacked for the f16 tensor-core kernels ("Q4H", `matvec_h16.cu`; docs/cuda.md,
//! "the f16 route"). Owns the layout and the numerics it fixes (host side); the device side is
//! `mvh_*` in matvec_h16.cu.
//!
//! What a kernel computes from a Q4H matrix, per row r and sub-block b (32 values) of GGUF's
//! Q4_K (`d·sc·q − dmin·m`):
//! - `dsc = f16(2^E · d·sc)` and `ndm = f16(−2^E · dmin·m)` (round to nearest even from the exact
//!   f32 products; E is one power of two per matrix, [`Q4h::exp`], chosen so the largest `dsc`
//!   lies in [16, 32): the kernels' constants `1024 · dsc` stay finite and `dsc / 16` stays
//!   normal down to 2^-14 of the largest);
//! - each weight as `f16(q · dsc)` (one rounding of the exact product) multiplied by the f16
//!   activation, and the sub-block's min as `ndm` times the f16 sum of its activations — both
//!   inside `mma.sync.m16n8k16` with f32 accumulation — and the result times `2^-E`.
//!
//! Layout of one matrix of `n_out` rows (a multiple of 16) × `k` values (a multiple of 256):
//! row group G = rows 16G..16G+16, super-block s, `ng = n_out / 16`, `nsb = k / 256`:
//! - quants `[ng][nsb][4 loads j][32 lanes][16 bytes]` (2048 bytes per (G, s)): lane (g = lane/4,
//!   t = lane%4), word i (tile i = values 64j + 16i .. + 16) holds the 8 nibbles of the lane's
//!   m16n8k16 A fragment — register p (0..4) = row g + 8·(p%2), values 2t + 8·(p/2) + {0, 1},
//!   at bits 4p (first value) and 16 + 4p (second);
//! - then `dsc` as f16 `[ng][nsb][16 rows][8 sub-blocks]` (256 bytes per (G, s));
//! - then `ndm` as f16 `[ng][nsb][16 rows][8 sub-blocks]`.
//!
//! 5 bits per weight (Q4_K: 4.5): the scales are stored decoded. Invariant: [`logical`]
//! recovers every quant, `dsc` and `ndm` as defined above.

use half::f16;
use muser_quant::BlockQ4K;

use crate::error::CudaError;

const QK: usize = 256;
const Q4K_BYTES: usize = 144;
/// Bytes of one (row group, super-block) piece of each part.
const QUANT_PIECE: usize = 2048;
const SCALE_PIECE: usize = 256;

/// A repacked matrix: the bytes and its power-of-two exponent E.
pub struct Q4h {
    pub bytes: Vec<u8>,
    /// The matrix's scales are stored times 2^exp; outputs are multiplied by 2^-exp.
    pub exp: i32,
}

/// Bytes of a Q4H matrix.
pub fn bytes(n_out: usize, k: usize) -> usize {
    n_out / 16 * (k / QK) * (QUANT_PIECE + 2 * SCALE_PIECE)
}

/// Where the `dsc` and `ndm` parts start.
pub fn part_offsets(n_out: usize, k: usize) -> (usize, usize) {
    let pieces = n_out / 16 * (k / QK);
    (pieces * QUANT_PIECE, pieces * (QUANT_PIECE + SCALE_PIECE))
}

/// The bytes of the first `groups` row groups (16 rows each) of a matrix: one `(offset, length)`
/// per part (quants, `dsc`, `ndm`), what a decode matmul's first blocks read (block G = group G).
pub fn prefix(n_out: usize, k: usize, groups: usize) -> [(usize, usize); 3] {
    let per = groups.min(n_out / 16) * (k / QK);
    let (d, m) = part_offsets(n_out, k);
    [
        (0, per * QUANT_PIECE),
        (d, per * SCALE_PIECE),
        (m, per * SCALE_PIECE),
    ]
}

fn check(n_out: usize, k: usize, len: usize) -> Result<(), CudaError> {
    if n_out == 0 || !n_out.is_multiple_of(16) || k == 0 || !k.is_multiple_of(QK) {
        return Err(CudaError::Invalid(format!(
            "Q4H: a {n_out} × {k} matrix (rows must be a positive multiple of 16, row length of \
             {QK})"
        )));
    }
    if len != n_out * (k / QK) * Q4K_BYTES {
        return Err(CudaError::Invalid(format!(
            "Q4H: {len} bytes for {n_out} rows of {k} Q4_K values (expected {})",
            n_out * (k / QK) * Q4K_BYTES
        )));
    }
    Ok(())
}

/// Quant byte offset of (row group, super-block, load, lane).
pub(crate) fn quant_at(nsb: usize, g: usize, s: usize, j: usize, lane: usize) -> usize {
    ((g * nsb + s) * 4 + j) * 512 + lane * 16
}

/// For quant word i of lane `lane` and register p: (row in group, value in super-block of the
/// first of the pair) for load j.
pub(crate) fn frag(j: usize, i: usize, lane: usize, p: usize) -> (usize, usize) {
    let (g, t) = (lane / 4, lane % 4);
    (g + 8 * (p % 2), 64 * j + 16 * i + 2 * t + 8 * (p / 2))
}

/// The matrix's power of two E: the largest d·sc times 2^E in [16, 32) (0 for an all-zero
/// matrix). The upload plan reads it before the repack.
pub fn exponent(src: &[u8], n_out: usize, k: usize) -> Result<i32, CudaError> {
    check(n_out, k, src.len())?;
    let mut max = 0f32;
    for blk in src.chunks_exact(Q4K_BYTES) {
        let b: BlockQ4K = bytemuck::pod_read_unaligned(blk);
        let (sc, _) = b.scales_mins();
        let d = b.d.to_f32().abs();
        for &c in &sc {
            max = max.max(d * f32::from(c));
        }
    }
    Ok(exp_for(max))
}

/// E putting `max` in [16, 32).
pub(crate) fn exp_for(max: f32) -> i32 {
    if max > 0.0 && max.is_finite() {
        4 - max.log2().floor() as i32
    } else {
        0
    }
}

/// Repack `n_out` GGUF Q4_K rows of `k` values (`src` = the tensor's bytes) into Q4H; the row
/// groups in parallel (each writes its own part of every section).
pub fn repack(src: &[u8], n_out: usize, k: usize) -> Result<Q4h, CudaError> {
    let exp = exponent(src, n_out, k)?;
    let nsb = k / QK;
    let scale = 2f32.powi(exp);
    let mut out = vec![0u8; bytes(n_out, k)];
    let (dsc_at, ndm_at) = part_offsets(n_out, k);
    // Group g's pieces: quants, dsc, ndm (offsets within the group's part of each section).
    let fill = |g: usize, [q, dsc_out, ndm_out]: [&mut [u8]; 3]| -> Result<(), CudaError> {
        for s in 0..nsb {
            let rows: Vec<BlockQ4K> = (0..16)
                .map(|r| {
                    let at = ((16 * g + r) * nsb + s) * Q4K_BYTES;
                    bytemuck::pod_read_unaligned(&src[at..at + Q4K_BYTES])
                })
                .collect();
            let quants: Vec<[u8; QK]> = rows.iter().map(BlockQ4K::quants).collect();
            for j in 0..4 {
                for lane in 0..32 {
                    let at = quant_at(nsb, 0, s, j, lane);
                    for i in 0..4 {
                        let mut word = 0u32;
                        for p in 0..4 {
                            let (r, v) = frag(j, i, lane, p);
                            word |= u32::from(quants[r][v]) << (4 * p);
                            word |= u32::from(quants[r][v + 1]) << (16 + 4 * p);
                        }
                        q[at + 4 * i..at + 4 * i + 4].copy_from_slice(&word.to_le_bytes());
                    }
                }
            }
            for (r, b) in rows.iter().enumerate() {
                let (sc, m) = b.scales_mins();
                let (d, dmin) = (b.d.to_f32(), b.dmin.to_f32());
                for sb in 0..8 {
                    // d·sc and dmin·m are exact in f32 (11 × 6 bits); the power of two too.
                    let dsc = f16::from_f32(d * f32::from(sc[sb]) * scale);
                    let ndm = f16::from_f32(-(dmin * f32::from(m[sb])) * scale);
                    if !ndm.is_finite() {
                        return Err(CudaError::Invalid(format!(
                            "Q4H: row {}'s min {} × 2^{exp} is out of f16's range",
                            16 * g + r,
                            dmin * f32::from(m[sb])
                        )));
                    }
                    let o = (s * 16 + r) * 16 + 2 * sb;
                    dsc_out[o..o + 2].copy_from_slice(&dsc.to_le_bytes());
                    ndm_out[o..o + 2].copy_from_slice(&ndm.to_le_bytes());
                }
            }
        }
        Ok(())
    };
    per_group(&mut out, [dsc_at, ndm_at], n_out / 16, fill)?;
    Ok(Q4h { bytes: out, exp })
}

/// Run `fill(g, parts)` for every row group g in parallel, `parts` its part of each of the three
/// sections of `out` (sections starting at 0 and at `starts`, each an array over the groups).
/// The first error wins (which one, when several groups fail, is not fixed).
pub(crate) fn per_group(
    out: &mut [u8],
    starts: [usize; 2],
    n_groups: usize,
    fill: impl Fn(usize, [&mut [u8]; 3]) -> Result<(), CudaError> + Sync,
) -> Result<(), CudaError> {
    use rayon::prelude::*;
    let (a, rest) = out.split_at_mut(starts[0]);
    let (b, c) = rest.split_at_mut(starts[1] - starts[0]);
    let chunk = |x: &mut [u8]| x.len() / n_groups;
    let (ca, cb, cc) = (chunk(a), chunk(b), chunk(c));
    a.par_chunks_mut(ca)
        .zip(b.par_chunks_mut(cb))
        .zip(c.par_chunks_mut(cc))
        .enumerate()
        .try_for_each(|(g, ((pa, pb), pc))| fill(g, [pa, pb, pc]))
}

/// A Q4H matrix read back: quants `[n_out][k]`, `dsc` and `ndm` `[n_out][k/32]` (scaled by 2^E).
pub struct Logical {
    pub q: Vec<u8>,
    pub dsc: Vec<f16>,
    pub ndm: Vec<f16>,
}

/// Read a Q4H matrix back into rows (the inverse of the layout; tests and references).
pub fn logical(bytes_in: &[u8], n_out: usize, k: usize) -> Result<Logical, CudaError> {
    if n_out == 0 || !n_out.is_multiple_of(16) || k == 0 || !k.is_multiple_of(QK) {
        return Err(CudaError::Invalid(format!("Q4H: a {n_out} × {k} matrix")));
    }
    if bytes_in.len() != bytes(n_out, k) {
        return Err(CudaError::Invalid(format!(
            "Q4H: {} bytes for a {n_out} × {k} matrix (expected {})",
            bytes_in.len(),
            bytes(n_out, k)
        )));
    }
    let nsb = k / QK;
    let (dsc_at, ndm_at) = part_offsets(n_out, k);
    let mut l = Logical {
        q: vec![0; n_out * k],
        dsc: vec![f16::ZERO; n_out * k / 32],
        ndm: vec![f16::ZERO; n_out * k / 32],
    };
    let half_at = |at: usize| f16::from_le_bytes([bytes_in[at], bytes_in[at + 1]]);
    for g in 0..n_out / 16 {
        for s in 0..nsb {
            for j in 0..4 {
                for lane in 0..32 {
                    let at = quant_at(nsb, g, s, j, lane);
                    for i in 0..4 {
                        let w = u32::from_le_bytes([
                            bytes_in[at + 4 * i],
                            bytes_in[at + 4 * i + 1],
                            bytes_in[at + 4 * i + 2],
                            bytes_in[at + 4 * i + 3],
                        ]);
                        for p in 0..4 {
                            let (r, v) = frag(j, i, lane, p);
                            let row = (16 * g + r) * k + QK * s + v;
                            l.q[row] = ((w >> (4 * p)) & 15) as u8;
                            l.q[row + 1] = ((w >> (16 + 4 * p)) & 15) as u8;
                        }
                    }
                }
            }
            for r in 0..16 {
                for sb in 0..8 {
                    let o = ((g * nsb + s) * 16 + r) * 16 + 2 * sb;
                    let idx = (16 * g + r) * (k / 32) + 8 * s + sb;
                    l.dsc[idx] = half_at(dsc_at + o);
                    l.ndm[idx] = half_at(ndm_at + o);
                }
            }
        }
    }
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::*;
    use muser_quant::q4_k;

    fn rows(n_out: usize, k: usize, seed: u32) -> Vec<u8> {
        crate::testing::quantized_rows::<BlockQ4K>(n_out, k, seed, q4_k::quantize_row)
    }

    /// `logical(repack(x))` gives back GGUF's quants, and scales and mins as the module
    /// defines them (f16 of the exact products times 2^E, E putting the largest in [16, 32)).
    #[test]
    fn the_layout_holds_the_quants_and_the_scaled_sub_block_factors() {
        let (n_out, k) = (48, 512);
        let src = rows(n_out, k, 7);
        let h = repack(&src, n_out, k).expect("repack");
        assert_eq!(h.bytes.len(), bytes(n_out, k));
        assert_eq!(h.bytes.len() * 8, n_out * k * 5, "5 bits per weight");
        let l = logical(&h.bytes, n_out, k).expect("logical");
        let mut max = 0f32;
        for r in 0..n_out {
            for s in 0..k / QK {
                let at = (r * (k / QK) + s) * Q4K_BYTES;
                let b: BlockQ4K = bytemuck::pod_read_unaligned(&src[at..at + Q4K_BYTES]);
                let q = b.quants();
                let (sc, m) = b.scales_mins();
                let at = r * k + QK * s;
                assert_eq!(&l.q[at..at + QK], &q[..], "quants of row {r}, block {s}");
                for sb in 0..8 {
                    let idx = r * (k / 32) + 8 * s + sb;
                    let scale = 2f64.powi(h.exp);
                    let want = f64::from(b.d.to_f32()) * f64::from(sc[sb]) * scale;
                    assert_eq!(l.dsc[idx], f16::from_f64(want), "dsc {r}/{s}/{sb}");
                    let want = -f64::from(b.dmin.to_f32()) * f64::from(m[sb]) * scale;
                    assert_eq!(l.ndm[idx], f16::from_f64(want), "ndm {r}/{s}/{sb}");
                    max = max.max(l.dsc[idx].to_f32().abs());
                }
            }
        }
        assert!((16.0..=32.0).contains(&max), "largest dsc {max}");
    }

    /// Shapes the kernels cannot take are typed errors naming the shape, never a panic.
    #[test]
    fn bad_shapes_are_refused() {
        let src = rows(16, 256, 1);
        assert!(repack(&src, 8, 512).is_err());
        assert!(repack(&src[..100], 16, 256).is_err());
        let e = repack(&src, 16, 128).err().expect("refused");
        assert!(e.to_string().contains("16 × 128"), "{e}");
        assert!(logical(&[0u8; 10], 16, 256).is_err());
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
        let dims = (n_out, k, k / 256 * 144, bytes(n_out, k));
        crate::testing::check_prefix(prefix, rep, &src, dims);
    }
}
