//! How the single-token (decode) tiles ask for the weights they will read next.
//!
//! Owns: [`Prefetch`] and the `MUSER_CPU_PREFETCH` switch (read once, at the first decode tile
//! or at [`init_prefetch`]). Every mode gives the same results: prefetches are hints that
//! change no value, only when bytes arrive.
//!
//! - unset, empty or `spread` (default): while a 4-row decode tile runs, the *next* tile's
//!   bytes (its rows are contiguous with this one's) are prefetched a few cache lines per
//!   sub-block, spread evenly over the tile's work;
//! - `burst`: the previous scheme, all of the next tile's row heads asked for at once when the
//!   tile starts, plus each row's own prefetch six groups ahead;
//! - `0` or `off`: only each row's own prefetch six groups ahead (a short row such as
//!   gemma-3-270m's 640-wide output matrix then comes from memory unannounced);
//! - anything else: an error ([`init_prefetch`] returns it, [`prefetch_mode`] panics with it).
//!
//! Measured on the 2-core AMD EPYC (Zen 3) AVX2 dev VM, 2 threads, gemma-3-270m Q4_K_M
//! (`matvec_bench`, the 262144 × 640 Q8_0 output projection, three alternating runs): burst
//! 16.7 / 15.0 / 14.0 ms, spread 11.7 / 12.3 / 12.2 ms. See docs/benchmarks-cpu.md for decode.

use crate::env_setting::EnvSetting;
use crate::QuantError;

/// The decode tiles' prefetch scheme (`MUSER_CPU_PREFETCH`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Prefetch {
    /// The next tile's bytes, a few lines per sub-block of this tile (default).
    Spread,
    /// The next tile's row heads at once, at the tile's start.
    Burst,
    /// Only the in-row prefetch six groups ahead.
    Off,
}

impl Prefetch {
    /// Lower-case name, as accepted by `MUSER_CPU_PREFETCH` (and used in route identities).
    pub fn name(self) -> &'static str {
        match self {
            Prefetch::Spread => "spread",
            Prefetch::Burst => "burst",
            Prefetch::Off => "off",
        }
    }
}

fn resolve(var: Option<&str>) -> Result<Prefetch, String> {
    match var.map(str::trim) {
        None | Some("") | Some("spread") => Ok(Prefetch::Spread),
        Some("burst") => Ok(Prefetch::Burst),
        Some("0") | Some("off") => Ok(Prefetch::Off),
        Some(other) => Err(format!(
            "MUSER_CPU_PREFETCH={other:?} is not one of: spread, burst, off (or 0)"
        )),
    }
}

static MODE: EnvSetting<Prefetch> = EnvSetting::new("MUSER_CPU_PREFETCH", resolve);

/// Resolve the prefetch mode now (reads `MUSER_CPU_PREFETCH` once). Call at start-up to get a
/// typed error instead of the panic [`prefetch_mode`] raises on a bad setting.
pub fn init_prefetch() -> Result<Prefetch, QuantError> {
    MODE.init().map_err(|reason| QuantError::Setting { reason })
}

/// The mode the decode tiles use.
///
/// # Panics
/// If `MUSER_CPU_PREFETCH` is not a known value (fail closed; call [`init_prefetch`] first to
/// handle that as an error).
pub fn prefetch_mode() -> Prefetch {
    MODE.get()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values() {
        assert_eq!(resolve(None), Ok(Prefetch::Spread));
        assert_eq!(resolve(Some(" spread ")), Ok(Prefetch::Spread));
        assert_eq!(resolve(Some("burst")), Ok(Prefetch::Burst));
        assert_eq!(resolve(Some("0")), Ok(Prefetch::Off));
        assert_eq!(resolve(Some("off")), Ok(Prefetch::Off));
        let e = resolve(Some("1")).unwrap_err();
        assert!(e.contains("MUSER_CPU_PREFETCH=\"1\""), "{e}");
    }
}
