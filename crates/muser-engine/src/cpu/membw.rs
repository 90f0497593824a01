//! Memory read bandwidth of this machine with the CPU route's worker threads — the ceiling of
//! a decode token, which reads every weight once. Benchmarks report decode as a share of it.
//!
//! Owns: the measurement. A buffer far larger than any cache (`bytes`) is filled once, then
//! read `reps` times in parallel (each thread sums its contiguous share as u64 words, which the
//! compiler vectorizes); the best pass counts. Reads only what it wrote: no unsafe, no input.

use rayon::prelude::*;

/// Best-of-`reps` parallel read bandwidth in GB/s over a `bytes` buffer, on `pool`.
pub fn read_bandwidth_gbps(pool: &rayon::ThreadPool, bytes: usize, reps: usize) -> f64 {
    let words = (bytes / 8).max(1 << 16);
    let buf: Vec<u64> = (0..words as u64).collect();
    let parts = pool.current_num_threads().max(1);
    let chunk = words.div_ceil(parts);
    let mut best = 0f64;
    for _ in 0..reps.max(1) {
        let t = std::time::Instant::now();
        let sum: u64 = pool.install(|| {
            buf.par_chunks(chunk)
                .map(|c| c.iter().fold(0u64, |a, &x| a.wrapping_add(x)))
                .reduce(|| 0, u64::wrapping_add)
        });
        let secs = t.elapsed().as_secs_f64();
        std::hint::black_box(sum);
        best = best.max((words * 8) as f64 / secs / 1e9);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_a_positive_finite_bandwidth() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let gbps = read_bandwidth_gbps(&pool, 8 << 20, 2);
        assert!(gbps.is_finite() && gbps > 0.0, "{gbps}");
    }
}
