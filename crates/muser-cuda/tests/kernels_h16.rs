//! The f16 route's kernels on the device (matvec_h16.cu): `act_h16` equals
//! `muser_cuda::h16::act_reference` bit for bit; `mvh_q4h_s*` is within f32-accumulation distance
//! of the exact value of its own f16 operands (`h16::mvh_reference`), close to the exact product
//! of the GGUF weights and the f32 activations, and gives each token the same bits whatever the
//! token count and the other tokens. Without a CUDA device every test says "skipping: no CUDA
//! device" (CI); `scripts/device/cuda-tests.sh` runs it on the H200.

use muser_cuda::h16::{self, H16Row};
use muser_cuda::launch::launch;
use muser_cuda::{q4h, DeviceBuffer, Gpu, KArgs, Kernel, Math, Registry};
use muser_gguf::GgmlType;

mod support;
use support::*;

/// `x` (`[n_tok][k]`) through `act_h16`: the device buffers (f16 fragments, sums, inverses).
fn act_on_device(gpu: &Gpu, reg: &Registry, x: &[f32], k: usize) -> [DeviceBuffer; 3] {
    let n_tok = x.len() / k;
    let xd = upload_bytes(gpu, bytemuck_f32(x));
    let xh = gpu.alloc(n_tok * k * 2 + 256, "xh").expect("alloc");
    let xs = gpu.alloc(n_tok * k / 32 * 2 + 256, "xsum").expect("alloc");
    let inv = gpu.alloc(n_tok * 4 + 256, "xinv").expect("alloc");
    let args = KArgs::new()
        .ptr(xd.ptr())
        .int(k)
        .int(n_tok)
        .ptr(xh.ptr())
        .ptr(xs.ptr())
        .ptr(inv.ptr());
    launch(
        reg.get(Kernel::ActH16, Math::Strict),
        Registry::act_h16_dims(n_tok),
        gpu.stream(),
        args,
    )
    .expect("act_h16");
    gpu.wait("act_h16").expect("wait");
    [xh, xs, inv]
}

/// Token rows of `[n_tok][k]` values of magnitudes 10^-3 .. 10^3 (the row scale at work).
fn tokens(n_tok: usize, k: usize, seed: u64) -> Vec<f32> {
    let mut x = rand_vec(n_tok * k, seed);
    for (t, row) in x.chunks_mut(k).enumerate() {
        let m = 10f32.powi(t as i32 % 7 - 3);
        row.iter_mut().for_each(|v| *v *= m);
    }
    x
}

#[test]
fn act_h16_matches_the_reference_bit_for_bit() {
    let Some((gpu, reg)) = device() else { return };
    for (k, n_tok) in [(256, 3), (6656, 9), (19968, 2)] {
        let x = tokens(n_tok, k, 11 + k as u64);
        let [xh, xs, inv] = act_on_device(&gpu, &reg, &x, k);
        let mut h = vec![0u16; n_tok * k];
        let mut s = vec![0u16; n_tok * k / 32];
        let mut iv = vec![0f32; n_tok];
        gpu.download(&mut h, xh.ptr(), "xh").expect("dl");
        gpu.download(&mut s, xs.ptr(), "xsum").expect("dl");
        gpu.download(&mut iv, inv.ptr(), "xinv").expect("dl");
        for t in 0..n_tok {
            let r = h16::act_reference(&x[t * k..(t + 1) * k]).expect("reference");
            assert_eq!(
                &h[t * k..(t + 1) * k],
                &r.xh[..],
                "k {k} token {t}: f16 values"
            );
            assert_eq!(
                &s[t * k / 32..(t + 1) * k / 32],
                &r.xsum[..],
                "k {k} token {t}: sums"
            );
            assert_eq!(iv[t].to_bits(), r.inv.to_bits(), "k {k} token {t}: inverse");
        }
    }
}

/// `n_tok` tokens through `mvh_q4h_*` (the plan's kernel for `n_out`): `[n_tok][n_out]`.
fn mvh_on_device(
    gpu: &Gpu,
    reg: &Registry,
    (w, exp): (&DeviceBuffer, i32),
    (n_out, k): (usize, usize),
    acts: &[DeviceBuffer; 3],
    n_tok: usize,
) -> Vec<f32> {
    let (kernel, dims) = Registry::mvh_plan(n_out, n_tok);
    let (y, yp) = guarded(gpu, n_tok * n_out);
    let args = KArgs::new()
        .ptr(w.ptr())
        .int(n_out)
        .int(k)
        .ptr(acts[0].ptr())
        .ptr(acts[1].ptr())
        .ptr(acts[2].ptr())
        .f32(2f32.powi(-exp))
        .ptr(yp)
        .int(n_out)
        .int(n_tok);
    launch(reg.get(kernel, Math::Strict), dims, gpu.stream(), args).expect("mvh");
    gpu.wait("mvh").expect("wait");
    read_guarded(gpu, &y, n_tok * n_out, "mvh output")
}

#[test]
fn mvh_q4h_is_its_arithmetic_and_every_token_count_gives_the_same_bits() {
    let Some((gpu, reg)) = device() else { return };
    // One shape per chain count: 16 row groups (S = 16), 128 (S = 8), 416 (S = 4).
    for (n_out, k) in [(256, 6656), (2048, 1024), (6656, 512)] {
        let (src, row_bytes) = quantized_rows(GgmlType::Q4_K, n_out, k, 5 + n_out as u64);
        let h = q4h::repack(&src, n_out, k).expect("repack");
        let logical = q4h::logical(&h.bytes, n_out, k).expect("logical");
        let w = upload_bytes(&gpu, &h.bytes);
        let n_tok = 20; // three blocks along y, the last one partly empty
        let x = tokens(n_tok, k, 3 + k as u64);
        let acts = act_on_device(&gpu, &reg, &x, k);
        let all = mvh_on_device(&gpu, &reg, (&w, h.exp), (n_out, k), &acts, n_tok);
        // The kernel against the exact value of its own operands.
        let rows: Vec<H16Row> = x
            .chunks(k)
            .map(|r| h16::act_reference(r).expect("row"))
            .collect();
        for (t, row) in rows.iter().enumerate() {
            let (want, abs) = h16::mvh_reference(&logical, h.exp, n_out, row);
            for r in 0..n_out {
                let got = f64::from(all[t * n_out + r]);
                let err = (got - want[r]).abs();
                assert!(
                    err <= 5e-5 * abs[r] + 1e-30,
                    "{n_out}×{k} token {t} row {r}: {got} vs {} (|terms| {})",
                    want[r],
                    abs[r]
                );
            }
        }
        // And close to the exact product of the GGUF weights and the f32 activations.
        let xf: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
        let exact = f64_products(GgmlType::Q4_K, &src, row_bytes, &xf, k);
        for t in 0..n_tok {
            let (g, e) = (
                &all[t * n_out..(t + 1) * n_out],
                &exact[t * n_out..(t + 1) * n_out],
            );
            assert_close(&format!("{n_out}×{k} token {t} vs exact"), g, e, 4e-3, 4e-3);
        }
        // Batch invariance: each token alone, and the first 8 as one packed step, give the
        // bits of the 20-token pass.
        let bits_all = bits(&all);
        for t in [0usize, 5, 19] {
            let one = act_on_device(&gpu, &reg, &x[t * k..(t + 1) * k], k);
            let y = mvh_on_device(&gpu, &reg, (&w, h.exp), (n_out, k), &one, 1);
            assert_eq!(
                bits(&y),
                &bits_all[t * n_out..(t + 1) * n_out],
                "{n_out}×{k}: token {t} alone"
            );
        }
        let eight = act_on_device(&gpu, &reg, &x[..8 * k], k);
        let y = mvh_on_device(&gpu, &reg, (&w, h.exp), (n_out, k), &eight, 8);
        assert_eq!(
            bits(&y),
            &bits_all[..8 * n_out],
            "{n_out}×{k}: 8 tokens vs 20"
        );
    }
}
