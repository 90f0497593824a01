//! A bounds-checked little-endian byte cursor over the whole file, used by the parser.
//!
//! Owns: every read of untrusted header bytes. Invariants: a read either returns exactly the
//! bytes asked for or a [`GgufError::Truncated`] naming the field and its absolute offset — it
//! never indexes out of bounds and never panics; counts are checked against the bytes
//! remaining (×  the smallest element encoding) by [`Cursor::check_count`] before anything
//! is allocated from them.

use crate::error::GgufError;

/// Read position over an immutable byte slice (the whole file).
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, pos: 0 }
    }

    /// Absolute position in the file.
    pub(crate) fn pos(&self) -> u64 {
        self.pos as u64
    }

    /// Bytes left after the position.
    pub(crate) fn remaining(&self) -> u64 {
        self.bytes.len().saturating_sub(self.pos) as u64
    }

    /// Take `n` bytes; `what` names the field for the error message (built only on failure).
    pub(crate) fn take(
        &mut self,
        n: u64,
        what: impl FnOnce() -> String,
    ) -> Result<&'a [u8], GgufError> {
        let available = self.remaining();
        let end = usize::try_from(n)
            .ok()
            .filter(|_| n <= available)
            .and_then(|n| self.pos.checked_add(n));
        match end.and_then(|end| self.bytes.get(self.pos..end).map(|s| (s, end))) {
            Some((s, end)) => {
                self.pos = end;
                Ok(s)
            }
            None => Err(GgufError::Truncated {
                what: what(),
                offset: self.pos(),
                needed: n,
                available,
            }),
        }
    }

    pub(crate) fn array<const N: usize>(
        &mut self,
        what: impl FnOnce() -> String,
    ) -> Result<[u8; N], GgufError> {
        let s = self.take(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(s);
        Ok(out)
    }

    pub(crate) fn u32(&mut self, what: impl FnOnce() -> String) -> Result<u32, GgufError> {
        self.array::<4>(what).map(u32::from_le_bytes)
    }

    pub(crate) fn u64(&mut self, what: impl FnOnce() -> String) -> Result<u64, GgufError> {
        self.array::<8>(what).map(u64::from_le_bytes)
    }

    /// Fail with [`GgufError::CountTooLarge`] unless `count` elements of at least
    /// `min_bytes_each` bytes fit in the remaining bytes. Returns the count as usize.
    pub(crate) fn check_count(
        &self,
        count: u64,
        min_bytes_each: u64,
        count_offset: u64,
        what: impl FnOnce() -> String,
    ) -> Result<usize, GgufError> {
        let available = self.remaining();
        let fits = count
            .checked_mul(min_bytes_each)
            .is_some_and(|need| need <= available);
        match usize::try_from(count) {
            Ok(n) if fits => Ok(n),
            _ => Err(GgufError::CountTooLarge {
                what: what(),
                offset: count_offset,
                count,
                min_bytes_each,
                available,
            }),
        }
    }

    /// A GGUF string: u64 length, then that many UTF-8 bytes.
    pub(crate) fn string(&mut self, what: impl Fn() -> String) -> Result<&'a str, GgufError> {
        let len_offset = self.pos();
        let len = self.u64(|| format!("length of {}", what()))?;
        let available = self.remaining();
        if len > available {
            return Err(GgufError::StringTooLong {
                what: what(),
                offset: len_offset,
                len,
                available,
            });
        }
        let data_offset = self.pos();
        let bytes = self.take(len, &what)?;
        std::str::from_utf8(bytes).map_err(|e| GgufError::InvalidUtf8 {
            what: what(),
            offset: data_offset,
            valid_up_to: e.valid_up_to(),
        })
    }

    /// Move to `to` (absolute), which must not be past the end of the file.
    pub(crate) fn seek(&mut self, to: u64, what: impl FnOnce() -> String) -> Result<(), GgufError> {
        let here = self.pos();
        if to >= here {
            self.take(to - here, what)?;
        } else {
            // Only forward seeks are used; a backward one is a parser bug, but stays safe.
            self.pos = usize::try_from(to).unwrap_or(0);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_bounded() {
        let bytes = [1u8, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 9];
        let mut c = Cursor::new(&bytes);
        assert_eq!(c.u32(|| "a".into()).ok(), Some(1));
        assert_eq!(c.u64(|| "b".into()).ok(), Some(2));
        match c.u32(|| "c".into()) {
            Err(GgufError::Truncated {
                what,
                offset,
                needed,
                available,
            }) => {
                assert_eq!((what.as_str(), offset, needed, available), ("c", 12, 4, 1));
            }
            other => panic!("expected Truncated, got {other:?}"),
        }
        assert!(c.take(u64::MAX, || "huge".into()).is_err());
        assert_eq!(c.pos(), 12);
    }

    #[test]
    fn counts_are_checked_against_remaining_bytes() {
        let bytes = [0u8; 16];
        let c = Cursor::new(&bytes);
        assert_eq!(c.check_count(4, 4, 0, || "x".into()).ok(), Some(4));
        assert!(c.check_count(5, 4, 0, || "x".into()).is_err());
        assert!(c.check_count(u64::MAX, 2, 0, || "x".into()).is_err());
    }

    #[test]
    fn strings_validate_length_and_utf8() {
        let mut ok = 3u64.to_le_bytes().to_vec();
        ok.extend_from_slice(b"abc");
        assert_eq!(Cursor::new(&ok).string(|| "s".into()).ok(), Some("abc"));

        let mut long = 4u64.to_le_bytes().to_vec();
        long.extend_from_slice(b"abc");
        assert!(matches!(
            Cursor::new(&long).string(|| "s".into()),
            Err(GgufError::StringTooLong {
                len: 4,
                available: 3,
                ..
            })
        ));

        let mut bad = 2u64.to_le_bytes().to_vec();
        bad.extend_from_slice(&[0xc3, 0x28]);
        assert!(matches!(
            Cursor::new(&bad).string(|| "s".into()),
            Err(GgufError::InvalidUtf8 { offset: 8, .. })
        ));
    }
}
