//! The f16 route's activations and arithmetic, host side: what `act_h16` writes
//! ([`act_reference`], bit for bit) and the f64 value of what `mvh_*` computes from a Q4H or Q6H
//! matrix ([`mvh_reference_q4h`], [`mvh_reference_q6h`]: the same f16 operands, summed exactly,
//! so a kernel differs from them by its f32 accumulation only). Device side: matvec_h16.cu;
//! weights: `q4h`, `q6h`.

use half::f16;

use crate::error::CudaError;
use crate::{q4h, q6h};

/// A token row in the f16 route's format (`act_h16`'s outputs for one token).
pub struct H16Row {
    /// `[k]` f16 bits in fragment order ([`position`]).
    pub xh: Vec<u16>,
    /// `[k/32]` f16 bits: each 32-value sub-block's sum.
    pub xsum: Vec<u16>,
    /// `[k/16]` f16 bits: each 16-value sub-block's sum.
    pub xsum16: Vec<u16>,
    /// The power of two the row was multiplied by, inverted.
    pub inv: f32,
}

/// The value index (within the row) stored at fragment position `o`.
pub fn position(o: usize) -> usize {
    let w = o & 63;
    let (t4, i, e2) = (w >> 4, (w >> 2) & 3, w & 3);
    (o & !63) + 16 * i + 2 * t4 + (e2 & 1) + 8 * (e2 >> 1)
}

/// ⌊log2 |v|⌋ of a finite nonzero f32 (subnormals included): CUDA's `ilogbf`.
fn ilogb(v: f32) -> i32 {
    let b = v.to_bits() & 0x7fff_ffff;
    let e = (b >> 23) as i32;
    if e == 0 {
        (31 - (b & 0x7f_ffff).leading_zeros() as i32) - 149
    } else {
        e - 127
    }
}

/// 2^e as f32 for −149 ≤ e ≤ 127 (exact).
pub(crate) fn pow2(e: i32) -> f32 {
    if e >= -126 {
        f32::from_bits(((e + 127) as u32) << 23)
    } else {
        f32::from_bits(1 << (e + 149))
    }
}

/// The row's power of two (act_h16.cuh `h16_shift`) for its largest magnitude `amax` (NaNs
/// skipped, as `fmaxf` does): 9 − ⌊log2 amax⌋ capped at 127, 0 for a zero or non-finite `amax`.
pub fn shift_of(amax: f32) -> i32 {
    if amax > 0.0 && amax.is_finite() {
        (9 - ilogb(amax)).min(127)
    } else {
        0
    }
}

/// `act_h16` for one row of `k` values (`k` a positive multiple of 64).
pub fn act_reference(x: &[f32]) -> Result<H16Row, CudaError> {
    let k = x.len();
    if k == 0 || !k.is_multiple_of(64) {
        return Err(CudaError::Invalid(format!(
            "f16 activations: a row of {k} values (a positive multiple of 64)"
        )));
    }
    let sh = shift_of(x.iter().fold(0f32, |m, v| m.max(v.abs())));
    let scale = pow2(sh);
    let h = |v: f32| f16::from_f32(v * scale);
    let xh = (0..k).map(|o| h(x[position(o)]).to_bits()).collect();
    let sum = |b: &[f32]| {
        let s = b.iter().fold(0f32, |s, &v| s + h(v).to_f32());
        f16::from_f32(s).to_bits()
    };
    Ok(H16Row {
        xh,
        xsum: x.chunks(32).map(sum).collect(),
        xsum16: x.chunks(16).map(sum).collect(),
        inv: pow2(-sh),
    })
}

/// The f64 value of `mvh_q4h_*`'s arithmetic for one token: `(Σ_k f16(q·dsc)·x'_k + Σ_b
/// ndm_b·xsum_b) · inv · 2^-exp` with every product and sum exact, and the same with absolute
/// values (the scale of the f32 accumulation error). `m` from [`q4h::logical`].
pub fn mvh_reference_q4h(
    m: &q4h::Logical,
    exp: i32,
    n_out: usize,
    row: &H16Row,
) -> (Vec<f64>, Vec<f64>) {
    let k = row.xh.len();
    exact_sums(
        row,
        exp,
        n_out,
        |r, i| (m.q[r * k + i], m.dsc[r * (k / 32) + i / 32]),
        |r| {
            row.xsum
                .iter()
                .enumerate()
                .map(|(b, &xs)| m.ndm[r * (k / 32) + b].to_f64() * f64::from(f16::from_bits(xs)))
                .collect()
        },
    )
}

/// [`mvh_reference_q4h`] for `mvh_q6h_*`: weights `f16(q·dsc)` with q in 0..=63, and the −32
/// offset as `f16(−32·dsc)` (exact) times each 16-value sum. `m` from [`q6h::logical`].
pub fn mvh_reference_q6h(
    m: &q6h::Logical,
    exp: i32,
    n_out: usize,
    row: &H16Row,
) -> (Vec<f64>, Vec<f64>) {
    let k = row.xh.len();
    exact_sums(
        row,
        exp,
        n_out,
        |r, i| (m.q[r * k + i], m.dsc[r * (k / 16) + i / 16]),
        |r| {
            row.xsum16
                .iter()
                .enumerate()
                .map(|(b, &xs)| {
                    -32.0 * m.dsc[r * (k / 16) + b].to_f64() * f64::from(f16::from_bits(xs))
                })
                .collect()
        },
    )
}

/// `Σ_k f16(q·dsc)·x'_k` + the min terms of each row, exactly, times `inv · 2^-exp`; and the
/// same over absolute values.
fn exact_sums(
    row: &H16Row,
    exp: i32,
    n_out: usize,
    weight: impl Fn(usize, usize) -> (u8, f16),
    mins: impl Fn(usize) -> Vec<f64>,
) -> (Vec<f64>, Vec<f64>) {
    let k = row.xh.len();
    let mut x = vec![0f64; k];
    for (o, &b) in row.xh.iter().enumerate() {
        x[position(o)] = f64::from(f16::from_bits(b));
    }
    let unscale = f64::from(row.inv) * 2f64.powi(-exp);
    let (mut y, mut a) = (vec![0f64; n_out], vec![0f64; n_out]);
    for r in 0..n_out {
        let (mut s, mut abs) = (0f64, 0f64);
        for (i, &xv) in x.iter().enumerate() {
            let (q, dsc) = weight(r, i);
            let w = f16::from_f32(f32::from(q) * dsc.to_f32()).to_f64();
            s += w * xv;
            abs += (w * xv).abs();
        }
        for p in mins(r) {
            s += p;
            abs += p.abs();
        }
        y[r] = s * unscale;
        a[r] = abs * unscale;
    }
    (y, a)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value index appears once in a chunk's positions, and a lane's 32 bytes are its
    /// four tiles' B fragments (values 2·t4 + {0, 1, 8, 9} of each 16).
    #[test]
    fn positions_are_a_permutation_in_fragment_order() {
        let mut seen = [false; 128];
        for o in 0..128 {
            let k = position(o);
            assert!(!seen[k], "value {k} twice");
            seen[k] = true;
            let (t4, i, e2) = ((o % 64) / 16, (o / 4) % 4, o % 4);
            assert_eq!(k % 16, 2 * t4 + [0, 1, 8, 9][e2], "position {o}");
            assert_eq!(k / 16 % 4, i);
        }
    }

    /// The row's power of two puts its largest magnitude in [512, 1024) (subnormal inputs
    /// included), the inverse undoes it exactly, and the sums are the f16 values' sums.
    #[test]
    fn the_row_scale_and_sums() {
        for (amax, want_sh) in [(1.0f32, 9), (1000.0, 0), (3.0e-40, 127), (1.5e30, -91)] {
            let mut x = vec![0f32; 64];
            x[5] = -amax;
            x[9] = amax / 3.0;
            let r = act_reference(&x).expect("row");
            assert_eq!(r.inv, pow2(-want_sh), "amax {amax}");
            let scale = pow2(want_sh);
            let big =
                r.xh.iter()
                    .map(|&b| f16::from_bits(b).to_f32().abs())
                    .fold(0f32, f32::max);
            assert_eq!(big, f16::from_f32(amax * scale).to_f32(), "amax {amax}");
            if want_sh < 127 {
                assert!((512.0..1024.0).contains(&big), "amax {amax}: {big}");
            }
            let s0 = x[..32]
                .iter()
                .fold(0f32, |s, &v| s + f16::from_f32(v * scale).to_f32());
            assert_eq!(f16::from_bits(r.xsum[0]), f16::from_f32(s0), "amax {amax}");
            let s16 = x[..16]
                .iter()
                .fold(0f32, |s, &v| s + f16::from_f32(v * scale).to_f32());
            assert_eq!(
                f16::from_bits(r.xsum16[0]),
                f16::from_f32(s16),
                "amax {amax}"
            );
        }
        assert!(act_reference(&[1.0; 48]).is_err());
        assert_eq!(ilogb(pow2(-149)), -149);
        assert_eq!(ilogb(6.0), 2);
    }
}
