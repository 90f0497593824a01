//! GGUF metadata values: the 13 on-disk value types, a decoded [`Value`], and homogeneous
//! [`Array`]s (which may nest: an array of arrays, each inner array with its own element type).
//!
//! Owns: the in-memory data model of metadata and its human-readable rendering (`Display`:
//! short form `{}` that elides long arrays and strings, full form `{:#}`). Invariant: an
//! `Array` is homogeneous by construction (one Rust variant per element type), so a value can
//! always be encoded back exactly as it was read. No serde: this crate has no serde dependency.

use std::fmt;

/// The on-disk value type id of a metadata value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl ValueType {
    /// The type with this on-disk id.
    pub fn from_id(id: u32) -> Option<ValueType> {
        use ValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    /// The on-disk id.
    pub fn id(self) -> u32 {
        self as u32
    }

    /// Lower-case name (`"u32"`, `"string"`, `"array"`).
    pub fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }

    /// The fewest bytes one value of this type can occupy on disk (strings: the 8-byte length;
    /// arrays: 4-byte element type + 8-byte count). Used to reject absurd counts before
    /// allocating.
    pub fn min_encoded_size(self) -> u64 {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => 1,
            U16 | I16 => 2,
            U32 | I32 | F32 => 4,
            U64 | I64 | F64 | String => 8,
            Array => 12,
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    Array(Array),
    U64(u64),
    I64(i64),
    F64(f64),
}

/// A homogeneous metadata array. `Array(Vec<Array>)` is an array of arrays; each inner array
/// carries its own element type.
#[derive(Clone, Debug, PartialEq)]
pub enum Array {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
    String(Vec<String>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
    Array(Vec<Array>),
}

impl Value {
    /// The on-disk type of this value.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
        }
    }

    /// Whether this is one of the eight integer types.
    pub fn is_integer(&self) -> bool {
        self.as_i128().is_some()
    }

    fn as_i128(&self) -> Option<i128> {
        Some(match *self {
            Value::U8(v) => v.into(),
            Value::I8(v) => v.into(),
            Value::U16(v) => v.into(),
            Value::I16(v) => v.into(),
            Value::U32(v) => v.into(),
            Value::I32(v) => v.into(),
            Value::U64(v) => v.into(),
            Value::I64(v) => v.into(),
            _ => return None,
        })
    }

    /// Any integer type holding a non-negative value, as u64.
    pub fn as_u64(&self) -> Option<u64> {
        self.as_i128().and_then(|v| u64::try_from(v).ok())
    }

    /// Any integer type whose value fits in i64.
    pub fn as_i64(&self) -> Option<i64> {
        self.as_i128().and_then(|v| i64::try_from(v).ok())
    }

    /// Any integer type whose value fits in u32.
    pub fn as_u32(&self) -> Option<u32> {
        self.as_i128().and_then(|v| u32::try_from(v).ok())
    }

    /// `F32`, or `F64` rounded to f32.
    pub fn as_f32(&self) -> Option<f32> {
        match *self {
            Value::F32(v) => Some(v),
            Value::F64(v) => Some(v as f32),
            _ => None,
        }
    }

    /// `F64`, or `F32` widened.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

macro_rules! slice_accessors {
    ($($fn:ident => $variant:ident : $t:ty),* $(,)?) => {
        $(
            #[doc = concat!("The elements, if this is an array of `", stringify!($t), "`.")]
            pub fn $fn(&self) -> Option<&[$t]> {
                match self {
                    Array::$variant(v) => Some(v),
                    _ => None,
                }
            }
        )*
    };
}

impl Array {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Array::U8(v) => v.len(),
            Array::I8(v) => v.len(),
            Array::U16(v) => v.len(),
            Array::I16(v) => v.len(),
            Array::U32(v) => v.len(),
            Array::I32(v) => v.len(),
            Array::F32(v) => v.len(),
            Array::Bool(v) => v.len(),
            Array::String(v) => v.len(),
            Array::U64(v) => v.len(),
            Array::I64(v) => v.len(),
            Array::F64(v) => v.len(),
            Array::Array(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element type (`ValueType::Array` for an array of arrays).
    pub fn element_type(&self) -> ValueType {
        match self {
            Array::U8(_) => ValueType::U8,
            Array::I8(_) => ValueType::I8,
            Array::U16(_) => ValueType::U16,
            Array::I16(_) => ValueType::I16,
            Array::U32(_) => ValueType::U32,
            Array::I32(_) => ValueType::I32,
            Array::F32(_) => ValueType::F32,
            Array::Bool(_) => ValueType::Bool,
            Array::String(_) => ValueType::String,
            Array::U64(_) => ValueType::U64,
            Array::I64(_) => ValueType::I64,
            Array::F64(_) => ValueType::F64,
            Array::Array(_) => ValueType::Array,
        }
    }

    /// Nesting depth: 1 for a flat array, 1 + the deepest inner array otherwise.
    pub fn depth(&self) -> usize {
        match self {
            Array::Array(v) => 1 + v.iter().map(Array::depth).max().unwrap_or(0),
            _ => 1,
        }
    }

    slice_accessors! {
        as_u8s => U8: u8,
        as_i8s => I8: i8,
        as_u16s => U16: u16,
        as_i16s => I16: i16,
        as_u32s => U32: u32,
        as_i32s => I32: i32,
        as_f32s => F32: f32,
        as_bools => Bool: bool,
        as_strings => String: String,
        as_u64s => U64: u64,
        as_i64s => I64: i64,
        as_f64s => F64: f64,
        as_arrays => Array: Array,
    }

    /// Element `i` as a [`Value`] (cloned), or `None` when out of range.
    pub fn get(&self, i: usize) -> Option<Value> {
        Some(match self {
            Array::U8(v) => Value::U8(*v.get(i)?),
            Array::I8(v) => Value::I8(*v.get(i)?),
            Array::U16(v) => Value::U16(*v.get(i)?),
            Array::I16(v) => Value::I16(*v.get(i)?),
            Array::U32(v) => Value::U32(*v.get(i)?),
            Array::I32(v) => Value::I32(*v.get(i)?),
            Array::F32(v) => Value::F32(*v.get(i)?),
            Array::Bool(v) => Value::Bool(*v.get(i)?),
            Array::String(v) => Value::String(v.get(i)?.clone()),
            Array::U64(v) => Value::U64(*v.get(i)?),
            Array::I64(v) => Value::I64(*v.get(i)?),
            Array::F64(v) => Value::F64(*v.get(i)?),
            Array::Array(v) => Value::Array(v.get(i)?.clone()),
        })
    }

    /// All elements as i64, if this is an integer array whose every value fits.
    pub fn to_i64s(&self) -> Option<Vec<i64>> {
        fn conv<T: Copy>(v: &[T], f: impl Fn(T) -> Option<i64>) -> Option<Vec<i64>> {
            v.iter().map(|&x| f(x)).collect()
        }
        match self {
            Array::U8(v) => conv(v, |x| Some(x.into())),
            Array::I8(v) => conv(v, |x| Some(x.into())),
            Array::U16(v) => conv(v, |x| Some(x.into())),
            Array::I16(v) => conv(v, |x| Some(x.into())),
            Array::U32(v) => conv(v, |x| Some(x.into())),
            Array::I32(v) => conv(v, |x| Some(x.into())),
            Array::U64(v) => conv(v, |x| i64::try_from(x).ok()),
            Array::I64(v) => Some(v.clone()),
            _ => None,
        }
    }

    /// All elements as f32, if this is an `F32` or `F64` array.
    pub fn to_f32s(&self) -> Option<Vec<f32>> {
        match self {
            Array::F32(v) => Some(v.clone()),
            Array::F64(v) => Some(v.iter().map(|&x| x as f32).collect()),
            _ => None,
        }
    }
}

/// Strings longer than this many bytes are elided in the short `Display` form.
const SHORT_STRING_BYTES: usize = 96;
/// Arrays longer than this are shown with their first few elements only.
const SHORT_ARRAY_ITEMS: usize = 8;
/// How many elements the short form shows of a long array.
const SHORT_ARRAY_SHOWN: usize = 3;

fn write_str_value(f: &mut fmt::Formatter<'_>, s: &str, full: bool) -> fmt::Result {
    if full || s.len() <= SHORT_STRING_BYTES {
        return write!(f, "{s:?}");
    }
    let mut cut = SHORT_STRING_BYTES;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    let head = s.get(..cut).unwrap_or("");
    write!(f, "{head:?}... ({} bytes)", s.len())
}

fn write_items<T>(
    f: &mut fmt::Formatter<'_>,
    items: &[T],
    full: bool,
    mut one: impl FnMut(&mut fmt::Formatter<'_>, &T) -> fmt::Result,
) -> fmt::Result {
    let shown = if full || items.len() <= SHORT_ARRAY_ITEMS {
        items.len()
    } else {
        SHORT_ARRAY_SHOWN
    };
    f.write_str("[")?;
    for (i, item) in items.iter().take(shown).enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        one(f, item)?;
    }
    if shown < items.len() {
        f.write_str(", ...")?;
    }
    f.write_str("]")
}

impl fmt::Display for Array {
    /// `{}`: `[u32; 4] [1, 2, 3, 4]`, long arrays elided (`[string; 262144] ["<pad>", "<eos>",
    /// "<bos>", ...]`). `{:#}`: every element.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let full = f.alternate();
        write!(f, "[{}; {}] ", self.element_type(), self.len())?;
        fn dbg<T: fmt::Debug>(f: &mut fmt::Formatter<'_>, x: &T) -> fmt::Result {
            write!(f, "{x:?}")
        }
        match self {
            Array::U8(v) => write_items(f, v, full, dbg),
            Array::I8(v) => write_items(f, v, full, dbg),
            Array::U16(v) => write_items(f, v, full, dbg),
            Array::I16(v) => write_items(f, v, full, dbg),
            Array::U32(v) => write_items(f, v, full, dbg),
            Array::I32(v) => write_items(f, v, full, dbg),
            Array::F32(v) => write_items(f, v, full, dbg),
            Array::Bool(v) => write_items(f, v, full, dbg),
            Array::U64(v) => write_items(f, v, full, dbg),
            Array::I64(v) => write_items(f, v, full, dbg),
            Array::F64(v) => write_items(f, v, full, dbg),
            Array::String(v) => write_items(f, v, full, |f, s| write_str_value(f, s, full)),
            Array::Array(v) => write_items(f, v, full, |f, a| {
                if full {
                    write!(f, "{a:#}")
                } else {
                    write!(f, "{a}")
                }
            }),
        }
    }
}

impl fmt::Display for Value {
    /// Scalars print plainly (strings quoted and escaped); see [`Array`]'s `Display` for
    /// arrays. `{}` elides long strings and arrays, `{:#}` prints everything.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::U8(v) => write!(f, "{v}"),
            Value::I8(v) => write!(f, "{v}"),
            Value::U16(v) => write!(f, "{v}"),
            Value::I16(v) => write!(f, "{v}"),
            Value::U32(v) => write!(f, "{v}"),
            Value::I32(v) => write!(f, "{v}"),
            Value::F32(v) => write!(f, "{v:?}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::String(s) => write_str_value(f, s, f.alternate()),
            Value::Array(a) => {
                if f.alternate() {
                    write!(f, "{a:#}")
                } else {
                    write!(f, "{a}")
                }
            }
            Value::U64(v) => write!(f, "{v}"),
            Value::I64(v) => write!(f, "{v}"),
            Value::F64(v) => write!(f, "{v:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_ids_round_trip() {
        for id in 0..13 {
            let t = ValueType::from_id(id).expect("known id");
            assert_eq!(t.id(), id);
        }
        assert_eq!(ValueType::from_id(13), None);
        assert_eq!(ValueType::from_id(u32::MAX), None);
    }

    #[test]
    fn integer_accessors_convert_when_they_fit() {
        assert_eq!(Value::U8(7).as_u64(), Some(7));
        assert_eq!(Value::I32(-1).as_u64(), None);
        assert_eq!(Value::I32(-1).as_i64(), Some(-1));
        assert_eq!(Value::U64(u64::MAX).as_i64(), None);
        assert_eq!(Value::U64(1 << 40).as_u32(), None);
        assert_eq!(Value::I64(5).as_u32(), Some(5));
        assert_eq!(Value::F32(1.0).as_u64(), None);
        assert_eq!(Value::F64(0.5).as_f32(), Some(0.5));
        assert_eq!(Value::Bool(true).as_f32(), None);
        assert_eq!(Value::String("x".into()).as_str(), Some("x"));
    }

    #[test]
    fn display_is_short_for_big_arrays() {
        let toks: Vec<String> = ["<pad>", "<eos>", "<bos>", "a", "b", "c", "d", "e", "f"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let v = Value::Array(Array::String(toks));
        assert_eq!(
            v.to_string(),
            r#"[string; 9] ["<pad>", "<eos>", "<bos>", ...]"#
        );
        assert!(format!("{v:#}").ends_with(r#""e", "f"]"#));
        let small = Value::Array(Array::U32(vec![1, 2]));
        assert_eq!(small.to_string(), "[u32; 2] [1, 2]");
        let nested = Value::Array(Array::Array(vec![Array::I8(vec![-1]), Array::Bool(vec![])]));
        assert_eq!(
            nested.to_string(),
            "[array; 2] [[i8; 1] [-1], [bool; 0] []]"
        );
        let long = Value::String("é".repeat(100));
        let s = long.to_string();
        assert!(s.ends_with("... (200 bytes)"), "{s}");
        assert_eq!(Value::F32(1.0).to_string(), "1.0");
    }

    #[test]
    fn array_helpers() {
        let a = Array::U64(vec![1, u64::MAX]);
        assert_eq!(a.to_i64s(), None);
        assert_eq!(Array::I16(vec![-3, 4]).to_i64s(), Some(vec![-3, 4]));
        assert_eq!(Array::F64(vec![0.5]).to_f32s(), Some(vec![0.5]));
        assert_eq!(a.get(1), Some(Value::U64(u64::MAX)));
        assert_eq!(a.get(2), None);
        let nested = Array::Array(vec![Array::Array(vec![Array::U8(vec![1])])]);
        assert_eq!(nested.depth(), 3);
        assert_eq!(nested.element_type(), ValueType::Array);
        assert!(Array::Bool(vec![]).is_empty());
    }
}
