//! Accuracy metrics of the contract (BRIEF §2): how far a route's logit rows are from the f64
//! oracle's, and how two routes agree.
//!
//! Owns: the definitions, so every report computes them the same way:
//! - mean KL(oracle ‖ route) over positions, from log-softmax of each row (in f64);
//! - top-1 agreement: fraction of positions where the argmax matches (lowest id wins ties);
//! - max |Δ normalized logprob| over plausible tokens: the largest |logp_route − logp_oracle|
//!   over every (position, token) with oracle logprob > −10;
//! - first greedy divergence: the first position whose argmax differs (None if none).

use serde::Serialize;

/// Tokens with an oracle log-probability above this are "plausible".
pub const PLAUSIBLE_LOGPROB: f64 = -10.0;

/// log-softmax of one row, in f64.
pub fn log_softmax(x: &[f32]) -> Vec<f64> {
    let lse = log_sum_exp(x);
    x.iter().map(|&v| f64::from(v) - lse).collect()
}

/// `log_softmax(x)[i]` alone (the same value, without the row of them).
pub fn log_softmax_at(x: &[f32], i: usize) -> f64 {
    f64::from(x[i]) - log_sum_exp(x)
}

/// ln Σ exp(x), in f64, shifted by the maximum.
fn log_sum_exp(x: &[f32]) -> f64 {
    let max = x
        .iter()
        .fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
    x.iter()
        .map(|&v| (f64::from(v) - max).exp())
        .sum::<f64>()
        .ln()
        + max
}

/// Index of the largest value (lowest index on ties).
pub fn argmax(x: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in x.iter().enumerate() {
        if v > x[best] {
            best = i;
        }
    }
    best
}

/// Distance of `route` from `reference` (both `[n_pos][n_vocab]` flattened).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Comparison {
    pub positions: usize,
    /// Mean KL(reference ‖ route), nats.
    pub mean_kl: f64,
    /// Largest per-position KL.
    pub max_kl: f64,
    /// Fraction of positions with the same argmax.
    pub top1: f64,
    /// Max |Δ logprob| over tokens with reference logprob > −10.
    pub max_plausible_dlogp: f64,
    /// First position whose argmax differs.
    pub first_divergence: Option<usize>,
}

/// Compare two logit matrices of `n_vocab` columns. Panics if their lengths differ or are not
/// whole rows (a programming error of the caller, who loaded both files).
pub fn compare(reference: &[f32], route: &[f32], n_vocab: usize) -> Comparison {
    assert_eq!(
        reference.len(),
        route.len(),
        "logit matrices differ in size"
    );
    assert_eq!(reference.len() % n_vocab, 0, "not whole rows");
    let n = reference.len() / n_vocab;
    let (mut kl_sum, mut kl_max, mut agree, mut dmax) = (0.0, 0.0f64, 0usize, 0.0f64);
    let mut first = None;
    for t in 0..n {
        let a = &reference[t * n_vocab..(t + 1) * n_vocab];
        let b = &route[t * n_vocab..(t + 1) * n_vocab];
        let p = log_softmax(a);
        let q = log_softmax(b);
        let mut kl = 0.0;
        for (&lp, &lq) in p.iter().zip(&q) {
            kl += lp.exp() * (lp - lq);
            if lp > PLAUSIBLE_LOGPROB {
                dmax = dmax.max((lp - lq).abs());
            }
        }
        kl_sum += kl;
        kl_max = kl_max.max(kl);
        if argmax(a) == argmax(b) {
            agree += 1;
        } else if first.is_none() {
            first = Some(t);
        }
    }
    Comparison {
        positions: n,
        mean_kl: if n > 0 { kl_sum / n as f64 } else { 0.0 },
        max_kl: kl_max,
        top1: if n > 0 { agree as f64 / n as f64 } else { 1.0 },
        max_plausible_dlogp: dmax,
        first_divergence: first,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_rows_are_perfect() {
        let x = [1.0f32, 2.0, 3.0, 0.5, 2.0, 1.0];
        let c = compare(&x, &x, 3);
        assert_eq!(c.mean_kl, 0.0);
        assert_eq!(c.top1, 1.0);
        assert_eq!(c.max_plausible_dlogp, 0.0);
        assert_eq!(c.first_divergence, None);
    }

    #[test]
    fn differences_are_measured() {
        let a = [3.0f32, 1.0, 0.0, 0.0, 1.0, 3.0];
        let b = [1.0f32, 3.0, 0.0, 0.0, 1.0, 3.0];
        let c = compare(&a, &b, 3);
        assert!(c.mean_kl > 0.0 && c.max_kl > c.mean_kl);
        assert_eq!(c.top1, 0.5);
        assert_eq!(c.first_divergence, Some(0));
        assert!((c.max_plausible_dlogp - 2.0).abs() < 1e-9);
    }
}
