//! The phase profiler (`MUSER_CUDA_PROFILE=1`): a timing event after each dependency group of an
//! eagerly launched step, with the group's label. `report` pairs labels with samples and fails
//! (typed error) if their counts disagree, rather than mislabel a time.

use std::collections::BTreeMap;

use crate::device::{Event, Stream};
use crate::error::CudaError;

#[derive(Default)]
pub struct PhaseProfiler {
    enabled: bool,
    start: Option<Event>,
    marks: Vec<(&'static str, Event)>,
    totals: BTreeMap<&'static str, (f64, u64)>,
}

impl PhaseProfiler {
    pub fn from_env() -> PhaseProfiler {
        PhaseProfiler {
            enabled: std::env::var("MUSER_CUDA_PROFILE").as_deref() == Ok("1"),
            ..Default::default()
        }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Start a step on `stream`.
    pub fn begin(&mut self, stream: Stream) -> Result<(), CudaError> {
        if !self.enabled {
            return Ok(());
        }
        let e = Event::new(true)?;
        e.record(stream)?;
        self.start = Some(e);
        self.marks.clear();
        Ok(())
    }

    /// Close the dependency group `label` (everything queued since the previous mark).
    pub fn mark(&mut self, label: &'static str, stream: Stream) -> Result<(), CudaError> {
        if !self.enabled {
            return Ok(());
        }
        let e = Event::new(true)?;
        e.record(stream)?;
        self.marks.push((label, e));
        Ok(())
    }

    /// After the step completed: accumulate group times. `expected` is how many marks the step
    /// was meant to record; a mismatch aborts with an error.
    pub fn end(&mut self, expected: usize) -> Result<(), CudaError> {
        if !self.enabled {
            return Ok(());
        }
        let start = self
            .start
            .take()
            .ok_or_else(|| CudaError::Profile("end without begin".into()))?;
        if self.marks.len() != expected {
            return Err(CudaError::Profile(format!(
                "{} samples recorded for {} labels",
                self.marks.len(),
                expected
            )));
        }
        let mut prev = &start;
        for (label, e) in &self.marks {
            let ms = f64::from(e.since(prev)?);
            let t = self.totals.entry(label).or_insert((0.0, 0));
            t.0 += ms;
            t.1 += 1;
            prev = e;
        }
        self.marks.clear();
        Ok(())
    }

    /// Forget the accumulated totals (the next report covers only what runs after this).
    pub fn reset(&mut self) {
        self.totals.clear();
    }

    /// Per-label totals, largest first.
    pub fn report(&self) -> String {
        let all: f64 = self.totals.values().map(|t| t.0).sum();
        let mut v: Vec<_> = self.totals.iter().collect();
        v.sort_by(|a, b| b.1 .0.total_cmp(&a.1 .0));
        let mut s = format!("CUDA phase profile (total {all:.3} ms):\n");
        for (label, (ms, n)) in v {
            s += &format!(
                "  {label:<24} {ms:>10.3} ms {:>5.1}%  ({n} samples)\n",
                100.0 * ms / all.max(1e-12)
            );
        }
        s
    }
}
