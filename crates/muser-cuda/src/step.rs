//! The host image of `StepParams` (common.cuh): the per-step scalars every position- or
//! row-count-dependent kernel reads from device memory, so a captured graph replays without
//! re-capture. Owns the word layout; the struct in common.cuh must match it field for field
//! (20 little-endian `u32`: pos0, n_tok, seq0, per_row, pos[8], seq[8]).

use crate::error::CudaError;

/// Rows of one packed decode step at most (`MUSER_MAX_BATCH` in common.cuh).
pub const MAX_BATCH: usize = 8;

/// Bytes of the device image.
pub const STEP_BYTES: usize = 4 * WORDS;

const WORDS: usize = 4 + 2 * MAX_BATCH;

/// One step: either consecutive tokens of one sequence, or packed decode rows (one token of
/// a different sequence per row, each at its own position).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepParams {
    words: [u32; WORDS],
}

impl StepParams {
    /// `n_tok` consecutive tokens of sequence `seq`, the first at position `pos0`.
    pub fn single(seq: usize, pos0: usize, n_tok: usize) -> StepParams {
        let mut words = [0u32; WORDS];
        words[0] = pos0 as u32;
        words[1] = n_tok as u32;
        words[2] = seq as u32;
        StepParams { words }
    }

    /// Packed decode rows: row t is a token of sequence `rows[t].0` at position `rows[t].1`.
    pub fn rows(rows: &[(usize, usize)]) -> Result<StepParams, CudaError> {
        if rows.is_empty() || rows.len() > MAX_BATCH {
            return Err(CudaError::Invalid(format!(
                "a packed decode step holds 1..={MAX_BATCH} rows (got {})",
                rows.len()
            )));
        }
        let mut words = [0u32; WORDS];
        words[1] = rows.len() as u32;
        words[3] = 1;
        for (t, &(seq, pos)) in rows.iter().enumerate() {
            words[4 + t] = pos as u32;
            words[4 + MAX_BATCH + t] = seq as u32;
        }
        Ok(StepParams { words })
    }

    /// The words to upload (`gpu.upload(buf, params.words())`).
    pub fn words(&self) -> &[u32] {
        &self.words
    }

    /// Packed decode rows (each row its own sequence and position).
    pub fn per_row(&self) -> bool {
        self.words[3] != 0
    }

    /// Tokens (rows) of the step.
    pub fn n_tok(&self) -> usize {
        self.words[1] as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_common_cuh() {
        let s = StepParams::single(3, 100, 7);
        assert_eq!(&s.words()[..4], &[100, 7, 3, 0]);
        assert_eq!(s.words().len() * 4, STEP_BYTES);
        let r = StepParams::rows(&[(0, 5), (2, 9)]).expect("rows");
        assert_eq!(&r.words()[..6], &[0, 2, 0, 1, 5, 9]);
        assert_eq!(&r.words()[4 + MAX_BATCH..4 + MAX_BATCH + 2], &[0, 2]);
        assert_eq!(r.n_tok(), 2);
        // The C struct: four scalars and two arrays of MUSER_MAX_BATCH.
        let src = include_str!("kernels/common.cuh");
        assert!(src.contains(&format!("#define MUSER_MAX_BATCH {MAX_BATCH}")));
        assert!(src.contains("u32 pos[MUSER_MAX_BATCH];\n    u32 seq[MUSER_MAX_BATCH];"));
    }

    #[test]
    fn too_many_rows_is_an_error() {
        assert!(StepParams::rows(&[]).is_err());
        let nine: Vec<(usize, usize)> = (0..9).map(|i| (i, 0)).collect();
        assert!(StepParams::rows(&nine).is_err());
    }
}
