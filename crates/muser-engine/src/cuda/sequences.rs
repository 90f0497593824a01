//! Sequence slots of a CUDA session: prefill and decode of one sequence (`eval`, `eval_seq`),
//! one token of each of several sequences as packed rows of one step (`decode_batch`), and the
//! slots' positions; the `_ref` forms borrow the rows from the page-locked staging (host_io.rs).
//! Every step goes through the accelerator scheduler. Invariant: a refused
//! request (missing slot, a sequence twice, too many rows, bad token, full context) changes no
//! position.

use std::borrow::Cow;

use muser_cuda::sched::StepKind;
use muser_cuda::MAX_BATCH;

use super::host_io::Land;
use super::CudaSession;
use crate::cpu::Logits;
use crate::EngineError;

impl CudaSession<'_> {
    /// Positions seen by sequence 0.
    pub fn n_past(&self) -> usize {
        self.n_past[0]
    }

    /// Positions seen by sequence `seq` (0 for a slot that does not exist).
    pub fn n_past_seq(&self, seq: usize) -> usize {
        self.n_past.get(seq).copied().unwrap_or(0)
    }

    /// Sequence slots of this session.
    pub fn n_seq(&self) -> usize {
        self.n_past.len()
    }

    /// Forget every sequence (the KV rows are overwritten as new positions arrive).
    pub fn clear(&mut self) {
        self.n_past.iter_mut().for_each(|p| *p = 0);
    }

    /// Forget sequence `seq`.
    pub fn clear_seq(&mut self, seq: usize) -> Result<(), EngineError> {
        self.check_seq(seq)?;
        self.n_past[seq] = 0;
        Ok(())
    }

    fn check_seq(&self, seq: usize) -> Result<(), EngineError> {
        if seq >= self.n_past.len() {
            return Err(EngineError::Config(format!(
                "sequence {seq} does not exist (the session has {} slots)",
                self.n_past.len()
            )));
        }
        Ok(())
    }

    /// Evaluate `tokens` after the ones already seen (sequence 0); returns the requested logit
    /// rows.
    pub fn eval(&mut self, tokens: &[u32], which: Logits) -> Result<Vec<f32>, EngineError> {
        self.eval_seq_ref(0, tokens, which).map(Cow::into_owned)
    }

    /// One token of each of several sequences as packed rows of one step (`rows`: (sequence,
    /// token id), distinct sequences, at most `MAX_BATCH`); returns each row's logits in
    /// order, `rows.len() × n_vocab`. Every row's logits equal that sequence's own decode step
    /// bit for bit.
    pub fn decode_batch(&mut self, rows: &[(usize, u32)]) -> Result<Vec<f32>, EngineError> {
        self.decode_batch_ref(rows).map(Cow::into_owned)
    }

    /// `decode_batch`, the rows borrowed from the page-locked staging where the session has it
    /// (`MUSER_CUDA_HOST_STAGE`, host_io.rs) — no copy on the host.
    pub fn decode_batch_ref(
        &mut self,
        rows: &[(usize, u32)],
    ) -> Result<Cow<'_, [f32]>, EngineError> {
        let n_vocab = self.model.config.n_vocab;
        if rows.is_empty() || rows.len() > MAX_BATCH {
            return Err(EngineError::Config(format!(
                "a batched decode step holds 1..={MAX_BATCH} sequences (got {})",
                rows.len()
            )));
        }
        for (i, &(seq, tok)) in rows.iter().enumerate() {
            self.check_seq(seq)?;
            if rows[..i].iter().any(|&(s, _)| s == seq) {
                return Err(EngineError::Config(format!(
                    "sequence {seq} appears twice in one batched decode step"
                )));
            }
            crate::check_eval(&[tok], self.n_past[seq], self.opts.n_ctx, n_vocab)?;
        }
        let seq_pos: Vec<(usize, usize)> = rows.iter().map(|&(s, _)| (s, self.n_past[s])).collect();
        let tokens: Vec<u32> = rows.iter().map(|&(_, t)| t).collect();
        self.sched.submit(
            rows[0].0 as u64,
            StepKind::Decode,
            (0, rows.len(), rows.len()),
        );
        let job = self.sched.take_next();
        debug_assert!(job.is_some() && self.sched.take_next().is_none());
        let step = muser_cuda::StepParams::rows(&seq_pos)?;
        let staged = self
            .stage
            .as_ref()
            .is_some_and(|st| rows.len() <= st.rows());
        let mut out = Vec::new();
        let land = if staged {
            Land::Staged(0)
        } else {
            Land::Vec(&mut out)
        };
        self.step(&tokens, step, rows.len(), land)?;
        for &(s, _) in rows {
            self.n_past[s] += 1;
        }
        Ok(self.landed(staged, rows.len(), out))
    }

    /// Evaluate `tokens` after the ones sequence `seq` has already seen; returns the requested
    /// logit rows.
    pub fn eval_seq(
        &mut self,
        seq: usize,
        tokens: &[u32],
        which: Logits,
    ) -> Result<Vec<f32>, EngineError> {
        self.eval_seq_ref(seq, tokens, which).map(Cow::into_owned)
    }

    /// `eval_seq`, the rows borrowed from the page-locked staging where they fit in it
    /// (`MUSER_CUDA_HOST_STAGE`, host_io.rs: up to `MAX_BATCH` rows) — no copy on the host.
    pub fn eval_seq_ref(
        &mut self,
        seq: usize,
        tokens: &[u32],
        which: Logits,
    ) -> Result<Cow<'_, [f32]>, EngineError> {
        let n_vocab = self.model.config.n_vocab;
        self.check_seq(seq)?;
        crate::check_eval(tokens, self.n_past[seq], self.opts.n_ctx, n_vocab)?;
        let chunk = self.opts.chunk;
        let n_chunks = tokens.len().div_ceil(chunk);
        // Every step goes through the scheduler, the one owner of the device queue (one
        // sequence's steps here: they come back in submission order).
        for i in 0..n_chunks {
            let start = i * chunk;
            let len = chunk.min(tokens.len() - start);
            let rows = match which {
                Logits::All => len,
                Logits::Last if i + 1 == n_chunks => 1,
                Logits::Last => 0,
            };
            let kind = if len == 1 {
                StepKind::Decode
            } else {
                StepKind::Prefill
            };
            self.sched.submit(seq as u64, kind, (start, len, rows));
        }
        let total_rows = match which {
            Logits::All => tokens.len(),
            Logits::Last => usize::from(n_chunks > 0),
        };
        let staged = self
            .stage
            .as_ref()
            .is_some_and(|st| total_rows <= st.rows());
        let (mut out, mut at) = (Vec::new(), 0);
        while let Some(job) = self.sched.take_next() {
            let (start, len, rows) = job.payload;
            let step = muser_cuda::StepParams::single(seq, self.n_past[seq], len);
            let land = if staged {
                Land::Staged(at)
            } else {
                Land::Vec(&mut out)
            };
            match self.step(&tokens[start..start + len], step, rows, land) {
                Ok(()) => {
                    self.n_past[seq] += len;
                    at += rows;
                }
                Err(e) => {
                    // Drop this eval's remaining steps: nothing stale runs later.
                    while self.sched.take_next().is_some() {}
                    return Err(e);
                }
            }
        }
        Ok(self.landed(staged, total_rows, out))
    }

    /// An eval's rows: `rows` rows of the staging, or `out`.
    fn landed(&self, staged: bool, rows: usize, out: Vec<f32>) -> Cow<'_, [f32]> {
        match &self.stage {
            Some(st) if staged => Cow::Borrowed(st.logits(rows)),
            _ => Cow::Owned(out),
        }
    }
}
