//! Code point classes as llama.cpp's pre-tokenizers see them.
//!
//! Owns: the general-category class of a code point (`\p{L}`, `\p{N}`, ... from the generated
//! Unicode 15.1 table in `unicode_table.rs`, the version the pinned llama.cpp uses) and
//! llama.cpp's whitespace set (`\s`: the Unicode White_Space property, 25 code points, which
//! e.g. excludes U+200B and U+180E). Invariant: these answers equal llama.cpp's
//! `unicode_cpt_flags_from_cpt` for every code point; the splitters in `pretok` rely on it.

use crate::unicode_table::RANGES;

/// General-category class of a code point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// Unassigned (`Cn`).
    Undefined,
    /// `\p{N}`.
    Number,
    /// `\p{L}`.
    Letter,
    /// `\p{Z}`.
    Separator,
    /// `\p{M}`.
    Mark,
    /// `\p{P}`.
    Punctuation,
    /// `\p{S}`.
    Symbol,
    /// `\p{C}` other than `Cn`: `Cc`, `Cf`, `Co`, `Cs`.
    Control,
}

impl Class {
    fn from_code(c: u8) -> Class {
        match c {
            1 => Class::Number,
            2 => Class::Letter,
            3 => Class::Separator,
            4 => Class::Mark,
            5 => Class::Punctuation,
            6 => Class::Symbol,
            7 => Class::Control,
            _ => Class::Undefined,
        }
    }
}

/// The class of `c`.
pub(crate) fn class(c: char) -> Class {
    let cp = c as u32;
    // `partition_point` finds the first range starting after `cp`; the table starts at 0.
    let i = RANGES.partition_point(|&(start, _)| start <= cp);
    Class::from_code(RANGES[i.saturating_sub(1)].1)
}

/// llama.cpp's whitespace (`\s`): Unicode White_Space.
pub(crate) fn is_whitespace(c: char) -> bool {
    matches!(
        c as u32,
        0x09..=0x0D
            | 0x20
            | 0x85
            | 0xA0
            | 0x1680
            | 0x2000..=0x200A
            | 0x2028
            | 0x2029
            | 0x202F
            | 0x205F
            | 0x3000
    )
}

/// Class and whitespace bit of one code point, computed once per character of the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Flags {
    pub class: Class,
    pub ws: bool,
}

impl Flags {
    /// Flags of `c`.
    pub fn of(c: char) -> Flags {
        Flags {
            class: class(c),
            ws: is_whitespace(c),
        }
    }

    pub fn letter(self) -> bool {
        self.class == Class::Letter
    }

    pub fn number(self) -> bool {
        self.class == Class::Number
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_of_known_code_points() {
        assert_eq!(class('a'), Class::Letter);
        assert_eq!(class('Z'), Class::Letter);
        assert_eq!(class('7'), Class::Number);
        assert_eq!(class(' '), Class::Separator);
        assert_eq!(class('\n'), Class::Control);
        assert_eq!(class('!'), Class::Punctuation);
        assert_eq!(class('$'), Class::Symbol);
        assert_eq!(class('é'), Class::Letter);
        assert_eq!(class('\u{301}'), Class::Mark);
        assert_eq!(class('²'), Class::Number);
        assert_eq!(class('中'), Class::Letter);
        assert_eq!(class('😀'), Class::Symbol);
        assert_eq!(class('\u{200D}'), Class::Control);
        assert_eq!(class('\u{FE0F}'), Class::Mark);
        assert_eq!(class('\u{10FFFF}'), Class::Undefined);
        // Unicode 15.1 additions are assigned, 16.0 ones are not (llama.cpp's table is 15.1).
        assert_eq!(class('\u{2FFC}'), Class::Symbol);
        assert_eq!(class('\u{1CC00}'), Class::Undefined);
    }

    #[test]
    fn whitespace_set() {
        for c in [
            '\t', '\n', '\u{0B}', '\u{0C}', '\r', ' ', '\u{85}', '\u{A0}', '\u{3000}',
        ] {
            assert!(is_whitespace(c), "{c:?}");
        }
        for c in ['\u{200B}', '\u{180E}', '\u{1C}', 'a', '\u{FEFF}'] {
            assert!(!is_whitespace(c), "{c:?}");
        }
    }
}
