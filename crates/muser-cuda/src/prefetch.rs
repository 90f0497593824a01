//! The decode graph's L2 prefetch branch (`MUSER_CUDA_L2_PREFETCH=<MiB>`, the f16 route).
//! Between two matmuls the main chain runs small kernels (norms, attention, the activation
//! format: ~33 µs per layer of a 52-layer model on the H200, measured with
//! `MUSER_CUDA_PROBE_DUP`) while DRAM idles. At each such point a side stream launches
//! `l2_prefetch` (prefetch.cu) for the first row groups of the next matmul's weights
//! (`q4h::prefix` / `q6h::prefix`), so that matmul's first blocks read them from L2.
//!
//! Invariants: hints only — no kernel reads anything the branch writes, so no number changes;
//! each prefetch starts after the work queued before its issue point (an event recorded on the
//! main stream, and the kernel's `griddepcontrol.wait`), never during the matmul before it;
//! [`L2Prefetcher::join`] makes the main stream wait for the branch once per step (a captured
//! graph must end joined). The branch owns side stream [`PREFETCH_SIDE`]; `graph::Fork` never
//! uses it.
//!
//! Two ways to pull the bytes ([`PrefetchKind`]): `cp.async.bulk.prefetch.L2` hints
//! (`l2_prefetch`) or plain loads whose values are dropped (`l2_touch`), over a grid of
//! `blocks` blocks. Session 31 measured the hints from one block: a loss growing with the bytes.
//! One block is slow to pull them (8 MiB took it 36 µs on the H200 in session 40's
//! `scripts/device/experiments/l2pf_rate.cu`, 132 blocks 4 µs), so the side stream fell behind
//! the main chain and the step's join waited for it. The same microbenchmark found that the
//! hints, from any grid, leave a later streaming read at cold speed, where loads leave it at L2
//! speed.

use std::sync::atomic::{AtomicBool, Ordering};

use cudarc::driver::CudaFunction;

use crate::device::{Event, Gpu, SIDE_STREAMS};
use crate::error::CudaError;
use crate::launch::{launch, Dims, KArgs};

/// The side stream the prefetch branch runs on (the last; `Fork` uses the others).
pub const PREFETCH_SIDE: usize = SIDE_STREAMS - 1;

/// Threads of an `l2_prefetch` block (each issues 32 KiB chunks).
const HINT_THREADS: u32 = 128;
/// Threads of an `l2_touch` block (each keeps 8 loads of 16 bytes in flight).
const TOUCH_THREADS: u32 = 256;

/// How the branch pulls bytes into L2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrefetchKind {
    /// `cp.async.bulk.prefetch.L2` hints (`l2_prefetch`).
    Hint,
    /// Loads whose values are dropped (`l2_touch`).
    Touch,
}

impl PrefetchKind {
    /// The kernel that runs this kind.
    pub fn kernel(self) -> crate::Kernel {
        match self {
            PrefetchKind::Hint => crate::Kernel::L2Prefetch,
            PrefetchKind::Touch => crate::Kernel::L2Touch,
        }
    }

    /// Its letter in the route identity.
    pub fn letter(self) -> char {
        match self {
            PrefetchKind::Hint => 'h',
            PrefetchKind::Touch => 't',
        }
    }

    fn threads(self) -> u32 {
        match self {
            PrefetchKind::Hint => HINT_THREADS,
            PrefetchKind::Touch => TOUCH_THREADS,
        }
    }
}

/// Issues prefetches on the side branch and joins it.
pub struct L2Prefetcher {
    kind: PrefetchKind,
    /// Blocks of each prefetch launch.
    blocks: u32,
    mark: Event,
    end: Event,
    /// Whether a prefetch was issued since the last join (a join of a branch with no work in
    /// the capture would wait on an event recorded outside it).
    pending: AtomicBool,
}

impl L2Prefetcher {
    /// A prefetcher whose launches run `kind` on `blocks` blocks (at least 1).
    pub fn new(kind: PrefetchKind, blocks: u32) -> Result<L2Prefetcher, CudaError> {
        Ok(L2Prefetcher {
            kind,
            blocks: blocks.max(1),
            mark: Event::new(false)?,
            end: Event::new(false)?,
            pending: AtomicBool::new(false),
        })
    }

    pub fn kind(&self) -> PrefetchKind {
        self.kind
    }

    /// Prefetch three byte ranges `(device address, length)` into L2 once the work queued so
    /// far on `gpu`'s main stream is done, with `f` (the registry's function for
    /// [`PrefetchKind::kernel`] of this prefetcher's kind). Addresses must be 16-byte aligned (a
    /// length's tail below 16 bytes is skipped); an empty range is skipped.
    pub fn issue(
        &self,
        gpu: &Gpu,
        f: &CudaFunction,
        ranges: [(u64, usize); 3],
    ) -> Result<(), CudaError> {
        if let Some((p, _)) = ranges.iter().find(|(p, n)| *n > 0 && p % 16 != 0) {
            return Err(CudaError::Invalid(format!(
                "l2_prefetch: address {p:#x} is not 16-byte aligned"
            )));
        }
        if ranges.iter().all(|(_, n)| *n < 16) {
            return Ok(());
        }
        let side = gpu.side(PREFETCH_SIDE);
        self.mark.record(gpu.stream())?;
        self.mark.wait_on(side)?;
        let mut args = KArgs::new();
        for (p, n) in ranges {
            args = args.ptr(p).u64(n as u64);
        }
        let dims = Dims {
            grid: (self.blocks, 1, 1),
            block: self.kind.threads(),
            smem: 0,
        };
        launch(f, dims, side, args)?;
        self.pending.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Forget what an unfinished step issued (one that failed before its join): a step's join
    /// waits only for that step's prefetches.
    pub fn begin(&self) {
        self.pending.store(false, Ordering::Relaxed);
    }

    /// The main stream waits for everything issued since the last join (nothing to do if
    /// nothing was).
    pub fn join(&self, gpu: &Gpu) -> Result<(), CudaError> {
        if !self.pending.swap(false, Ordering::Relaxed) {
            return Ok(());
        }
        self.end.record(gpu.side(PREFETCH_SIDE))?;
        self.end.wait_on(gpu.stream())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Graph;
    use crate::testing::scale;
    use crate::{Kernel, Math, Module, Registry};

    /// A step with the prefetch branch (main: double; branch: prefetch the buffer; main: double;
    /// join) runs eagerly and as a replayed graph, with and without programmatic dependent
    /// launch, with either kind on one block and on many, to the values of the main chain
    /// alone; a misaligned range is a typed error.
    #[test]
    fn the_prefetch_branch_changes_no_value_and_joins() {
        if !matches!(Gpu::probe(), Ok(Some(_))) {
            eprintln!("skipping: no CUDA device");
            return;
        }
        let gpu = Gpu::open(0).expect("open GPU");
        let reg = Registry::build_modules(&gpu, &[Module::Elementwise, Module::Prefetch])
            .expect("registry");
        let n = 1 << 22;
        let x0: Vec<f32> = (0..n).map(|i| (i % 1009) as f32 - 504.0).collect();
        let buf = gpu.alloc(n * 4, "x").expect("alloc");
        let p = buf.ptr();
        let forms = [
            (PrefetchKind::Hint, 1),
            (PrefetchKind::Hint, 132),
            (PrefetchKind::Touch, 1),
            (PrefetchKind::Touch, 132),
        ];
        for ((kind, blocks), pdl) in forms.into_iter().flat_map(|k| [(k, false), (k, true)]) {
            let f = reg.get(kind.kernel(), Math::Strict);
            let pf = L2Prefetcher::new(kind, blocks).expect("prefetcher");
            let step = || -> Result<(), CudaError> {
                scale(&reg, gpu.stream(), p, 2.0, n)?;
                // An odd length: the tail below 16 bytes is skipped.
                pf.issue(
                    &gpu,
                    f,
                    [(p, n * 2), (p + (n * 2) as u64, n * 2 - 7), (0, 0)],
                )?;
                scale(&reg, gpu.stream(), p, 2.0, n)?;
                pf.join(&gpu)
            };
            gpu.set_pdl(pdl);
            gpu.upload(p, &x0).expect("upload");
            step().expect("eager step");
            let g = Graph::capture(&gpu, "prefetch test graph", step).expect("capture");
            for _ in 0..2 {
                g.launch().expect("replay");
            }
            gpu.wait("prefetch test graph").expect("wait");
            let mut got = vec![0f32; n];
            gpu.download(&mut got, p, "x").expect("download");
            // Three steps of two doublings: × 64, exact in f32.
            for (i, (&g, &x)) in got.iter().zip(&x0).enumerate() {
                assert_eq!(g, x * 64.0, "{kind:?} × {blocks}, pdl {pdl}: value {i}");
            }
        }
        let f = reg.get(Kernel::L2Touch, Math::Strict);
        let pf = L2Prefetcher::new(PrefetchKind::Touch, 8).expect("prefetcher");
        let err = pf.issue(&gpu, f, [(p + 4, 64), (0, 0), (0, 0)]);
        assert!(matches!(err, Err(CudaError::Invalid(_))), "{err:?}");
    }
}
