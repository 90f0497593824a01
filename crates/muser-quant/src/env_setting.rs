//! One kernel switch read from the environment once (`MUSER_SIMD`, `MUSER_CPU_PREFETCH`,
//! `MUSER_CPU_TILE_TOKENS`): parsed at first use, the parse error kept (not retried), returned
//! by `init` for a typed start-up error and raised as a panic by `get` (fail closed: a bad
//! value never silently becomes the default).

use std::sync::OnceLock;

pub(crate) struct EnvSetting<T: 'static> {
    var: &'static str,
    parse: fn(Option<&str>) -> Result<T, String>,
    cell: OnceLock<Result<T, String>>,
}

impl<T: Copy + 'static> EnvSetting<T> {
    pub(crate) const fn new(
        var: &'static str,
        parse: fn(Option<&str>) -> Result<T, String>,
    ) -> EnvSetting<T> {
        EnvSetting {
            var,
            parse,
            cell: OnceLock::new(),
        }
    }

    fn cell(&self) -> &Result<T, String> {
        self.cell
            .get_or_init(|| (self.parse)(std::env::var(self.var).ok().as_deref()))
    }

    /// The value, or the reason the variable's setting is refused.
    pub(crate) fn init(&self) -> Result<T, String> {
        self.cell().clone()
    }

    /// The value. Panics (naming the variable's problem) on a refused setting.
    pub(crate) fn get(&self) -> T {
        match self.cell() {
            Ok(v) => *v,
            Err(reason) => panic!("muser-quant: {reason}"),
        }
    }
}
