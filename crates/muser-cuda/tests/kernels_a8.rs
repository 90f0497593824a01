//! The A8 activation side of the matmuls on the device (`matvec_a8.cu`, `matvec_packed_a8.cu`,
//! `mmq_a8.cu`; the route `MUSER_CUDA_ACTS=a8`): the device quantizer equals muser_quant::a8's
//! bit for bit; the one-token Q4_K / Q6_K-P kernels (staged, unstaged and register-resident),
//! the packed decode rows (dp4a and tensor cores) and the tensor-core matmuls equal the eight-token reference kernel bit
//! for bit, and so do the plain Q5_K / Q8_0 / Q5_0 one-token kernels theirs; each reference is
//! close to the f64 product of the dequantized weights and the dequantized A8 activations. Without a CUDA device every
//! test says "skipping: no CUDA device" (CI); `scripts/device/cuda-tests.sh` runs it on the H200.

use bytemuck::Zeroable;
use muser_cuda::launch::{launch, A16Matmul, Dims};
use muser_cuda::{DeviceBuffer, Gpu, Kernel, Math, Registry};
use muser_gguf::GgmlType;
use muser_quant::a8::{self, BlockA8};

mod support;
use support::*;

/// A8 activations on the device: `[n_tok][k]` i8 quants, `[n_tok][k/32]` scales and sums.
struct A8Dev {
    xq: DeviceBuffer,
    xs: DeviceBuffer,
    xsum: DeviceBuffer,
}

/// Quantize `x` (`[n_tok][k]`) with `quant_a8`, check it against muser_quant::a8 (quants,
/// scale bits, sums) and return it with the dequantized activations (f64, `[n_tok][k]`).
fn quant_a8_on_device(
    gpu: &Gpu,
    reg: &Registry,
    x: &[f32],
    k: usize,
    n_tok: usize,
) -> (A8Dev, Vec<f64>) {
    let (xq, xs, xsum) = launch_quant(gpu, reg, Kernel::QuantA8, x, (k, n_tok, 1));
    let mut q = vec![0i8; n_tok * k];
    let mut d = vec![0f32; n_tok * k / 32];
    let mut sum = vec![0i32; n_tok * k / 32];
    gpu.download(&mut q, xq.ptr(), "xq").expect("dl");
    gpu.download(&mut d, xs.ptr(), "xs").expect("dl");
    gpu.download(&mut sum, xsum.ptr(), "xsum").expect("dl");
    let mut deq = vec![0f64; n_tok * k];
    for t in 0..n_tok {
        let mut blocks = vec![BlockA8::zeroed(); a8::n_groups(k)];
        a8::quantize_row(&x[t * k..(t + 1) * k], &mut blocks).expect("cpu a8");
        for i in 0..k {
            let (b, j) = (&blocks[i / 256], i % 256);
            assert_eq!(q[t * k + i], b.qs[j], "quant {t}/{i}");
            if j % 32 == 0 {
                let g = t * k / 32 + i / 32;
                assert_eq!(d[g].to_bits(), b.d[j / 32].to_bits(), "scale {t}/{i}");
                assert_eq!(sum[g], b.sum[j / 32], "sum {t}/{i}");
            }
            deq[t * k + i] = f64::from(b.d[j / 32]) * f64::from(b.qs[j]);
        }
    }
    (A8Dev { xq, xs, xsum }, deq)
}

/// Rows in the layout the A8 kernels read: Q6_K repacked into Q6_K-P, the others as they are;
/// (bytes, row bytes).
fn device_layout(
    ty: GgmlType,
    host: Vec<u8>,
    row_bytes: usize,
    (n_out, k): (usize, usize),
) -> (Vec<u8>, usize) {
    if ty == GgmlType::Q6_K {
        (
            muser_cuda::q6pad::repack(&host, n_out, k).expect("repack"),
            muser_cuda::q6pad::row_bytes(k),
        )
    } else {
        (host, row_bytes)
    }
}

/// `kern` over `n_tok` tokens of `act` with weights (pointer, row bytes) into a guarded output.
fn run(
    gpu: &Gpu,
    reg: &Registry,
    kern: Kernel,
    dims: Dims,
    (w, row_bytes): (u64, usize),
    act: &A8Dev,
    (k, n_out, n_tok): (usize, usize, usize),
) -> Vec<f32> {
    let (buf, y) = guarded(gpu, n_tok * n_out);
    let args = A16Matmul {
        w,
        row_bytes,
        xq: act.xq.ptr(),
        xs: act.xs.ptr(),
        xsum: act.xsum.ptr(),
        k,
        y,
        ldy: n_out,
        n_out,
        n_tok,
    };
    launch(reg.get(kern, Math::Strict), dims, gpu.stream(), args.args()).expect("launch");
    read_guarded(gpu, &buf, n_tok * n_out, kern.symbol())
}

#[test]
fn a8_decode_kernels_match_their_reference() {
    let Some((gpu, reg)) = device() else { return };
    let (n_out, n_tok) = (77usize, 11usize);
    // As the A16 test: all-tail rows, full iterations + tail, tail pairs over several steps,
    // the widest staged copy (FFN down; 19968 · 80 / 64 = 24 960 bytes for A8). K = 9984 is
    // 39 blocks: Q6_K-P's last pair half empty.
    for k in [1024usize, 6656, 9984, 19968] {
        let x = rand_vec(n_tok * k, 99 + k as u64);
        let (act, xd) = quant_a8_on_device(&gpu, &reg, &x, k, n_tok);
        for (ty, k8, t1) in [
            (
                GgmlType::Q4_K,
                Kernel::MvaQ4kA8T8,
                [(Kernel::MvsQ4kA8T1, true), (Kernel::MvpQ4kA8T1, false)],
            ),
            (
                GgmlType::Q6_K,
                Kernel::MvaQ6pA8T8,
                [(Kernel::MvsQ6pA8T1, true), (Kernel::MvpQ6pA8T1, false)],
            ),
        ] {
            let (host, row_bytes) = quantized_rows(ty, n_out, k, 7 + ty as u64);
            let want = f64_products(ty, &host, row_bytes, &xd, k);
            let (bytes, row_bytes) = device_layout(ty, host, row_bytes, (n_out, k));
            let w = upload_bytes(&gpu, &bytes);
            let y8 = run(
                &gpu,
                &reg,
                k8,
                mva_dims(&reg, n_out, n_tok, 1, 8),
                (w.ptr(), row_bytes),
                &act,
                (k, n_out, n_tok),
            );
            // `kern` over the first `nt` tokens must give the eight-token kernel's bits.
            let same_as_y8 = |kern: Kernel, dims: Dims, nt: usize| {
                let y = run(
                    &gpu,
                    &reg,
                    kern,
                    dims,
                    (w.ptr(), row_bytes),
                    &act,
                    (k, n_out, nt),
                );
                assert_eq!(
                    bits(&y),
                    bits(&y8[..nt * n_out]),
                    "{ty:?} A8: {} with {nt} tokens differs from {} at K = {k}",
                    kern.symbol(),
                    k8.symbol()
                );
            };
            for (kern, staged) in t1 {
                same_as_y8(kern, t1_dims(&reg, kern, n_out, k, staged), 1);
            }
            // The register-resident kernels, where a lane's activations fit (K <= 8192).
            let mvr = if ty == GgmlType::Q4_K {
                Kernel::MvrQ4kA8T1
            } else {
                Kernel::MvrQ6pA8T1
            };
            if let Some(dims) = reg.mvr_dims(n_out, k) {
                same_as_y8(mvr, dims, 1);
            }
            // Packed decode rows (matvec_packed_a8.cu), in batched decode's launch shape
            // (`Registry::packed_plan_a8`): each token's outputs are the eight-token kernel's.
            for (nt, staged, unstaged) in packed_a8(ty) {
                let plan = reg.packed_plan_a8(n_out, k, nt);
                if plan.staged {
                    same_as_y8(staged, plan.dims, nt);
                }
                same_as_y8(
                    unstaged,
                    Dims {
                        smem: 0,
                        ..plan.dims
                    },
                    nt,
                );
            }
            // Packed rows on the tensor cores (mmv_a8.cu): every token count 1..=8 of one
            // launch.
            if Registry::mmv_fits(k) {
                let km = if ty == GgmlType::Q4_K {
                    Kernel::MmvQ4kA8
                } else {
                    Kernel::MmvQ6pA8
                };
                for nt in 1..=8usize.min(n_tok) {
                    same_as_y8(km, reg.mmv_dims(n_out, k), nt);
                }
            }
            assert_close(&format!("{ty:?} A8 K={k}"), &y8, &want, 1e-5, 1e-6);
            eprintln!("{ty:?} A8: ok ({n_out} rows x {k}, {n_tok} tokens)");
        }
    }
}

/// The packed A8 decode kernels of a format: (tokens per launch, staged, unstaged).
fn packed_a8(ty: GgmlType) -> [(usize, Kernel, Kernel); 3] {
    use Kernel::*;
    if ty == GgmlType::Q4_K {
        [
            (2, MvsQ4kA8T2, MvpQ4kA8T2),
            (4, MvsQ4kA8T4, MvpQ4kA8T4),
            (8, MvsQ4kA8T8, MvpQ4kA8T8),
        ]
    } else {
        [
            (2, MvsQ6pA8T2, MvpQ6pA8T2),
            (4, MvsQ6pA8T4, MvpQ6pA8T4),
            (8, MvsQ6pA8T8, MvpQ6pA8T8),
        ]
    }
}

/// The plain A8 kernels (Q5_K, Q8_0, Q5_0; mva_body through the formats' dot<NT>): the
/// one-token kernel (`MUSER_CUDA_MVA_ROWS` rows per warp) equals the eight-token kernel bit for
/// bit, and that is close to the f64 product of the dequantized weights and activations.
#[test]
fn a8_plain_kernels_match_their_reference() {
    let Some((gpu, reg)) = device() else { return };
    let (n_out, n_tok) = (77usize, 11usize);
    for k in [1024usize, 6656, 9984] {
        let x = rand_vec(n_tok * k, 57 + k as u64);
        let (act, xd) = quant_a8_on_device(&gpu, &reg, &x, k, n_tok);
        for (ty, k1, k8) in [
            (GgmlType::Q5_K, Kernel::MvaQ5kA8T1, Kernel::MvaQ5kA8T8),
            (GgmlType::Q8_0, Kernel::MvaQ80A8T1, Kernel::MvaQ80A8T8),
            (GgmlType::Q5_0, Kernel::MvaQ50A8T1, Kernel::MvaQ50A8T8),
        ] {
            let (host, row_bytes) = quantized_rows(ty, n_out, k, 13 + ty as u64);
            let want = f64_products(ty, &host, row_bytes, &xd, k);
            let w = upload_bytes(&gpu, &host);
            let y8 = run(
                &gpu,
                &reg,
                k8,
                mva_dims(&reg, n_out, n_tok, 1, 8),
                (w.ptr(), row_bytes),
                &act,
                (k, n_out, n_tok),
            );
            let y1 = run(
                &gpu,
                &reg,
                k1,
                mva_dims(&reg, n_out, 1, reg.mva_rows, 1),
                (w.ptr(), row_bytes),
                &act,
                (k, n_out, 1),
            );
            assert_eq!(
                bits(&y1),
                bits(&y8[..n_out]),
                "{ty:?} A8: {} differs from {} at K = {k}",
                k1.symbol(),
                k8.symbol()
            );
            assert_close(&format!("{ty:?} A8 K={k}"), &y8, &want, 1e-5, 1e-6);
            eprintln!("{ty:?} A8 plain: ok ({n_out} rows x {k}, {n_tok} tokens)");
        }
    }
}

/// The A8 tensor-core prefill matmuls (`mmq_a8.cu`) equal the eight-token A8 kernels bit for
/// bit (which equal the one-token decode kernels, above): two row tiles and two token tiles,
/// both partial, and a two-token launch.
#[test]
fn a8_mmq_kernels_match_the_decode_kernels() {
    let Some((gpu, reg)) = device() else { return };
    let n_out = 200usize;
    for k in [1024usize, 6656, 9984] {
        for n_tok in [70usize, 2] {
            let x = rand_vec(n_tok * k, 3 + k as u64);
            let (act, _) = quant_a8_on_device(&gpu, &reg, &x, k, n_tok);
            for (ty, k8, kmmq) in [
                (GgmlType::Q4_K, Kernel::MvaQ4kA8T8, Kernel::MmqQ4kA8),
                (GgmlType::Q6_K, Kernel::MvaQ6pA8T8, Kernel::MmqQ6pA8),
            ] {
                let (host, row_bytes) = quantized_rows(ty, n_out, k, 41 + ty as u64);
                let (bytes, row_bytes) = device_layout(ty, host, row_bytes, (n_out, k));
                let w = upload_bytes(&gpu, &bytes);
                let (wp, shape) = ((w.ptr(), row_bytes), (k, n_out, n_tok));
                let y8 = run(
                    &gpu,
                    &reg,
                    k8,
                    mva_dims(&reg, n_out, n_tok, 1, 8),
                    wp,
                    &act,
                    shape,
                );
                let ym = run(
                    &gpu,
                    &reg,
                    kmmq,
                    reg.mmq_dims(n_out, n_tok),
                    wp,
                    &act,
                    shape,
                );
                let diff = bits(&ym)
                    .iter()
                    .zip(bits(&y8))
                    .filter(|(a, b)| **a != *b)
                    .count();
                assert_eq!(
                    diff,
                    0,
                    "{ty:?} A8 K={k} n_tok={n_tok}: {diff} of {} mmq outputs differ from {}",
                    ym.len(),
                    k8.symbol()
                );
                eprintln!("{ty:?} A8 mmq: ok ({n_out} rows x {k}, {n_tok} tokens, bit-identical)");
            }
        }
    }
}
