//! Kernel launches with packed arguments. `KArgs` keeps every argument in its own 8-byte slot
//! (allocated up front, never moved) and hands the driver one pointer per slot.

use std::ffi::c_void;

use cudarc::driver::{result, sys, CudaFunction};

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

/// Grid/block geometry.
#[derive(Clone, Copy, Debug)]
pub struct Dims {
    pub grid: (u32, u32, u32),
    pub block: u32,
    pub smem: u32,
}

/// Launch shape of the attention partial kernels (attention.cu): `attn_partial` (one query
/// token per block, decode) or `attn_partial_mt` (`ATTN_MT_TOKENS` per block, prefill). A shape
/// never changes a head's arithmetic, only which warps share a K/V tile load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttnShape {
    /// Query heads per block (divides the GQA ratio).
    pub heads: usize,
    /// Query tokens per block: 1 (`attn_partial`) or `ATTN_MT_TOKENS` (`attn_partial_mt`).
    pub tokens: usize,
    /// `attn_partial`'s K/V tile buffers (its last argument `nbuf`): 2 overlaps the next
    /// tile's copy with this tile's arithmetic, 1 where two do not fit. Unused by the mt kernel.
    pub bufs: usize,
}

/// Query tokens per `attn_partial_mt` block (`ATQ` in attention.cu).
pub const ATTN_MT_TOKENS: usize = 8;

/// Dynamic shared memory a launch may use without opting in.
pub const SMEM_DEFAULT_MAX: usize = 48 * 1024;

impl AttnShape {
    /// `attn_partial` with `heads` query heads per block, double-buffered where that fits.
    pub fn decode(heads: usize, hd: usize, hd_v: usize) -> AttnShape {
        let two = AttnShape {
            heads,
            tokens: 1,
            bufs: 2,
        };
        if two.smem(hd, hd_v) <= SMEM_DEFAULT_MAX {
            two
        } else {
            AttnShape { bufs: 1, ..two }
        }
    }

    /// `attn_partial_mt` with the most heads (≤ 4, dividing `gqa`) whose tiles fit the default
    /// shared memory; None when not even one head fits or head_dim_v > 256.
    pub fn prefill(gqa: usize, hd: usize, hd_v: usize) -> Option<AttnShape> {
        if hd_v > 256 {
            return None; // the kernel keeps at most 8 output columns per lane
        }
        (1..=gqa.min(4))
            .rev()
            .filter(|&g| gqa.is_multiple_of(g))
            .map(|heads| AttnShape {
                heads,
                tokens: ATTN_MT_TOKENS,
                bufs: 1,
            })
            .find(|s| s.smem(hd, hd_v) <= SMEM_DEFAULT_MAX)
    }

    /// Shared memory: queries `[heads][tokens][hd]` f32 and the tile's probabilities
    /// `[heads][tokens][32]` f32, then the K and V tiles: `attn_partial` `bufs` × `[32][hd + 4]`,
    /// `[32][hd_v + 4]` f16; `attn_partial_mt` one `[32][hd + 2]`, `[32][hd_v + 2]`.
    pub fn smem(&self, hd: usize, hd_v: usize) -> usize {
        let per_query = self.heads * self.tokens * (hd * 4 + 32 * 4);
        if self.tokens == 1 {
            per_query + self.bufs * 32 * ((hd + 4) + (hd_v + 4)) * 2
        } else {
            per_query + 32 * (hd + 2) * 2 + 32 * (hd_v + 2) * 2
        }
    }

    /// Grid `(n_super, n_head / heads, ⌈n_tok / tokens⌉)`, one warp per head.
    pub fn dims(
        &self,
        n_super: usize,
        n_head: usize,
        n_tok: usize,
        hd: usize,
        hd_v: usize,
    ) -> Dims {
        let u = |v: usize| u32::try_from(v).expect("attention grid dimension overflows u32");
        Dims {
            grid: (
                u(n_super),
                u(n_head / self.heads),
                u(n_tok.div_ceil(self.tokens)),
            ),
            block: u(32 * self.heads),
            smem: u(self.smem(hd, hd_v)),
        }
    }
}

/// Launch `f` on `stream` — with the programmatic-dependent-launch attribute when the stream
/// carries it (`Gpu::set_pdl`; the kernel then overlaps the previous kernel's tail and waits for
/// it in `pdl_wait`), plainly otherwise.
pub fn launch(f: &CudaFunction, dims: Dims, stream: Stream, args: KArgs) -> Result<(), CudaError> {
    launch_clusters_of(f, dims, 1, stream, args)
}

/// Every launch: `f` in clusters of `cluster` blocks (1: plain blocks), twice under a timing
/// probe (crate::probe enqueues the same launch again).
fn launch_clusters_of(
    f: &CudaFunction,
    dims: Dims,
    cluster: u32,
    stream: Stream,
    mut args: KArgs,
) -> Result<(), CudaError> {
    cluster_tiles(dims.grid.0, cluster)?;
    let mut ptrs = slot_ptrs(&mut args);
    let times = if crate::probe::is_dup(f) { 2 } else { 1 };
    for _ in 0..times {
        launch_once(f, dims, cluster, stream, &mut ptrs)?;
    }
    Ok(())
}

/// The kernel-parameter pointers of `args`' slots (little-endian: the first 4 bytes of a slot
/// are the i32/f32 value).
fn slot_ptrs(args: &mut KArgs) -> Vec<*mut c_void> {
    let base = args.slots.as_mut_ptr();
    (0..args.n)
        // SAFETY: i < n <= 24, inside the boxed array.
        .map(|i| unsafe { base.add(i) } as *mut c_void)
        .collect()
}

/// [`launch`] as thread-block clusters of `cluster` consecutive blocks along the grid's x
/// (`dims.grid.0 % cluster == 0`; `cluster <= 8`, the portable limit, or 16 for a function the
/// registry allowed the non-portable size, `Registry::NON_PORTABLE_CLUSTER`), with the
/// programmatic-dependent-launch attribute when the stream carries it. For kernels that
/// exchange data through distributed shared memory (norm.cu's `residual_norm_h16_cl8` / `_cl16`,
/// attention.cu's `attn_combine_h16_cl`).
pub fn launch_cluster(
    f: &CudaFunction,
    dims: Dims,
    cluster: u32,
    stream: Stream,
    args: KArgs,
) -> Result<(), CudaError> {
    launch_clusters_of(f, dims, cluster, stream, args)
}

/// Whether clusters of `cluster` blocks tile a grid of `grid_x` blocks along x (1..=16 blocks
/// — above 8 the function must allow the non-portable size — dividing it).
fn cluster_tiles(grid_x: u32, cluster: u32) -> Result<(), CudaError> {
    if cluster == 0 || cluster > 16 || !grid_x.is_multiple_of(cluster) {
        return Err(CudaError::Invalid(format!(
            "a cluster of {cluster} blocks does not tile a grid of {grid_x} blocks along x \
             (1..=16 blocks, dividing it)"
        )));
    }
    Ok(())
}

fn launch_once(
    f: &CudaFunction,
    dims: Dims,
    cluster: u32,
    stream: Stream,
    ptrs: &mut [*mut c_void],
) -> Result<(), CudaError> {
    if stream.pdl() || cluster > 1 {
        return launch_ex(f, dims, cluster, stream, ptrs);
    }
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
            ptrs,
        )
    }
    .map_err(drv("cuLaunchKernel"))
}

/// `cuLaunchKernelEx` with the programmatic-stream-serialization attribute when the stream
/// carries it (`Gpu::set_pdl`) and the cluster-dimension attribute when `cluster > 1`.
fn launch_ex(
    f: &CudaFunction,
    dims: Dims,
    cluster: u32,
    stream: Stream,
    ptrs: &mut [*mut c_void],
) -> Result<(), CudaError> {
    // SAFETY: an all-zero attribute value is valid plain data (a C union of integers/structs).
    let mut pdl: sys::CUlaunchAttributeValue = unsafe { std::mem::zeroed() };
    pdl.programmaticStreamSerializationAllowed = 1;
    // SAFETY: as above.
    let mut cl: sys::CUlaunchAttributeValue = unsafe { std::mem::zeroed() };
    cl.clusterDim = sys::CUlaunchAttributeValue_union__bindgen_ty_1 {
        x: cluster,
        y: 1,
        z: 1,
    };
    let mut attrs = Vec::with_capacity(2);
    if stream.pdl() {
        attrs.push(sys::CUlaunchAttribute {
            id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
            pad: [0; 4],
            value: pdl,
        });
    }
    if cluster > 1 {
        attrs.push(sys::CUlaunchAttribute {
            id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
            pad: [0; 4],
            value: cl,
        });
    }
    let cfg = sys::CUlaunchConfig {
        gridDimX: dims.grid.0,
        gridDimY: dims.grid.1,
        gridDimZ: dims.grid.2,
        blockDimX: dims.block,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: dims.smem,
        hStream: stream.raw(),
        attrs: attrs.as_mut_ptr(),
        numAttrs: attrs.len() as u32,
    };
    // SAFETY: as in `launch` (slots match the kernel's parameters and outlive the call); `cfg`
    // and the attributes it points to live across the call, which copies them.
    unsafe {
        sys::cuLaunchKernelEx(
            &cfg,
            f.cu_function(),
            ptrs.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    }
    .result()
    .map_err(drv("cuLaunchKernelEx"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clusters_must_tile_the_grid() {
        assert!(cluster_tiles(8, 8).is_ok());
        assert!(cluster_tiles(16, 8).is_ok());
        assert!(cluster_tiles(6, 2).is_ok());
        assert!(cluster_tiles(12, 8).is_err());
        assert!(cluster_tiles(16, 16).is_ok());
        assert!(cluster_tiles(32, 32).is_err());
        assert!(cluster_tiles(8, 0).is_err());
    }
}
