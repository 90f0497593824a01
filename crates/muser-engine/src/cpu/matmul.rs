//! Quantized matrix × activation products for the CPU route.
//!
//! Owns: quantizing an activation batch once per activation format (`Acts`), and the parallel
//! product `y[t][r] = dot(W[r], a[t])` over weight rows.
//!
//! Activation formats (`ActFormat`, A/B switch `MUSER_CPU_ACTS=a16|q8`):
//! - `A16` (default): Muser's 16-bit activations, f32 scale per 32 values (`muser_quant::a16`),
//!   for every k-quant and 32-block weight; f32 activations for f32/f16/bf16 weights.
//! - `Q8`: what the comparator's CPU backend does — each weight type's `vec_dot_type`
//!   (Q8_K for k-quants, Q8_0 for Q8_0/Q5_0, f16 for f16 weights).
//!
//! Measured (forged tiny, 80 tokens, `tests/cpu_vs_oracle.rs`): mean KL to the f64 oracle
//! 2.4e-2 with Q8 activations, ~1e-5 with A16 — see docs/accuracy.md for the fixtures' table.
//!
//! Invariants: each output element is one call of the same dot kernel on the same bytes,
//! whatever the thread count, the split of rows between threads, or the number of tokens in
//! the batch — so results are bit-identical across threads, chunk sizes and batch composition.

use std::collections::HashMap;

use bytemuck::Zeroable;
use muser_gguf::{GgmlType, Gguf};
use muser_quant::a16::{self, BlockA16};
use rayon::prelude::*;

use crate::model::Matrix;
use crate::EngineError;

/// How activations are quantized before a matmul.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ActFormat {
    /// Muser's 16-bit activations (default).
    A16,
    /// The comparator's 8-bit activation types.
    Q8,
}

impl ActFormat {
    /// `MUSER_CPU_ACTS` (`a16` or `q8`; unset = `a16`). Anything else is an error.
    pub fn from_env() -> Result<ActFormat, EngineError> {
        match std::env::var("MUSER_CPU_ACTS").as_deref() {
            Err(_) | Ok("a16") => Ok(ActFormat::A16),
            Ok("q8") => Ok(ActFormat::Q8),
            Ok(other) => Err(EngineError::Config(format!(
                "MUSER_CPU_ACTS='{other}': use a16 or q8"
            ))),
        }
    }

    /// Name used in route identities.
    pub fn name(self) -> &'static str {
        match self {
            ActFormat::A16 => "a16",
            ActFormat::Q8 => "q8",
        }
    }
}

/// The representation a given weight is multiplied with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum ActKind {
    A16,
    F32,
    Ggml(GgmlType),
}

fn act_kind(format: ActFormat, wty: GgmlType) -> Result<ActKind, muser_quant::QuantError> {
    match (format, wty) {
        (_, GgmlType::F32) => Ok(ActKind::F32),
        (ActFormat::A16, t) if a16::supports(t) => Ok(ActKind::A16),
        (ActFormat::A16, GgmlType::F16 | GgmlType::BF16) => Ok(ActKind::F32),
        (_, t) => muser_quant::vec_dot_type(t).map(ActKind::Ggml),
    }
}

/// A batch of `n_tokens` activation rows of `n` elements (`[n_tokens][n]` f32), quantized on
/// demand into each representation a weight asks for (each at most once).
pub struct Acts<'x> {
    x: &'x [f32],
    n: usize,
    n_tokens: usize,
    format: ActFormat,
    a16: Option<Vec<BlockA16>>,
    /// ggml activation rows, stored as u64 words so every block type is aligned.
    ggml: HashMap<GgmlType, (Vec<u64>, usize)>,
}

impl<'x> Acts<'x> {
    pub fn new(x: &'x [f32], n: usize, format: ActFormat) -> Acts<'x> {
        Acts {
            x,
            n,
            n_tokens: x.len() / n.max(1),
            format,
            a16: None,
            ggml: HashMap::new(),
        }
    }

    fn a16(&mut self, tensor: &str) -> Result<&[BlockA16], EngineError> {
        if self.a16.is_none() {
            let groups = a16::n_groups(self.n);
            let mut buf = vec![BlockA16::zeroed(); groups * self.n_tokens];
            buf.par_chunks_mut(groups.max(1))
                .zip(self.x.par_chunks(self.n.max(1)))
                .try_for_each(|(dst, src)| a16::quantize_row(src, dst))
                .map_err(|e| EngineError::quant(tensor, e))?;
            self.a16 = Some(buf);
        }
        Ok(self.a16.as_deref().unwrap_or(&[]))
    }

    fn ggml(&mut self, ty: GgmlType, tensor: &str) -> Result<&[u8], EngineError> {
        if !self.ggml.contains_key(&ty) {
            let row_bytes = ty.bytes_for(self.n as u64).ok_or_else(|| {
                EngineError::Shape(format!(
                    "{tensor}: {} elements are not whole {ty} blocks",
                    self.n
                ))
            })? as usize;
            let len = row_bytes * self.n_tokens;
            let mut words = vec![0u64; len.div_ceil(8)];
            let buf: &mut [u8] = &mut bytemuck::cast_slice_mut(&mut words)[..len];
            buf.par_chunks_mut(row_bytes)
                .zip(self.x.par_chunks(self.n))
                .try_for_each(|(dst, src)| muser_quant::quantize_activation(ty, src, dst))
                .map_err(|e| EngineError::quant(tensor, e))?;
            self.ggml.insert(ty, (words, len));
        }
        Ok(self
            .ggml
            .get(&ty)
            .map(|(w, len)| &bytemuck::cast_slice::<u64, u8>(w)[..*len])
            .unwrap_or(&[]))
    }
}

/// Tokens per cache block in the batched product: the weight rows of one task are reused across
/// this many activation rows while both stay in L2.
const TOKEN_BLOCK: usize = 64;

/// Rows per parallel task: at least 16, and about 8 tasks per thread so work balances.
fn rows_per_task(n_out: usize) -> usize {
    (n_out / (rayon::current_num_threads() * 8)).max(16)
}

/// Compute `y[r][t]` (`[n_out][n_tokens]`, transposed) in parallel over row ranges with
/// `kernel(row_bytes, first_token, outputs)`, which fills the outputs of up to
/// `TOKEN_BLOCK` consecutive tokens; then scatter into `out[t * n_out + r]`.
fn run_rows(
    w: &Matrix,
    g: &Gguf,
    n_tokens: usize,
    out: &mut [f32],
    kernel: impl Fn(&[u8], usize, &mut [f32]) -> Result<(), muser_quant::QuantError> + Sync,
) -> Result<(), EngineError> {
    let wbytes = w.bytes(g);
    let rpt = rows_per_task(w.n_out);
    let mut yt = vec![0f32; w.n_out * n_tokens];
    yt.par_chunks_mut(rpt * n_tokens)
        .enumerate()
        .try_for_each(|(chunk, dst)| {
            let r0 = chunk * rpt;
            let rows = dst.len() / n_tokens;
            for t0 in (0..n_tokens).step_by(TOKEN_BLOCK) {
                let nt = TOKEN_BLOCK.min(n_tokens - t0);
                for i in 0..rows {
                    let r = r0 + i;
                    let wrow = &wbytes[r * w.row_bytes..(r + 1) * w.row_bytes];
                    kernel(
                        wrow,
                        t0,
                        &mut dst[i * n_tokens + t0..i * n_tokens + t0 + nt],
                    )?;
                }
            }
            Ok(())
        })
        .map_err(|e| EngineError::quant(&w.name, e))?;
    scatter(&yt, w.n_out, n_tokens, out);
    Ok(())
}

/// Like `run_rows`, but the kernel takes a whole task: the bytes of its consecutive weight rows
/// and `y` = `[rows][n_tokens]` outputs (the kernel blocks over tokens itself).
fn run_blocks(
    w: &Matrix,
    g: &Gguf,
    n_tokens: usize,
    out: &mut [f32],
    kernel: impl Fn(&[u8], &mut [f32]) -> Result<(), muser_quant::QuantError> + Sync,
) -> Result<(), EngineError> {
    let wbytes = w.bytes(g);
    let rpt = rows_per_task(w.n_out);
    let mut yt = vec![0f32; w.n_out * n_tokens];
    yt.par_chunks_mut(rpt * n_tokens)
        .enumerate()
        .try_for_each(|(chunk, dst)| {
            let r0 = chunk * rpt;
            let rows = dst.len() / n_tokens;
            kernel(&wbytes[r0 * w.row_bytes..(r0 + rows) * w.row_bytes], dst)
        })
        .map_err(|e| EngineError::quant(&w.name, e))?;
    scatter(&yt, w.n_out, n_tokens, out);
    Ok(())
}

/// `out[t * n_out + r] = yt[r * n_tokens + t]`: a transpose, in parallel over blocks of 16
/// tokens so each task reads short contiguous runs and writes rows that stay in cache.
fn scatter(yt: &[f32], n_out: usize, n_tokens: usize, out: &mut [f32]) {
    if n_tokens == 1 {
        out.copy_from_slice(yt);
        return;
    }
    const TB: usize = 16;
    out.par_chunks_mut(n_out * TB)
        .enumerate()
        .for_each(|(b, dst)| {
            let t0 = b * TB;
            let nt = dst.len() / n_out;
            for r in 0..n_out {
                let src = &yt[r * n_tokens + t0..r * n_tokens + t0 + nt];
                for (k, &v) in src.iter().enumerate() {
                    dst[k * n_out + r] = v;
                }
            }
        });
}

/// `out[t * w.n_out + r] = dot(W[r], acts[t])` for every token `t` and row `r`.
pub fn matmul(
    g: &Gguf,
    w: &Matrix,
    acts: &mut Acts<'_>,
    out: &mut [f32],
) -> Result<(), EngineError> {
    let n_tokens = acts.n_tokens;
    if acts.n != w.n_in || out.len() != n_tokens * w.n_out {
        return Err(EngineError::Shape(format!(
            "{}: [{} x {}] times {} rows of {} into {} outputs",
            w.name,
            w.n_out,
            w.n_in,
            n_tokens,
            acts.n,
            out.len()
        )));
    }
    let kind = act_kind(acts.format, w.ty).map_err(|e| EngineError::quant(&w.name, e))?;
    match kind {
        ActKind::A16 => {
            let groups = a16::n_groups(w.n_in);
            let a = acts.a16(&w.name)?;
            let rows: Vec<&[BlockA16]> = a.chunks(groups.max(1)).collect();
            run_blocks(w, g, n_tokens, out, |wrows, y| {
                a16::matmul_rows(w.ty, wrows, w.row_bytes, &rows, y)
            })
        }
        ActKind::F32 => {
            let x = acts.x;
            let n = w.n_in;
            let ty = w.ty;
            run_rows(w, g, n_tokens, out, |wrow, t0, y| {
                let mut wf = vec![0f32; n];
                muser_quant::dequantize(ty, wrow, &mut wf)?;
                for (k, o) in y.iter_mut().enumerate() {
                    let t = t0 + k;
                    let xs: &[u8] = bytemuck::cast_slice(&x[t * n..(t + 1) * n]);
                    *o = muser_quant::vec_dot(GgmlType::F32, bytemuck::cast_slice(&wf), xs)?;
                }
                Ok(())
            })
        }
        ActKind::Ggml(vty) => {
            let a = acts.ggml(vty, &w.name)?;
            let a_row = a.len() / n_tokens.max(1);
            run_rows(w, g, n_tokens, out, |wrow, t0, y| {
                for (k, o) in y.iter_mut().enumerate() {
                    let t = t0 + k;
                    *o = muser_quant::vec_dot(w.ty, wrow, &a[t * a_row..(t + 1) * a_row])?;
                }
                Ok(())
            })
        }
    }
}
