//! Weights repacked once per model for the A8 route's AVX-512 VNNI tiles
//! (`muser_quant::a8_repack`): every layer matrix and the output projection whose type has a
//! repacked layout, rewritten at the first CPU session into the interleaved order the kernels
//! read, so decode runs four `vpdpbusd` per weight row and group with no per-call decoding of
//! the GGUF blocks. Same bits as the mapped weights (the quant crate's tests hold every tile to
//! the reference bit for bit; `cpu_route` tests the logits).
//!
//! Memory: the copies replace the mapped pages they came from — after each matrix is repacked
//! its file range is released from the process's resident set (`Gguf::release_range`; a later
//! read, such as an embedding row of a tied output matrix, faults it back from the file) — so
//! resident memory stays near the file size. The mapped views stay valid throughout.
//!
//! A/B switch `MUSER_CPU_REPACK=0|1`: unset means on wherever it applies (A8 activations at an
//! AVX-512 VNNI level); `1` where it cannot apply is an error, `0` keeps the mapped weights
//! (packed decode tiles, per-call unpacking for prefill).

use std::collections::HashMap;
use std::sync::Arc;

use muser_quant::{a8_repack, SimdLevel};
use rayon::prelude::*;

use crate::cpu::matmul::ActFormat;
use crate::model::{Matrix, Model};
use crate::EngineError;

/// File bytes repacked (and released) per task.
const CHUNK_BYTES: usize = 1 << 20;

/// One matrix repacked: `n_out` rows of `row_bytes`.
pub struct RepackedMatrix {
    pub row_bytes: usize,
    data: Vec<u8>,
}

impl RepackedMatrix {
    /// All rows.
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }
}

/// Every repacked matrix of a model, by its byte offset in the file (a tied output matrix is
/// the embedding's view: one copy serves both names).
pub struct Repacked {
    mats: HashMap<usize, RepackedMatrix>,
    bytes: usize,
}

impl Repacked {
    /// The repacked copy of `m`, if it has one.
    pub fn get(&self, m: &Matrix) -> Option<&RepackedMatrix> {
        self.mats.get(&m.file_range().0)
    }

    /// Bytes held by the copies.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Repack every matrix of `model` with a repacked layout, in parallel on `pool`.
    pub fn build(model: &Model, pool: &rayon::ThreadPool) -> Result<Repacked, EngineError> {
        let w = &model.weights;
        let mut todo: Vec<&Matrix> = w
            .layers
            .iter()
            .flat_map(|l| l.matrices())
            .chain(std::iter::once(&w.output))
            .filter(|m| a8_repack::supports(m.ty))
            .collect();
        todo.sort_by_key(|m| m.file_range().0);
        todo.dedup_by_key(|m| m.file_range().0);
        let g = model.gguf();
        let mut built = Vec::with_capacity(todo.len());
        for m in todo {
            let rb = a8_repack::row_bytes(m.ty, m.n_in)
                .ok_or_else(|| EngineError::Config(format!("{}: no repacked layout", m.name)))?;
            let mut data = vec![0u8; rb * m.n_out];
            // Rows in chunks of about `CHUNK_BYTES` of the file, each released as soon as it is
            // repacked, so the mapped pages and the copy of a large matrix are never both
            // resident.
            let rows = (CHUNK_BYTES / m.row_bytes).max(1);
            let (off, _) = m.file_range();
            let src = m.bytes(g);
            pool.install(|| {
                data.par_chunks_mut(rows * rb)
                    .enumerate()
                    .try_for_each(|(c, out)| {
                        let r0 = c * rows;
                        let n = out.len() / rb;
                        let input = &src[r0 * m.row_bytes..(r0 + n) * m.row_bytes];
                        a8_repack::repack_rows(m.ty, input, m.row_bytes, out)
                            .map_err(|e| EngineError::quant(&m.name, e))?;
                        g.release_range(off + r0 * m.row_bytes, input.len())
                            .map_err(|e| {
                                EngineError::Config(format!(
                                    "{}: releasing mapped pages: {e}",
                                    m.name
                                ))
                            })
                    })
            })?;
            built.push((
                off,
                RepackedMatrix {
                    row_bytes: rb,
                    data,
                },
            ));
        }
        let bytes = built.iter().map(|(_, m)| m.data.len()).sum();
        Ok(Repacked {
            mats: built.into_iter().collect(),
            bytes,
        })
    }
}

impl Model {
    /// The model's repacked weights, built on `pool` by the first caller.
    pub(crate) fn cpu_repacked(
        &self,
        pool: &rayon::ThreadPool,
    ) -> Result<Arc<Repacked>, EngineError> {
        let mut slot = self
            .cpu_repacked
            .lock()
            .map_err(|_| EngineError::Config("repacked weights: a builder panicked".into()))?;
        if let Some(r) = slot.as_ref() {
            return Ok(Arc::clone(r));
        }
        let r = Arc::new(Repacked::build(self, pool)?);
        *slot = Some(Arc::clone(&r));
        Ok(r)
    }
}

/// Whether a session repacks (`CpuOptions::repack`; `MUSER_CPU_REPACK`, see the module header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repack {
    /// Wherever it applies (A8 activations at an AVX-512 VNNI level).
    Auto,
    /// Required: an error where it does not apply.
    On,
    /// Never: the mapped weights.
    Off,
}

impl Repack {
    /// `MUSER_CPU_REPACK`: unset = `Auto`, `1` = `On`, `0` = `Off`; anything else is an error.
    pub fn from_env() -> Result<Repack, EngineError> {
        match std::env::var("MUSER_CPU_REPACK").as_deref() {
            Err(_) => Ok(Repack::Auto),
            Ok("1") => Ok(Repack::On),
            Ok("0") => Ok(Repack::Off),
            Ok(other) => Err(EngineError::Config(format!(
                "MUSER_CPU_REPACK='{other}': use 0 or 1"
            ))),
        }
    }

    /// Whether a session with `acts` at `level` uses repacked weights.
    pub fn resolve(self, acts: ActFormat, level: SimdLevel) -> Result<bool, EngineError> {
        let applies = acts == ActFormat::A8 && level.vnni();
        match self {
            Repack::Auto => Ok(applies),
            Repack::Off => Ok(false),
            Repack::On if applies => Ok(true),
            Repack::On => Err(EngineError::Config(format!(
                "MUSER_CPU_REPACK=1: repacked weights need A8 activations at an AVX-512 VNNI \
                 level (acts={}, simd={})",
                acts.name(),
                level.name()
            ))),
        }
    }
}
