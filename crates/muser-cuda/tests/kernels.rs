//! Kernel tests against the CPU reference, on the device. Without a CUDA device every test says
//! "skipping: no CUDA device" and returns (CI); `scripts/device/cuda-tests.sh` runs them on the
//! H200.
//!
//! Every output buffer is surrounded by guard regions filled with a sentinel; a kernel that
//! writes outside its output fails the test.

use muser_cuda::launch::{launch, A16Matmul, Dims};
use muser_cuda::{DeviceBuffer, Gpu, KArgs, Kernel, Math, Registry, MMV_PAIR_MAX_TOKENS};
use muser_gguf::GgmlType;
use muser_quant::a16::{self, BlockA16};

mod support;
use support::*;

struct A16Dev {
    xq: DeviceBuffer,
    xs: DeviceBuffer,
    xsum: DeviceBuffer,
}

/// Quantize `x` ([n_tok][k]) with the device's quant_a16 and check it equals muser_quant::a16.
fn quant_on_device(gpu: &Gpu, reg: &Registry, x: &[f32], k: usize, n_tok: usize) -> A16Dev {
    let (xq, xs, xsum) = launch_quant(gpu, reg, Kernel::QuantA16, x, (k, n_tok, 2));
    let mut q = vec![0i16; n_tok * k];
    let mut d = vec![0f32; n_tok * k / 32];
    let mut sum = vec![0i32; n_tok * k / 32];
    gpu.download(&mut q, xq.ptr(), "xq").expect("dl");
    gpu.download(&mut d, xs.ptr(), "xs").expect("dl");
    gpu.download(&mut sum, xsum.ptr(), "xsum").expect("dl");
    for t in 0..n_tok {
        let row = &x[t * k..(t + 1) * k];
        let mut blocks = vec![BlockA16::zeroed_block(); a16::n_groups(k)];
        a16::quantize_row(row, &mut blocks).expect("cpu a16");
        for i in 0..k {
            let (b, j) = (i / 256, i % 256);
            assert_eq!(q[t * k + i], blocks[b].qs[j], "quant {t}/{i}");
            if j % 32 == 0 {
                assert_eq!(
                    d[t * k / 32 + i / 32].to_bits(),
                    blocks[b].d[j / 32].to_bits(),
                    "scale {t}/{i}"
                );
                assert_eq!(
                    sum[t * k / 32 + i / 32],
                    blocks[b].sum[j / 32],
                    "sum {t}/{i}"
                );
            }
        }
    }
    A16Dev { xq, xs, xsum }
}

fn bytes_u32(x: &[u32]) -> &[u8] {
    // SAFETY: u32 has no padding and any byte pattern is a valid u8.
    unsafe { std::slice::from_raw_parts(x.as_ptr().cast::<u8>(), std::mem::size_of_val(x)) }
}

trait Zeroed {
    fn zeroed_block() -> Self;
}
impl Zeroed for BlockA16 {
    fn zeroed_block() -> Self {
        BlockA16 {
            d: [0.0; 8],
            sum: [0; 8],
            qs: [0; 256],
        }
    }
}

/// (one token, eight tokens, the decode variants: pipelined and shared-memory staged).
fn kernels(ty: GgmlType) -> (Kernel, Kernel, &'static [Kernel]) {
    use Kernel::*;
    match ty {
        GgmlType::Q4_K => (MvaQ4kT1, MvaQ4kT8, &[MvpQ4kT1, MvsQ4kT1]),
        GgmlType::Q5_K => (MvaQ5kT1, MvaQ5kT8, &[]),
        GgmlType::Q6_K => (MvaQ6kT1, MvaQ6kT8, &[MvpQ6kT1, MvsQ6kT1]),
        GgmlType::Q8_0 => (MvaQ80T1, MvaQ80T8, &[]),
        GgmlType::Q5_0 => (MvaQ50T1, MvaQ50T8, &[]),
        GgmlType::F16 => (MvaF16T1, MvaF16T8, &[]),
        GgmlType::F32 => (MvaF32T1, MvaF32T8, &[]),
        _ => unreachable!(),
    }
}

/// The packed-decode kernels of a format: (kernel, tokens per launch, staged).
fn packed_kernels(ty: GgmlType) -> &'static [(Kernel, usize, bool)] {
    use Kernel::*;
    match ty {
        GgmlType::Q4_K => &[
            (MvpQ4kT2, 2, false),
            (MvsQ4kT2, 2, true),
            (MvpQ4kT4, 4, false),
            (MvsQ4kT4, 4, true),
            (MvpQ4kT8, 8, false),
            (MvsQ4kT8, 8, true),
        ],
        GgmlType::Q6_K => &[
            (MvpQ6kT2, 2, false),
            (MvsQ6kT2, 2, true),
            (MvpQ6kT4, 4, false),
            (MvsQ6kT4, 4, true),
            (MvpQ6kT8, 8, false),
            (MvsQ6kT8, 8, true),
        ],
        _ => &[],
    }
}

/// The weight formats the matmul kernels take.
const TYPES: [GgmlType; 7] = [
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::Q8_0,
    GgmlType::Q5_0,
    GgmlType::F16,
    GgmlType::F32,
];

/// Every A16 matvec kernel against the f64 product of the dequantized weights and the
/// dequantized A16 activations; one-token, eight-token (with a tail) and pipelined kernels
/// bit-identical to each other.
#[test]
fn a16_matvec_kernels_match_the_cpu_reference() {
    let Some((gpu, reg)) = device() else { return };
    // K = 1024: 16 units per row (all in the decode kernels' packed tail); 6656: 3 full
    // iterations + 8 tail units; 9984: 4 + 28 (tail pairs over four steps); 19968: the widest
    // staged activation copy (Muse Glimmer's FFN down: 44 928 bytes of dynamic shared memory
    // beside the static lane-sum scratch, inside the 48 KiB default).
    for k in [1024usize, 6656, 9984, 19968] {
        a16_matvec_case(&gpu, &reg, k);
    }
}

/// One A16 matmul test case on the device: `n_out` quantized weight rows of `k` values, `n_tok`
/// activation rows quantized by the device (checked against the CPU), and the f64 reference.
struct A16Case {
    w: DeviceBuffer,
    /// The weight rows' bytes on the host (GGUF layout).
    host: Vec<u8>,
    row_bytes: usize,
    act: A16Dev,
    k: usize,
    n_out: usize,
    /// `[n_tok][n_out]`: the dequantized weights times the dequantized A16 activations, in f64.
    want: Vec<f64>,
}

impl A16Case {
    fn new(
        gpu: &Gpu,
        reg: &Registry,
        ty: GgmlType,
        (n_out, k, n_tok): (usize, usize, usize),
        (w_seed, x_seed): (u64, u64),
    ) -> A16Case {
        let (w, row_bytes) = quantized_rows(ty, n_out, k, w_seed);
        let x = rand_vec(n_tok * k, x_seed);
        let act = quant_on_device(gpu, reg, &x, k, n_tok);
        let mut xd = vec![0f64; n_tok * k];
        for t in 0..n_tok {
            let mut blocks = vec![BlockA16::zeroed_block(); a16::n_groups(k)];
            a16::quantize_row(&x[t * k..(t + 1) * k], &mut blocks).expect("a16");
            for i in 0..k {
                let b = &blocks[i / 256];
                xd[t * k + i] = f64::from(b.d[(i % 256) / 32]) * f64::from(b.qs[i % 256]);
            }
        }
        A16Case {
            want: f64_products(ty, &w, row_bytes, &xd, k),
            w: upload_bytes(gpu, &w),
            host: w,
            row_bytes,
            act,
            k,
            n_out,
        }
    }

    /// Launch `kern` on the first `n_tok` activation rows into a guarded output.
    fn run(&self, gpu: &Gpu, reg: &Registry, kern: Kernel, dims: Dims, n_tok: usize) -> Vec<f32> {
        self.run_on(gpu, reg, kern, dims, n_tok, (self.w.ptr(), self.row_bytes))
    }

    /// `run` with other weight bytes (another layout of the same rows): (pointer, row bytes).
    fn run_on(
        &self,
        gpu: &Gpu,
        reg: &Registry,
        kern: Kernel,
        dims: Dims,
        n_tok: usize,
        (w, row_bytes): (u64, usize),
    ) -> Vec<f32> {
        let (buf, y) = guarded(gpu, n_tok * self.n_out);
        let args = A16Matmul {
            w,
            row_bytes,
            xq: self.act.xq.ptr(),
            xs: self.act.xs.ptr(),
            xsum: self.act.xsum.ptr(),
            k: self.k,
            y,
            ldy: self.n_out,
            n_out: self.n_out,
            n_tok,
        };
        launch(reg.get(kern, Math::Strict), dims, gpu.stream(), args.args()).expect("launch");
        read_guarded(gpu, &buf, n_tok * self.n_out, kern.symbol())
    }
}

fn a16_matvec_case(gpu: &Gpu, reg: &Registry, k: usize) {
    let (n_out, n_tok) = (77usize, 11usize);
    for ty in TYPES {
        let case = A16Case::new(gpu, reg, ty, (n_out, k, n_tok), (7 + ty as u64, 99));
        let (k1, k8, kp) = kernels(ty);
        let run = |kern: Kernel, rows_per_warp: u32, nt: usize, tok_per_launch: u32| -> Vec<f32> {
            let dims = mva_dims(reg, n_out, nt, rows_per_warp, tok_per_launch);
            case.run(gpu, reg, kern, dims, nt)
        };
        // The pipelined one-token kernels in the engine's launch (`Registry::t1_plan`: the
        // staged activations and the weight ring, if `MUSER_CUDA_MVA_WSTAGES[_Q6]` asks for one,
        // in dynamic shared memory).
        let run_t1 = |kern: Kernel| -> Vec<f32> {
            let staged = matches!(kern, Kernel::MvsQ4kT1 | Kernel::MvsQ6kT1);
            case.run(gpu, reg, kern, t1_dims(reg, kern, n_out, k, staged), 1)
        };
        let y8 = run(k8, 1, n_tok, 8);
        let y1 = run(k1, reg.mva_rows, 1, 1);
        assert_eq!(
            bits(&y1),
            bits(&y8[..n_out]),
            "{ty:?}: one-token kernel differs from the eight-token kernel"
        );
        for &kp in kp {
            let yp = run_t1(kp);
            assert_eq!(
                bits(&yp),
                bits(&y1),
                "{ty:?}: {} differs from the one-token kernel",
                kp.symbol()
            );
        }
        // Q6_K: every kernel of the aligned repack (`muser_cuda::q6pad`; odd block counts
        // included: K = 9984 is 39 blocks) computes the Q6_K kernels' bits.
        if ty == GgmlType::Q6_K {
            q6p_case(gpu, reg, &case, (&y1, &y8), n_tok);
        }
        // Packed decode rows (several sequences' tokens in one launch): each token's outputs
        // are the eight-token kernel's, bit for bit, in the launch shape batched decode uses
        // (`Registry::packed_plan`). Staged variants only where their copy of `nt` activation
        // rows fits the opt-in shared memory.
        for &(kern, nt, staged) in packed_kernels(ty) {
            let plan = reg.packed_plan(n_out, k, nt);
            if staged && !plan.staged {
                continue;
            }
            let mut dims = plan.dims;
            if !staged {
                dims.smem = 0;
            }
            let yp = case.run(gpu, reg, kern, dims, nt);
            assert_eq!(
                bits(&yp),
                bits(&y8[..nt * n_out]),
                "{ty:?}: {} differs from the eight-token kernel",
                kern.symbol()
            );
        }
        // Packed rows on the tensor cores (Q4_K, Q6_K): every token count 1..=8 of one launch.
        let mmv = match ty {
            GgmlType::Q4_K => Some(Kernel::MmvQ4k),
            GgmlType::Q6_K => Some(Kernel::MmvQ6k),
            _ => None,
        };
        if let Some(km) = mmv.filter(|_| Registry::mmv_fits(k)) {
            // The paired tiles (<= 4 tokens: two units per tile).
            let kpair = if ty == GgmlType::Q4_K {
                Kernel::MmvPairQ4k
            } else {
                Kernel::MmvPairQ6k
            };
            for (kern, dims, max_nt) in [
                (km, reg.mmv_dims(n_out, k), 8),
                (kpair, reg.mmv_pair_dims(n_out, k), MMV_PAIR_MAX_TOKENS),
            ] {
                for nt in 1..=max_nt.min(n_tok) {
                    let ym = case.run(gpu, reg, kern, dims, nt);
                    assert_eq!(
                        bits(&ym),
                        bits(&y8[..nt * n_out]),
                        "{ty:?}: {} with {nt} tokens differs from the eight-token kernel",
                        kern.symbol()
                    );
                }
            }
        }
        assert_close(&format!("{ty:?}"), &y8, &case.want, 1e-5, 1e-6);
        eprintln!("{ty:?}: ok ({n_out} rows x {k}, {n_tok} tokens)");
    }
}

/// The Q6_K-P kernels (`muser_cuda::q6pad`, the engine's default Q6_K layout) on the repack of
/// `case`'s Q6_K rows, each against the GGUF-layout kernels' outputs: `y1` (one token) and
/// `y8` (`n_tok` tokens, eight-token kernel). Launch shapes as the engine's.
fn q6p_case(gpu: &Gpu, reg: &Registry, case: &A16Case, (y1, y8): (&[f32], &[f32]), n_tok: usize) {
    use Kernel::*;
    let (n_out, k) = (case.n_out, case.k);
    let p = muser_cuda::q6pad::repack(&case.host, n_out, k).expect("repack");
    let pw = upload_bytes(gpu, &p);
    let on_p = (pw.ptr(), muser_cuda::q6pad::row_bytes(k));
    let check = |kern: Kernel, dims: Dims, nt: usize, want: &[f32]| {
        let got = case.run_on(gpu, reg, kern, dims, nt, on_p);
        assert_eq!(
            bits(&got),
            bits(want),
            "Q6_K-P: {} with {nt} tokens differs from the Q6_K kernels at K = {k}",
            kern.symbol()
        );
    };
    check(MvaQ6pT1, mva_dims(reg, n_out, 1, reg.mva_rows, 1), 1, y1);
    check(MvaQ6pT8, mva_dims(reg, n_out, n_tok, 1, 8), n_tok, y8);
    for (kern, staged) in [(MvsQ6pT1, true), (MvpQ6pT1, false)] {
        check(kern, t1_dims(reg, kern, n_out, k, staged), 1, y1);
    }
    for (kern, nt, staged) in [
        (MvpQ6pT2, 2, false),
        (MvsQ6pT2, 2, true),
        (MvpQ6pT4, 4, false),
        (MvsQ6pT4, 4, true),
        (MvpQ6pT8, 8, false),
        (MvsQ6pT8, 8, true),
    ] {
        let plan = reg.packed_plan(n_out, k, nt);
        if staged && !plan.staged {
            continue;
        }
        let mut dims = plan.dims;
        if !staged {
            dims.smem = 0;
        }
        check(kern, dims, nt, &y8[..nt * n_out]);
    }
    if Registry::mmv_fits(k) {
        for nt in 1..=8usize.min(n_tok) {
            check(MmvQ6p, reg.mmv_dims(n_out, k), nt, &y8[..nt * n_out]);
        }
        for nt in 1..=MMV_PAIR_MAX_TOKENS.min(n_tok) {
            check(
                MmvPairQ6p,
                reg.mmv_pair_dims(n_out, k),
                nt,
                &y8[..nt * n_out],
            );
        }
    }
    for nt in [n_tok, 2] {
        check(MmqQ6p, reg.mmq_dims(n_out, nt), nt, &y8[..nt * n_out]);
    }
}

/// The tensor-core matmuls (Q4_K, Q6_K) bit-identical to the eight-token dp2a kernels (which
/// the test above ties to the one-token decode kernels) and close to the f64 reference; two
/// row tiles and two token tiles, both partial, and a two-token launch.
#[test]
fn mmq_kernels_match_the_decode_kernels_bit_for_bit() {
    let Some((gpu, reg)) = device() else { return };
    let n_out = 200usize;
    for k in [1024usize, 6656, 9984] {
        for (ty, kmmq, k8) in [
            (GgmlType::Q4_K, Kernel::MmqQ4k, Kernel::MvaQ4kT8),
            (GgmlType::Q6_K, Kernel::MmqQ6k, Kernel::MvaQ6kT8),
        ] {
            for n_tok in [70usize, 2] {
                let case = A16Case::new(
                    &gpu,
                    &reg,
                    ty,
                    (n_out, k, n_tok),
                    (41 + ty as u64, 3 + k as u64),
                );
                let y8 = case.run(&gpu, &reg, k8, mva_dims(&reg, n_out, n_tok, 1, 8), n_tok);
                let ym = case.run(&gpu, &reg, kmmq, reg.mmq_dims(n_out, n_tok), n_tok);
                let diff = bits(&ym)
                    .iter()
                    .zip(bits(&y8))
                    .filter(|(a, b)| **a != *b)
                    .count();
                assert_eq!(
                    diff,
                    0,
                    "{ty:?} K={k} n_tok={n_tok}: {diff} of {} mmq outputs differ from the dp2a kernel (first: {:?})",
                    ym.len(),
                    ym.iter().zip(&y8).find(|(a, b)| a.to_bits() != b.to_bits())
                );
                assert_close(&format!("{ty:?} mmq"), &ym, &case.want, 1e-5, 1e-6);
                if ty == GgmlType::Q6_K {
                    let p = muser_cuda::q6pad::repack(&case.host, n_out, k).expect("repack");
                    let pw = upload_bytes(&gpu, &p);
                    let yp = case.run_on(
                        &gpu,
                        &reg,
                        Kernel::MmqQ6p,
                        reg.mmq_dims(n_out, n_tok),
                        n_tok,
                        (pw.ptr(), muser_cuda::q6pad::row_bytes(k)),
                    );
                    assert!(
                        bits(&yp) == bits(&ym),
                        "Q6_K-P mmq K={k} n_tok={n_tok}: differs from mmq_q6_k"
                    );
                }
                eprintln!("{ty:?} mmq: ok ({n_out} rows x {k}, {n_tok} tokens, bit-identical)");
            }
        }
    }
}

/// A kernel never registered is a programming error that fails loudly (no fallback).
#[test]
fn every_registered_kernel_loads() {
    let Some((_gpu, reg)) = device() else { return };
    for &k in Kernel::ALL {
        for &m in k.module().maths() {
            let _ = reg.get(k, m);
        }
    }
    assert!(reg.init_ms > 0.0);
    assert_eq!(reg.identity().len(), 64);
}

/// The f32-activation route (`MUSER_CUDA_ACTS=f32`): every `mv_*` kernel against the f64
/// product of the dequantized weights and the f32 activations; one-token and eight-token
/// kernels bit-identical (the eight-token launch has a 3-token tail).
#[test]
fn f32_matvec_kernels_match_the_cpu_reference() {
    let Some((gpu, reg)) = device() else { return };
    use Kernel::*;
    let (k, n_out, n_tok) = (1024usize, 77usize, 11usize);
    for (ty, k1, k8) in [
        (GgmlType::Q4_K, MvQ4kT1, MvQ4kT8),
        (GgmlType::Q5_K, MvQ5kT1, MvQ5kT8),
        (GgmlType::Q6_K, MvQ6kT1, MvQ6kT8),
        (GgmlType::Q8_0, MvQ80T1, MvQ80T8),
        (GgmlType::Q5_0, MvQ50T1, MvQ50T8),
        (GgmlType::F16, MvF16T1, MvF16T8),
        (GgmlType::F32, MvF32T1, MvF32T8),
    ] {
        let (w, row_bytes) = quantized_rows(ty, n_out, k, 17 + ty as u64);
        let x = rand_vec(n_tok * k, 5);
        let xd: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
        let want = f64_products(ty, &w, row_bytes, &xd, k);
        let wd = upload_bytes(&gpu, &w);
        let xd = upload_bytes(&gpu, bytemuck_f32(&x));
        let run = |kern: Kernel, nt: usize, tok_per_launch: u32| -> Vec<f32> {
            let (buf, y) = guarded(&gpu, nt * n_out);
            launch(
                reg.get(kern, Math::Strict),
                Dims {
                    grid: (
                        (n_out as u32).div_ceil(4),
                        (nt as u32).div_ceil(tok_per_launch),
                        1,
                    ),
                    block: 128,
                    smem: 0,
                },
                gpu.stream(),
                KArgs::new()
                    .ptr(wd.ptr())
                    .u64(row_bytes as u64)
                    .ptr(xd.ptr())
                    .int(k)
                    .ptr(y)
                    .int(n_out)
                    .int(k)
                    .int(n_out)
                    .int(nt),
            )
            .expect("launch");
            read_guarded(&gpu, &buf, nt * n_out, kern.symbol())
        };
        let y8 = run(k8, n_tok, 8);
        let y1 = run(k1, 1, 1);
        assert_eq!(
            bits(&y1),
            bits(&y8[..n_out]),
            "{ty:?}: one-token f32 kernel differs from the eight-token kernel"
        );
        assert_close(&format!("{ty:?} f32 route"), &y8, &want, 1e-5, 1e-5);
        eprintln!("{ty:?} f32 route: ok ({n_out} rows x {k}, {n_tok} tokens)");
    }
}

/// Every embedding kernel against `muser_quant::dequantize` of the looked-up rows; the launch
/// has one block more than `StepParams.n_tok`, whose row would land in the guard.
#[test]
fn embed_kernels_match_the_cpu_dequantization() {
    let Some((gpu, reg)) = device() else { return };
    use Kernel::*;
    let (k, n_rows) = (1024usize, 37usize);
    let toks: [u32; 4] = [5, 0, 36, 17];
    let td = upload_bytes(&gpu, bytes_u32(&toks));
    let sp = upload_bytes(&gpu, bytes_u32(&[0u32, toks.len() as u32]));
    for (ty, kern) in [
        (GgmlType::Q4_K, EmbedQ4k),
        (GgmlType::Q5_K, EmbedQ5k),
        (GgmlType::Q6_K, EmbedQ6k),
        (GgmlType::Q8_0, EmbedQ80),
        (GgmlType::Q5_0, EmbedQ50),
        (GgmlType::F16, EmbedF16),
        (GgmlType::F32, EmbedF32),
    ] {
        let (w, row_bytes) = quantized_rows(ty, n_rows, k, 29 + ty as u64);
        let wd = upload_bytes(&gpu, &w);
        let (buf, out) = guarded(&gpu, toks.len() * k);
        launch(
            reg.get(kern, Math::Strict),
            Dims {
                grid: (toks.len() as u32 + 1, 1, 1),
                block: 256,
                smem: 0,
            },
            gpu.stream(),
            KArgs::new()
                .ptr(wd.ptr())
                .u64(row_bytes as u64)
                .ptr(td.ptr())
                .ptr(sp.ptr())
                .ptr(out)
                .int(k),
        )
        .expect("launch");
        let got = read_guarded(&gpu, &buf, toks.len() * k, kern.symbol());
        let mut row = vec![0f32; k];
        let mut same = 0usize;
        for (t, &id) in toks.iter().enumerate() {
            let r = id as usize;
            muser_quant::dequantize(ty, &w[r * row_bytes..(r + 1) * row_bytes], &mut row)
                .expect("deq");
            let amax = row.iter().fold(0f32, |m, v| m.max(v.abs()));
            for (i, (&g, &c)) in got[t * k..(t + 1) * k].iter().zip(&row).enumerate() {
                same += usize::from(g.to_bits() == c.to_bits());
                assert!(
                    (g - c).abs() <= 1e-6 * amax,
                    "{ty:?} token {id} [{i}]: {g} vs {c}"
                );
            }
        }
        eprintln!(
            "{ty:?} embed: ok ({same} of {} values bit-identical to the CPU)",
            toks.len() * k
        );
    }
}
