//! Tests of the A16 format and its dot products: quantization, exactness against f64, and
//! bit-identity of every SIMD level, tile shape and the unpacked prefill path with the references.

use super::*;
use crate::SimdLevel;

use crate::testutil::{noise, noise_weights as weights};

fn acts(n: usize, seed: u64) -> (Vec<f32>, Vec<BlockA16>) {
    let mut x = noise(seed, n, 3.0);
    // An outlier sub-block and an all-zero sub-block.
    x[5] = 40.0;
    for v in x.iter_mut().skip(64).take(32) {
        *v = 0.0;
    }
    let mut a = vec![BlockA16::zeroed(); n_groups(n)];
    quantize_row(&x, &mut a).expect("quantize");
    (x, a)
}

#[cfg(target_arch = "x86_64")]
#[test]
fn simd_quantization_matches_the_reference() {
    if !crate::simd::avx2_available() {
        eprintln!("skipping: no AVX2 on this CPU");
        return;
    }
    for seed in 0..50u64 {
        let mut x = noise(seed, 96, 10.0);
        x[3] = 0.5; // ties at the top of the range are exercised by the scale
        if seed % 7 == 0 {
            x[40] = f32::NAN;
        }
        if seed % 11 == 0 {
            x[70] = f32::INFINITY;
        }
        for sb in x.chunks(32) {
            let amax = sb.iter().fold(0f32, |m, v| m.max(v.abs()));
            let mut q = [0i16; 32];
            // SAFETY: AVX2 checked above.
            let got = unsafe { crate::a16_avx2::quantize_sub(sb, &mut q) };
            if sb.iter().any(|v| v.is_nan()) {
                assert!(got.is_none());
                continue;
            }
            let (d, sum) = got.expect("no NaN");
            if amax == 0.0 || !amax.is_finite() {
                assert_eq!((d, sum), (0.0, 0));
                continue;
            }
            let id = QMAX / amax;
            let want: Vec<i16> = sb
                .iter()
                .map(|&v| (v * id).round_ties_even().clamp(-QMAX, QMAX) as i16)
                .collect();
            assert_eq!(q.to_vec(), want);
            assert_eq!(d.to_bits(), (amax / QMAX).to_bits());
            assert_eq!(sum, want.iter().map(|&v| i32::from(v)).sum::<i32>());
        }
    }
}

#[test]
fn quantization_is_fine_grained() {
    let (x, a) = acts(640, 1);
    let mut y = vec![0f32; 640];
    dequantize_row(&a, &mut y);
    for (j, (xs, ys)) in x.chunks(32).zip(y.chunks(32)).enumerate() {
        let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
        for (p, q) in xs.iter().zip(ys) {
            assert!(
                (p - q).abs() <= amax / 32767.0 * 0.5 + amax * 1e-6,
                "sub-block {j}"
            );
        }
    }
    assert_eq!(a[2].d[4..], [0.0; 4], "padding sub-blocks are zero");
}

#[test]
fn dots_match_f64_of_the_dequantized_rows() {
    for ty in [
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
        GgmlType::Q8_0,
        GgmlType::Q5_0,
    ] {
        let n = if ty.block_size() == 256 { 768 } else { 640 };
        let w = weights(ty, n, 7);
        let (_, a) = acts(n, 9);
        let mut wf = vec![0f64; n];
        crate::dequantize_f64(ty, &w, &mut wf).expect("dequantize");
        let mut af = vec![0f32; n];
        dequantize_row(&a, &mut af);
        let exact: f64 = wf.iter().zip(&af).map(|(p, q)| p * f64::from(*q)).sum();
        let got = f64::from(dot_at(SimdLevel::Scalar, ty, &w, &a).expect("dot"));
        let scale: f64 = wf
            .iter()
            .zip(&af)
            .map(|(p, q)| (p * f64::from(*q)).abs())
            .sum();
        assert!(
            (got - exact).abs() <= 1e-5 * scale,
            "{ty}: {got} vs {exact}"
        );
    }
}

use crate::testutil::available_levels as test_levels;

#[cfg(target_arch = "x86_64")]
#[test]
fn avx2_is_bit_identical_to_the_reference() {
    if !crate::simd::avx2_available() {
        eprintln!("skipping: no AVX2 on this CPU");
        return;
    }
    for ty in [
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
        GgmlType::Q8_0,
        GgmlType::Q5_0,
    ] {
        for (n, seed) in [(256usize, 1u64), (512, 2), (2304, 3), (640, 4), (96, 5)] {
            if n % ty.block_size() != 0 {
                continue;
            }
            let w = weights(ty, n, seed);
            let (_, a) = acts(n, seed + 100);
            let r = dot_at(SimdLevel::Scalar, ty, &w, &a).expect("ref");
            for level in test_levels() {
                let v = dot_at(level, ty, &w, &a).expect("simd");
                assert_eq!(
                    r.to_bits(),
                    v.to_bits(),
                    "{ty} n={n} at {level:?}: {r} vs {v}"
                );
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn multi_row_tiles_equal_single_rows() {
    if !crate::simd::avx2_available() {
        eprintln!("skipping: no AVX2 on this CPU");
        return;
    }
    for ty in [
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
        GgmlType::Q8_0,
        GgmlType::Q5_0,
    ] {
        let n = 512;
        let w = weights(ty, n, 11);
        let rows: Vec<Vec<BlockA16>> = (0..4).map(|r| acts(n, 20 + r).1).collect();
        let refs: Vec<&[BlockA16]> = rows.iter().map(Vec::as_slice).collect();
        for k in 1..=4 {
            for level in test_levels() {
                let mut out = vec![0f32; k];
                dot_rows_at(level, ty, &w, &refs[..k], &mut out).expect("rows");
                for (r, o) in out.iter().enumerate() {
                    let single = dot_at(SimdLevel::Scalar, ty, &w, refs[r]).expect("single");
                    assert_eq!(
                        o.to_bits(),
                        single.to_bits(),
                        "{ty} tile {k} row {r} at {level:?}"
                    );
                }
            }
        }
    }
}

/// `out[i * a.len() + t]` is the scalar reference dot of weight row `i` (of `rows`) with `a[t]`,
/// bit for bit, for every row and activation row.
fn assert_rows_match_scalar(
    ty: GgmlType,
    rows: &[u8],
    row_bytes: usize,
    a: &[&[BlockA16]],
    out: &[f32],
    what: &str,
) {
    let na = a.len();
    for (i, row) in rows.chunks(row_bytes).enumerate() {
        for (t, at) in a.iter().enumerate() {
            let want = dot_at(SimdLevel::Scalar, ty, row, at).expect("dot");
            assert_eq!(
                out[i * na + t].to_bits(),
                want.to_bits(),
                "{ty} row {i} act {t} of {na}, {what}"
            );
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn matmul_blocks_equal_single_dots() {
    if !crate::simd::avx2_available() {
        eprintln!("skipping: no AVX2 on this CPU");
        return;
    }
    for ty in [
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
        GgmlType::Q8_0,
        GgmlType::Q5_0,
    ] {
        let n = if ty.block_size() == 256 { 512 } else { 608 };
        // 13 rows: decode tiles at rows 0 and 4 prefetch their successor, the one at 8
        // does not, and row 12 is a single-row tail.
        let rows: Vec<u8> = (0..13).flat_map(|r| weights(ty, n, 40 + r)).collect();
        let row_bytes = rows.len() / 13;
        let acts: Vec<Vec<BlockA16>> = (0..14).map(|t| acts(n, 60 + t).1).collect();
        let refs: Vec<&[BlockA16]> = acts.iter().map(Vec::as_slice).collect();
        for na in [1usize, 2, 5, 6, 9, 14] {
            for level in test_levels() {
                let mut out = vec![0f32; 13 * na];
                matmul_rows_at(level, ty, &rows, row_bytes, &refs[..na], &mut out).expect("matmul");
                assert_rows_match_scalar(
                    ty,
                    &rows,
                    row_bytes,
                    &refs[..na],
                    &out,
                    &format!("{level:?}"),
                );
            }
        }
    }
}

/// The unpacked prefill product at both tile heights (2 and 4 tokens, `tile_shape`) equals the
/// scalar reference bit for bit, for token counts that leave partial tiles.
#[cfg(target_arch = "x86_64")]
#[test]
fn prefill_tile_heights_equal_single_dots() {
    if !crate::simd::avx2_available() {
        eprintln!("skipping: no AVX2 on this CPU");
        return;
    }
    for ty in [GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0] {
        let n = if ty.block_size() == 256 { 512 } else { 608 };
        let rows: Vec<u8> = (0..5).flat_map(|r| weights(ty, n, 70 + r)).collect();
        let row_bytes = rows.len() / 5;
        let groups = n_groups(n);
        let mut u = vec![UnpackedGroup::zeroed(); 5 * groups];
        for (i, ug) in u.chunks_mut(groups).enumerate() {
            unpack_row(ty, &rows[i * row_bytes..(i + 1) * row_bytes], ug).expect("unpack");
        }
        let acts: Vec<Vec<BlockA16>> = (0..19).map(|t| acts(n, 90 + t).1).collect();
        let refs: Vec<&[BlockA16]> = acts.iter().map(Vec::as_slice).collect();
        for na in [8usize, 11, 19] {
            for level in test_levels().into_iter().filter(|l| l.avx2()) {
                for tokens in [2usize, 4] {
                    let mut out = vec![0f32; 5 * na];
                    crate::a16_unpack::matmul_unpacked(
                        level,
                        ty,
                        &u,
                        groups,
                        n,
                        &refs[..na],
                        &mut out,
                        tokens,
                    );
                    let what = format!("{tokens}-token tiles at {level:?}");
                    assert_rows_match_scalar(ty, &rows, row_bytes, &refs[..na], &out, &what);
                }
            }
        }
    }
}

#[test]
fn rejects_mismatched_rows() {
    let w = weights(GgmlType::Q4_K, 512, 1);
    let (_, a) = acts(256, 2);
    assert!(dot(GgmlType::Q4_K, &w, &a).is_err());
    assert!(dot(GgmlType::F16, &[0u8; 64], &a).is_err());
}
