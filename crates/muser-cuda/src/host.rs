//! Page-locked host staging (`PinnedHost`): the step's inputs (token ids, step words) and its
//! logit rows cross PCIe through these instead of pageable memory, so the copies are real DMA
//! in stream order — queued behind the decode graph with no host round trip and no driver
//! staging copy — and the caller reads the logits where the copy left them.
//!
//! Invariants: a `PinnedHost` is `u32`-aligned page-locked memory of a fixed length, freed
//! once on drop with its context bound; it is written by the host only while no copy from or
//! into it is queued (the engine waits for the stream at the end of every step before it
//! touches the staging again).

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{result, CudaContext};

use crate::device::{Gpu, Stream};
use crate::error::{drv, CudaError};

/// `CU_MEMHOSTALLOC_PORTABLE`: the pages count as pinned for every context.
const PORTABLE: u32 = 0x01;

/// A page-locked host buffer of `len` 4-byte words (read as `f32` or `u32`).
pub struct PinnedHost {
    ptr: *mut c_void,
    len: usize,
    ctx: Arc<CudaContext>,
}

// SAFETY: the buffer is plain host memory owned by this value; access goes through `&self` /
// `&mut self`, so Rust's borrow rules order it like a `Vec<u32>`'s.
unsafe impl Send for PinnedHost {}

impl PinnedHost {
    /// Allocate `len` words of page-locked host memory for `gpu`'s context.
    pub fn new(gpu: &Gpu, len: usize, what: &str) -> Result<PinnedHost, CudaError> {
        gpu.bind()?;
        let bytes = len.max(1) * 4;
        // SAFETY: context bound above; the pointer is owned by the returned value and freed
        // once in Drop.
        let ptr = unsafe { result::malloc_host(bytes, PORTABLE) }.map_err(|e| {
            CudaError::Invalid(format!(
                "cuMemHostAlloc of {bytes} bytes for {what} failed: {e:?}"
            ))
        })?;
        if ptr.is_null() || !(ptr as usize).is_multiple_of(4) {
            return Err(CudaError::Invalid(format!(
                "cuMemHostAlloc for {what} returned an unaligned pointer"
            )));
        }
        Ok(PinnedHost {
            ptr,
            len,
            ctx: Arc::clone(gpu.ctx()),
        })
    }

    /// Capacity in 4-byte words.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_f32(&self) -> &[f32] {
        // SAFETY: `ptr` is 4-aligned, valid for `len` words for the life of `self`, and every
        // bit pattern is an f32; no copy writes into it while `&self` is held (module invariant).
        unsafe { std::slice::from_raw_parts(self.ptr as *const f32, self.len) }
    }

    pub fn as_u32_mut(&mut self) -> &mut [u32] {
        // SAFETY: as `as_f32`, and `&mut self` makes this the only view.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut u32, self.len) }
    }

    /// Queue a copy of words `at..at + words` of this buffer to device address `dst` on
    /// `stream` (asynchronous: the caller waits for the stream before writing here again).
    pub fn upload(
        &self,
        stream: Stream,
        dst: u64,
        at: usize,
        words: usize,
    ) -> Result<(), CudaError> {
        check_range(at, words, self.len)?;
        // SAFETY: the range is inside this page-locked buffer (checked); the caller passes a
        // device range of at least `words` words, and keeps the buffer unwritten and alive
        // until the stream has passed the copy (module invariant).
        let src = unsafe { std::slice::from_raw_parts((self.ptr as *const u32).add(at), words) };
        // SAFETY: as above; the stream belongs to this buffer's context.
        unsafe { result::memcpy_htod_async(dst, src, stream.raw()) }
            .map_err(drv("cuMemcpyHtoDAsync"))
    }

    /// Queue a copy of `words` words from device address `src` into this buffer at word `at`
    /// on `stream` (asynchronous: read the words only after waiting for the stream).
    pub fn download(
        &mut self,
        stream: Stream,
        src: u64,
        at: usize,
        words: usize,
    ) -> Result<(), CudaError> {
        check_range(at, words, self.len)?;
        // SAFETY: the range is inside this page-locked buffer (checked); the caller passes a
        // device range of at least `words` words and reads here only after the stream is idle.
        let dst = unsafe { std::slice::from_raw_parts_mut((self.ptr as *mut u32).add(at), words) };
        // SAFETY: as above; the stream belongs to this buffer's context.
        unsafe { result::memcpy_dtoh_async(dst, src, stream.raw()) }
            .map_err(drv("cuMemcpyDtoHAsync"))
    }
}

fn check_range(at: usize, words: usize, len: usize) -> Result<(), CudaError> {
    match at.checked_add(words) {
        Some(end) if end <= len => Ok(()),
        _ => Err(CudaError::Invalid(format!(
            "pinned staging: words {at}..{at}+{words} beyond its {len}"
        ))),
    }
}

impl Drop for PinnedHost {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `ptr` came from cuMemHostAlloc and is freed once.
            let _ = unsafe { result::free_host(self.ptr) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{elementwise_gpu, scale};

    /// Words up through the staging, a kernel on them, and back into the staging at an offset,
    /// all queued on the stream with one wait at the end (as a decode step runs them).
    #[test]
    fn staged_copies_keep_stream_order() {
        let Some((gpu, reg)) = elementwise_gpu() else {
            return;
        };
        let n = 1000;
        let mut st = PinnedHost::new(&gpu, 3 * n, "test staging").expect("pinned");
        let dev = gpu.alloc(4 * n, "test buffer").expect("alloc");
        let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 7.0).collect();
        for (w, v) in st.as_u32_mut()[..n].iter_mut().zip(&x) {
            *w = v.to_bits();
        }
        let s = gpu.stream();
        st.upload(s, dev.ptr(), 0, n).expect("upload");
        scale(&reg, s, dev.ptr(), 2.0, n).expect("scale");
        st.download(s, dev.ptr(), 2 * n, n).expect("download");
        gpu.wait("staging test").expect("wait");
        let back = &st.as_f32()[2 * n..];
        for (i, (b, v)) in back.iter().zip(&x).enumerate() {
            assert_eq!(b.to_bits(), (v * 2.0).to_bits(), "word {i}");
        }
        // Out of range: a typed error, nothing queued.
        assert!(st.upload(s, dev.ptr(), 2 * n + 1, n).is_err());
        assert!(st.download(s, dev.ptr(), usize::MAX, 2).is_err());
    }
}
