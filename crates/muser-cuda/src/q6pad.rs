//! Q6_K rows repacked for the one-token decode kernels ("Q6_K-P", `MUSER_CUDA_Q6_PAD`): the
//! same bytes as GGUF's Q6_K, moved so that every load of a decode unit is aligned. Owns the
//! layout (host side; the device side is `AQ6KP` in formats_a16.cuh) and nothing else.
//!
//! GGUF Q6_K: blocks of 256 values in 210 bytes — `ql[128]`, `qh[64]`, `scales[16]` (i8), `d`
//! (f16) — so block b of a row starts at 210·b, 2-byte aligned. A decode unit u (half h = u/2,
//! part p = u%2; 64 values) reads the runs A = ql[64h + 16p ..][16], B = ql[64h + 32 + 16p ..][16],
//! H = qh[32h + 16p ..][16], the scales s[8h + p + {0, 2, 4, 6}] and d.
//!
//! Q6_K-P: blocks in pairs of 432 bytes (27 × 16), pair i = blocks 2i (e = 0) and 2i + 1 (e = 1):
//! - `[192e + 48u ..]`: unit u's A, B, H (48 bytes, 16-aligned);
//! - `[384 + 16e + 4u ..]`: unit u's four scales in group order (one aligned word);
//! - `[416 + 2e ..]`: d; `[420 .. 432]`: zero.
//!
//! A row of nb blocks takes ⌈nb/2⌉ pairs (an odd last block leaves its pair's second half zero).
//! Block b's address is row + 216·b: 16-aligned for even b, 8 past a 16-byte boundary for odd b,
//! which is how the device tells the pair half (rows must start 16-byte aligned: the row length
//! is a multiple of 432 and arena slices are 256-aligned). Invariant: `unpack(repack(x)) == x`.

use crate::error::CudaError;

/// Values per Q6_K block and its GGUF size.
const QK: usize = 256;
const Q6K_BYTES: usize = 210;
/// Bytes of a pair of blocks in Q6_K-P.
pub const PAIR_BYTES: usize = 432;

/// Bytes of one Q6_K-P row of `n_in` values (`n_in` a multiple of 256).
pub fn row_bytes(n_in: usize) -> usize {
    (n_in / QK).div_ceil(2) * PAIR_BYTES
}

/// Where unit u's three runs start in a GGUF Q6_K block.
fn runs(u: usize) -> [usize; 3] {
    let (h, p) = (u / 2, u % 2);
    [64 * h + 16 * p, 64 * h + 32 + 16 * p, 128 + 32 * h + 16 * p]
}

/// Unit u's scale indices, in group order.
fn scale_idx(u: usize) -> [usize; 4] {
    let (h, p) = (u / 2, u % 2);
    [8 * h + p, 8 * h + p + 2, 8 * h + p + 4, 8 * h + p + 6]
}

/// Repack `n_rows` GGUF Q6_K rows of `n_in` values (`src` = the tensor's bytes) into Q6_K-P.
pub fn repack(src: &[u8], n_rows: usize, n_in: usize) -> Result<Vec<u8>, CudaError> {
    if !n_in.is_multiple_of(QK) || n_in == 0 {
        return Err(CudaError::Invalid(format!(
            "Q6_K-P: row length {n_in} is not a positive multiple of {QK}"
        )));
    }
    let nb = n_in / QK;
    let src_row = nb * Q6K_BYTES;
    if src.len() != n_rows * src_row {
        return Err(CudaError::Invalid(format!(
            "Q6_K-P: {} bytes for {n_rows} rows of {n_in} Q6_K values (expected {})",
            src.len(),
            n_rows * src_row
        )));
    }
    let dst_row = row_bytes(n_in);
    let mut out = vec![0u8; n_rows * dst_row];
    for (srow, drow) in src.chunks_exact(src_row).zip(out.chunks_exact_mut(dst_row)) {
        for (b, blk) in srow.chunks_exact(Q6K_BYTES).enumerate() {
            let pair = &mut drow[PAIR_BYTES * (b / 2)..PAIR_BYTES * (b / 2 + 1)];
            let e = b % 2;
            for u in 0..4 {
                for (r, &start) in runs(u).iter().enumerate() {
                    let at = 192 * e + 48 * u + 16 * r;
                    pair[at..at + 16].copy_from_slice(&blk[start..start + 16]);
                }
                for (j, &s) in scale_idx(u).iter().enumerate() {
                    pair[384 + 16 * e + 4 * u + j] = blk[192 + s];
                }
            }
            pair[416 + 2 * e..418 + 2 * e].copy_from_slice(&blk[208..210]);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The inverse of `repack` (tests only): Q6_K-P rows back to GGUF Q6_K.
    fn unpack(src: &[u8], n_rows: usize, n_in: usize) -> Vec<u8> {
        let nb = n_in / QK;
        let mut out = vec![0u8; n_rows * nb * Q6K_BYTES];
        for (srow, drow) in src
            .chunks_exact(row_bytes(n_in))
            .zip(out.chunks_exact_mut(nb * Q6K_BYTES))
        {
            for (b, blk) in drow.chunks_exact_mut(Q6K_BYTES).enumerate() {
                let pair = &srow[PAIR_BYTES * (b / 2)..];
                let e = b % 2;
                for u in 0..4 {
                    for (r, &start) in runs(u).iter().enumerate() {
                        let at = 192 * e + 48 * u + 16 * r;
                        blk[start..start + 16].copy_from_slice(&pair[at..at + 16]);
                    }
                    for (j, &s) in scale_idx(u).iter().enumerate() {
                        blk[192 + s] = pair[384 + 16 * e + 4 * u + j];
                    }
                }
                blk[208..210].copy_from_slice(&pair[416 + 2 * e..418 + 2 * e]);
            }
        }
        out
    }

    fn bytes(n: usize, seed: u64) -> Vec<u8> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (s >> 56) as u8
            })
            .collect()
    }

    #[test]
    fn repack_round_trips_and_covers_every_byte() {
        // Even and odd block counts (the model's 26 and 78, and 39: a half-empty last pair).
        for (rows, n_in) in [(3usize, 6656usize), (2, 19968), (5, 9984), (1, 256)] {
            let src = bytes(rows * n_in / QK * Q6K_BYTES, (rows * n_in) as u64);
            let p = repack(&src, rows, n_in).expect("repack");
            assert_eq!(p.len(), rows * row_bytes(n_in));
            assert_eq!(unpack(&p, rows, n_in), src, "{rows} x {n_in}");
            // Every source byte lands once: the runs cover ql and qh, the unit scale words
            // cover the 16 scales (each unit takes 4 distinct ones).
            let mut seen = [0u8; 210];
            for u in 0..4 {
                for start in runs(u) {
                    seen[start..start + 16].iter_mut().for_each(|c| *c += 1);
                }
                for s in scale_idx(u) {
                    seen[192 + s] += 1;
                }
            }
            seen[208] += 1;
            seen[209] += 1;
            assert!(seen.iter().all(|&c| c == 1), "{seen:?}");
        }
    }

    #[test]
    fn unit_loads_are_aligned() {
        // Unit data of either half at 16-byte offsets, scale words at 4-byte offsets, pair
        // halves told apart by the block address's offset mod 16 (0 or 8).
        for e in 0..2 {
            for u in 0..4 {
                assert_eq!((192 * e + 48 * u) % 16, 0);
                assert_eq!((384 + 16 * e + 4 * u) % 4, 0);
            }
            assert_eq!((216 * e) % 16, 8 * e);
        }
        assert_eq!(PAIR_BYTES % 16, 0);
    }

    #[test]
    fn bad_shapes_are_errors() {
        assert!(repack(&[0; 210], 1, 255).is_err());
        assert!(repack(&[0; 209], 1, 256).is_err());
        assert!(repack(&[], 1, 0).is_err());
    }
}
