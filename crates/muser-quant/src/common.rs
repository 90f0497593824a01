//! Small scalar helpers shared by the format modules.
//!
//! Owns: ggml's `nearest_int` rounding, the 6-bit scale/min packing of Q4_K/Q5_K, f16
//! rounding helpers for quantizers, and the fixed summation order of the float dot products
//! (F32/F16/BF16), which the AVX2 kernels reproduce exactly.

use half::f16;

/// ggml's `nearest_int`: round to nearest, ties to even, by adding 1.5·2^23 and reading the
/// mantissa bits. Exact for |v| <= 4194303; NaN gives 0 (as in ggml).
#[inline]
pub(crate) fn nearest_int(v: f32) -> i32 {
    let val = v + 12_582_912.0f32;
    (val.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// Round to nearest (ties to even) for |v| < 2^22, as an f32 — the same magic-number trick,
/// cheap on baseline x86-64 where `f32::round` is a libm call. Larger magnitudes come back
/// unchanged or off by the rounding of the addition; NaN stays NaN. Used by the weight
/// quantizers, whose inputs to it are bounded by their level counts.
#[inline(always)]
pub(crate) fn round_fast(v: f32) -> f32 {
    (v + 12_582_912.0f32) - 12_582_912.0f32
}

/// The smallest finite f16 that is >= `v` (for `v` >= 0), saturating at `f16::MAX`.
/// Quantizers round super-block scales *up* so the largest sub-block scale still fits its
/// integer range.
#[inline]
pub(crate) fn f16_ceil(v: f32) -> f16 {
    if v.is_nan() || v <= 0.0 {
        return f16::from_f32(0.0);
    }
    if v >= f16::MAX.to_f32() {
        return f16::MAX;
    }
    let h = f16::from_f32(v);
    if h.to_f32() < v {
        // Positive finite below MAX: the next f16 up is the next bit pattern.
        f16::from_bits(h.to_bits() + 1)
    } else {
        h
    }
}

/// Exact f16 → f32 conversion without branches on the common path (vectorizable), for the
/// scalar kernels: the f16 exponent/mantissa bits are placed in an f32 and rescaled by
/// 2^112 (exact, also for subnormals); infinities and NaNs are rebuilt bit for bit
/// (NaN payload kept, quiet bit as given).
#[inline(always)]
pub(crate) fn f16_to_f32(h: half::f16) -> f32 {
    let b = u32::from(h.to_bits());
    let sign = (b & 0x8000) << 16;
    let em = b & 0x7fff;
    let scaled = f32::from_bits(em << 13) * f32::from_bits(0x7780_0000); // × 2^112
    let bits = if em >= 0x7c00 {
        0x7f80_0000 | ((em & 0x3ff) << 13)
    } else {
        scaled.to_bits()
    };
    f32::from_bits(bits | sign)
}

/// Unpack the 12-byte scale field of Q4_K/Q5_K into eight 6-bit scales and eight 6-bit mins.
///
/// Layout (bits): bytes 0..4 hold `sc[0..4]` in bits 0..6 and the top two bits of `sc[4..8]`
/// in bits 6..8; bytes 4..8 the same for the mins; bytes 8..12 hold the low nibbles of
/// `sc[4..8]` (bits 0..4) and of `m[4..8]` (bits 4..8).
#[inline]
pub(crate) fn unpack_k4_scales(q: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    // Four lanes at a time in u32 words (byte j of a word is lane j).
    let w = |i: usize| u32::from_le_bytes([q[i], q[i + 1], q[i + 2], q[i + 3]]);
    let (w0, w1, w2) = (w(0), w(4), w(8));
    let sc_lo = w0 & 0x3f3f_3f3f;
    let m_lo = w1 & 0x3f3f_3f3f;
    let sc_hi = (w2 & 0x0f0f_0f0f) | (((w0 >> 6) & 0x0303_0303) << 4);
    let m_hi = ((w2 >> 4) & 0x0f0f_0f0f) | (((w1 >> 6) & 0x0303_0303) << 4);
    let cat = |lo: u32, hi: u32| {
        let (a, b) = (lo.to_le_bytes(), hi.to_le_bytes());
        [a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]]
    };
    (cat(sc_lo, sc_hi), cat(m_lo, m_hi))
}

/// Inverse of [`unpack_k4_scales`]; inputs must be < 64.
#[inline]
pub(crate) fn pack_k4_scales(sc: &[u8; 8], m: &[u8; 8]) -> [u8; 12] {
    let mut q = [0u8; 12];
    for j in 0..4 {
        q[j] = (sc[j] & 63) | ((sc[j + 4] >> 4) << 6);
        q[j + 4] = (m[j] & 63) | ((m[j + 4] >> 4) << 6);
        q[j + 8] = (sc[j + 4] & 0x0f) | ((m[j + 4] & 0x0f) << 4);
    }
    q
}

/// Number of independent f32 accumulators of the float dot products.
pub(crate) const DOT_LANES: usize = 32;

/// Reduce the 32 accumulators in the fixed tree the AVX2 kernels use:
/// `s[l] = (a[l] + a[8+l]) + (a[16+l] + a[24+l])`, then `t[l] = s[l] + s[l+4]`,
/// `u[l] = t[l] + t[l+2]`, result `u[0] + u[1]`.
#[inline]
pub(crate) fn reduce_lanes(a: &[f32; DOT_LANES]) -> f32 {
    let mut s = [0f32; 8];
    for l in 0..8 {
        s[l] = (a[l] + a[8 + l]) + (a[16 + l] + a[24 + l]);
    }
    let t = [s[0] + s[4], s[1] + s[5], s[2] + s[6], s[3] + s[7]];
    let u = [t[0] + t[2], t[1] + t[3]];
    u[0] + u[1]
}

/// The float dot product's reference order: element `i < n - n % 32` goes to accumulator
/// `i % 32` (`acc = acc + p`), the accumulators are reduced by [`reduce_lanes`], then the
/// tail elements are added one by one. `prod(i)` is the product `x[i] * y[i]` in f32.
#[inline]
pub(crate) fn lane_dot_ref(n: usize, prod: impl Fn(usize) -> f32) -> f32 {
    let mut acc = [0f32; DOT_LANES];
    let main = n - n % DOT_LANES;
    let mut base = 0;
    while base < main {
        for (l, a) in acc.iter_mut().enumerate() {
            *a += prod(base + l);
        }
        base += DOT_LANES;
    }
    let mut r = reduce_lanes(&acc);
    for i in main..n {
        r += prod(i);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_ties_to_even() {
        assert_eq!(nearest_int(0.5), 0);
        assert_eq!(nearest_int(1.5), 2);
        assert_eq!(nearest_int(2.5), 2);
        assert_eq!(nearest_int(-0.5), 0);
        assert_eq!(nearest_int(-1.5), -2);
        assert_eq!(nearest_int(-126.7), -127);
        assert_eq!(nearest_int(f32::NAN), 0);
        for v in [-3.49f32, 3.51, 100.2, -0.2, 2.5, -7.5] {
            assert_eq!(nearest_int(v), v.round_ties_even() as i32);
            assert_eq!(round_fast(v), v.round_ties_even());
        }
    }

    #[test]
    fn f16_to_f32_is_exact_for_all_values() {
        for b in 0..=u16::MAX {
            let h = f16::from_bits(b);
            let (ours, theirs) = (f16_to_f32(h), h.to_f32());
            if h.is_nan() {
                assert!(ours.is_nan());
                assert_eq!(
                    ours.to_bits() & 0x807f_ffff,
                    (u32::from(b & 0x8000) << 16) | (u32::from(b & 0x3ff) << 13)
                );
            } else {
                assert_eq!(ours.to_bits(), theirs.to_bits(), "{b:#x}");
            }
        }
    }

    #[test]
    fn f16_ceil_is_upper_bound() {
        for v in [
            1e-9f32, 1e-7, 0.1, 0.3333, 1.0, 1.0001, 1000.7, 65504.0, 1e9,
        ] {
            let h = f16_ceil(v);
            assert!(h.is_finite());
            assert!(h.to_f32() >= v.min(65504.0), "{v}");
        }
        assert_eq!(f16_ceil(0.0).to_f32(), 0.0);
        assert_eq!(f16_ceil(-1.0).to_f32(), 0.0);
    }

    #[test]
    fn k4_scales_round_trip() {
        let mut sc = [0u8; 8];
        let mut m = [0u8; 8];
        for seed in 0..64u8 {
            for j in 0..8 {
                sc[j] = ((seed as usize * 7 + j * 13) % 64) as u8;
                m[j] = ((seed as usize * 11 + j * 29) % 64) as u8;
            }
            let packed = pack_k4_scales(&sc, &m);
            assert_eq!(unpack_k4_scales(&packed), (sc, m));
            // Against the byte-wise definition, on arbitrary bytes.
            let q: [u8; 12] = std::array::from_fn(|i| (seed as usize * 97 + i * 61) as u8);
            let (s2, m2) = unpack_k4_scales(&q);
            for j in 0..4 {
                assert_eq!(s2[j], q[j] & 63);
                assert_eq!(m2[j], q[j + 4] & 63);
                assert_eq!(s2[j + 4], (q[j + 8] & 0x0f) | ((q[j] >> 6) << 4));
                assert_eq!(m2[j + 4], (q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
            }
        }
    }
}
