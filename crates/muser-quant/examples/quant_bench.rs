//! Quick throughput and accuracy report for muser-quant (no assertions; numbers only).
//!
//! `cargo run --release -p muser-quant --example quant_bench [-- --rows N --cols K --only q4_K --quant-only]`
//!
//! Times are on-CPU time of the benchmark thread (single core). Prints one JSON object per
//! line: dot-product throughput per weight type at each SIMD
//! level (a matrix-vector product over `rows × cols` weights, single thread), quantize
//! throughput, and relative RMS round-trip error on N(0, 1) data.

use std::hint::black_box;
use std::time::Instant;

use muser_quant::{self as mq, GgmlType, SimdLevel};

fn gaussian(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed;
    let mut next = move || {
        s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    (0..n)
        .map(|_| {
            let u1 = ((next() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
            let u2 = (next() >> 11) as f64 / (1u64 << 53) as f64;
            ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
        })
        .collect()
}

/// On-CPU nanoseconds of this thread (Linux `schedstat`), so a busy machine that time-slices
/// us does not distort per-core throughput; wall time elsewhere.
fn cpu_ns(start: Instant) -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .next()
                .and_then(|v| v.parse::<f64>().ok())
        })
        .unwrap_or_else(|| start.elapsed().as_nanos() as f64)
}

/// Run `f` repeatedly for at least `min_s` seconds of CPU time after one warm-up; returns
/// CPU seconds per call.
fn time<F: FnMut()>(min_s: f64, mut f: F) -> f64 {
    let wall = Instant::now();
    f();
    let t0 = cpu_ns(wall);
    let mut n = 0u64;
    loop {
        f();
        n += 1;
        let t = (cpu_ns(wall) - t0) * 1e-9;
        if t >= min_s {
            return t / n as f64;
        }
    }
}

fn aligned_bytes(n: usize) -> Vec<u32> {
    vec![0u32; n.div_ceil(4)]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: usize| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let rows = arg("--rows", 1024);
    let cols = arg("--cols", 4096);
    println!(
        "{{\"muser_simd\":\"{}\",\"detected\":\"{}\",\"rows\":{rows},\"cols\":{cols}}}",
        mq::simd_level().name(),
        mq::detected_level().name()
    );
    let levels: Vec<SimdLevel> = [SimdLevel::Scalar, SimdLevel::Avx2]
        .into_iter()
        .filter(|l| l.is_available())
        .collect();
    let types = [
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
        GgmlType::Q8_0,
        GgmlType::Q5_0,
        GgmlType::F16,
        GgmlType::BF16,
        GgmlType::F32,
    ];
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| GgmlType::from_name(v));
    let types: Vec<GgmlType> = types
        .into_iter()
        .filter(|t| only.is_none_or(|o| o == *t))
        .collect();
    let quant_only = args.iter().any(|a| a == "--quant-only");
    let wf = gaussian(1, rows * cols);
    let af = gaussian(2, cols);
    for ty in types {
        let vty = mq::vec_dot_type(ty).expect("weight type");
        let row_bytes = ty.bytes_for(cols as u64).expect("cols multiple of block") as usize;
        let act_bytes = vty.bytes_for(cols as u64).expect("cols multiple of block") as usize;
        let mut wbuf = aligned_bytes(rows * row_bytes);
        let mut abuf = aligned_bytes(act_bytes);
        let w = &mut bytemuck::cast_slice_mut::<u32, u8>(&mut wbuf)[..rows * row_bytes];
        let a = &mut bytemuck::cast_slice_mut::<u32, u8>(&mut abuf)[..act_bytes];

        // Quantize throughput (single thread) and round-trip error.
        let tq = time(0.3, || {
            mq::quantize(ty, black_box(&wf), w).expect("quantize")
        });
        let mut back = vec![0f32; rows * cols];
        mq::dequantize(ty, w, &mut back).expect("dequantize");
        let (mut e, mut s) = (0f64, 0f64);
        for (x, y) in wf.iter().zip(&back) {
            e += (f64::from(*x) - f64::from(*y)).powi(2);
            s += f64::from(*x).powi(2);
        }
        let td = time(0.3, || {
            mq::dequantize(ty, black_box(w), &mut back).expect("dequantize")
        });
        mq::quantize_activation(vty, &af, a).expect("quantize activations");
        println!(
            "{{\"type\":\"{ty}\",\"quantize_Mweights_per_s\":{:.1},\"dequantize_Mweights_per_s\":{:.1},\"rel_rms_err\":{:.5}}}",
            (rows * cols) as f64 / tq / 1e6,
            (rows * cols) as f64 / td / 1e6,
            (e / s).sqrt()
        );
        if quant_only {
            continue;
        }
        let mut out = vec![0f32; rows];
        let mut results = Vec::new();
        for &level in &levels {
            let t = time(0.5, || {
                mq::matvec_at(level, ty, black_box(w), a, &mut out).expect("matvec");
            });
            results.push(out.clone());
            println!(
                "{{\"type\":\"{ty}\",\"dot\":\"{ty}x{vty}\",\"simd\":\"{}\",\"weight_GB_per_s\":{:.2},\"Gweights_per_s\":{:.3},\"us_per_matvec\":{:.1}}}",
                level.name(),
                (rows * row_bytes) as f64 / t / 1e9,
                (rows * cols) as f64 / t / 1e9,
                t * 1e6
            );
        }
        if let [s, v] = results.as_slice() {
            let same = s.iter().zip(v).all(|(p, q)| p.to_bits() == q.to_bits());
            println!("{{\"type\":\"{ty}\",\"avx2_bit_identical_to_scalar\":{same}}}");
        }
    }
    if quant_only {
        return;
    }
    // Activation quantizers.
    for ty in [GgmlType::Q8_K, GgmlType::Q8_0, GgmlType::Q8_1] {
        let nb = ty.bytes_for(cols as u64).expect("multiple") as usize;
        let mut buf = aligned_bytes(nb);
        let b = &mut bytemuck::cast_slice_mut::<u32, u8>(&mut buf)[..nb];
        let t = time(0.3, || {
            mq::quantize(ty, black_box(&af), b).expect("quantize")
        });
        println!(
            "{{\"type\":\"{ty}\",\"activation_quantize_Mvalues_per_s\":{:.1}}}",
            cols as f64 / t / 1e6
        );
    }
}
