//! Weight rows unpacked for the A8 prefill path: when several tokens multiply the same weight
//! rows, each row is unpacked once — integer weights offset-corrected, then offset by +128 as
//! unsigned bytes, in the interleaved order of the activations' `qs_il` (`a8::il_index`), the
//! half sub-block scales exactly as the packed kernels compute them — and the AVX2 and AVX-512
//! VNNI tiles (`a8_avx2::dot_unpacked`,
//! `a8_avx512::dot_unpacked`) run on them. The engine's path unpacks with AVX2
//! (`a8_avx2::unpack_*`); [`unpack_row`] here is the scalar unpacking (A16's, narrowed) those
//! are tested equal to. Results are bit-identical to the packed path and to the references in
//! `a8` (`a8_tests`).

use bytemuck::{Pod, Zeroable};
use muser_gguf::GgmlType;

use crate::a16::{self, UnpackedGroup};
use crate::a8::GROUP;
use crate::QuantError;

/// One group (256 values) of a weight row unpacked for the A8 prefill tiles. 352 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct UnpackedGroup8 {
    /// Scale of each sub-block's first half (lanes 0–7); Q8_0/Q5_0: the block's `d`.
    pub ws: [f32; 8],
    /// Scale of each sub-block's second half (lanes 8–15): Q6_K's second scale, `ws` otherwise.
    pub ws_hi: [f32; 8],
    /// Q4_K/Q5_K: `dmin · m_j`.
    pub wm: [f32; 8],
    /// Weights, offset-corrected (all formats' lie in -128..=127) and then offset by +128:
    /// `(w as u8) ^ 0x80`, unsigned as `vpdpbusd` takes them (the activations' `lcorr` takes
    /// the offset back out), in the interleaved order of `BlockA8::qs_il` (`a8::il_index`).
    pub q: [u8; GROUP],
}

const _: () = assert!(std::mem::size_of::<UnpackedGroup8>() == 352);

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
        o.ws_hi = if ty == GgmlType::Q6_K { s.ws_hi } else { s.ws };
        o.wm = s.wm;
        for (i, &v) in s.q.iter().enumerate() {
            // Every format's offset-corrected weights lie in -128..=127.
            o.q[crate::a8::il_index(i)] = (v as u8) ^ 0x80;
        }
    }
    Ok(())
}
