//! Timing probes. `MUSER_CUDA_PROBE_DUP=<kernel symbol>` (e.g. `residual_norm_h16`) enqueues
//! every launch of that kernel twice, so a benchmark's token time with it minus the plain one
//! is the kernel's marginal cost inside the replayed graph (launch, PDL wait and work), where
//! ncu's per-kernel figures (eager, one kernel at a time) cannot see. The outputs are **not**
//! the model's (a kernel that updates a buffer in place runs twice): the route identity says
//! `probe=dup:<symbol>` and the registry warns on stderr once. The symbol must name a kernel
//! the registry loaded, else building the registry fails (a probe that changes nothing would
//! be a silent no-op). Process-wide: the last registry built decides.

use std::sync::atomic::{AtomicUsize, Ordering};

use cudarc::driver::CudaFunction;

use crate::error::CudaError;
use crate::registry::Kernel;

/// The environment variable naming the duplicated kernel.
pub const ENV_DUP: &str = "MUSER_CUDA_PROBE_DUP";

/// The duplicated kernel's loaded functions (strict and fast math builds), as raw
/// `CUfunction` addresses; 0 = none.
static DUP: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

/// The kernel `MUSER_CUDA_PROBE_DUP` names, if set; an unknown symbol is an error.
pub fn dup_from_env() -> Result<Option<Kernel>, CudaError> {
    std::env::var(ENV_DUP).map_or(Ok(None), |v| parse_dup(&v))
}

/// The kernel a `MUSER_CUDA_PROBE_DUP` value names (empty: none).
fn parse_dup(v: &str) -> Result<Option<Kernel>, CudaError> {
    if v.trim().is_empty() {
        return Ok(None);
    }
    Kernel::ALL
        .iter()
        .copied()
        .find(|k| k.symbol() == v.trim())
        .map(Some)
        .ok_or_else(|| CudaError::Invalid(format!("{ENV_DUP}={v}: no kernel has that symbol")))
}

/// Arm (or, with `None`, disarm) the duplication for `kernel`'s loaded functions.
pub(crate) fn install(
    kernel: Option<Kernel>,
    functions: &[&CudaFunction],
) -> Result<(), CudaError> {
    for slot in &DUP {
        slot.store(0, Ordering::Relaxed);
    }
    let Some(k) = kernel else { return Ok(()) };
    if functions.is_empty() {
        return Err(CudaError::Invalid(format!(
            "{ENV_DUP}={}: this route does not load that kernel",
            k.symbol()
        )));
    }
    for (slot, f) in DUP.iter().zip(functions) {
        slot.store(f.cu_function() as usize, Ordering::Relaxed);
    }
    eprintln!(
        "muser: {ENV_DUP}={}: every launch of it runs twice (timing probe; outputs are not the model's)",
        k.symbol()
    );
    Ok(())
}

/// Whether launches of `f` are duplicated.
pub(crate) fn is_dup(f: &CudaFunction) -> bool {
    let p = f.cu_function() as usize;
    p != 0 && DUP.iter().any(|s| s.load(Ordering::Relaxed) == p)
}

/// The route identity's suffix: `,probe=dup:<symbol>` when armed.
pub fn label(kernel: Option<Kernel>) -> String {
    kernel.map_or(String::new(), |k| format!(",probe=dup:{}", k.symbol()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_names_a_registered_kernel_and_says_so_in_the_route() {
        assert_eq!(parse_dup("").expect("empty"), None);
        let k = parse_dup(" residual_norm_h16 ").expect("known symbol");
        assert_eq!(k, Some(Kernel::ResidualNormH16));
        assert_eq!(label(k), ",probe=dup:residual_norm_h16");
        assert_eq!(label(None), "");
        assert!(matches!(
            parse_dup("no_such_kernel"),
            Err(CudaError::Invalid(_))
        ));
    }
}
