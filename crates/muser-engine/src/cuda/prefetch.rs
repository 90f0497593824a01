//! Where a decode step prefetches weights into L2 (`MUSER_CUDA_L2_PREFETCH`; the branch itself is
//! `muser_cuda::prefetch`): before each point where the main chain leaves the matmuls for small
//! kernels, the next matmul's (or matmuls') first row groups, `budget` bytes shared in
//! proportion to the matrices' sizes, `budget` the option's entry for that point
//! ([`PfPoint`]). Decode steps only (at most 8 tokens: the `mvh_*` kernels, which read weights
//! once per step); prefill tiles reread their weights and are left alone.
//! Measured in session 31 as one block of hints and kept off: a loss that grows with the bytes
//! (tg128 full forge 99.7 / 60.4 / 46.5 / 37.5 tok/s at 8 / 16 / 24 / 32 MiB vs 133.2). Session
//! 40 rebuilt it (loads over 132 blocks, per-point budgets): level (148.7–148.8 vs 147.8–148.7),
//! so it stays off; docs/cuda.md's row has the figures.

use muser_cuda::{q4h, q6h, CudaError, HWeights};

use super::weights::DevMatrix;
use super::CudaSession;

/// The matmuls a prefetch point is for: its index in `CudaOptions::l2_prefetch_mb`.
#[derive(Clone, Copy, Debug)]
pub(super) enum PfPoint {
    /// The attention projections (or, after the last layer, the output head).
    Projections = 0,
    /// The attention output.
    AttnOutput = 1,
    /// FFN gate and up.
    GateUp = 2,
    /// FFN down.
    Down = 3,
}

/// Tokens per step up to which a step prefetches (the one-token-per-row matmuls' range).
const DECODE_MAX: usize = 8;

impl CudaSession<'_> {
    /// Whether an `n`-token step runs the prefetch branch.
    pub(super) fn prefetching(&self, n: usize) -> bool {
        self.prefetch.is_some() && n <= DECODE_MAX
    }

    /// Prefetch the first row groups of `mats` (f16-route matrices; others are skipped), point
    /// `at`'s budget of bytes, after the work queued so far, if this step prefetches.
    pub(super) fn prefetch(
        &self,
        n: usize,
        at: PfPoint,
        mats: &[&DevMatrix],
    ) -> Result<(), CudaError> {
        let Some(pf) = self.prefetch.as_ref().filter(|_| self.prefetching(n)) else {
            return Ok(());
        };
        let budget = self.opts.l2_prefetch_mb[at as usize] << 20;
        let h16 = |m: &DevMatrix| m.h16.map(|(w, _)| w);
        let bytes = |m: &DevMatrix| match h16(m) {
            Some(HWeights::Q4H) => q4h::bytes(m.n_out, m.n_in, self.reg.h16.q4h_scales),
            Some(HWeights::Q6H) => q6h::bytes(m.n_out, m.n_in, self.reg.h16.q6h_scales),
            None => 0,
        };
        let total: usize = mats.iter().map(|m| bytes(m)).sum();
        if total == 0 || budget == 0 {
            return Ok(());
        }
        let f = self.f(pf.kind().kernel());
        for m in mats {
            let Some(w) = h16(m) else { continue };
            let groups = m.n_out / 16;
            // This matrix's share of the budget, in whole row groups.
            let share = (budget as u128 * bytes(m) as u128 / total as u128) as usize;
            let g = share / (bytes(m) / groups).max(1);
            let parts = match w {
                HWeights::Q4H => q4h::prefix(m.n_out, m.n_in, g, self.reg.h16.q4h_scales),
                HWeights::Q6H => q6h::prefix(m.n_out, m.n_in, g, self.reg.h16.q6h_scales),
            };
            pf.issue(&self.gpu, f, parts.map(|(o, len)| (m.ptr + o as u64, len)))?;
        }
        Ok(())
    }

    /// The main stream waits for the step's prefetch branch (before the step ends).
    pub(super) fn prefetch_join(&self, n: usize) -> Result<(), CudaError> {
        match self.prefetch.as_ref().filter(|_| self.prefetching(n)) {
            Some(pf) => pf.join(&self.gpu),
            None => Ok(()),
        }
    }
}
