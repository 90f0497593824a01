//! Byte-level BPE (llama.cpp `llm_tokenizer_bpe_session`): GPT-2 byte encoding, ranked merges
//! within each pre-tokenized word, and llama.cpp's fallback for symbols that are not tokens.
//!
//! Owns: the merge table and the merge loop. Strings that take part in merges are interned to
//! ids (token texts keep their token id; other merge sides and results get ids past the
//! vocabulary), so the loop compares integers instead of building strings.
//! Invariants (the same result as llama.cpp's string-based loop): the lowest rank merges
//! first, ties go to the leftmost pair; a queued pair is stale exactly when either side was
//! merged away or grew (its byte length changed); when one pair text appears twice in
//! `tokenizer.ggml.merges` the first rank wins; a final symbol that is not a token is emitted
//! byte by byte, keeping only bytes whose one-character GPT-2 spelling is a token (others are
//! dropped, as in llama.cpp). Work per word is O(n log n) in its length.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use muser_gguf::{tokenizer as key, Gguf};

use crate::error::TokenizerError;
use crate::fxhash::FxMap;
use crate::pretok::PreTokenizer;
use crate::vocab::Vocab;

/// The GPT-2 byte → printable code point table: bytes that are printable Latin-1 keep their
/// code point, the others are mapped in byte order onto U+0100, U+0101, ...
pub(crate) fn byte_to_char_table() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next = 0x100u32;
    for (b, slot) in table.iter_mut().enumerate() {
        let printable = matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF);
        let cp = if printable {
            b as u32
        } else {
            next += 1;
            next - 1
        };
        *slot = char::from_u32(cp).unwrap_or('\0');
    }
    table
}

/// Merge data of a byte-level BPE vocabulary.
pub(crate) struct Bpe {
    pub pre: PreTokenizer,
    /// Interned id of each byte's GPT-2 character (`None`: appears in no token or merge).
    byte_sym: [Option<u32>; 256],
    /// `(left, right)` interned ids → `(rank, interned id of left+right)`.
    merges: FxMap<(u32, u32), (u32, u32)>,
    /// Token id of each byte 0x21..=0x7E spelled alone (the fallback path), else `None`.
    ascii_token: [Option<u32>; 128],
    /// GPT-2 spelling of each byte.
    pub byte_char: [char; 256],
    /// GPT-2 character → byte, for detokenizing.
    pub char_byte: FxMap<char, u8>,
}

/// String interner seeded with the vocabulary: token ids are their own symbol ids.
struct Interner<'v> {
    vocab: &'v FxMap<String, u32>,
    extra: FxMap<String, u32>,
    next: u32,
}

impl Interner<'_> {
    fn get(&self, s: &str) -> Option<u32> {
        self.vocab.get(s).or_else(|| self.extra.get(s)).copied()
    }

    fn intern(&mut self, s: &str) -> u32 {
        if let Some(id) = self.get(s) {
            return id;
        }
        let id = self.next;
        self.next += 1;
        self.extra.insert(s.to_owned(), id);
        id
    }
}

impl Bpe {
    /// Read `tokenizer.ggml.merges` (array of `"left right"` strings, split at the first space
    /// after the first byte, as llama.cpp does).
    pub fn from_gguf(g: &Gguf, vocab: &Vocab, pre: PreTokenizer) -> Result<Bpe, TokenizerError> {
        let merges = g
            .opt_array(key::MERGES)?
            .ok_or(TokenizerError::MissingMerges)?;
        let merges = merges.as_strings().ok_or_else(|| TokenizerError::BadKey {
            key: key::MERGES,
            reason: "not an array of strings".into(),
        })?;
        if merges.len() >= u32::MAX as usize / 2 {
            return Err(TokenizerError::BadKey {
                key: key::MERGES,
                reason: format!("{} merges", merges.len()),
            });
        }
        let mut interner = Interner {
            vocab: &vocab.to_id,
            extra: FxMap::default(),
            next: vocab.n_vocab() as u32,
        };
        let mut table: FxMap<(u32, u32), (u32, u32)> = FxMap::default();
        table.reserve(merges.len());
        for (rank, m) in merges.iter().enumerate() {
            let space = m.bytes().skip(1).position(|b| b == b' ').map(|p| p + 1);
            let (left, right) = match space {
                Some(p) => (&m[..p], &m[p + 1..]),
                None => ("", ""),
            };
            let l = interner.intern(left);
            let r = interner.intern(right);
            let joined = format!("{left}{right}");
            let res = interner.intern(&joined);
            table.entry((l, r)).or_insert((rank as u32, res));
        }
        let byte_char = byte_to_char_table();
        let mut byte_sym = [None; 256];
        let mut buf = [0u8; 4];
        for (b, slot) in byte_sym.iter_mut().enumerate() {
            *slot = interner.get(byte_char[b].encode_utf8(&mut buf));
        }
        let mut ascii_token = [None; 128];
        for (b, slot) in ascii_token.iter_mut().enumerate() {
            if (0x21..=0x7E).contains(&b) {
                *slot = vocab
                    .to_id
                    .get((b as u8 as char).encode_utf8(&mut buf))
                    .copied();
            }
        }
        let char_byte = byte_char
            .iter()
            .enumerate()
            .map(|(b, &c)| (c, b as u8))
            .collect();
        Ok(Bpe {
            pre,
            byte_sym,
            merges: table,
            ascii_token,
            byte_char,
            char_byte,
        })
    }

    /// GPT-2 spelling of `bytes`.
    pub fn spell(&self, bytes: &[u8]) -> String {
        bytes.iter().map(|&b| self.byte_char[b as usize]).collect()
    }

    /// Encode one raw-text fragment (already split around special tokens).
    pub fn encode_fragment(&self, vocab: &Vocab, text: &str, out: &mut Vec<u32>) {
        let mut session = Session::default();
        for word in self.pre.split(text) {
            if self.pre.ignore_merges() {
                if let Some(&id) = vocab.to_id.get(&self.spell(word.as_bytes())) {
                    out.push(id);
                    continue;
                }
            }
            session.word(self, vocab.n_vocab() as u32, word.as_bytes(), out);
        }
    }
}

/// A queued merge: `(rank, left index, right index, byte size, merged symbol)`, min first.
type Candidate = Reverse<(u32, u32, u32, u32, u32)>;

#[derive(Clone, Copy)]
struct Symbol {
    /// Byte offset in the word.
    start: u32,
    /// Byte length (0: merged into its left neighbour).
    len: u32,
    /// Interned id of its GPT-2 spelling, if interned.
    sym: Option<u32>,
    prev: i32,
    next: i32,
}

/// Reusable buffers for the merge loop.
#[derive(Default)]
struct Session {
    symbols: Vec<Symbol>,
    /// Min-heap on (rank, left index); `size` detects stale entries; last: merged symbol.
    queue: BinaryHeap<Candidate>,
}

impl Session {
    fn try_pair(&mut self, bpe: &Bpe, left: i32, right: i32) {
        if left < 0 || right < 0 {
            return;
        }
        let (l, r) = (self.symbols[left as usize], self.symbols[right as usize]);
        let (Some(ls), Some(rs)) = (l.sym, r.sym) else {
            return;
        };
        if let Some(&(rank, merged)) = bpe.merges.get(&(ls, rs)) {
            let size = l.len + r.len;
            self.queue
                .push(Reverse((rank, left as u32, right as u32, size, merged)));
        }
    }

    fn word(&mut self, bpe: &Bpe, n_vocab: u32, word: &[u8], out: &mut Vec<u32>) {
        let n = word.len();
        self.symbols.clear();
        self.queue.clear();
        for (i, &b) in word.iter().enumerate() {
            self.symbols.push(Symbol {
                start: i as u32,
                len: 1,
                sym: bpe.byte_sym[b as usize],
                prev: i as i32 - 1,
                next: if i + 1 == n { -1 } else { i as i32 + 1 },
            });
        }
        for i in 1..n {
            self.try_pair(bpe, i as i32 - 1, i as i32);
        }
        while let Some(Reverse((_, left, right, size, merged))) = self.queue.pop() {
            let (l, r) = (self.symbols[left as usize], self.symbols[right as usize]);
            if l.len == 0 || r.len == 0 || l.len + r.len != size {
                continue;
            }
            let next = r.next;
            {
                let s = &mut self.symbols[left as usize];
                s.len += r.len;
                s.sym = Some(merged);
                s.next = next;
            }
            self.symbols[right as usize].len = 0;
            if next >= 0 {
                self.symbols[next as usize].prev = left as i32;
            }
            let prev = self.symbols[left as usize].prev;
            self.try_pair(bpe, prev, left as i32);
            self.try_pair(bpe, left as i32, next);
        }
        let mut i = if n == 0 { -1 } else { 0 };
        while i >= 0 {
            let s = self.symbols[i as usize];
            i = s.next;
            if s.len == 0 {
                continue;
            }
            match s.sym {
                Some(id) if id < n_vocab => out.push(id),
                _ => {
                    let bytes = &word[s.start as usize..(s.start + s.len) as usize];
                    for &b in bytes {
                        if let Some(id) = bpe.ascii_token.get(b as usize).copied().flatten() {
                            out.push(id);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt2_byte_table() {
        let t = byte_to_char_table();
        assert_eq!(t[b'!' as usize], '!');
        assert_eq!(t[b' ' as usize], 'Ġ');
        assert_eq!(t[b'\n' as usize], 'Ċ');
        assert_eq!(t[0], 'Ā');
        // 0xAD is the 68th non-printable byte (after 0x00..=0x20 and 0x7F..=0xA0).
        assert_eq!(t[0xAD], '\u{143}');
        let set: std::collections::HashSet<char> = t.iter().copied().collect();
        assert_eq!(set.len(), 256);
    }
}
