//! Phase profiling of the CPU route (`MUSER_CPU_PROFILE=1`): wall time per named step of the
//! forward pass, accumulated over a session, so a benchmark can say where a token's time goes.
//!
//! Owns: the buckets. Off by default; when off, `mark` is a branch and nothing else. Results do
//! not change with profiling on (it only reads the clock between steps).

use std::time::Instant;

/// Accumulated time per phase.
#[derive(Debug)]
pub struct PhaseProfile {
    enabled: bool,
    last: Instant,
    /// (label, seconds, marks), in first-seen order.
    buckets: Vec<(&'static str, f64, u64)>,
}

impl PhaseProfile {
    /// Enabled when `MUSER_CPU_PROFILE` is set to anything but `0`.
    pub fn from_env() -> PhaseProfile {
        let enabled = std::env::var("MUSER_CPU_PROFILE").is_ok_and(|v| v != "0");
        PhaseProfile {
            enabled,
            last: Instant::now(),
            buckets: Vec::new(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Start timing from now (discard the time since the last mark).
    pub fn start(&mut self) {
        if self.enabled {
            self.last = Instant::now();
        }
    }

    /// Attribute the time since the last mark to `label`.
    pub fn mark(&mut self, label: &'static str) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        let dt = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        match self.buckets.iter_mut().find(|b| b.0 == label) {
            Some(b) => {
                b.1 += dt;
                b.2 += 1;
            }
            None => self.buckets.push((label, dt, 1)),
        }
    }

    /// Forget the accumulated buckets (the next report covers only what runs after this).
    pub fn reset(&mut self) {
        self.buckets.clear();
    }

    /// A table of phases with their share of the total.
    pub fn report(&self) -> String {
        let total: f64 = self.buckets.iter().map(|b| b.1).sum();
        let mut s = format!(
            "{:<18} {:>10} {:>7} {:>9}\n",
            "phase", "ms", "share", "marks"
        );
        for (label, secs, n) in &self.buckets {
            s.push_str(&format!(
                "{label:<18} {:>10.2} {:>6.1}% {n:>9}\n",
                secs * 1e3,
                100.0 * secs / total.max(1e-12)
            ));
        }
        s.push_str(&format!("{:<18} {:>10.2}\n", "total", total * 1e3));
        s
    }
}
