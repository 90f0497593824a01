//! Helpers shared by the device kernel tests (`kernels.rs`, `kernels_a8.rs`): the device and
//! registry (or a loud skip), guarded output buffers, deterministic inputs, the f64 reference
//! products and the comparisons.
#![allow(dead_code)] // each test binary uses its own subset

use muser_cuda::launch::{launch, Dims};
use muser_cuda::{DeviceBuffer, Gpu, KArgs, Kernel, Math, Module, Registry};
use muser_gguf::GgmlType;

pub const GUARD: usize = 256; // f32 words each side
pub const SENTINEL: u32 = 0x7FC0_DEAD;

pub fn device() -> Option<(Gpu, Registry)> {
    match Gpu::probe() {
        Ok(Some(_)) => {}
        _ => {
            eprintln!("skipping: no CUDA device");
            return None;
        }
    }
    let gpu = Gpu::open(0).expect("open GPU");
    let reg = Registry::build_modules(&gpu, &Module::ALL).expect("registry");
    Some((gpu, reg))
}

/// A device f32 buffer of `n` words with guards; returns (buffer, pointer to word 0).
pub fn guarded(gpu: &Gpu, n: usize) -> (DeviceBuffer, u64) {
    let buf = gpu
        .alloc((n + 2 * GUARD) * 4, "test output")
        .expect("alloc");
    let fill = vec![SENTINEL; n + 2 * GUARD];
    gpu.upload(buf.ptr(), &fill).expect("upload");
    let p = buf.ptr() + (GUARD * 4) as u64;
    (buf, p)
}

/// Read back `n` words and check both guards are intact.
pub fn read_guarded(gpu: &Gpu, buf: &DeviceBuffer, n: usize, what: &str) -> Vec<f32> {
    let mut all = vec![0u32; n + 2 * GUARD];
    gpu.download(&mut all, buf.ptr(), what).expect("download");
    let bad = all[..GUARD]
        .iter()
        .chain(&all[GUARD + n..])
        .filter(|&&w| w != SENTINEL)
        .count();
    assert_eq!(bad, 0, "{what}: {bad} guard words overwritten");
    all[GUARD..GUARD + n]
        .iter()
        .map(|&w| f32::from_bits(w))
        .collect()
}

pub fn upload_bytes(gpu: &Gpu, bytes: &[u8]) -> DeviceBuffer {
    // 256 bytes of slack: kernels may read a few bytes past 2-byte-aligned runs.
    let buf = gpu.alloc(bytes.len() + 256, "test input").expect("alloc");
    gpu.upload(buf.ptr(), bytes).expect("upload");
    buf
}

/// Deterministic pseudo-random values in [-1, 1).
pub fn rand_vec(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

pub fn bytemuck_f32(x: &[f32]) -> &[u8] {
    // SAFETY: f32 has no padding and any byte pattern is a valid u8.
    unsafe { std::slice::from_raw_parts(x.as_ptr().cast::<u8>(), std::mem::size_of_val(x)) }
}

/// `n_rows` rows of `k` pseudo-random values quantized to `ty`; returns (bytes, row bytes).
pub fn quantized_rows(ty: GgmlType, n_rows: usize, k: usize, seed: u64) -> (Vec<u8>, usize) {
    let row_bytes = k / ty.block_size() * ty.type_size();
    let wf = rand_vec(n_rows * k, seed);
    let mut w = vec![0u8; n_rows * row_bytes];
    for (src, dst) in wf.chunks(k).zip(w.chunks_mut(row_bytes)) {
        muser_quant::quantize(ty, src, dst).expect("quantize");
    }
    (w, row_bytes)
}

/// `want[t * n_out + r]`: row `r` of the dequantized weights (f64) · token `t` of `x`.
pub fn f64_products(ty: GgmlType, w: &[u8], row_bytes: usize, x: &[f64], k: usize) -> Vec<f64> {
    let (n_out, n_tok) = (w.len() / row_bytes, x.len() / k);
    let mut want = vec![0f64; n_tok * n_out];
    let mut wrow = vec![0f64; k];
    for (r, row) in w.chunks(row_bytes).enumerate() {
        muser_quant::dequantize_f64(ty, row, &mut wrow).expect("deq");
        for (t, xt) in x.chunks(k).enumerate() {
            want[t * n_out + r] = wrow.iter().zip(xt).map(|(a, b)| a * b).sum();
        }
    }
    want
}

pub fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Every `got` within `abs` × the outputs' RMS plus `rel` × |want| of the f64 reference.
pub fn assert_close(what: &str, got: &[f32], want: &[f64], abs: f64, rel: f64) {
    let norm = want.iter().map(|v| v * v).sum::<f64>().sqrt() / (want.len() as f64).sqrt();
    for (i, (&g, &r)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(g) - r).abs();
        assert!(
            err <= abs * norm.max(1e-3) + rel * r.abs(),
            "{what} [{i}]: {g} vs {r} (err {err:e}, norm {norm:e})"
        );
    }
}

/// Launch shape of the dp2a matvec kernels: `rows_per_warp` rows per warp, `tok_per_launch`
/// tokens per row pass.
pub fn mva_dims(
    reg: &Registry,
    n_out: usize,
    nt: usize,
    rows_per_warp: u32,
    tok_per_launch: u32,
) -> Dims {
    Dims {
        grid: (
            (n_out as u32).div_ceil(reg.mva_warps * rows_per_warp),
            (nt as u32).div_ceil(tok_per_launch),
            1,
        ),
        block: 32 * reg.mva_warps,
        smem: 0,
    }
}

/// Quantize `x` (`[n_tok][k]` f32) on the device with `kern` (`quant_a16` / `quant_a8`, quants
/// of `quant_bytes` each): the (quants, scales, sums) buffers.
pub fn launch_quant(
    gpu: &Gpu,
    reg: &Registry,
    kern: Kernel,
    x: &[f32],
    (k, n_tok, quant_bytes): (usize, usize, usize),
) -> (DeviceBuffer, DeviceBuffer, DeviceBuffer) {
    let xd = upload_bytes(gpu, bytemuck_f32(x));
    let xq = gpu.alloc(n_tok * k * quant_bytes, "xq").expect("alloc");
    let xs = gpu.alloc(n_tok * k / 32 * 4, "xs").expect("alloc");
    let xsum = gpu.alloc(n_tok * k / 32 * 4, "xsum").expect("alloc");
    launch(
        reg.get(kern, Math::Strict),
        Dims {
            grid: ((k as u32 / 32).div_ceil(8), n_tok as u32, 1),
            block: 256,
            smem: 0,
        },
        gpu.stream(),
        KArgs::new()
            .ptr(xd.ptr())
            .int(k)
            .int(k)
            .int(n_tok)
            .ptr(xq.ptr())
            .ptr(xs.ptr())
            .ptr(xsum.ptr()),
    )
    .unwrap_or_else(|e| panic!("launch {}: {e}", kern.symbol()));
    (xq, xs, xsum)
}

/// The engine's launch of a one-token pipelined kernel (`Registry::t1_plan`), checked to take
/// the staged or unstaged path the test asks for.
pub fn t1_dims(reg: &Registry, kern: Kernel, n_out: usize, k: usize, staged: bool) -> Dims {
    let plan = reg.t1_plan(kern, n_out, k, staged);
    assert_eq!(
        plan.staged,
        staged,
        "{}: staged plan at K = {k}",
        kern.symbol()
    );
    plan.dims
}
