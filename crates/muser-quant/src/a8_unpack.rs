//! Weight rows unpacked for the A8 prefill path: when several tokens multiply the same weight
//! rows, each row is unpacked once — integer weights offset-corrected as i8 (unsigned for
//! Q4_K/Q5_K), the sub-block scales exactly as the packed kernels compute them — and the AVX2
//! tiles (`a8_avx2::dot_unpacked`) run on them. The engine's path unpacks with AVX2
//! (`a8_avx2::unpack_*`); [`unpack_row`] here is the scalar unpacking (A16's, narrowed) those
//! are tested equal to. Results are bit-identical to the packed path and to the references in
//! `a8` (`a8_tests`).

use bytemuck::{Pod, Zeroable};
use muser_gguf::GgmlType;

use crate::a16::{self, UnpackedGroup};
use crate::a8::GROUP;
use crate::QuantError;

/// One group (256 values) of a weight row unpacked for the A8 prefill tiles. 608 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct UnpackedGroup8 {
    /// Weight scale of each sub-block (Q6_K: of its first half); Q8_0/Q5_0: the block's `d`.
    pub ws: [f32; 8],
    /// Q6_K: scale of each sub-block's second half.
    pub ws_hi: [f32; 8],
    /// Q4_K/Q5_K: `dmin · m_j`.
    pub wm: [f32; 8],
    /// `-128 · Σ_{i<4} q[4l + i]` for each lane `l` (sub-block `j` at `8j..8j+8`): the
    /// correction that turns a product with activations offset by +128 (unsigned, as
    /// `vpdpbusd` takes them) back into the exact lane partials (`a8_avx512`).
    pub corr: [i32; GROUP / 4],
    /// Weights (offset-corrected, all formats fit i8), sub-block `j` at `32j..32j+32`.
    pub q: [i8; GROUP],
}

const _: () = assert!(std::mem::size_of::<UnpackedGroup8>() == 608);

/// Fill `u.corr` from `u.q` (see [`UnpackedGroup8::corr`]).
pub(crate) fn fill_corr(u: &mut UnpackedGroup8) {
    for (c, q) in u.corr.iter_mut().zip(u.q.chunks_exact(4)) {
        *c = -128 * q.iter().map(|&v| i32::from(v)).sum::<i32>();
    }
}

/// Unpack one weight row of `ty` into `out` (`ceil(n / 256)` groups), using `scratch` (the same
/// number of A16 groups) for the wide form.
pub fn unpack_row(
    ty: GgmlType,
    w: &[u8],
    scratch: &mut [UnpackedGroup],
    out: &mut [UnpackedGroup8],
) -> Result<(), QuantError> {
    if scratch.len() != out.len() {
        return Err(QuantError::Length {
            ty,
            what: "A8 unpack scratch groups",
            expected: out.len(),
            got: scratch.len(),
        });
    }
    a16::unpack_row(ty, w, scratch)?;
    for (o, s) in out.iter_mut().zip(scratch.iter()) {
        o.ws = s.ws;
        o.ws_hi = s.ws_hi;
        o.wm = s.wm;
        for (d, &v) in o.q.iter_mut().zip(s.q.iter()) {
            // Every format's offset-corrected weights lie in -128..=127.
            *d = v as i8;
        }
        fill_corr(o);
    }
    Ok(())
}
