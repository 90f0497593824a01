//! Kernel launches with packed arguments. `KArgs` keeps every argument in its own 8-byte slot
//! (allocated up front, never moved) and hands the driver one pointer per slot.

use std::ffi::c_void;

use cudarc::driver::{result, CudaFunction};

use crate::device::Stream;

use crate::error::{drv, CudaError};

/// Kernel arguments in declaration order.
pub struct KArgs {
    slots: Box<[u64; 24]>,
    n: usize,
}

impl Default for KArgs {
    fn default() -> Self {
        KArgs::new()
    }
}

impl KArgs {
    pub fn new() -> KArgs {
        KArgs {
            slots: Box::new([0; 24]),
            n: 0,
        }
    }
    fn push_bits(mut self, v: u64) -> KArgs {
        assert!(self.n < 24, "too many kernel arguments");
        self.slots[self.n] = v;
        self.n += 1;
        self
    }
    /// A device pointer (or 0 for null).
    pub fn ptr(self, p: u64) -> KArgs {
        self.push_bits(p)
    }
    pub fn i32(self, v: i32) -> KArgs {
        self.push_bits(v as u32 as u64)
    }
    pub fn u64(self, v: u64) -> KArgs {
        self.push_bits(v)
    }
    pub fn f32(self, v: f32) -> KArgs {
        self.push_bits(u64::from(v.to_bits()))
    }
    /// Usize that must fit a kernel's `int`.
    pub fn int(self, v: usize) -> KArgs {
        let v = i32::try_from(v).expect("kernel int argument overflows i32");
        self.i32(v)
    }
}

/// Grid/block geometry.
/// The arguments every A16 matmul kernel takes (`mva_*`, `mvp_*`, `mvs_*`, `mmq_*` in
/// matvec_a16.cu / mmq_a16.cu), in their order: weights `[n_out][row_bytes]`, activation quants
/// `xq [n_tok][k]` i16 with scales `xs` and quant sums `xsum` `[n_tok][k/32]`, outputs
/// `y [n_tok][ldy]` f32. All pointers are device addresses.
#[derive(Clone, Copy, Debug)]
pub struct A16Matmul {
    pub w: u64,
    pub row_bytes: usize,
    pub xq: u64,
    pub xs: u64,
    pub xsum: u64,
    pub k: usize,
    pub y: u64,
    pub ldy: usize,
    pub n_out: usize,
    pub n_tok: usize,
}

impl A16Matmul {
    pub fn args(&self) -> KArgs {
        KArgs::new()
            .ptr(self.w)
            .u64(self.row_bytes as u64)
            .ptr(self.xq)
            .ptr(self.xs)
            .ptr(self.xsum)
            .int(self.k)
            .ptr(self.y)
            .int(self.ldy)
            .int(self.n_out)
            .int(self.n_tok)
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Dims {
    pub grid: (u32, u32, u32),
    pub block: u32,
    pub smem: u32,
}

/// Launch `f` on `stream`.
pub fn launch(
    f: &CudaFunction,
    dims: Dims,
    stream: Stream,
    mut args: KArgs,
) -> Result<(), CudaError> {
    let base = args.slots.as_mut_ptr();
    // Little-endian: the first 4 bytes of a slot are the i32/f32 value.
    let mut ptrs: Vec<*mut c_void> = (0..args.n)
        // SAFETY: i < n <= 24, inside the boxed array.
        .map(|i| unsafe { base.add(i) } as *mut c_void)
        .collect();
    // SAFETY: argument slots match the kernel's parameter list (each call site in the engine
    // mirrors its kernel's signature, tested on the device); the slots outlive the call (the
    // driver copies parameters at launch).
    unsafe {
        result::launch_kernel(
            f.cu_function(),
            dims.grid,
            (dims.block, 1, 1),
            dims.smem,
            stream.raw(),
            &mut ptrs,
        )
    }
    .map_err(drv("cuLaunchKernel"))
}
