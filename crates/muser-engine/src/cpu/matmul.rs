//! Quantized matrix × activation products for the CPU route.
//!
//! Owns: quantizing an activation batch once per activation format (`Acts`), and the parallel
//! product `y[t][r] = dot(W[r], a[t])` over weight rows (tasks own row ranges and write their
//! outputs straight into `y`).
//!
//! Activation formats (`ActFormat`, A/B switch `MUSER_CPU_ACTS=a16|a8|q8`):
//! - `A8` (default): Muser's 8-bit activations, f32 scale per 32 values (`muser_quant::a8`):
//!   the comparator's 8-bit integer products with a finer activation scale; for every k-quant
//!   and 32-block weight (f32 activations for f32/f16/bf16 weights, as with A16).
//! - `A16`: Muser's 16-bit activations, f32 scale per 32 values (`muser_quant::a16`): three to
//!   four orders of magnitude closer to the f64 oracle than A8, at roughly 0.7× its speed.
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
use muser_quant::a8::{self, BlockA8};
use muser_quant::a8_repack;
use rayon::prelude::*;

use crate::cpu::repack::Repacked;
use crate::model::Matrix;
use crate::EngineError;

/// Where a product's weight bytes come from: the mapped file, or the model's repacked copy
/// (`cpu::repack`) for the matrices that have one.
#[derive(Clone, Copy)]
pub struct WeightSource<'a> {
    pub g: &'a Gguf,
    pub repacked: Option<&'a Repacked>,
}

impl<'a> WeightSource<'a> {
    /// The mapped weights only.
    pub fn mapped(g: &'a Gguf) -> WeightSource<'a> {
        WeightSource { g, repacked: None }
    }
}

/// How activations are quantized before a matmul.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ActFormat {
    /// Muser's 16-bit activations (the high-accuracy route).
    A16,
    /// The comparator's 8-bit activation types.
    Q8,
    /// Muser's 8-bit activations, f32 scale per 32 values (`muser_quant::a8`; default).
    A8,
}

impl ActFormat {
    /// `MUSER_CPU_ACTS` (`a8`, `a16` or `q8`; unset = `a8`). Anything else is an error.
    pub fn from_env() -> Result<ActFormat, EngineError> {
        match std::env::var("MUSER_CPU_ACTS").as_deref() {
            Err(_) | Ok("a8") => Ok(ActFormat::A8),
            Ok("a16") => Ok(ActFormat::A16),
            Ok("q8") => Ok(ActFormat::Q8),
            Ok(other) => Err(EngineError::Config(format!(
                "MUSER_CPU_ACTS='{other}': use a16, a8 or q8"
            ))),
        }
    }

    /// Name used in route identities.
    pub fn name(self) -> &'static str {
        match self {
            ActFormat::A16 => "a16",
            ActFormat::Q8 => "q8",
            ActFormat::A8 => "a8",
        }
    }
}

/// The representation a given weight is multiplied with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum ActKind {
    A16,
    A8,
    F32,
    Ggml(GgmlType),
}

fn act_kind(format: ActFormat, wty: GgmlType) -> Result<ActKind, muser_quant::QuantError> {
    match (format, wty) {
        (_, GgmlType::F32) => Ok(ActKind::F32),
        (ActFormat::A16, t) if a16::supports(t) => Ok(ActKind::A16),
        (ActFormat::A8, t) if a8::supports(t) => Ok(ActKind::A8),
        (ActFormat::A16 | ActFormat::A8, GgmlType::F16 | GgmlType::BF16) => Ok(ActKind::F32),
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
    a8: Option<Vec<BlockA8>>,
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
            a8: None,
            ggml: HashMap::new(),
        }
    }

    fn a16(&mut self, tensor: &str) -> Result<&[BlockA16], EngineError> {
        if self.a16.is_none() {
            self.a16 = Some(quantize_rows(self.x, self.n, a16::quantize_row, tensor)?);
        }
        Ok(self.a16.as_deref().unwrap_or(&[]))
    }

    fn a8(&mut self, tensor: &str) -> Result<&[BlockA8], EngineError> {
        if self.a8.is_none() {
            self.a8 = Some(quantize_rows(self.x, self.n, a8::quantize_row, tensor)?);
        }
        Ok(self.a8.as_deref().unwrap_or(&[]))
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

/// The rows of `x` (`[n_tokens][n]`) quantized in parallel into groups of 256 (A16 or A8 blocks,
/// `quantize_row` of that format), `ceil(n / 256)` per row.
fn quantize_rows<B: Zeroable + Clone + Send>(
    x: &[f32],
    n: usize,
    quantize_row: fn(&[f32], &mut [B]) -> Result<(), muser_quant::QuantError>,
    tensor: &str,
) -> Result<Vec<B>, EngineError> {
    let groups = a16::n_groups(n);
    let mut buf = vec![B::zeroed(); groups * (x.len() / n.max(1))];
    buf.par_chunks_mut(groups.max(1))
        .zip(x.par_chunks(n.max(1)))
        .try_for_each(|(dst, src)| quantize_row(src, dst))
        .map_err(|e| EngineError::quant(tensor, e))?;
    Ok(buf)
}

/// Rows per parallel task: about two tasks per thread per matrix (a token's work is already
/// split over several matrices in one parallel region), at least 16 rows.
fn rows_per_task(n_out: usize) -> usize {
    (n_out / (rayon::current_num_threads() * 2)).max(16)
}

/// Weight rows per step of a multi-token task: the task computes them for every token into a
/// small `[row][token]` buffer, then writes them into the `[token][row]` output. This replaced
/// a whole-product `[row][token]` buffer and a separate parallel transpose (2026-12-01, AVX2
/// dev VM, `muser bench -p 512 -t 2`, alternating binaries, three rounds): A8 gemma-3-270m
/// 197–208 → 251–270 tok/s, forged small 234–273 → 349–384; A16 191 / 192 → 211 / 220 and
/// 237 / 233 → 259 / 281. 16, 32, 64 and 128 rows per step were within noise of each other.
const STEP_ROWS: usize = 32;

/// One product's `[n_tokens][n_out]` output, shared by the tasks of a parallel region: each
/// task writes only the columns (weight rows) it owns.
#[derive(Clone, Copy)]
struct SharedOut {
    ptr: *mut f32,
    len: usize,
    n_out: usize,
}

// SAFETY: a `SharedOut` is only written through `write_rows`, and the tasks of one region own
// disjoint row ranges, so no element is written by two threads; the buffer outlives the region
// (it is borrowed mutably by `matmul_many` for the whole region).
unsafe impl Send for SharedOut {}
unsafe impl Sync for SharedOut {}

impl SharedOut {
    /// `out[t * n_out + r0 + k] = y[k * n_tokens + t]` for the `y.len() / n_tokens` rows of `y`.
    fn write_rows(&self, r0: usize, y: &[f32], n_tokens: usize) {
        let rows = y.len() / n_tokens;
        assert!(r0 + rows <= self.n_out && n_tokens * self.n_out == self.len);
        for t in 0..n_tokens {
            for k in 0..rows {
                // SAFETY: `t * n_out + r0 + k < n_tokens * n_out == len` (asserted above), the
                // pointer came from a live `&mut [f32]` of `len` elements, and rows `r0..r0 +
                // rows` belong to this task alone (see the `Sync` impl).
                unsafe { *self.ptr.add(t * self.n_out + r0 + k) = y[k * n_tokens + t] };
            }
        }
    }
}

/// The activation operand of one product, borrowed for the parallel part.
enum Operand<'a> {
    A16(Vec<&'a [BlockA16]>),
    A8(Vec<&'a [BlockA8]>),
    F32(&'a [f32]),
    Ggml(&'a [u8], usize),
}

/// One task: rows `r0..r0 + rows` of product `p`. At one token its outputs are `dst` itself;
/// with several tokens it writes them into the shared output `outs[p]`.
struct Task<'a> {
    p: usize,
    r0: usize,
    rows: usize,
    dst: Option<&'a mut [f32]>,
}

/// Several products with the same input in one parallel region:
/// `outs[i][t * w_i.n_out + r] = dot(W_i[r], acts[t])`. Sharing the region (Q/K/V/gate;
/// FFN gate/up) saves a fork-join per matrix, which matters at one token.
pub fn matmul_many(
    src: WeightSource<'_>,
    acts: &mut Acts<'_>,
    products: &mut [(&Matrix, &mut [f32])],
) -> Result<(), EngineError> {
    let n_tokens = acts.n_tokens;
    let mut kinds = Vec::with_capacity(products.len());
    for (w, out) in products.iter() {
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
                acts.a16(&w.name)?;
            }
            ActKind::A8 => {
                acts.a8(&w.name)?;
            }
            ActKind::Ggml(t) => {
                acts.ggml(t, &w.name)?;
            }
            ActKind::F32 => {}
        }
        kinds.push(kind);
    }
    let acts = &*acts;
    let groups = a16::n_groups(acts.n).max(1);
    let operands: Vec<Operand<'_>> = kinds
        .iter()
        .map(|k| match k {
            ActKind::A16 => {
                Operand::A16(acts.a16.as_deref().unwrap_or(&[]).chunks(groups).collect())
            }
            ActKind::A8 => Operand::A8(acts.a8.as_deref().unwrap_or(&[]).chunks(groups).collect()),
            ActKind::F32 => Operand::F32(acts.x),
            ActKind::Ggml(t) => {
                let b = acts
                    .ggml
                    .get(t)
                    .map(|(w, len)| &bytemuck::cast_slice::<u64, u8>(w)[..*len])
                    .unwrap_or(&[]);
                Operand::Ggml(b, b.len() / n_tokens.max(1))
            }
        })
        .collect();

    let mats: Vec<&Matrix> = products.iter().map(|(w, _)| *w).collect();
    // Each product's weight bytes and row size: the repacked copy (A8 products only) or the
    // mapped rows.
    let sources: Vec<(&[u8], usize, bool)> = mats
        .iter()
        .zip(&kinds)
        .map(|(w, k)| match src.repacked.and_then(|r| r.get(w)) {
            Some(r) if *k == ActKind::A8 => (r.bytes(), r.row_bytes, true),
            _ => (w.bytes(src.g), w.row_bytes, false),
        })
        .collect();
    let mut outs: Vec<SharedOut> = Vec::with_capacity(products.len());
    let mut tasks: Vec<Task<'_>> = Vec::new();
    for (p, (w, out)) in products.iter_mut().enumerate() {
        let rpt = rows_per_task(w.n_out);
        outs.push(SharedOut {
            ptr: out.as_mut_ptr(),
            len: out.len(),
            n_out: w.n_out,
        });
        if n_tokens == 1 {
            for (c, dst) in out.chunks_mut(rpt).enumerate() {
                let rows = dst.len();
                tasks.push(Task {
                    p,
                    r0: c * rpt,
                    rows,
                    dst: Some(dst),
                });
            }
        } else {
            for r0 in (0..w.n_out).step_by(rpt) {
                let rows = rpt.min(w.n_out - r0);
                tasks.push(Task {
                    p,
                    r0,
                    rows,
                    dst: None,
                });
            }
        }
    }
    let outs = &outs;
    // `y[i * n_tokens + t] = W[r0 + i] · acts[t]` for the rows of `wbytes`.
    let product = |p: usize, wbytes: &[u8], y: &mut [f32]| -> Result<(), EngineError> {
        let w = mats[p];
        let (_, rb, repacked) = sources[p];
        let r = match &operands[p] {
            Operand::A16(a) => a16::matmul_rows(w.ty, wbytes, w.row_bytes, a, y),
            Operand::A8(a) if repacked => a8_repack::matmul_rows(w.ty, wbytes, rb, a, y),
            Operand::A8(a) => a8::matmul_rows(w.ty, wbytes, w.row_bytes, a, y),
            Operand::F32(x) => (|| {
                let n = w.n_in;
                let mut wf = vec![0f32; n];
                for (i, wrow) in wbytes.chunks(w.row_bytes).enumerate() {
                    muser_quant::dequantize(w.ty, wrow, &mut wf)?;
                    for t in 0..n_tokens {
                        let xs: &[u8] = bytemuck::cast_slice(&x[t * n..(t + 1) * n]);
                        y[i * n_tokens + t] =
                            muser_quant::vec_dot(GgmlType::F32, bytemuck::cast_slice(&wf), xs)?;
                    }
                }
                Ok(())
            })(),
            Operand::Ggml(a, a_row) => (|| {
                for (i, wrow) in wbytes.chunks(w.row_bytes).enumerate() {
                    for t in 0..n_tokens {
                        y[i * n_tokens + t] =
                            muser_quant::vec_dot(w.ty, wrow, &a[t * a_row..(t + 1) * a_row])?;
                    }
                }
                Ok(())
            })(),
        };
        r.map_err(|e| EngineError::quant(&w.name, e))
    };
    tasks.into_par_iter().try_for_each(|task| {
        let (all, rb, _) = sources[task.p];
        let wbytes = &all[task.r0 * rb..(task.r0 + task.rows) * rb];
        if let Some(dst) = task.dst {
            return product(task.p, wbytes, dst);
        }
        // Several tokens: STEP_ROWS rows at a time into a small [row][token] buffer, then into
        // the [token][row] output.
        let mut y = vec![0f32; STEP_ROWS.min(task.rows) * n_tokens];
        for s0 in (0..task.rows).step_by(STEP_ROWS) {
            let sr = STEP_ROWS.min(task.rows - s0);
            let ys = &mut y[..sr * n_tokens];
            product(task.p, &wbytes[s0 * rb..(s0 + sr) * rb], ys)?;
            outs[task.p].write_rows(task.r0 + s0, ys, n_tokens);
        }
        Ok(())
    })?;
    Ok(())
}

/// `out[t * w.n_out + r] = dot(W[r], acts[t])` for every token `t` and row `r`.
pub fn matmul(
    src: WeightSource<'_>,
    w: &Matrix,
    acts: &mut Acts<'_>,
    out: &mut [f32],
) -> Result<(), EngineError> {
    matmul_many(src, acts, &mut [(w, out)])
}
