//! Prefill tile shapes of the A16 and A8 kernels: tokens per tile (the switch below) and the A8
//! tiles' weight rows per SIMD level (`tile_rows_a8`).
//!
//! Owns: the `MUSER_CPU_TILE_TOKENS` switch (read once, at the first prefill tile or at
//! [`init_tile_tokens`]). Every height gives the same results: each (row, token) output has its
//! own accumulators and the same operation sequence whatever tile it is computed in.
//!
//! - unset, empty or `auto`: A16 2 at the AVX2 level, 4 at the AVX-512 level; A8 4;
//! - `2` or `4`: that height at every SIMD level;
//! - anything else: an error ([`init_tile_tokens`] returns it, [`tile_tokens`] panics with it).
//!
//! Measured on the 2-core AMD EPYC (Zen 3) AVX2 dev VM, 64 tokens, 2 threads, one process
//! alternating the heights (best of 7): 2 × 2 tiles 13–25% faster than 2 × 4 on every matrix
//! of gemma-3-270m and forged small (e.g. small's FFN up Q4_K 33.5 vs 27.0 GMAC/s, FFN down
//! Q6_K 35.2 vs 29.5): eight pairs of AVX2 accumulators (plus the k-quants' min accumulators)
//! do not fit sixteen vector registers. AVX-512's 32 registers hold the 2 × 4 tile.

use crate::env_setting::EnvSetting;
use crate::simd::SimdLevel;
use crate::QuantError;

fn resolve(var: Option<&str>) -> Result<Option<usize>, String> {
    match var.map(str::trim) {
        None | Some("") | Some("auto") => Ok(None),
        Some("2") => Ok(Some(2)),
        Some("4") => Ok(Some(4)),
        Some(other) => Err(format!(
            "MUSER_CPU_TILE_TOKENS={other:?} is not one of: auto, 2, 4"
        )),
    }
}

static TOKENS: EnvSetting<Option<usize>> = EnvSetting::new("MUSER_CPU_TILE_TOKENS", resolve);

/// The height for SIMD `level` given the setting (`None` = auto).
fn height(setting: Option<usize>, level: SimdLevel) -> usize {
    setting.unwrap_or(if level.avx512() { 4 } else { 2 })
}

/// Resolve `MUSER_CPU_TILE_TOKENS` now and return the height at `level`. Call at start-up to
/// get a typed error instead of the panic [`tile_tokens`] raises on a bad setting.
pub fn init_tile_tokens(level: SimdLevel) -> Result<usize, QuantError> {
    TOKENS
        .init()
        .map(|s| height(s, level))
        .map_err(|reason| QuantError::Setting { reason })
}

/// Tokens per prefill tile of the A8 kernels at SIMD `level`: `auto` is 4 at every level (one
/// accumulator per (row, token) pair instead of A16's two, so 2 × 4 fits sixteen registers).
/// Measured on the AVX2 dev VM, gemma-3-270m `muser bench -p 512 -t 2`, alternating runs:
/// 2 × 2 184.3 / 199.7 tok/s, 2 × 4 230.0 / 225.2 (A16 at its 2 × 2: 174.6 / 186.2).
///
/// # Panics
/// As [`tile_tokens`].
pub fn tile_tokens_a8(level: SimdLevel) -> usize {
    let _ = level;
    TOKENS.get().unwrap_or(4)
}

/// Weight rows per prefill tile of the A8 kernels at SIMD `level`: 4 with AVX-512 VNNI (32
/// vector registers hold 4 × 4 accumulators), 2 otherwise (the AVX2 tiles take at most 2).
pub fn tile_rows_a8(level: SimdLevel) -> usize {
    if level.vnni() {
        4
    } else {
        2
    }
}

/// Tokens per prefill tile at SIMD `level`.
///
/// # Panics
/// If `MUSER_CPU_TILE_TOKENS` is not a known value (fail closed; call [`init_tile_tokens`]
/// first to handle that as an error).
pub fn tile_tokens(level: SimdLevel) -> usize {
    height(TOKENS.get(), level)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values() {
        assert_eq!(resolve(None), Ok(None));
        assert_eq!(resolve(Some("auto")), Ok(None));
        assert_eq!(resolve(Some(" 2")), Ok(Some(2)));
        assert_eq!(resolve(Some("4")), Ok(Some(4)));
        assert!(resolve(Some("3")).is_err());
        assert_eq!(height(None, SimdLevel::Avx2), 2);
        assert_eq!(height(None, SimdLevel::Avx512), 4);
        assert_eq!(height(Some(4), SimdLevel::Avx2), 4);
    }
}
