//! The accelerator scheduler: the one owner of the device's work queue (the seed's
//! `AcceleratorScheduler`). Every step that will run on the GPU is submitted here and taken out
//! in the order the policy decides:
//!
//! - decode steps before prefill steps (a waiting token is latency; a prompt is throughput);
//! - among steps of the same kind, cyclic fairness between sequences: after serving sequence
//!   `s`, the next served is the first waiting sequence after `s` in id order (wrapping), so no
//!   sequence waits behind another's whole backlog;
//! - steps of one sequence stay in submission order.
//!
//! Pure policy (no CUDA types): tested in CI. Today one sequence uses it (the CUDA session
//! submits each step and runs what it gets back); packed multi-sequence decode builds on it.

use std::collections::{BTreeMap, VecDeque};

/// Kind of a GPU step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum StepKind {
    Decode,
    Prefill,
}

/// A queued step of sequence `seq`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job<T> {
    pub seq: u64,
    pub kind: StepKind,
    pub payload: T,
}

/// The queue and its policy.
#[derive(Debug)]
pub struct AcceleratorScheduler<T> {
    queues: BTreeMap<(StepKind, u64), VecDeque<T>>,
    last: BTreeMap<StepKind, u64>,
    served: u64,
}

impl<T> Default for AcceleratorScheduler<T> {
    fn default() -> Self {
        AcceleratorScheduler {
            queues: BTreeMap::new(),
            last: BTreeMap::new(),
            served: 0,
        }
    }
}

impl<T> AcceleratorScheduler<T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Queue a step.
    pub fn submit(&mut self, seq: u64, kind: StepKind, payload: T) {
        self.queues
            .entry((kind, seq))
            .or_default()
            .push_back(payload);
    }

    /// Steps waiting.
    pub fn len(&self) -> usize {
        self.queues.values().map(VecDeque::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Steps handed out so far.
    pub fn served(&self) -> u64 {
        self.served
    }

    /// The next step to run, by the policy above.
    pub fn take_next(&mut self) -> Option<Job<T>> {
        for kind in [StepKind::Decode, StepKind::Prefill] {
            let waiting: Vec<u64> = self
                .queues
                .range((kind, 0)..=(kind, u64::MAX))
                .filter(|(_, q)| !q.is_empty())
                .map(|(&(_, s), _)| s)
                .collect();
            if waiting.is_empty() {
                continue;
            }
            let seq = match self.last.get(&kind) {
                Some(&l) => waiting
                    .iter()
                    .copied()
                    .find(|&s| s > l)
                    .unwrap_or(waiting[0]),
                None => waiting[0],
            };
            let q = self.queues.get_mut(&(kind, seq))?;
            let payload = q.pop_front()?;
            if q.is_empty() {
                self.queues.remove(&(kind, seq));
            }
            self.last.insert(kind, seq);
            self.served += 1;
            return Some(Job { seq, kind, payload });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(s: &mut AcceleratorScheduler<u32>) -> Vec<(u64, StepKind, u32)> {
        std::iter::from_fn(|| s.take_next().map(|j| (j.seq, j.kind, j.payload))).collect()
    }

    #[test]
    fn decode_goes_before_prefill() {
        let mut s = AcceleratorScheduler::new();
        s.submit(1, StepKind::Prefill, 10);
        s.submit(2, StepKind::Decode, 20);
        s.submit(1, StepKind::Prefill, 11);
        assert_eq!(
            order(&mut s),
            vec![
                (2, StepKind::Decode, 20),
                (1, StepKind::Prefill, 10),
                (1, StepKind::Prefill, 11)
            ]
        );
        assert!(s.is_empty());
        assert_eq!(s.served(), 3);
    }

    #[test]
    fn sequences_take_turns_and_keep_their_own_order() {
        let mut s = AcceleratorScheduler::new();
        for p in 0..3 {
            s.submit(7, StepKind::Decode, 70 + p);
        }
        s.submit(3, StepKind::Decode, 30);
        s.submit(5, StepKind::Decode, 50);
        s.submit(5, StepKind::Decode, 51);
        let got: Vec<(u64, u32)> = order(&mut s).into_iter().map(|(q, _, p)| (q, p)).collect();
        assert_eq!(
            got,
            vec![(3, 30), (5, 50), (7, 70), (5, 51), (7, 71), (7, 72)]
        );
    }

    #[test]
    fn a_new_decode_preempts_waiting_prefill_between_steps() {
        let mut s = AcceleratorScheduler::new();
        s.submit(1, StepKind::Prefill, 1);
        s.submit(1, StepKind::Prefill, 2);
        assert_eq!(s.take_next().map(|j| j.payload), Some(1));
        s.submit(9, StepKind::Decode, 99);
        assert_eq!(s.take_next().map(|j| (j.seq, j.payload)), Some((9, 99)));
        assert_eq!(s.take_next().map(|j| j.payload), Some(2));
        assert_eq!(s.take_next(), None);
    }
}
