//! How the f16 route's weight layouts store their sub-block factors (`Scales`, shared by
//! crate::q4h and crate::q6h): decoded as f16, or GGUF's scale bytes with one f16 base per row
//! and super-block, which the kernels turn into the same f16 factors (each module's header).
//! Owns the switches' reading; the layouts own their bytes.

use crate::error::CudaError;

/// How a Q4H or Q6H matrix stores its sub-block factors (the same numbers either way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scales {
    /// The factors as f16 (Q4H 5 bits per weight, Q6H 7).
    F16,
    /// GGUF's scale bytes and one f16 base per row (Q4H 4.625 bits per weight, Q6H 6.5625).
    U8,
}

impl Scales {
    /// The switch `var` = `auto|f16|u8`: None for `auto` (or unset) — the engine then picks u8
    /// where every matrix of the format in the model can take it (`q4h::u8_check`,
    /// `q6h::u8_check`), and a registry built without a model compiles the u8 reader. One
    /// reader for the kernels' `-D` and the engine's layout.
    pub fn choice_from_env(var: &str) -> Result<Option<Scales>, CudaError> {
        match std::env::var(var) {
            Err(_) => Ok(None),
            Ok(v) => match v.trim() {
                "auto" => Ok(None),
                "f16" => Ok(Some(Scales::F16)),
                "u8" => Ok(Some(Scales::U8)),
                _ => Err(CudaError::Invalid(format!(
                    "{var}={v}: expected auto, f16 or u8"
                ))),
            },
        }
    }
}
