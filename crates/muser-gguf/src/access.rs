//! Typed metadata accessors on [`Gguf`]: required (`get_*`), optional (`opt_*`, missing is
//! `Ok(None)`), and architecture-scoped (`arch_*` / `opt_arch_*`, key =
//! `"{general.architecture}.{suffix}"`).
//!
//! Owns: the conversion rules. Invariants: every error names the full key; a present key of
//! the wrong type is always an error (never treated as missing); integer getters accept any
//! integer type whose value fits the requested type and report [`GgufError::ValueOutOfRange`]
//! otherwise; float getters accept f32 and f64.

use crate::error::GgufError;
use crate::keys::{general, ArchKey};
use crate::reader::Gguf;
use crate::value::{Array, Value};

fn wrong(key: &str, expected: &'static str, v: &Value) -> GgufError {
    GgufError::WrongKeyType {
        key: key.to_owned(),
        expected,
        found: v.value_type(),
    }
}

fn int<T: TryFrom<i128>>(key: &str, expected: &'static str, v: &Value) -> Result<T, GgufError> {
    let wide: i128 = match *v {
        Value::U8(x) => x.into(),
        Value::I8(x) => x.into(),
        Value::U16(x) => x.into(),
        Value::I16(x) => x.into(),
        Value::U32(x) => x.into(),
        Value::I32(x) => x.into(),
        Value::U64(x) => x.into(),
        Value::I64(x) => x.into(),
        _ => return Err(wrong(key, expected, v)),
    };
    T::try_from(wide).map_err(|_| GgufError::ValueOutOfRange {
        key: key.to_owned(),
        expected,
        value: wide.to_string(),
    })
}

/// `Some(x)` or a [`GgufError::WrongKeyType`] (floats and bools: no integer conversion).
fn exact<T>(key: &str, expected: &'static str, x: Option<T>, v: &Value) -> Result<T, GgufError> {
    x.ok_or_else(|| wrong(key, expected, v))
}

macro_rules! typed {
    ($get:ident, $opt:ident, $arch:ident, $opt_arch:ident, $t:ty, $conv:expr) => {
        #[doc = concat!("Required key as `", stringify!($t), "` (see the module docs for conversions).")]
        pub fn $get(&self, key: &str) -> Result<$t, GgufError> {
            self.$opt(key)?.ok_or_else(|| GgufError::MissingKey {
                key: key.to_owned(),
            })
        }

        #[doc = concat!("Optional key as `", stringify!($t), "`: missing is `Ok(None)`, a wrong type is an error.")]
        pub fn $opt(&self, key: &str) -> Result<Option<$t>, GgufError> {
            match self.get(key) {
                None => Ok(None),
                Some(v) => {
                    let conv: fn(&str, &Value) -> Result<$t, GgufError> = $conv;
                    conv(key, v).map(Some)
                }
            }
        }

        #[doc = concat!("Required architecture-scoped key as `", stringify!($t), "`.")]
        pub fn $arch(&self, k: ArchKey) -> Result<$t, GgufError> {
            self.$get(&self.arch_key(k)?)
        }

        #[doc = concat!("Optional architecture-scoped key as `", stringify!($t), "`.")]
        pub fn $opt_arch(&self, k: ArchKey) -> Result<Option<$t>, GgufError> {
            self.$opt(&self.arch_key(k)?)
        }
    };
}

impl Gguf {
    /// The full key for an architecture-scoped suffix, using `general.architecture`.
    pub fn arch_key(&self, k: ArchKey) -> Result<String, GgufError> {
        Ok(k.full(self.get_str(general::ARCHITECTURE)?))
    }

    /// Required string key (borrowed from the parsed metadata).
    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        self.opt_str(key)?.ok_or_else(|| GgufError::MissingKey {
            key: key.to_owned(),
        })
    }

    /// Optional string key.
    pub fn opt_str(&self, key: &str) -> Result<Option<&str>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(wrong(key, "string", v)),
        }
    }

    /// Required array key.
    pub fn get_array(&self, key: &str) -> Result<&Array, GgufError> {
        self.opt_array(key)?.ok_or_else(|| GgufError::MissingKey {
            key: key.to_owned(),
        })
    }

    /// Optional array key.
    pub fn opt_array(&self, key: &str) -> Result<Option<&Array>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(v) => Err(wrong(key, "array", v)),
        }
    }

    /// Required architecture-scoped string key.
    pub fn arch_str(&self, k: ArchKey) -> Result<&str, GgufError> {
        self.get_str(&self.arch_key(k)?)
    }

    /// Optional architecture-scoped string key.
    pub fn opt_arch_str(&self, k: ArchKey) -> Result<Option<&str>, GgufError> {
        self.opt_str(&self.arch_key(k)?)
    }

    /// Required architecture-scoped array key.
    pub fn arch_array(&self, k: ArchKey) -> Result<&Array, GgufError> {
        self.get_array(&self.arch_key(k)?)
    }

    /// Optional architecture-scoped array key.
    pub fn opt_arch_array(&self, k: ArchKey) -> Result<Option<&Array>, GgufError> {
        self.opt_array(&self.arch_key(k)?)
    }

    typed!(get_u32, opt_u32, arch_u32, opt_arch_u32, u32, |k, v| int(
        k, "u32", v
    ));
    typed!(get_u64, opt_u64, arch_u64, opt_arch_u64, u64, |k, v| int(
        k, "u64", v
    ));
    typed!(get_i32, opt_i32, arch_i32, opt_arch_i32, i32, |k, v| int(
        k, "i32", v
    ));
    typed!(get_i64, opt_i64, arch_i64, opt_arch_i64, i64, |k, v| int(
        k, "i64", v
    ));
    typed!(get_f32, opt_f32, arch_f32, opt_arch_f32, f32, |k, v| exact(
        k,
        "f32",
        v.as_f32(),
        v
    ));
    typed!(get_f64, opt_f64, arch_f64, opt_arch_f64, f64, |k, v| exact(
        k,
        "f64",
        v.as_f64(),
        v
    ));
    typed!(
        get_bool,
        opt_bool,
        arch_bool,
        opt_arch_bool,
        bool,
        |k, v| exact(k, "bool", v.as_bool(), v)
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::arch;
    use crate::value::ValueType;
    use crate::writer::{to_bytes, GgufBuilder};

    fn file(with_arch: bool) -> Gguf {
        let mut b = GgufBuilder::new();
        if with_arch {
            b.kv(general::ARCHITECTURE, Value::String("muse-glimmer".into()))
                .unwrap();
        }
        b.kv("muse-glimmer.block_count", Value::U64(52)).unwrap();
        b.kv("muse-glimmer.context_length", Value::U64(1 << 40))
            .unwrap();
        b.kv("muse-glimmer.attention.head_count", Value::I32(-1))
            .unwrap();
        b.kv(
            "muse-glimmer.attention.layer_norm_rms_epsilon",
            Value::F64(1e-5),
        )
        .unwrap();
        b.kv(
            "muse-glimmer.attention.sliding_window_pattern",
            Value::Array(Array::Bool(vec![true, true, true, false])),
        )
        .unwrap();
        b.kv("name", Value::String("x".into())).unwrap();
        b.kv("flag", Value::Bool(true)).unwrap();
        Gguf::from_bytes(to_bytes(b, &[]).unwrap()).unwrap()
    }

    #[test]
    fn typed_getters_convert_and_name_keys() {
        let g = file(true);
        assert_eq!(g.architecture(), Some("muse-glimmer"));
        assert_eq!(g.arch_u32(arch::BLOCK_COUNT).unwrap(), 52);
        assert_eq!(g.get_u64("muse-glimmer.context_length").unwrap(), 1 << 40);
        match g.arch_u32(arch::CONTEXT_LENGTH) {
            Err(GgufError::ValueOutOfRange {
                key,
                expected,
                value,
            }) => {
                assert_eq!(
                    (key.as_str(), expected),
                    ("muse-glimmer.context_length", "u32")
                );
                assert_eq!(value, (1u64 << 40).to_string());
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            g.arch_u32(arch::HEAD_COUNT),
            Err(GgufError::ValueOutOfRange { .. })
        ));
        assert_eq!(g.arch_i64(arch::HEAD_COUNT).unwrap(), -1);
        assert_eq!(g.arch_f32(arch::RMS_EPS).unwrap(), 1e-5_f64 as f32);
        let pattern = g.arch_array(arch::SLIDING_WINDOW_PATTERN).unwrap();
        assert_eq!(pattern.as_bools(), Some(&[true, true, true, false][..]));
        assert_eq!(g.get_str("name").unwrap(), "x");
        assert!(g.get_bool("flag").unwrap());

        match g.get_u32("name") {
            Err(e @ GgufError::WrongKeyType { .. }) => {
                assert_eq!(e.to_string(), "GGUF key 'name' should be u32 but is string");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            g.get_f32("flag"),
            Err(GgufError::WrongKeyType {
                found: ValueType::Bool,
                ..
            })
        ));
        assert!(matches!(
            g.get_str("flag"),
            Err(GgufError::WrongKeyType { .. })
        ));
        assert!(matches!(
            g.get_array("name"),
            Err(GgufError::WrongKeyType { .. })
        ));
        match g.arch_u32(arch::VOCAB_SIZE) {
            Err(e @ GgufError::MissingKey { .. }) => {
                assert_eq!(e.to_string(), "missing GGUF key 'muse-glimmer.vocab_size'");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(g.opt_arch_u32(arch::VOCAB_SIZE).unwrap(), None);
        assert_eq!(g.opt_arch_f32(arch::FINAL_LOGIT_SOFTCAPPING).unwrap(), None);
        assert_eq!(g.opt_arch_u32(arch::BLOCK_COUNT).unwrap(), Some(52));
        assert!(g.opt_str("flag").is_err());
        assert_eq!(g.opt_array("nope").unwrap(), None);
        assert_eq!(g.opt_bool("nope").unwrap(), None);
    }

    #[test]
    fn arch_getters_need_an_architecture() {
        let g = file(false);
        assert_eq!(g.architecture(), None);
        match g.arch_u32(arch::BLOCK_COUNT) {
            Err(GgufError::MissingKey { key }) => assert_eq!(key, general::ARCHITECTURE),
            other => panic!("{other:?}"),
        }
        assert!(g.opt_arch_u32(arch::BLOCK_COUNT).is_err());
    }
}
