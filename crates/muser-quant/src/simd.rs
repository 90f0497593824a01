//! Run-time choice of the SIMD level for the dot-product kernels.
//!
//! Owns: [`SimdLevel`], CPU feature detection (`is_x86_feature_detected!`, never
//! `target-cpu=native`) and the `MUSER_SIMD` switch.
//!
//! `MUSER_SIMD` (read once, at the first kernel call or at [`init_simd`]):
//! - unset, empty or `auto`: the best level this CPU supports;
//! - `scalar`: force the scalar reference kernels (A/B switch);
//! - `avx2`: demand the AVX2 kernels; on a CPU without AVX2+FMA+F16C this is an error
//!   ([`init_simd`] returns it, [`simd_level`] panics with the message), never a silent
//!   fallback;
//! - `avx512`: demand the AVX-512 kernels, likewise;
//! - `avx512vnni`: demand the AVX-512 kernels plus the VNNI ones (the A8 prefill tiles),
//!   likewise;
//! - anything else: an error, the same way.
//!
//! Invariant: every kernel's AVX2 path returns bit-identical results to its scalar
//! reference (see each format module), so the level changes speed, never numbers.

use std::sync::OnceLock;

use crate::env_setting::EnvSetting;
use crate::QuantError;

/// Which implementation of the kernels runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SimdLevel {
    /// The portable scalar reference kernels.
    Scalar,
    /// x86-64 AVX2 + FMA + F16C kernels.
    Avx2,
    /// AVX-512 (F, BW) kernels where Muser has them (the A16 dots), AVX2 kernels elsewhere.
    Avx512,
    /// `Avx512` plus the AVX-512 VNNI kernels (VL, VNNI: the A8 prefill tiles).
    Avx512Vnni,
}

impl SimdLevel {
    /// Every level, the scalar reference first.
    pub const ALL: [SimdLevel; 4] = [
        SimdLevel::Scalar,
        SimdLevel::Avx2,
        SimdLevel::Avx512,
        SimdLevel::Avx512Vnni,
    ];

    /// The level named `name` (as [`SimdLevel::name`] spells it), if any.
    pub fn from_name(name: &str) -> Option<SimdLevel> {
        SimdLevel::ALL.into_iter().find(|l| l.name() == name)
    }

    /// The CPU features the level needs, for error messages.
    fn requires(self) -> &'static str {
        match self {
            SimdLevel::Scalar => "nothing",
            SimdLevel::Avx2 => "AVX2/FMA/F16C",
            SimdLevel::Avx512 => "AVX-512 F/BW (or AVX2/FMA/F16C)",
            SimdLevel::Avx512Vnni => "AVX-512 VNNI/VL/F/BW (or AVX2/FMA/F16C)",
        }
    }

    /// Lower-case name, as accepted by `MUSER_SIMD`.
    pub fn name(self) -> &'static str {
        match self {
            SimdLevel::Scalar => "scalar",
            SimdLevel::Avx2 => "avx2",
            SimdLevel::Avx512 => "avx512",
            SimdLevel::Avx512Vnni => "avx512vnni",
        }
    }

    /// Whether the AVX2 kernels may run at this level (AVX-512 implies them).
    pub fn avx2(self) -> bool {
        self != SimdLevel::Scalar
    }

    /// Whether the AVX-512 (F, BW) kernels may run at this level.
    pub fn avx512(self) -> bool {
        matches!(self, SimdLevel::Avx512 | SimdLevel::Avx512Vnni)
    }

    /// Whether the AVX-512 VNNI kernels may run at this level.
    pub fn vnni(self) -> bool {
        self == SimdLevel::Avx512Vnni
    }

    /// Whether this CPU can run the level.
    pub fn is_available(self) -> bool {
        match self {
            SimdLevel::Scalar => true,
            SimdLevel::Avx2 => avx2_available(),
            SimdLevel::Avx512 => avx512_available(),
            SimdLevel::Avx512Vnni => avx512_vnni_available(),
        }
    }
}

/// Whether the AVX2 kernels can run here (AVX2, FMA and F16C all present).
pub fn avx2_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static HAS: OnceLock<bool> = OnceLock::new();
        *HAS.get_or_init(|| {
            is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("fma")
                && is_x86_feature_detected!("f16c")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the AVX-512 kernels can run here (the AVX2 set plus AVX-512 F and BW).
pub fn avx512_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static HAS: OnceLock<bool> = OnceLock::new();
        *HAS.get_or_init(|| {
            avx2_available()
                && is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the AVX-512 VNNI kernels can run here (the AVX-512 set plus VL and VNNI).
pub fn avx512_vnni_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static HAS: OnceLock<bool> = OnceLock::new();
        *HAS.get_or_init(|| {
            avx512_available()
                && is_x86_feature_detected!("avx512vl")
                && is_x86_feature_detected!("avx512vnni")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The best level the hardware supports, ignoring `MUSER_SIMD`.
pub fn detected_level() -> SimdLevel {
    if avx512_vnni_available() {
        SimdLevel::Avx512Vnni
    } else if avx512_available() {
        SimdLevel::Avx512
    } else if avx2_available() {
        SimdLevel::Avx2
    } else {
        SimdLevel::Scalar
    }
}

fn resolve(var: Option<&str>) -> Result<SimdLevel, String> {
    match var.map(str::trim) {
        None | Some("") | Some("auto") => Ok(detected_level()),
        Some(name) => {
            let level = SimdLevel::from_name(name).ok_or_else(|| {
                let names: Vec<&str> = SimdLevel::ALL.iter().map(|l| l.name()).collect();
                format!(
                    "MUSER_SIMD={name:?} is not one of: auto, {}",
                    names.join(", ")
                )
            })?;
            if level.is_available() {
                Ok(level)
            } else {
                Err(format!(
                    "MUSER_SIMD={name} but this CPU lacks {}",
                    level.requires()
                ))
            }
        }
    }
}

static LEVEL: EnvSetting<SimdLevel> = EnvSetting::new("MUSER_SIMD", resolve);

/// Resolve the SIMD level now (reads `MUSER_SIMD` once). Call at start-up to get a typed
/// error instead of the panic [`simd_level`] raises on a bad setting.
pub fn init_simd() -> Result<SimdLevel, QuantError> {
    LEVEL.init().map_err(|reason| QuantError::Simd { reason })
}

/// The level the dispatching kernels use.
///
/// # Panics
/// If `MUSER_SIMD` asks for something this CPU cannot do or is not a known value (fail
/// closed; call [`init_simd`] first to handle that as an error).
pub fn simd_level() -> SimdLevel {
    LEVEL.get()
}

/// Panic unless `level` can run on this CPU (kernels taking an explicit level call this
/// before entering SIMD code).
#[inline]
pub(crate) fn require(level: SimdLevel) {
    if !level.is_available() {
        panic!(
            "muser-quant: SIMD level {} requested but not available on this CPU",
            level.name()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_values() {
        assert_eq!(resolve(Some("scalar")), Ok(SimdLevel::Scalar));
        assert_eq!(resolve(None), Ok(detected_level()));
        assert_eq!(resolve(Some("auto")), Ok(detected_level()));
        assert!(resolve(Some("sse9")).is_err());
        for l in SimdLevel::ALL {
            assert_eq!(SimdLevel::from_name(l.name()), Some(l));
            assert_eq!(resolve(Some(l.name())).is_ok(), l.is_available());
        }
        assert_eq!(resolve(Some("avx2")).is_ok(), avx2_available());
        assert_eq!(resolve(Some("avx512vnni")).is_ok(), avx512_vnni_available());
        assert!(SimdLevel::Avx512Vnni.avx2() && SimdLevel::Avx512Vnni.avx512());
        assert!(!SimdLevel::Avx512.vnni() && SimdLevel::Avx512Vnni.vnni());
    }
}
