//! Golden tests: muser-quant's f32 dequantize and its ggml-exact quantizers equal gguf-py's
//! (from the pinned llama.cpp sdist) bit for bit.
//!
//! Fixtures come from `scripts/gen-quant-golden.py` (see `tests/golden/receipt.json`):
//! small edge-case files compared value by value, plus PRNG streams regenerated here with
//! the script's splitmix64 and compared by SHA-256 of the input (proves the generators agree)
//! and of the output.

use std::path::PathBuf;

use muser_quant::{dequantize, quantize, GgmlType};
use serde_json::Value;
use sha2::{Digest, Sha256};

struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n + 8);
        while out.len() < n {
            out.extend_from_slice(&self.next().to_le_bytes());
        }
        out.truncate(n);
        out
    }

    /// The script's `floats`: per group of 32 an exponent k in [-20, 20], then
    /// `(2·(next >> 40) − 2^24) · 2^(k−24)`, exact in f32.
    fn floats(&mut self, n: usize) -> Vec<f32> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let k = (self.next() % 41) as i32 - 20;
            let scale = f32::from_bits(((k - 24 + 127) as u32) << 23);
            for _ in 0..32.min(n - out.len()) {
                let m = 2 * (self.next() >> 40) as i64 - (1 << 24);
                out.push(m as f32 * scale);
            }
        }
        out
    }

    /// The script's `float_bits`.
    fn float_bits(&mut self, n: usize, allow_nan: bool) -> Vec<f32> {
        (0..n)
            .map(|_| {
                let mut v = self.next() as u32;
                if !allow_nan && (v >> 23) & 0xff == 0xff && v & 0x7f_ffff != 0 {
                    v = (v & 0x807f_ffff) | (0x7e << 23);
                }
                f32::from_bits(v)
            })
            .collect()
    }
}

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("golden")
}

fn manifest() -> Value {
    let text = std::fs::read_to_string(golden_dir().join("manifest.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(golden_dir().join(name)).unwrap()
}

/// Bytes in a 4-byte aligned buffer (block structs need up to 4).
fn aligned(bytes: &[u8]) -> Vec<u32> {
    let mut v = vec![0u32; bytes.len().div_ceil(4)];
    bytemuck::cast_slice_mut::<u32, u8>(&mut v)[..bytes.len()].copy_from_slice(bytes);
    v
}

fn ty_of(name: &str) -> GgmlType {
    GgmlType::from_name(name).unwrap()
}

/// f16/bf16 fields made finite, as the script does.
fn sanitize(raw: &mut [u8], name: &str) {
    let (size, offs): (usize, &[usize]) = match name {
        "f16" => (2, &[0]),
        "bf16" => (2, &[]),
        "q8_0" => (34, &[0]),
        "q5_0" => (22, &[0]),
        "q4_K" => (144, &[0, 2]),
        "q5_K" => (176, &[0, 2]),
        "q6_K" => (210, &[208]),
        _ => panic!("unknown format {name}"),
    };
    for block in raw.chunks_exact_mut(size) {
        if name == "bf16" {
            let mut v = u16::from_le_bytes([block[0], block[1]]);
            if (v >> 7) & 0xff == 0xff {
                v = (v & 0x807f) | (0x7f << 7);
            }
            block[..2].copy_from_slice(&v.to_le_bytes());
        }
        for &o in offs {
            let mut v = u16::from_le_bytes([block[o], block[o + 1]]);
            if (v >> 10) & 0x1f == 0x1f {
                v = (v & 0x83ff) | (0x0f << 10);
            }
            block[o..o + 2].copy_from_slice(&v.to_le_bytes());
        }
    }
}

fn sha_hex(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

fn dequant_bytes(ty: GgmlType, raw: &[u8]) -> Vec<u8> {
    let buf = aligned(raw);
    let src = &bytemuck::cast_slice::<u32, u8>(&buf)[..raw.len()];
    let n = raw.len() / ty.type_size() * ty.block_size();
    let mut out = vec![0f32; n];
    dequantize(ty, src, &mut out).unwrap();
    out.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn quant_bytes(ty: GgmlType, x: &[f32]) -> Vec<u8> {
    let n = ty.bytes_for(x.len() as u64).unwrap() as usize;
    let mut buf = vec![0u32; n.div_ceil(4)];
    let dst = &mut bytemuck::cast_slice_mut::<u32, u8>(&mut buf)[..n];
    quantize(ty, x, dst).unwrap();
    dst.to_vec()
}

fn first_f32_mismatch(got: &[u8], want: &[u8]) -> Option<(usize, f32, f32)> {
    got.chunks_exact(4)
        .zip(want.chunks_exact(4))
        .enumerate()
        .find_map(|(i, (g, w))| {
            (g != w).then(|| {
                let f = |b: &[u8]| f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                (i, f(g), f(w))
            })
        })
}

#[test]
fn dequantize_matches_gguf_py() {
    let m = manifest();
    let entries = m["dequantize"].as_array().unwrap();
    assert_eq!(entries.len(), 7);
    for e in entries {
        let name = e["type"].as_str().unwrap();
        let ty = ty_of(name);
        // Edge blocks, value by value.
        let raw = read(e["edge_input"].as_str().unwrap());
        let want = read(e["edge_output"].as_str().unwrap());
        let got = dequant_bytes(ty, &raw);
        assert_eq!(got.len(), want.len(), "{name} edge length");
        if let Some((i, g, w)) = first_f32_mismatch(&got, &want) {
            panic!(
                "{name} edge value {i}: got {g:e} ({:#x}), gguf-py {w:e} ({:#x})",
                g.to_bits(),
                w.to_bits()
            );
        }
        // PRNG stream, by digest.
        let s = &e["stream"];
        let mut raw =
            SplitMix64(s["seed"].as_u64().unwrap()).bytes(s["bytes"].as_u64().unwrap() as usize);
        sanitize(&mut raw, name);
        assert_eq!(
            sha_hex(&raw),
            s["input_sha256"].as_str().unwrap(),
            "{name}: stream generator differs"
        );
        assert_eq!(
            sha_hex(&dequant_bytes(ty, &raw)),
            s["output_sha256"].as_str().unwrap(),
            "{name}: stream output"
        );
    }
}

#[test]
fn quantize_matches_gguf_py() {
    let m = manifest();
    let entries = m["quantize"].as_array().unwrap();
    assert_eq!(entries.len(), 4);
    for e in entries {
        let name = e["type"].as_str().unwrap();
        let ty = ty_of(name);
        let xb = read(e["edge_input"].as_str().unwrap());
        let x: Vec<f32> = xb
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let want = read(e["edge_output"].as_str().unwrap());
        let got = quant_bytes(ty, &x);
        if let Some(i) = got.iter().zip(&want).position(|(a, b)| a != b) {
            let blk = i / ty.type_size();
            panic!(
                "{name} edge byte {i} (block {blk}): got {:?}, gguf-py {:?}",
                &got[blk * ty.type_size()..][..ty.type_size()],
                &want[blk * ty.type_size()..][..ty.type_size()]
            );
        }
        assert_eq!(got.len(), want.len(), "{name}");
        let s = &e["stream"];
        let xs =
            SplitMix64(s["seed"].as_u64().unwrap()).floats(s["values"].as_u64().unwrap() as usize);
        let xs_bytes: Vec<u8> = xs.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(
            sha_hex(&xs_bytes),
            s["input_sha256"].as_str().unwrap(),
            "{name}: float generator differs"
        );
        assert_eq!(
            sha_hex(&quant_bytes(ty, &xs)),
            s["output_sha256"].as_str().unwrap(),
            "{name}: stream output"
        );
        if let Some(b) = e.get("bits_stream") {
            let xr = SplitMix64(b["seed"].as_u64().unwrap()).float_bits(
                b["values"].as_u64().unwrap() as usize,
                b["allow_nan"].as_bool().unwrap(),
            );
            let xr_bytes: Vec<u8> = xr.iter().flat_map(|v| v.to_le_bytes()).collect();
            assert_eq!(
                sha_hex(&xr_bytes),
                b["input_sha256"].as_str().unwrap(),
                "{name}: bits generator differs"
            );
            assert_eq!(
                sha_hex(&quant_bytes(ty, &xr)),
                b["output_sha256"].as_str().unwrap(),
                "{name}: bits stream output"
            );
        }
    }
}

#[test]
fn receipt_names_the_pinned_sdist() {
    let text = std::fs::read_to_string(golden_dir().join("receipt.json")).unwrap();
    let r: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        r["sdist_sha256"].as_str().unwrap(),
        "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
    );
}

/// The probe's "ties" input: per block a factor `c`, `x[0] = 127c`, then `c·(t·0.5)` for
/// `t = next % 255 − 127`.
fn ties(seed: u64, blocks: usize, factors: &[f32]) -> Vec<f32> {
    let mut r = SplitMix64(seed);
    let mut out = Vec::with_capacity(blocks * 32);
    for _ in 0..blocks {
        let c = factors[(r.next() % factors.len() as u64) as usize];
        out.push(127.0 * c);
        for _ in 1..32 {
            let t = (r.next() % 255) as i32 - 127;
            out.push(c * (t as f32 * 0.5));
        }
    }
    out
}

#[test]
fn q8_1_matches_cuda_device_output() {
    let text = std::fs::read_to_string(golden_dir().join("q8_1_cuda.json")).unwrap();
    let fx: Value = serde_json::from_str(&text).unwrap();
    let inp = &fx["inputs"];
    let mut x = SplitMix64(inp["floats"]["seed"].as_u64().unwrap())
        .floats(inp["floats"]["values"].as_u64().unwrap() as usize);
    let factors: Vec<f32> = inp["ties"]["factors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    x.extend(ties(
        inp["ties"]["seed"].as_u64().unwrap(),
        inp["ties"]["blocks"].as_u64().unwrap() as usize,
        &factors,
    ));
    let mut y = vec![
        muser_quant::BlockQ8_1 {
            d: half::f16::ZERO,
            s: half::f16::ZERO,
            qs: [0; 32]
        };
        x.len() / 32
    ];
    muser_quant::q8_1::quantize_row(&x, &mut y);
    let strict = bytemuck::cast_slice::<_, u8>(&y);
    assert_eq!(strict.len() as u64, fx["strict"]["bytes"].as_u64().unwrap());
    assert_eq!(
        sha_hex(strict),
        fx["strict"]["sha256"].as_str().unwrap(),
        "IEEE Q8_1 vs strict CUDA build"
    );
    muser_quant::q8_1::quantize_row_fast_math(&x, &mut y);
    let fast = bytemuck::cast_slice::<_, u8>(&y);
    assert_eq!(
        sha_hex(fast),
        fx["fast_math"]["sha256"].as_str().unwrap(),
        "fast-math model vs ggml-flags CUDA build"
    );
}
