//! AVX-512 VNNI tiles for the A8 prefill products: `RW` unpacked weight rows (`a8_unpack`) ×
//! `RA` activation rows, a pair of 32-value sub-blocks per 512-bit vector.
//!
//! Bit-identical to the references in `a8`. Per pair of sub-blocks `(j, j + 1)` and (weight
//! row, activation row), one `vpdpbusd` gives the sixteen exact lane partials of both
//! sub-blocks: the activations go in offset by +128 (unsigned bytes, `q ^ 0x80`), the weights
//! as signed bytes, and the accumulator starts at the row's stored correction
//! `corr = -128 · Σ w` per lane, so the result is `Σ w·a` exactly (|partial| < 2^24, no
//! overflow in i32). Lanes 0–7 belong to the even sub-block and 8–15 to the odd one, which is
//! why the reference keeps two accumulator sets (`acc_e`, `acc_o`): the low half of the 512-bit
//! accumulator is `acc_e`, the high half `acc_o`, each lane updated with the reference's fused
//! multiply-add by the reference's scale product. A missing odd sub-block (a 32-value block
//! format with an odd block count) leaves the high half untouched (masked update). The final
//! reduction is the reference's, so the tile shape never changes a result.
//!
//! Safety: the entry point is `unsafe` and enables AVX-512 F/BW/VL/VNNI (plus the AVX2 set);
//! callers check those at run time (`SimdLevel::vnni()`) and pass rows built for the same
//! length (checked by the dispatcher in `a8_dispatch`).

#![allow(unsafe_op_in_unsafe_fn)]

use std::arch::x86_64::*;

use crate::a8::{BlockA8, UnpackedGroup8};

/// `[lo | hi]` as one 512-bit vector.
#[inline(always)]
unsafe fn join(lo: __m256, hi: __m256) -> __m512 {
    _mm512_castpd_ps(_mm512_insertf64x4::<1>(
        _mm512_castps_pd(_mm512_castps256_ps512(lo)),
        _mm256_castps_pd(hi),
    ))
}

/// `reduce8(lo + hi)` (`a16_avx2::reduce8` of the lane-wise sum of the two 256-bit halves) of
/// each of eight vectors, as one array: the same additions on the same operands as the
/// reference's tree (`a8`: `acc_e + acc_o`, then `(s_l + s_{l+4})`, `(u_0 + u_2)`,
/// `(u_1 + u_3)`, `t_0 + t_1`), eight outputs at once. For `macc`, pass `[m | 0]`: `m + 0`
/// is `m` exactly.
#[inline(always)]
unsafe fn reduce8_x8(v: [__m512; 8]) -> [f32; 8] {
    // z[m] = [s_{2m} | s_{2m+1}], s_k = lo(v_k) + hi(v_k).
    let z: [__m512; 4] = std::array::from_fn(|m| {
        let (a, b) = (v[2 * m], v[2 * m + 1]);
        _mm512_add_ps(
            _mm512_shuffle_f32x4::<0x44>(a, b),
            _mm512_shuffle_f32x4::<0xee>(a, b),
        )
    });
    // u[h] 128-bit lane k = s_{4h+k}[0..4] + s_{4h+k}[4..8].
    let u: [__m512; 2] = std::array::from_fn(|h| {
        let (a, b) = (z[2 * h], z[2 * h + 1]);
        _mm512_add_ps(
            _mm512_shuffle_f32x4::<0x88>(a, b),
            _mm512_shuffle_f32x4::<0xdd>(a, b),
        )
    });
    // Lane k: [u0 + u2, u1 + u3] of s_k, then of s_{k+4}.
    let t = _mm512_add_ps(
        _mm512_shuffle_ps::<0x44>(u[0], u[1]),
        _mm512_shuffle_ps::<0xee>(u[0], u[1]),
    );
    // Lane k: [t0 + t1 of s_k, of s_{k+4}, (repeated)].
    let r = _mm512_add_ps(
        _mm512_shuffle_ps::<0x88>(t, t),
        _mm512_shuffle_ps::<0xdd>(t, t),
    );
    let mut lanes = [0f32; 16];
    _mm512_storeu_ps(lanes.as_mut_ptr(), r);
    std::array::from_fn(|k| lanes[4 * (k % 4) + k / 4])
}

/// `out[rw * RA + ra] = dot(w[rw], a[ra])` for unpacked rows of `nb` 32-value blocks.
// Row and token indices address several arrays at once.
#[allow(clippy::needless_range_loop)]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub unsafe fn dot_unpacked<
    const SPLIT: bool,
    const MINS: bool,
    const RW: usize,
    const RA: usize,
>(
    nb: usize,
    w: [&[UnpackedGroup8]; RW],
    a: [&[BlockA8]; RA],
    out: &mut [f32],
) {
    let groups = a[0].len();
    let bias = _mm512_set1_epi8(-128);
    // Scale lanes of the pair of sub-blocks (j, j + 1), as indices into [s_lo(8) | s_hi(8)]:
    // `base` + j.
    let base = if SPLIT {
        _mm512_setr_epi32(0, 0, 0, 0, 8, 8, 8, 8, 1, 1, 1, 1, 9, 9, 9, 9)
    } else {
        _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1)
    };
    let mut acc = [[_mm512_setzero_ps(); RA]; RW];
    let mut macc = [[_mm256_setzero_ps(); RA]; RW];
    for g in 0..groups {
        let n_sub = (nb - 8 * g).min(8);
        // Weight scales [ws | ws_hi] per row, activation scales [da | da] per token; each
        // pair's lanes are picked from them and multiplied per (row, token): the reference's
        // scale products.
        let mut ws = [_mm512_setzero_ps(); RW];
        let mut dd = [_mm512_setzero_ps(); RA];
        for ra in 0..RA {
            let da = _mm256_loadu_ps(a[ra][g].d.as_ptr());
            dd[ra] = join(da, da);
        }
        for rw in 0..RW {
            let u = &w[rw][g];
            ws[rw] = join(
                _mm256_loadu_ps(u.ws.as_ptr()),
                _mm256_loadu_ps(u.ws_hi.as_ptr()),
            );
            if MINS {
                let wm = _mm256_loadu_ps(u.wm.as_ptr());
                for ra in 0..RA {
                    let da = _mm512_castps512_ps256(dd[ra]);
                    let sum = _mm256_loadu_si256(a[ra][g].sum.as_ptr() as *const __m256i);
                    let fas = _mm256_cvtepi32_ps(sum);
                    macc[rw][ra] = _mm256_fmadd_ps(_mm256_mul_ps(wm, da), fas, macc[rw][ra]);
                }
            }
        }
        // The pair of sub-blocks (j, j + 1); `$last`: j + 1 is missing.
        macro_rules! pair {
            ($j:expr, $last:expr) => {{
                let j = $j;
                let idx = _mm512_add_epi32(base, _mm512_set1_epi32(j as i32));
                let mut av = [_mm512_setzero_si512(); RA];
                let mut dp = [_mm512_setzero_ps(); RA];
                for ra in 0..RA {
                    let q = a[ra][g].qs.as_ptr().add(32 * j) as *const __m512i;
                    av[ra] = _mm512_xor_si512(_mm512_loadu_si512(q), bias);
                    dp[ra] = _mm512_permutexvar_ps(idx, dd[ra]);
                }
                for rw in 0..RW {
                    let u = &w[rw][g];
                    let wv = _mm512_loadu_si512(u.q.as_ptr().add(32 * j) as *const __m512i);
                    let c = u.corr.as_ptr().add(8 * j) as *const __m512i;
                    let wp = _mm512_permutexvar_ps(idx, ws[rw]);
                    for ra in 0..RA {
                        let pr = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(
                            _mm512_loadu_si512(c),
                            av[ra],
                            wv,
                        ));
                        let sv = _mm512_mul_ps(wp, dp[ra]);
                        acc[rw][ra] = if $last {
                            _mm512_mask3_fmadd_ps(sv, pr, acc[rw][ra], 0x00ff)
                        } else {
                            _mm512_fmadd_ps(sv, pr, acc[rw][ra])
                        };
                    }
                }
            }};
        }
        if n_sub == 8 {
            // Whole groups (every k-quant group): four pairs, unrolled.
            pair!(0, false);
            pair!(2, false);
            pair!(4, false);
            pair!(6, false);
        } else if n_sub == 4 {
            // Half a group (rows of 640, gemma-3-270m's width, end with one).
            pair!(0, false);
            pair!(2, false);
        } else {
            let mut j = 0;
            while j < n_sub {
                pair!(j, j + 1 == n_sub);
                j += 2;
            }
        }
    }
    // Eight outputs at a time through the reference's reduction tree, transposed.
    let n = RW * RA;
    let mut c = 0;
    while c < n {
        let r = reduce8_x8(std::array::from_fn(|k| {
            let i = c + k;
            if i < n {
                acc[i / RA][i % RA]
            } else {
                _mm512_setzero_ps()
            }
        }));
        let m = if MINS {
            reduce8_x8(std::array::from_fn(|k| {
                let i = c + k;
                if i < n {
                    join(macc[i / RA][i % RA], _mm256_setzero_ps())
                } else {
                    _mm512_setzero_ps()
                }
            }))
        } else {
            [0f32; 8]
        };
        for k in 0..(n - c).min(8) {
            out[c + k] = if MINS { r[k] - m[k] } else { r[k] };
        }
        c += 8;
    }
}
