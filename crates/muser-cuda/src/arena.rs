//! The device weight arena: one allocation holding every weight tensor, uploaded once from the
//! mapped file; tensors are addressed as (offset, length) views. Offsets are 256-byte aligned.

use std::time::Instant;

use crate::device::{DeviceBuffer, Gpu};
use crate::error::CudaError;

/// Alignment of every tensor in the arena.
pub const ALIGN: usize = 256;

/// A tensor's place in the arena.
#[derive(Clone, Copy, Debug)]
pub struct ArenaSlice {
    pub offset: usize,
    pub len: usize,
}

/// The host bytes of one arena part: borrowed (the mapped file, norm vectors), or made just
/// before its upload and dropped right after (a repack: host memory holds one at a time).
pub enum Part<'a> {
    Bytes(&'a [u8]),
    Make(Box<dyn Fn() -> Result<Vec<u8>, CudaError> + 'a>),
}

/// Plans offsets, then uploads.
pub struct Arena {
    buf: DeviceBuffer,
    pub upload_secs: f64,
}

/// Bytes kept free after the last tensor: kernels may read a few bytes past a 2-byte-aligned
/// 16-byte run (aligned word loads, see formats_a16.cuh).
pub const SLACK: usize = 256;

/// Offsets for a list of tensor lengths (and the total, slack included), in order.
pub fn plan(lens: &[usize]) -> (Vec<ArenaSlice>, usize) {
    let mut off = 0usize;
    let slices = lens
        .iter()
        .map(|&len| {
            let s = ArenaSlice { offset: off, len };
            off = (off + len).div_ceil(ALIGN) * ALIGN;
            s
        })
        .collect();
    (slices, off + SLACK)
}

impl Arena {
    /// Allocate `total` bytes and upload `parts` (slice, host bytes) in chunks of 64 MiB,
    /// calling `progress(done, total)` after each chunk.
    pub fn upload(
        gpu: &Gpu,
        total: usize,
        parts: &[(ArenaSlice, Part<'_>)],
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Arena, CudaError> {
        let buf = gpu.alloc(total, "weight arena")?;
        let t0 = Instant::now();
        const CHUNK: usize = 64 << 20;
        let all: u64 = parts.iter().map(|(s, _)| s.len as u64).sum();
        let mut done = 0u64;
        for (s, part) in parts {
            let made;
            let bytes: &[u8] = match part {
                Part::Bytes(b) => b,
                Part::Make(f) => {
                    made = f()?;
                    &made
                }
            };
            if bytes.len() != s.len || s.offset + s.len > total {
                return Err(CudaError::Invalid(format!(
                    "arena part at {} of {} bytes does not fit its plan",
                    s.offset,
                    bytes.len()
                )));
            }
            for (i, c) in bytes.chunks(CHUNK).enumerate() {
                gpu.upload(buf.at(s.offset + i * CHUNK), c)?;
                done += c.len() as u64;
                progress(done, all);
            }
        }
        gpu.wait("weight upload")?;
        Ok(Arena {
            buf,
            upload_secs: t0.elapsed().as_secs_f64(),
        })
    }

    /// Device address of a tensor.
    pub fn ptr(&self, s: ArenaSlice) -> u64 {
        self.buf.at(s.offset)
    }

    pub fn bytes(&self) -> usize {
        self.buf.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_aligns_every_tensor() {
        let (s, total) = plan(&[10, 256, 1, 0, 300]);
        let offs: Vec<usize> = s.iter().map(|s| s.offset).collect();
        assert_eq!(offs, vec![0, 256, 512, 768, 768]);
        assert_eq!(total, 1280 + SLACK);
        assert!(s.iter().all(|s| s.offset % ALIGN == 0));
    }
}
