//! Token sampling in llama.cpp's default chain order:
//! repetition penalty → top-k → top-p → min-p → temperature → draw.
//!
//! Owns: turning one logit row into one token id. Invariants: `temp <= 0` is greedy (argmax,
//! the lowest id wins a tie) and uses no randomness; otherwise the draw is a pure function of
//! (logits, history, seed, number of draws so far), so a seed reproduces a generation exactly.
//! The random stream is Muser's own (SplitMix64-seeded xoshiro256**), not llama.cpp's mt19937,
//! so equal seeds do not give equal draws across the two engines. The row is read in place
//! (the penalty's few values merged in index order; top-k in one pass over it): no per-token
//! copy of a 202048-entry row.

use std::collections::VecDeque;

/// Sampler settings; defaults are llama.cpp's.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplerConfig {
    /// Temperature; `<= 0` means greedy.
    pub temp: f32,
    /// Keep the `top_k` most likely tokens (0 = off).
    pub top_k: usize,
    /// Keep the smallest set whose probability reaches `top_p` (1 = off).
    pub top_p: f32,
    /// Drop tokens below `min_p` × the top probability (0 = off).
    pub min_p: f32,
    /// Divide positive / multiply negative logits of recently seen tokens (1 = off).
    pub repeat_penalty: f32,
    /// How many recent tokens the penalty looks at.
    pub repeat_last_n: usize,
    pub seed: u64,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            temp: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            seed: 0,
        }
    }
}

impl SamplerConfig {
    /// Greedy decoding.
    pub fn greedy() -> SamplerConfig {
        SamplerConfig {
            temp: 0.0,
            ..SamplerConfig::default()
        }
    }
}

/// xoshiro256** seeded by SplitMix64.
struct Rng([u64; 4]);

impl Rng {
    fn new(seed: u64) -> Rng {
        let mut s = seed;
        let mut next = || {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng([next(), next(), next(), next()])
    }

    fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        let r = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        r
    }

    /// Uniform in [0, 1).
    fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A stateful sampler (it remembers recent tokens for the penalty).
pub struct Sampler {
    cfg: SamplerConfig,
    rng: Rng,
    recent: VecDeque<u32>,
}

/// Index of the largest value; the lowest index wins ties; NaN never wins.
pub fn argmax(x: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in x.iter().enumerate() {
        if v > x[best] || x[best].is_nan() {
            best = i;
        }
    }
    best
}

impl Sampler {
    /// Greedy: `argmax` of the logits after the repeat penalty, without copying the row (two
    /// copies of 202048 entries per token before) — the penalized values (each recent
    /// occurrence applied in turn, as the sampling path does) kept aside for the few tokens
    /// they touch.
    fn choose_greedy(&self, logits: &[f32]) -> u32 {
        let pen = self.penalized(logits);
        if pen.is_empty() {
            return argmax(logits) as u32;
        }
        // `argmax` over the penalized row, read in index order.
        let (mut best, mut bv) = (0, f32::NAN);
        for (i, v) in row_values(logits, &pen) {
            if i == 0 || v > bv || bv.is_nan() {
                (best, bv) = (i, v);
            }
        }
        best as u32
    }

    /// The recent tokens' penalized logits, sorted by id, each token once (the penalty applied
    /// once per occurrence, in turn, as on a copy of the row); empty without a penalty.
    fn penalized(&self, logits: &[f32]) -> Vec<(u32, f32)> {
        let c = &self.cfg;
        let mut pen: Vec<(u32, f32)> = Vec::new();
        if c.repeat_penalty == 1.0 {
            return pen;
        }
        for &t in &self.recent {
            let Some(&l) = logits.get(t as usize) else {
                continue;
            };
            let at = match pen.iter().position(|e| e.0 == t) {
                Some(at) => at,
                None => {
                    pen.push((t, l));
                    pen.len() - 1
                }
            };
            pen[at].1 = penalize(pen[at].1, c.repeat_penalty);
        }
        pen.sort_by_key(|e| e.0);
        pen
    }
}

/// The row's values in index order with the penalized ones (`Sampler::penalized`: sorted,
/// distinct) merged in — the penalized row, without copying it.
fn row_values<'a>(
    logits: &'a [f32],
    pen: &'a [(u32, f32)],
) -> impl Iterator<Item = (usize, f32)> + 'a {
    let mut j = 0;
    logits
        .iter()
        .enumerate()
        .map(move |(i, &l)| match pen.get(j) {
            Some(&(t, pv)) if t as usize == i => {
                j += 1;
                (i, pv)
            }
            _ => (i, l),
        })
}

/// The first `k` (> 0) of the row in `rank_top_k`'s order, in one pass: a sorted buffer of the
/// best `k` so far, which a value enters only when it ranks before the buffer's last. The
/// same k in the same order as ranking a copy of the row (the full row is never copied).
fn top_k_scan(values: impl Iterator<Item = (usize, f32)>, k: usize) -> Vec<(u32, f32)> {
    let mut top: Vec<(u32, f32)> = Vec::with_capacity(k + 1);
    for (i, v) in values {
        let x = (i as u32, v);
        if top.len() == k && by_rank(&x, &top[k - 1]) != std::cmp::Ordering::Less {
            continue;
        }
        let at = top.partition_point(|e| by_rank(e, &x) == std::cmp::Ordering::Less);
        top.insert(at, x);
        top.truncate(k);
    }
    top
}

/// Logit descending, then id ascending: a total order (`total_cmp`), so ranks reproduce.
fn by_rank(a: &(u32, f32), b: &(u32, f32)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

/// The repeat penalty on one logit: a positive one divided, any other multiplied.
fn penalize(v: f32, penalty: f32) -> f32 {
    if v > 0.0 {
        v / penalty
    } else {
        v * penalty
    }
}

/// Sort every candidate by `by_rank` (the sampler without a top-k cut).
fn rank_all(cand: &mut [(u32, f32)]) {
    cand.sort_by(by_rank);
}

impl Sampler {
    pub fn new(cfg: SamplerConfig) -> Sampler {
        let rng = Rng::new(cfg.seed);
        Sampler {
            cfg,
            rng,
            recent: VecDeque::new(),
        }
    }

    /// Record a token that is part of the context (prompt tokens and accepted samples).
    pub fn accept(&mut self, tok: u32) {
        if self.cfg.repeat_last_n == 0 {
            return;
        }
        if self.recent.len() == self.cfg.repeat_last_n {
            self.recent.pop_front();
        }
        self.recent.push_back(tok);
    }

    /// Choose the next token from one logit row, and record it.
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        let tok = self.choose(logits);
        self.accept(tok);
        tok
    }

    fn choose(&mut self, logits: &[f32]) -> u32 {
        let c = &self.cfg;
        if c.temp <= 0.0 {
            return self.choose_greedy(logits);
        }
        let pen = self.penalized(logits);
        let mut cand: Vec<(u32, f32)> = if c.top_k > 0 && c.top_k < logits.len() {
            top_k_scan(row_values(logits, &pen), c.top_k)
        } else {
            let mut all: Vec<(u32, f32)> = row_values(logits, &pen)
                .map(|(i, v)| (i as u32, v))
                .collect();
            rank_all(&mut all);
            all
        };
        let probs = |cand: &[(u32, f32)]| -> Vec<f64> {
            let max = f64::from(cand[0].1);
            let e: Vec<f64> = cand.iter().map(|x| (f64::from(x.1) - max).exp()).collect();
            let s: f64 = e.iter().sum();
            e.iter().map(|v| v / s).collect()
        };
        if c.top_p < 1.0 {
            let p = probs(&cand);
            let mut acc = 0.0;
            let mut keep = cand.len();
            for (i, pi) in p.iter().enumerate() {
                acc += pi;
                if acc >= f64::from(c.top_p) {
                    keep = i + 1;
                    break;
                }
            }
            cand.truncate(keep.max(1));
        }
        if c.min_p > 0.0 {
            let floor = cand[0].1 + c.min_p.ln();
            let keep = cand.iter().take_while(|x| x.1 >= floor).count();
            cand.truncate(keep.max(1));
        }
        for x in cand.iter_mut() {
            x.1 /= c.temp;
        }
        let p = probs(&cand);
        let u = self.rng.uniform();
        let mut acc = 0.0;
        for (x, pi) in cand.iter().zip(&p) {
            acc += pi;
            if u < acc {
                return x.0;
            }
        }
        cand[cand.len() - 1].0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_the_argmax_and_lowest_id_on_ties() {
        let mut s = Sampler::new(SamplerConfig::greedy());
        assert_eq!(s.sample(&[0.1, 3.0, 3.0, -1.0]), 1);
    }

    #[test]
    fn same_seed_same_draws() {
        let logits: Vec<f32> = (0..100).map(|i| ((i * 37) % 11) as f32 * 0.3).collect();
        let cfg = SamplerConfig {
            seed: 9,
            ..SamplerConfig::default()
        };
        let run = || {
            let mut s = Sampler::new(cfg.clone());
            (0..20).map(|_| s.sample(&logits)).collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
    }

    #[test]
    fn top_k_one_is_greedy() {
        let logits = [0.5f32, 2.0, 1.0];
        let cfg = SamplerConfig {
            top_k: 1,
            seed: 3,
            ..SamplerConfig::default()
        };
        let mut s = Sampler::new(cfg);
        for _ in 0..10 {
            assert_eq!(s.sample(&logits), 1);
        }
    }

    #[test]
    fn min_p_removes_unlikely_tokens() {
        // Token 2 has probability e^-10 relative to the top: min_p 0.05 removes it.
        let logits = [10.0f32, 9.5, 0.0];
        let cfg = SamplerConfig {
            top_k: 0,
            top_p: 1.0,
            min_p: 0.05,
            temp: 1.0,
            seed: 1,
            ..SamplerConfig::default()
        };
        let mut s = Sampler::new(cfg);
        for _ in 0..200 {
            assert_ne!(s.sample(&logits), 2);
        }
    }

    #[test]
    fn repeat_penalty_lowers_seen_tokens() {
        let logits = [2.0f32, 1.9];
        let cfg = SamplerConfig {
            repeat_penalty: 1.5,
            ..SamplerConfig::greedy()
        };
        let mut s = Sampler::new(cfg);
        s.accept(0);
        assert_eq!(s.sample(&logits), 1);
    }

    /// The one-pass top-k gives exactly the full sort's first k of the penalized row: logits
    /// with many ties (a few distinct values), negative zeros and NaNs, penalized tokens, every
    /// k from 1 to past the length.
    #[test]
    fn top_k_scan_equals_the_full_sort() {
        let mut seed = 7u32;
        let mut next = || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            seed >> 8
        };
        for n in [1usize, 2, 5, 64, 1000] {
            let logits: Vec<f32> = (0..n)
                .map(|_| match next() % 11 {
                    0 => -0.0,
                    1 => f32::NAN,
                    r => (r % 4) as f32 * 0.5 - 1.0,
                })
                .collect();
            let mut s = Sampler::new(SamplerConfig {
                repeat_penalty: 1.5,
                ..SamplerConfig::default()
            });
            for _ in 0..6 {
                s.accept(next() % n as u32);
            }
            let pen = s.penalized(&logits);
            let mut full: Vec<(u32, f32)> = logits
                .iter()
                .enumerate()
                .map(|(i, &l)| (i as u32, l))
                .collect();
            for &t in &s.recent {
                full[t as usize].1 = penalize(full[t as usize].1, 1.5);
            }
            rank_all(&mut full);
            for k in [1usize, 2, 3, 40, n, n + 1] {
                let got = top_k_scan(row_values(&logits, &pen), k);
                let bits =
                    |v: &[(u32, f32)]| v.iter().map(|x| (x.0, x.1.to_bits())).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&full[..k.min(n)]), "n {n}, k {k}");
            }
        }
    }

    /// Greedy with the repeat penalty reads the row in place and picks exactly what the argmax
    /// of a penalized copy picks: recent tokens repeated (penalized once per occurrence), out of
    /// range, at index 0, on ties, beside NaNs.
    #[test]
    fn greedy_in_place_equals_the_penalized_copy() {
        let mut seed = 11u32;
        let mut next = || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            seed >> 8
        };
        for case in 0..200 {
            let n = 1 + (next() % 50) as usize;
            let logits: Vec<f32> = (0..n)
                .map(|_| match next() % 9 {
                    0 => f32::NAN,
                    1 => -0.0,
                    r => (r % 4) as f32 * 0.75 - 1.2,
                })
                .collect();
            let cfg = SamplerConfig {
                repeat_penalty: [1.0, 1.3, 0.7][case % 3],
                repeat_last_n: 8,
                ..SamplerConfig::greedy()
            };
            let mut s = Sampler::new(cfg.clone());
            for _ in 0..(next() % 10) {
                s.accept(next() % (n as u32 + 3));
            }
            let mut copy = logits.clone();
            for &t in &s.recent {
                if let Some(v) = copy.get_mut(t as usize) {
                    *v = penalize(*v, cfg.repeat_penalty);
                }
            }
            assert_eq!(
                s.choose_greedy(&logits),
                argmax(&copy) as u32,
                "case {case}: {logits:?}, recent {:?}",
                s.recent
            );
        }
    }
}
