//! Tests of the A8 format and its dot products: quantization, closeness to f64, and
//! bit-identity of the AVX2 tiles (every shape the dispatcher uses) with the references.

use super::*;
use crate::SimdLevel;
use muser_gguf::GgmlType;

use crate::testutil::{noise, noise_weights as weights};

fn acts(n: usize, seed: u64) -> (Vec<f32>, Vec<BlockA8>) {
    let mut x = noise(seed, n, 3.0);
    // An outlier sub-block and an all-zero sub-block.
    x[5] = 40.0;
    for v in x.iter_mut().skip(64).take(32) {
        *v = 0.0;
    }
    let mut a = vec![BlockA8::zeroed(); n_groups(n)];
    quantize_row(&x, &mut a).expect("quantize");
    (x, a)
}

const TYPES: [GgmlType; 5] = [
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::Q8_0,
    GgmlType::Q5_0,
];

#[test]
fn quantization_round_trips_within_half_a_step() {
    let (x, a) = acts(320, 3);
    let mut y = vec![0f32; 320];
    dequantize_row(&a, &mut y);
    for (sb, (xs, ys)) in x.chunks(32).zip(y.chunks(32)).enumerate() {
        let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
        for (u, v) in xs.iter().zip(ys) {
            assert!(
                (u - v).abs() <= amax / 127.0 * 0.5001,
                "sub-block {sb}: {u} vs {v}"
            );
        }
        let g = &a[sb / 8];
        let s: i32 = g.qs[(sb % 8) * 32..(sb % 8 + 1) * 32]
            .iter()
            .map(|&q| i32::from(q))
            .sum();
        assert_eq!(g.sum[sb % 8], s);
    }
    // The interleaved copy (every value once) and the lane sums.
    for g in &a {
        for (i, &q) in g.qs.iter().enumerate() {
            assert_eq!(g.qs_il[il_index(i)], q, "value {i}");
        }
        for l in 0..16 {
            let o = 32 * (l % 8) + 16 * (l / 8);
            let s: i32 = g.qs[o..o + 16].iter().map(|&q| i32::from(q)).sum();
            assert_eq!(g.lcorr[l], -128 * s, "lane {l}");
        }
    }
    let mut seen = [false; GROUP];
    for i in 0..GROUP {
        assert!(
            !std::mem::replace(&mut seen[il_index(i)], true),
            "il_index({i}) repeats"
        );
    }
    // Sub-blocks past the end of the row are zero.
    assert!(a[1].d[2..].iter().all(|&d| d == 0.0));
    let mut bad = vec![BlockA8::zeroed(); 1];
    assert!(quantize_row(&x[..40], &mut bad).is_err());
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
        x[3] = 0.5;
        if seed % 7 == 0 {
            x[40] = f32::NAN;
        }
        if seed % 11 == 0 {
            x[70] = f32::INFINITY;
        }
        if seed % 13 == 0 {
            x[0..32].fill(0.0);
        }
        for sb in x.chunks(32) {
            let (mut q, mut r) = ([0i8; 32], [0i8; 32]);
            // SAFETY: AVX2 checked above.
            let got = unsafe { crate::a8_avx2::quantize_sub(sb, &mut q) };
            let want = quantize_sub_ref(sb, &mut r);
            if sb.iter().any(|v| v.is_nan()) {
                assert_eq!(got, None);
                continue;
            }
            assert_eq!(got, Some(want), "seed {seed}");
            assert_eq!(q, r, "seed {seed}");
        }
    }
}

/// The reference dot products against the exact f64 dot of the dequantized operands: the
/// integer partials are exact, so only the f32 scale products and sums round.
#[test]
fn references_match_f64() {
    for ty in TYPES {
        for n in [256usize, 512, 1056] {
            if ty.bytes_for(n as u64).is_none() {
                continue;
            }
            let w = weights(ty, n, 11 + n as u64);
            let (_, a) = acts(n, 5);
            let mut wf = vec![0f32; n];
            crate::dequantize(ty, &w, &mut wf).expect("dequantize");
            let mut af = vec![0f32; n];
            dequantize_row(&a, &mut af);
            let exact: f64 = wf
                .iter()
                .zip(&af)
                .map(|(&u, &v)| f64::from(u) * f64::from(v))
                .sum();
            let mag: f64 = wf
                .iter()
                .zip(&af)
                .map(|(&u, &v)| (f64::from(u) * f64::from(v)).abs())
                .sum();
            let got = f64::from(dot_at(SimdLevel::Scalar, ty, &w, &a).expect("dot"));
            assert!(
                (got - exact).abs() <= 1e-5 * mag + 1e-6,
                "{ty} n={n}: {got} vs {exact}"
            );
        }
    }
}

/// Every AVX2 tile shape the dispatcher uses (decode's 4 rows with and without prefetch
/// hand-over, single leftover rows, 2 × 1..4 and 1 × 1..4 tiles on packed and on unpacked
/// rows, every tile height)
/// gives the scalar reference's bits.
#[cfg(target_arch = "x86_64")]
#[test]
fn simd_tiles_equal_the_reference() {
    let levels: Vec<SimdLevel> = crate::testutil::available_levels()
        .into_iter()
        .filter(|l| l.avx2())
        .collect();
    if levels.is_empty() {
        eprintln!("skipping: no AVX2 on this CPU");
        return;
    }
    for level in levels {
        tiles_equal_the_reference_at(level);
    }
}

#[cfg(target_arch = "x86_64")]
fn tiles_equal_the_reference_at(level: SimdLevel) {
    for ty in TYPES {
        for n in [256usize, 640, 1056, 1280] {
            // 640 and 1056 (partial last groups, 1056 with an odd block count) only for the
            // 32-value block formats.
            let Some(row_bytes) = ty.bytes_for(n as u64) else {
                continue;
            };
            let row_bytes = row_bytes as usize;
            // 13 rows: three decode tiles (two of them handed the next tile) and one single row.
            let w: Vec<u8> = (0..13u64).flat_map(|r| weights(ty, n, 100 + r)).collect();
            let a: Vec<Vec<BlockA8>> = (0..9u64).map(|t| acts(n, 40 + t).1).collect();
            for na in [1usize, 2, 3, 5, 9] {
                let ar: Vec<&[BlockA8]> = a[..na].iter().map(|v| &v[..]).collect();
                let mut want = vec![0f32; 13 * na];
                matmul_rows_at(SimdLevel::Scalar, ty, &w, row_bytes, &ar, &mut want)
                    .expect("reference");
                for (rows, tokens) in (1..=4).flat_map(|t| [(1, t), (2, t), (4, t)]) {
                    let mut got = vec![0f32; 13 * na];
                    let shape = TileShape { rows, tokens };
                    matmul_rows_shaped(level, ty, &w, row_bytes, &ar, &mut got, shape)
                        .expect("simd");
                    let (wb, gb): (Vec<u32>, Vec<u32>) = (
                        want.iter().map(|v| v.to_bits()).collect(),
                        got.iter().map(|v| v.to_bits()).collect(),
                    );
                    let l = level.name();
                    assert_eq!(gb, wb, "{l} {ty} n={n} tokens={na} tile {rows}x{tokens}");
                }
                // And each pair equals its single dot.
                for (i, chunk) in w.chunks(row_bytes).enumerate() {
                    for (t, at) in ar.iter().enumerate() {
                        let one = dot_at(SimdLevel::Scalar, ty, chunk, at).expect("dot");
                        assert_eq!(one.to_bits(), want[i * na + t].to_bits());
                    }
                }
            }
        }
    }
}

#[test]
fn bad_rows_are_typed_errors() {
    let w = weights(GgmlType::Q4_K, 512, 1);
    let (_, a) = acts(256, 1);
    assert!(matches!(
        dot(GgmlType::Q4_K, &w, &a),
        Err(QuantError::Length { .. })
    ));
    assert!(matches!(
        dot(GgmlType::F16, &w, &a),
        Err(QuantError::Unsupported { .. })
    ));
    assert!(matches!(
        dot(GgmlType::Q4_K, &w[..100], &a),
        Err(QuantError::NotBlockMultiple { .. })
    ));
}

/// The AVX2 unpackers give `unpack_row`'s groups (the scalar unpacking via A16's).
#[cfg(target_arch = "x86_64")]
#[test]
fn simd_unpack_equals_the_scalar_unpack() {
    if !crate::simd::avx2_available() {
        eprintln!("skipping: no AVX2 on this CPU");
        return;
    }
    for ty in TYPES {
        for n in [256usize, 640, 1280] {
            let Some(row_bytes) = ty.bytes_for(n as u64) else {
                continue;
            };
            let row_bytes = row_bytes as usize;
            let w: Vec<u8> = (0..3u64).flat_map(|r| weights(ty, n, 7 + r)).collect();
            let groups = n_groups(n);
            let mut want = vec![UnpackedGroup8::zeroed(); 3 * groups];
            let mut scratch = vec![crate::a16::UnpackedGroup::zeroed(); groups];
            for (r, o) in w.chunks(row_bytes).zip(want.chunks_mut(groups)) {
                unpack_row(ty, r, &mut scratch, o).expect("unpack");
            }
            // Garbage first: the unpacker writes every byte (its buffer is reused).
            let mut got = vec![UnpackedGroup8::zeroed(); 3 * groups];
            bytemuck::cast_slice_mut::<UnpackedGroup8, u8>(&mut got).fill(0x5a);
            crate::a8_dispatch::x86_unpack(ty, &w, row_bytes, n / SUB, groups, &mut got)
                .expect("simd unpack");
            assert_eq!(got, want, "{ty} n={n}");
        }
    }
}

/// Repacked rows (`a8_repack`) through the AVX-512 VNNI tiles give the scalar reference's bits
/// on the original rows, at every tile shape, for decode and prefill batches.
#[cfg(target_arch = "x86_64")]
#[test]
fn repacked_tiles_equal_the_reference() {
    use crate::a8_repack;
    if !SimdLevel::Avx512Vnni.is_available() {
        eprintln!("skipping: no AVX-512 VNNI on this CPU (repacked A8 tiles)");
        return;
    }
    let level = SimdLevel::Avx512Vnni;
    for ty in TYPES {
        for n in [256usize, 640, 1056, 1280] {
            let Some(row_bytes) = ty.bytes_for(n as u64) else {
                continue;
            };
            let row_bytes = row_bytes as usize;
            let w: Vec<u8> = (0..13u64).flat_map(|r| weights(ty, n, 300 + r)).collect();
            let rb = a8_repack::row_bytes(ty, n).expect("layout");
            // Garbage first: the repacker writes every byte.
            let mut packed = vec![0x5au8; 13 * rb];
            a8_repack::repack_rows(ty, &w, row_bytes, &mut packed).expect("repack");
            let a: Vec<Vec<BlockA8>> = (0..9u64).map(|t| acts(n, 60 + t).1).collect();
            for na in [1usize, 2, 3, 5, 9] {
                let ar: Vec<&[BlockA8]> = a[..na].iter().map(|v| &v[..]).collect();
                let mut want = vec![0f32; 13 * na];
                matmul_rows_at(SimdLevel::Scalar, ty, &w, row_bytes, &ar, &mut want)
                    .expect("reference");
                for (rows, tokens) in (1..=4).flat_map(|t| [(1, t), (2, t), (4, t)]) {
                    let mut got = vec![f32::NAN; 13 * na];
                    let shape = TileShape { rows, tokens };
                    a8_repack::matmul_rows_at(level, ty, &packed, rb, &ar, &mut got, shape)
                        .expect("repacked");
                    let (wb, gb): (Vec<u32>, Vec<u32>) = (
                        want.iter().map(|v| v.to_bits()).collect(),
                        got.iter().map(|v| v.to_bits()).collect(),
                    );
                    assert_eq!(
                        gb, wb,
                        "repacked {ty} n={n} tokens={na} tile {rows}x{tokens}"
                    );
                }
            }
        }
    }
}

/// Wrong inputs to the repacked path are typed errors, not panics.
#[test]
fn repacked_bad_input_is_a_typed_error() {
    use crate::a8_repack;
    let ty = GgmlType::Q4_K;
    let w = weights(ty, 512, 1);
    let rb = a8_repack::row_bytes(ty, 512).expect("layout");
    let mut packed = vec![0u8; rb];
    assert!(matches!(
        a8_repack::repack_rows(GgmlType::F16, &w, w.len(), &mut packed),
        Err(QuantError::Unsupported { .. })
    ));
    assert!(matches!(
        a8_repack::repack_rows(ty, &w[..100], 144, &mut packed),
        Err(QuantError::NotBlockMultiple { .. })
    ));
    assert!(matches!(
        a8_repack::repack_rows(ty, &w, w.len(), &mut packed[..10]),
        Err(QuantError::Length { .. })
    ));
    a8_repack::repack_rows(ty, &w, w.len(), &mut packed).expect("repack");
    let (_, a) = acts(512, 2);
    let (_, short) = acts(256, 2);
    let shape = TileShape { rows: 4, tokens: 4 };
    let mut out = [0f32; 1];
    assert!(matches!(
        a8_repack::matmul_rows_at(SimdLevel::Scalar, ty, &packed, rb, &[&a], &mut out, shape),
        Err(QuantError::Simd { .. })
    ));
    let level = SimdLevel::Avx512Vnni;
    assert!(matches!(
        a8_repack::matmul_rows_at(level, ty, &packed, rb, &[&short], &mut out, shape),
        Err(QuantError::Length { .. })
    ));
    assert!(matches!(
        a8_repack::matmul_rows_at(level, ty, &packed, rb, &[&a], &mut [0f32; 2], shape),
        Err(QuantError::Length { .. })
    ));
    for t in TYPES {
        let n = 256;
        let gb = a8_repack::group_bytes(t).expect("layout");
        let w = weights(t, n, 3);
        let mut p = vec![0u8; gb];
        a8_repack::repack_rows(t, &w, w.len(), &mut p).expect("repack");
    }
}
