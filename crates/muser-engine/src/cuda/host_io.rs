//! The host side of a step. With `MUSER_CUDA_HOST_STAGE=1` its token ids and step words go
//! up, and its logit rows come down, through page-locked staging (`HostStage`), so both copies
//! are queued in stream order around the step's kernels or graph and the host waits once per
//! step. Without it (the default until the device has measured it: built in session 43,
//! `scripts/device/host-io-ab.sh`) the inputs go up from pageable memory and the rows come
//! down into a `Vec` after a wait of their own. Also the steps' device clock
//! (`MUSER_CUDA_STEP_TIMES=1`, `StepClock`): wall time minus it is the host's share of a step.
//!
//! Invariants: the staging is written by the host only between steps — every step waits for
//! the stream before it returns, also when it fails after queuing a staged copy (unless the
//! failure is the wait's deadline: then the device is not answering); rows land in
//! the staging only when the whole eval's rows fit (`HostStage::rows`), and are read only
//! through the borrow `CudaSession::eval_seq_ref` / `decode_batch_ref` hand out, which ends
//! before the next step can run.

use muser_cuda::device::Event;
use muser_cuda::{CudaError, Gpu, PinnedHost, StepParams, Stream, MAX_BATCH};

use crate::EngineError;

/// Page-locked staging: the inputs of a step of at most `chunk` tokens, and the logit rows
/// of an eval of at most `MAX_BATCH` rows.
pub(super) struct HostStage {
    inp: PinnedHost, // [chunk] u32 token ids, then StepParams' words
    out: PinnedHost, // [MAX_BATCH][n_vocab] f32
    chunk: usize,
    n_vocab: usize,
}

/// Where a step's logit rows go on the host.
pub(super) enum Land<'a> {
    /// Appended to this vector (pageable; after a wait of its own).
    Vec(&'a mut Vec<f32>),
    /// Into the staging from row `at` on (queued behind the step; read after its wait).
    Staged(usize),
}

/// `MUSER_CUDA_HOST_STAGE` / `MUSER_CUDA_STEP_TIMES` other than 0 or 1 are refused (the
/// options read only "1" as on).
pub(super) fn check_env() -> Result<(), EngineError> {
    for name in ["MUSER_CUDA_HOST_STAGE", "MUSER_CUDA_STEP_TIMES"] {
        match std::env::var(name) {
            Ok(v) if v != "0" && v != "1" => {
                return Err(EngineError::Config(format!(
                    "{name}={v:?}: expected 0 or 1"
                )))
            }
            _ => {}
        }
    }
    Ok(())
}

impl HostStage {
    pub(super) fn new(gpu: &Gpu, chunk: usize, n_vocab: usize) -> Result<HostStage, EngineError> {
        let words = StepParams::single(0, 0, 1).words().len();
        Ok(HostStage {
            inp: PinnedHost::new(gpu, chunk + words, "the step's inputs")?,
            out: PinnedHost::new(gpu, MAX_BATCH * n_vocab, "the step's logit rows")?,
            chunk,
            n_vocab,
        })
    }

    /// Logit rows the staging holds.
    pub(super) fn rows(&self) -> usize {
        MAX_BATCH
    }

    /// Write a step's inputs into the staging and queue their copies to `tokens_dst` and
    /// `step_dst`; false (nothing queued) when the step has more tokens than the staging.
    pub(super) fn upload(
        &mut self,
        gpu: &Gpu,
        tokens: &[u32],
        sp: &StepParams,
        (tokens_dst, step_dst): (u64, u64),
    ) -> Result<bool, EngineError> {
        let (n, words) = (tokens.len(), sp.words());
        if n > self.chunk {
            return Ok(false);
        }
        let inp = self.inp.as_u32_mut();
        inp[..n].copy_from_slice(tokens);
        inp[n..n + words.len()].copy_from_slice(words);
        let s = gpu.stream();
        self.inp.upload(s, tokens_dst, 0, n)?;
        self.inp.upload(s, step_dst, n, words.len())?;
        Ok(true)
    }

    /// Queue the copy of `rows` logit rows from `src` into the staging from row `at` on.
    pub(super) fn download(
        &mut self,
        gpu: &Gpu,
        src: u64,
        at: usize,
        rows: usize,
    ) -> Result<(), EngineError> {
        let n = self.n_vocab;
        self.out.download(gpu.stream(), src, at * n, rows * n)?;
        Ok(())
    }

    /// The first `rows` logit rows (valid after the steps that wrote them have waited).
    pub(super) fn logits(&self, rows: usize) -> &[f32] {
        &self.out.as_f32()[..rows * self.n_vocab]
    }
}

/// `MUSER_CUDA_STEP_TIMES=1` (`CudaOptions::step_times`): each step's device time from an event before its graph (or its
/// launches) to one after them, summed over the steps — so wall time minus this is the host's
/// share (waking, copies, the next launch). Two timed events per step; off by default.
pub(super) struct StepClock {
    start: Event,
    end: Event,
    recorded: bool,
    gpu_s: f64,
    steps: u64,
}

impl StepClock {
    /// The clock where `on` (`CudaOptions::step_times`).
    pub(super) fn new(on: bool) -> Result<Option<StepClock>, CudaError> {
        if !on {
            return Ok(None);
        }
        Ok(Some(StepClock {
            start: Event::new(true)?,
            end: Event::new(true)?,
            recorded: false,
            gpu_s: 0.0,
            steps: 0,
        }))
    }

    pub(super) fn start(&mut self, s: Stream) -> Result<(), CudaError> {
        self.start.record(s)
    }

    pub(super) fn end(&mut self, s: Stream) -> Result<(), CudaError> {
        self.end.record(s)?;
        self.recorded = true;
        Ok(())
    }

    /// Add the step's time (call after the step's wait).
    pub(super) fn add(&mut self) -> Result<(), CudaError> {
        if std::mem::take(&mut self.recorded) {
            self.gpu_s += f64::from(self.end.since(&self.start)?) / 1e3;
            self.steps += 1;
        }
        Ok(())
    }

    /// (device seconds, steps) since the last call.
    pub(super) fn take(&mut self) -> (f64, u64) {
        (
            std::mem::take(&mut self.gpu_s),
            std::mem::take(&mut self.steps),
        )
    }
}
