//! AVX-512 VNNI tiles for the A8 prefill products: `RW` unpacked weight rows (`a8_unpack`,
//! interleaved order) × `RA` activation rows (`BlockA8::qs_il`).
//!
//! Bit-identical to the references in `a8`. In the interleaved order each 64-byte row `k` of a
//! group holds values `4k..4k+4` of every half sub-block, in the 32-bit lane of that half
//! (lane `L = j + 8h`). Per (weight row, activation row) and group, four chained `vpdpbusd`
//! give the sixteen exact lane partials: the weights go in offset by +128 (unsigned bytes, as
//! stored), the activations as signed bytes, and the chain starts at the token's stored
//! correction `lcorr = -128 · Σ a` per lane, so the result is `Σ w·a` exactly (|partial| <
//! 2^24, no overflow in i32). Then one fused multiply-add per lane with the reference's scale
//! product `[ws · da | ws_hi · da]`. Missing sub-blocks of a partial group are zero bytes with
//! zero scales: they add `+0` to an accumulator that is never `-0`, so nothing. The final
//! reduction is the reference's tree (eight outputs at once), so the tile shape never changes
//! a result.
//!
//! Safety: the entry point is `unsafe` and enables AVX-512 F/BW/VL/VNNI (plus the AVX2 set);
//! callers check those at run time (`SimdLevel::vnni()`) and pass rows built for the same
//! length (checked by the dispatcher in `a8_dispatch`).

#![allow(unsafe_op_in_unsafe_fn)]

use std::arch::x86_64::*;

use crate::a8::{BlockA8, UnpackedGroup8};

/// `[lo | hi]` as one 512-bit vector.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
#[inline]
pub(crate) unsafe fn join(lo: __m256, hi: __m256) -> __m512 {
    _mm512_castpd_ps(_mm512_insertf64x4::<1>(
        _mm512_castps_pd(_mm512_castps256_ps512(lo)),
        _mm256_castps_pd(hi),
    ))
}

/// Tokens `2p` and `2p + 1` of group `g` for the min terms: `[da | da']` and the quant sums
/// as floats, `[asum | asum']` (zeros for a missing odd token).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
#[inline]
pub(crate) unsafe fn token_pair<const RA: usize>(
    a: &[&[BlockA8]; RA],
    g: usize,
    p: usize,
) -> (__m512, __m512) {
    let (r0, r1) = (2 * p, 2 * p + 1);
    let d0 = _mm256_loadu_ps(a[r0][g].d.as_ptr());
    let s0 = _mm256_loadu_si256(a[r0][g].sum.as_ptr() as *const __m256i);
    let (d1, s1) = if r1 < RA {
        (
            _mm256_loadu_ps(a[r1][g].d.as_ptr()),
            _mm256_loadu_si256(a[r1][g].sum.as_ptr() as *const __m256i),
        )
    } else {
        (_mm256_setzero_ps(), _mm256_setzero_si256())
    };
    let s2 = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(s0), s1);
    (join(d0, d1), _mm512_cvtepi32_ps(s2))
}

/// Half `h` (0: lanes 0–7, 1: lanes 8–15) of `v`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
#[inline]
pub(crate) unsafe fn half(v: __m512, h: usize) -> __m256 {
    if h == 0 {
        _mm512_castps512_ps256(v)
    } else {
        _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)))
    }
}

/// `reduce8(lo + hi)` (`a16_avx2::reduce8` of the lane-wise sum of the two 256-bit halves) of
/// each of eight vectors, as one array: the same additions on the same operands as the
/// reference's tree (`a8`: `acc_e + acc_o`, then `(s_l + s_{l+4})`, `(u_0 + u_2)`,
/// `(u_1 + u_3)`, `t_0 + t_1`), eight outputs at once. For `macc`, pass `[m | 0]`: `m + 0`
/// is `m` exactly.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
#[inline]
unsafe fn reduce8_x8(v: [__m512; 8]) -> [f32; 8] {
    // z[m] = [s_{2m} | s_{2m+1}], s_k = lo(v_k) + hi(v_k).
    // (Loops, not `array::from_fn`: a closure would not inherit the target features.)
    let mut z = [_mm512_setzero_ps(); 4];
    for m in 0..4 {
        let (a, b) = (v[2 * m], v[2 * m + 1]);
        z[m] = _mm512_add_ps(
            _mm512_shuffle_f32x4::<0x44>(a, b),
            _mm512_shuffle_f32x4::<0xee>(a, b),
        );
    }
    // u[h] 128-bit lane k = s_{4h+k}[0..4] + s_{4h+k}[4..8].
    let mut u = [_mm512_setzero_ps(); 2];
    for h in 0..2 {
        let (a, b) = (z[2 * h], z[2 * h + 1]);
        u[h] = _mm512_add_ps(
            _mm512_shuffle_f32x4::<0x88>(a, b),
            _mm512_shuffle_f32x4::<0xdd>(a, b),
        );
    }
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

/// `out[rw * stride + ra] = dot(w[rw], a[ra])` for unpacked rows.
// Row and token indices address several arrays at once.
#[allow(clippy::needless_range_loop)]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub unsafe fn dot_unpacked<const MINS: bool, const RW: usize, const RA: usize>(
    w: [&[UnpackedGroup8]; RW],
    a: [&[BlockA8]; RA],
    out: &mut [f32],
    stride: usize,
) {
    let groups = a[0].len();
    let mut acc = [[_mm512_setzero_ps(); RA]; RW];
    for g in 0..groups {
        let mut dd = [_mm512_setzero_ps(); RA];
        for ra in 0..RA {
            let da = _mm256_loadu_ps(a[ra][g].d.as_ptr());
            dd[ra] = join(da, da);
        }
        // Every (row, token) chain of the group at once, 64 bytes of the group at a time: each
        // weight and activation vector is loaded once per group. (Row by row, LLVM held the
        // sixteen reused activation vectors in registers and spilled the accumulators: `a8_tiles`
        // 4 × 4, 512 tokens, small ffn_up 36–40 → 46–49 GMAC/s, ffn_down 53–56 → 61–63,
        // alternating binaries. Two tokens at a time was no better.)
        // (Loops, not `array::from_fn`: a closure would not inherit the target features.)
        let mut p = [[_mm512_setzero_si512(); RA]; RW];
        for ra in 0..RA {
            let c = _mm512_loadu_si512(a[ra][g].lcorr.as_ptr() as *const __m512i);
            for rw in 0..RW {
                p[rw][ra] = c;
            }
        }
        for k in 0..4 {
            let mut wv = [_mm512_setzero_si512(); RW];
            for rw in 0..RW {
                wv[rw] = _mm512_loadu_si512(w[rw][g].q.as_ptr().add(64 * k) as *const __m512i);
            }
            for ra in 0..RA {
                let q = a[ra][g].qs_il.as_ptr().add(64 * k) as *const __m512i;
                let av = _mm512_loadu_si512(q);
                for rw in 0..RW {
                    p[rw][ra] = _mm512_dpbusd_epi32(p[rw][ra], wv[rw], av);
                }
            }
        }
        for rw in 0..RW {
            let u = &w[rw][g];
            let ws = join(
                _mm256_loadu_ps(u.ws.as_ptr()),
                _mm256_loadu_ps(u.ws_hi.as_ptr()),
            );
            for ra in 0..RA {
                let s = _mm512_mul_ps(ws, dd[ra]);
                acc[rw][ra] = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(p[rw][ra]), acc[rw][ra]);
            }
        }
    }
    // The min terms in a pass of their own (the same chain per output, group by group; out of
    // the main loop they leave its accumulators in registers). Tokens 2p and 2p + 1 share a
    // 512-bit vector (`[2p | 2p + 1]`; a missing odd token's half stays unused).
    let mut macc = [[_mm512_setzero_ps(); 2]; RW];
    if MINS {
        for g in 0..groups {
            for p in 0..RA.div_ceil(2) {
                let (da2, fas2) = token_pair(&a, g, p);
                for rw in 0..RW {
                    let wm = _mm256_loadu_ps(w[rw][g].wm.as_ptr());
                    let m = _mm512_mul_ps(join(wm, wm), da2);
                    macc[rw][p] = _mm512_fmadd_ps(m, fas2, macc[rw][p]);
                }
            }
        }
    }
    let mut m = [[_mm256_setzero_ps(); RA]; RW];
    if MINS {
        for rw in 0..RW {
            for ra in 0..RA {
                m[rw][ra] = half(macc[rw][ra / 2], ra % 2);
            }
        }
    }
    store_tile(acc, MINS.then_some(m), out, stride);
}

/// The outputs of a tile of four rows × `RA` (≤ 4) tokens in one pass: per token, the four
/// rows' vectors become one 512-bit vector of their 128-bit partial sums (`u` = lanes 0–3 +
/// lanes 4–7 of `lo + hi`, row `r` in 128-bit lane `r`); a 4 × 4 transpose inside each 128-bit
/// lane then puts `u_k` of every token side by side, and `(u_0 + u_2) + (u_1 + u_3)` finishes the
/// reference's tree for all sixteen outputs at once. The min terms go the same way (without the
/// `lo + hi` step); each row's `RA` results are one (masked) 128-bit store.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
#[inline]
unsafe fn store_tile_4rows<const RA: usize>(
    acc: [[__m512; RA]; 4],
    macc: Option<[[__m256; RA]; 4]>,
    out: &mut [f32],
    stride: usize,
) {
    // The reference tree of the 8-lane vectors given, two per 512-bit vector (rows 0, 1 and
    // 2, 3): sixteen (or fewer) sums, row `r` in 128-bit lane `r`, token `e` in element `e`.
    // (Intrinsics only in functions with the target features: closures and plain inline
    // helpers do not inherit them.)
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    #[inline]
    unsafe fn tree(z01: [__m512; 4], z23: [__m512; 4], n: usize) -> __m512 {
        let mut u = [_mm512_setzero_ps(); 4];
        for e in 0..n {
            u[e] = _mm512_add_ps(
                _mm512_shuffle_f32x4::<0x88>(z01[e], z23[e]),
                _mm512_shuffle_f32x4::<0xdd>(z01[e], z23[e]),
            );
        }
        let t0 = _mm512_unpacklo_ps(u[0], u[1]);
        let t1 = _mm512_unpackhi_ps(u[0], u[1]);
        let t2 = _mm512_unpacklo_ps(u[2], u[3]);
        let t3 = _mm512_unpackhi_ps(u[2], u[3]);
        let (t0, t1) = (_mm512_castps_pd(t0), _mm512_castps_pd(t1));
        let (t2, t3) = (_mm512_castps_pd(t2), _mm512_castps_pd(t3));
        let k0 = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
        let k1 = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
        let k2 = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
        let k3 = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
        _mm512_add_ps(_mm512_add_ps(k0, k2), _mm512_add_ps(k1, k3))
    }
    let (mut z01, mut z23) = ([_mm512_setzero_ps(); 4], [_mm512_setzero_ps(); 4]);
    for e in 0..RA {
        // [lo + hi of row 0 | of row 1], [… row 2 | row 3].
        let (a0, a1, a2, a3) = (acc[0][e], acc[1][e], acc[2][e], acc[3][e]);
        z01[e] = _mm512_add_ps(
            _mm512_shuffle_f32x4::<0x44>(a0, a1),
            _mm512_shuffle_f32x4::<0xee>(a0, a1),
        );
        z23[e] = _mm512_add_ps(
            _mm512_shuffle_f32x4::<0x44>(a2, a3),
            _mm512_shuffle_f32x4::<0xee>(a2, a3),
        );
    }
    let mut r = tree(z01, z23, RA);
    if let Some(m) = macc {
        for e in 0..RA {
            z01[e] = join(m[0][e], m[1][e]);
            z23[e] = join(m[2][e], m[3][e]);
        }
        r = _mm512_sub_ps(r, tree(z01, z23, RA));
    }
    let mut lanes = [0f32; 16];
    _mm512_storeu_ps(lanes.as_mut_ptr(), r);
    for rw in 0..4 {
        out[rw * stride..rw * stride + RA].copy_from_slice(&lanes[4 * rw..4 * rw + RA]);
    }
}

/// `out[rw * stride + ra] = reduce8(lo + hi of acc[rw][ra]) − reduce8(macc[rw][ra])` (no min
/// term without `macc`): eight outputs at a time through the reference's reduction tree,
/// transposed (`reduce8_x8`). The accumulators come by value: a reference would let them escape
/// into this (not inlined) call and keep the callers' loops updating them in memory.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
#[inline]
pub(crate) unsafe fn store_tile<const RW: usize, const RA: usize>(
    acc: [[__m512; RA]; RW],
    macc: Option<[[__m256; RA]; RW]>,
    out: &mut [f32],
    stride: usize,
) {
    if RW == 4 && RA <= 4 {
        return store_tile_4rows::<RA>(
            std::array::from_fn(|r| acc[r % RW]),
            macc.map(|m| std::array::from_fn(|r| m[r % RW])),
            out,
            stride,
        );
    }
    let n = RW * RA;
    let mut c = 0;
    while c < n {
        // (Loops, not `array::from_fn`: a closure would not inherit the target features.)
        let mut v = [_mm512_setzero_ps(); 8];
        let mut mv = [_mm512_setzero_ps(); 8];
        for k in 0..(n - c).min(8) {
            let i = c + k;
            v[k] = acc[i / RA][i % RA];
            if let Some(macc) = macc {
                mv[k] = join(macc[i / RA][i % RA], _mm256_setzero_ps());
            }
        }
        let r = reduce8_x8(v);
        let m = if macc.is_some() {
            reduce8_x8(mv)
        } else {
            [0f32; 8]
        };
        for k in 0..(n - c).min(8) {
            let i = c + k;
            out[(i / RA) * stride + i % RA] = if macc.is_some() { r[k] - m[k] } else { r[k] };
        }
        c += 8;
    }
}
