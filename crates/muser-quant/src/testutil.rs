//! Test helpers: a deterministic PRNG (splitmix64), Gaussian data and error metrics.

use bytemuck::{Pod, Zeroable};

use crate::q8_k::{self, BlockQ8K};

pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi)`.
    pub(crate) fn f32_range(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }

    /// A value of `T` with random bytes.
    pub(crate) fn pod<T: Pod>(&mut self) -> T {
        let mut v = T::zeroed();
        for b in bytemuck::bytes_of_mut(&mut v) {
            *b = self.next_u64() as u8;
        }
        v
    }

    /// A valid Q8_K block (quantized from random data of random magnitude).
    pub(crate) fn q8k_block(&mut self) -> BlockQ8K {
        let s = 2f32.powi((self.next_u64() % 20) as i32 - 10);
        let x: Vec<f32> = (0..256).map(|_| self.f32_range(-1.0, 1.0) * s).collect();
        let mut b = [BlockQ8K::zeroed(); 1];
        q8_k::quantize_row(&x, &mut b);
        b[0]
    }
}

/// `n` deterministic N(0, 1) samples (Box–Muller in f64).
pub(crate) fn gaussian(seed: u64, n: usize) -> Vec<f32> {
    let mut r = Rng::new(seed);
    (0..n)
        .map(|_| {
            let u1 = ((r.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
            let u2 = (r.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
        })
        .collect()
}

/// RMS(x − y) / RMS(x).
pub(crate) fn rel_rms(x: &[f32], y: &[f32]) -> f64 {
    let e: f64 = x
        .iter()
        .zip(y)
        .map(|(a, b)| (f64::from(*a) - f64::from(*b)).powi(2))
        .sum();
    let s: f64 = x.iter().map(|a| f64::from(*a).powi(2)).sum();
    (e / s).sqrt()
}

/// Deterministic pseudo-random f32 in [-s, s) (xorshift; the activation-format tests' data).
pub(crate) fn noise(seed: u64, n: usize, s: f32) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * s
        })
        .collect()
}

/// One weight row of `ty` with `n_in` values quantized from [`noise`].
pub(crate) fn noise_weights(ty: muser_gguf::GgmlType, n_in: usize, seed: u64) -> Vec<u8> {
    let x = noise(seed, n_in, 1.0);
    let mut w = vec![0u8; ty.bytes_for(n_in as u64).expect("size") as usize];
    crate::quantize(ty, &x, &mut w).expect("quantize");
    w
}

/// Every SIMD level this CPU can run (the scalar reference first); says loudly which levels it
/// cannot test here.
pub(crate) fn available_levels() -> Vec<crate::SimdLevel> {
    let all = crate::SimdLevel::ALL;
    for l in all.iter().filter(|l| !l.is_available()) {
        eprintln!("skipping level {}: not available on this CPU", l.name());
    }
    all.into_iter().filter(|l| l.is_available()).collect()
}
