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
//!
//! [`Scales::U8`] (`MUSER_CUDA_Q4H_SCALES=u8`) stores the same numbers in 4.625 bits per weight:
//! the quants as above, then per (G, s) `[16 rows][8 sc bytes, 8 m bytes]` (256 bytes), then
//! `[16 rows][(d', −dmin') as f16]` (64 bytes), `d' = 2^E·d`, `dmin' = 2^E·dmin`. The kernels
//! (formats_h16.cuh, `Q4H_U8`) rebuild `dsc` as `f16(sc·d')` and `ndm` as `f16(m·(−dmin'))`
//! (the exact product rounded once, IEEE's signed zero where it is zero); [`repack`] writes
//! this layout only where that equals the f16 layout's `dsc` and `ndm` bit for bit in every
//! sub-block — otherwise a typed error naming the row — so both layouts give the same outputs.

use half::f16;
use muser_quant::BlockQ4K;

use crate::error::CudaError;

const QK: usize = 256;
const Q4K_BYTES: usize = 144;
/// Bytes of one (row group, super-block) piece of the quants.
const QUANT_PIECE: usize = 2048;

pub use crate::scales::Scales;

/// `MUSER_CUDA_Q4H_SCALES=auto|f16|u8` ([`Scales::choice_from_env`]).
pub fn scales_from_env() -> Result<Option<Scales>, CudaError> {
    Scales::choice_from_env("MUSER_CUDA_Q4H_SCALES")
}

/// Bytes of one (row group, super-block) piece of the two scale sections.
const fn scale_pieces(sc: Scales) -> (usize, usize) {
    match sc {
        Scales::F16 => (256, 256),
        Scales::U8 => (256, 64),
    }
}

/// A repacked matrix: the bytes and its power-of-two exponent E.
pub struct Q4h {
    pub bytes: Vec<u8>,
    /// The matrix's scales are stored times 2^exp; outputs are multiplied by 2^-exp.
    pub exp: i32,
}

/// Bytes of a Q4H matrix.
pub fn bytes(n_out: usize, k: usize, sc: Scales) -> usize {
    let (a, b) = scale_pieces(sc);
    n_out / 16 * (k / QK) * (QUANT_PIECE + a + b)
}

/// Where the second and third sections start (f16: `dsc`, `ndm`; u8: the bytes, the pairs).
pub fn part_offsets(n_out: usize, k: usize, sc: Scales) -> (usize, usize) {
    let pieces = n_out / 16 * (k / QK);
    (
        pieces * QUANT_PIECE,
        pieces * (QUANT_PIECE + scale_pieces(sc).0),
    )
}

/// The bytes of the first `groups` row groups (16 rows each) of a matrix: one `(offset, length)`
/// per section, what a decode matmul's first blocks read (block G = group G).
pub fn prefix(n_out: usize, k: usize, groups: usize, sc: Scales) -> [(usize, usize); 3] {
    let per = groups.min(n_out / 16) * (k / QK);
    let (d, m) = part_offsets(n_out, k, sc);
    let (a, b) = scale_pieces(sc);
    [(0, per * QUANT_PIECE), (d, per * a), (m, per * b)]
}

/// What the u8 kernels compute for a factor `x` (6 bits) times `d`: the exact product (17 bits,
/// exact in f32, a zero one signed as IEEE's) rounded once to f16 (formats_h16.cuh `times`).
fn times_u8(x: u8, d: f16) -> f16 {
    f16::from_f32(f32::from(x) * d.to_f32())
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
    use rayon::prelude::*;
    check(n_out, k, src.len())?;
    // The blocks in parallel: a maximum is the same in any order (f32::max skips NaN either way).
    let max = src
        .par_chunks_exact(Q4K_BYTES)
        .map(|blk| {
            let b: BlockQ4K = bytemuck::pod_read_unaligned(blk);
            let (sc, _) = b.scales_mins();
            let d = b.d.to_f32().abs();
            sc.iter().fold(0f32, |m, &c| m.max(d * f32::from(c)))
        })
        .reduce(|| 0f32, f32::max);
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
pub fn repack(src: &[u8], n_out: usize, k: usize, layout: Scales) -> Result<Q4h, CudaError> {
    let exp = exponent(src, n_out, k)?;
    let nsb = k / QK;
    let scale = 2f32.powi(exp);
    let mut out = vec![0u8; bytes(n_out, k, layout)];
    let (dsc_at, ndm_at) = part_offsets(n_out, k, layout);
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
                let f = Factors::of(b, scale);
                let row = 16 * g + r;
                if let Some(sb) = f.ndm.iter().position(|h| !h.is_finite()) {
                    return Err(CudaError::Invalid(format!(
                        "Q4H: row {row}'s min {} × 2^{exp} is out of f16's range",
                        b.dmin.to_f32() * f32::from(f.m[sb])
                    )));
                }
                match layout {
                    Scales::F16 => {
                        for sb in 0..8 {
                            let o = (s * 16 + r) * 16 + 2 * sb;
                            dsc_out[o..o + 2].copy_from_slice(&f.dsc[sb].to_le_bytes());
                            ndm_out[o..o + 2].copy_from_slice(&f.ndm[sb].to_le_bytes());
                        }
                    }
                    Scales::U8 => {
                        if !f.u8_exact() {
                            return Err(u8_inexact(row, s, b, exp));
                        }
                        let o = (s * 16 + r) * 16;
                        dsc_out[o..o + 8].copy_from_slice(&f.sc);
                        dsc_out[o + 8..o + 16].copy_from_slice(&f.m);
                        let o = (s * 16 + r) * 4;
                        ndm_out[o..o + 2].copy_from_slice(&f.d.to_le_bytes());
                        ndm_out[o + 2..o + 4].copy_from_slice(&f.nmin.to_le_bytes());
                    }
                }
            }
        }
        Ok(())
    };
    per_group(&mut out, [dsc_at, ndm_at], n_out / 16, fill)?;
    Ok(Q4h { bytes: out, exp })
}

/// One Q4_K block's factors in both layouts (scaled by 2^E).
struct Factors {
    sc: [u8; 8],
    m: [u8; 8],
    /// The f16 layout's `dsc` and `ndm`: d·sc and dmin·m are exact in f32 (11 × 6 bits), the
    /// power of two too, so each is one rounding.
    dsc: [f16; 8],
    ndm: [f16; 8],
    /// The u8 layout's pair: f16(2^E·d), f16(−2^E·dmin).
    d: f16,
    nmin: f16,
}

impl Factors {
    fn of(b: &BlockQ4K, scale: f32) -> Factors {
        let (sc, m) = b.scales_mins();
        let (d, dmin) = (b.d.to_f32(), b.dmin.to_f32());
        Factors {
            sc,
            m,
            dsc: sc.map(|c| f16::from_f32(d * f32::from(c) * scale)),
            ndm: m.map(|c| f16::from_f32(-(dmin * f32::from(c)) * scale)),
            d: f16::from_f32(d * scale),
            nmin: f16::from_f32(-dmin * scale),
        }
    }

    /// Whether the u8 kernels' factors from (sc, m, d', −dmin') are the f16 layout's, bit for
    /// bit, in all eight sub-blocks.
    fn u8_exact(&self) -> bool {
        (0..8).all(|sb| {
            times_u8(self.sc[sb], self.d).to_bits() == self.dsc[sb].to_bits()
                && times_u8(self.m[sb], self.nmin).to_bits() == self.ndm[sb].to_bits()
        })
    }
}

/// Whether every block of a Q4_K matrix can take the u8 layout (what [`repack`] with
/// [`Scales::U8`] checks, without repacking): the first inexact row, if any, as an error.
pub fn u8_check(src: &[u8], n_out: usize, k: usize) -> Result<(), CudaError> {
    let exp = exponent(src, n_out, k)?;
    let scale = 2f32.powi(exp);
    per_block(src, Q4K_BYTES, k / QK, |row, s, blk| {
        let b: BlockQ4K = bytemuck::pod_read_unaligned(blk);
        if Factors::of(&b, scale).u8_exact() {
            Ok(())
        } else {
            Err(u8_inexact(row, s, &b, exp))
        }
    })
}

/// Run `check(row, s, block)` on every super-block of a matrix of `nsb` blocks of `block_bytes`
/// per row, rows in parallel, in order within a row; the first error of a row stops it (which
/// row's error wins, when several fail, is not fixed).
pub(crate) fn per_block(
    src: &[u8],
    block_bytes: usize,
    nsb: usize,
    check: impl Fn(usize, usize, &[u8]) -> Result<(), CudaError> + Sync,
) -> Result<(), CudaError> {
    use rayon::prelude::*;
    src.par_chunks_exact(block_bytes * nsb)
        .enumerate()
        .try_for_each(|(row, blocks)| {
            blocks
                .chunks_exact(block_bytes)
                .enumerate()
                .try_for_each(|(s, blk)| check(row, s, blk))
        })
}

fn u8_inexact(row: usize, s: usize, b: &BlockQ4K, exp: i32) -> CudaError {
    CudaError::Invalid(format!(
        "Q4H with 8-bit scales (MUSER_CUDA_Q4H_SCALES=u8): row {row}, super-block {s}: d = {:e} \
         and dmin = {:e} times 2^{exp} do not give the f16 layout's factors exactly \
         (MUSER_CUDA_Q4H_SCALES=f16 keeps the f16 scales)",
        b.d.to_f32(),
        b.dmin.to_f32()
    ))
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

/// Read a Q4H matrix back into rows (the inverse of the layout; tests and references). The u8
/// layout's factors as its kernels compute them.
pub fn logical(
    bytes_in: &[u8],
    n_out: usize,
    k: usize,
    layout: Scales,
) -> Result<Logical, CudaError> {
    if n_out == 0 || !n_out.is_multiple_of(16) || k == 0 || !k.is_multiple_of(QK) {
        return Err(CudaError::Invalid(format!("Q4H: a {n_out} × {k} matrix")));
    }
    if bytes_in.len() != bytes(n_out, k, layout) {
        return Err(CudaError::Invalid(format!(
            "Q4H: {} bytes for a {n_out} × {k} matrix (expected {})",
            bytes_in.len(),
            bytes(n_out, k, layout)
        )));
    }
    let nsb = k / QK;
    let (dsc_at, ndm_at) = part_offsets(n_out, k, layout);
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
                let row = (g * nsb + s) * 16 + r;
                for sb in 0..8 {
                    let idx = (16 * g + r) * (k / 32) + 8 * s + sb;
                    if layout == Scales::F16 {
                        let o = row * 16 + 2 * sb;
                        l.dsc[idx] = half_at(dsc_at + o);
                        l.ndm[idx] = half_at(ndm_at + o);
                    } else {
                        let (o, p) = (dsc_at + row * 16 + sb, ndm_at + row * 4);
                        l.dsc[idx] = times_u8(bytes_in[o], half_at(p));
                        l.ndm[idx] = times_u8(bytes_in[o + 8], half_at(p + 2));
                    }
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
        let h = repack(&src, n_out, k, Scales::F16).expect("repack");
        assert_eq!(h.bytes.len(), bytes(n_out, k, Scales::F16));
        assert_eq!(h.bytes.len() * 8, n_out * k * 5, "5 bits per weight");
        let l = logical(&h.bytes, n_out, k, Scales::F16).expect("logical");
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
        for sc in [Scales::F16, Scales::U8] {
            assert!(repack(&src, 8, 512, sc).is_err());
            assert!(repack(&src[..100], 16, 256, sc).is_err());
            let e = repack(&src, 16, 128, sc).err().expect("refused");
            assert!(e.to_string().contains("16 × 128"), "{e}");
            assert!(logical(&[0u8; 10], 16, 256, sc).is_err());
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
            let dims = (n_out, k, k / 256 * 144, bytes(n_out, k, sc));
            let pre = |n, k, g| prefix(n, k, g, sc);
            crate::testing::check_prefix(pre, rep, &src, dims);
        }
    }

    /// The u8 layout holds the same quants and gives the same factors, bit for bit, as the f16
    /// layout (what its kernels compute: `logical`), in 4.625 bits per weight.
    #[test]
    fn the_u8_layout_gives_the_f16_layouts_factors() {
        let (n_out, k) = (48, 768);
        let mut src = rows(n_out, k, 9);
        // Zero mins in sub-block 0 of every third block (−0 in both layouts).
        for blk in src.chunks_exact_mut(Q4K_BYTES).step_by(3) {
            blk[4 + 4] &= !63;
        }
        let f = repack(&src, n_out, k, Scales::F16).expect("f16");
        let u = repack(&src, n_out, k, Scales::U8).expect("u8");
        assert_eq!(f.exp, u.exp);
        assert_eq!(
            u.bytes.len() * 8,
            n_out * k * 37 / 8,
            "4.625 bits per weight"
        );
        let (lf, lu) = (
            logical(&f.bytes, n_out, k, Scales::F16).expect("logical f16"),
            logical(&u.bytes, n_out, k, Scales::U8).expect("logical u8"),
        );
        assert_eq!(lf.q, lu.q);
        let bits = |v: &[f16]| v.iter().map(|h| h.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&lf.dsc), bits(&lu.dsc));
        assert_eq!(bits(&lf.ndm), bits(&lu.ndm));
        // Some zero mins (−0 in both) and nonzero ones, so the sign path is exercised.
        assert!(lu.ndm.iter().any(|h| h.to_bits() == 0x8000));
        assert!(lu.ndm.iter().any(|h| h.to_f32() < 0.0));
    }

    /// A block the u8 layout cannot hold exactly (a d below f16's subnormals once scaled by
    /// 2^-E: the f16 layout rounds d·sc, the u8 layout would round d first) is a typed error
    /// naming the row, never a silent change of the numbers.
    #[test]
    fn a_block_the_u8_layout_cannot_hold_exactly_is_refused() {
        let (n_out, k) = (16, 256);
        let mut src = rows(n_out, k, 3);
        // Every row: d = 2^-4 (exact at any E here), no mins; then row 0: d·sc = 1024·63, so
        // E = −11; row 5: d = 2^-4·(1 + 2^-10), whose d' = 2^-15·(…) lies below f16's normals
        // and loses its last bit, while d·sc·2^E is a normal f16.
        for (row, blk) in src.chunks_exact_mut(Q4K_BYTES).enumerate() {
            let mut b: BlockQ4K = bytemuck::pod_read_unaligned(blk);
            b.d = match row {
                0 => f16::from_f32(1024.0),
                5 => f16::from_bits(0x2C01),
                _ => f16::from_f32(0.0625),
            };
            b.dmin = f16::ZERO;
            b.scales[0] |= 63;
            blk.copy_from_slice(bytemuck::bytes_of(&b));
        }
        assert!(repack(&src, n_out, k, Scales::F16).is_ok());
        let e = repack(&src, n_out, k, Scales::U8).err().expect("refused");
        assert!(e.to_string().contains("row 5, super-block 0"), "{e}");
        let e = u8_check(&src, n_out, k).expect_err("refused");
        assert!(e.to_string().contains("row 5, super-block 0"), "{e}");
        assert!(u8_check(&rows(n_out, k, 3), n_out, k).is_ok());
    }
}
