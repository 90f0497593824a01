//! SentencePiece-style tokenizer (llama.cpp `llm_tokenizer_spm_session`), used by Gemma 3.
//!
//! Owns: the score-driven merge loop over one raw-text fragment and the byte fallback.
//! The caller has already replaced spaces with `▁` (U+2581) and added the space prefix.
//! Invariants (llama.cpp's behaviour): symbols start as single code points; any two adjacent
//! symbols whose concatenation is *any* vocabulary token (control and user-defined included)
//! may merge; the highest score merges first, ties go to the leftmost pair; a queued pair is
//! stale when either side was merged away or grew; a final symbol that is not a token becomes
//! its bytes as `<0xXX>` tokens (or the one-byte token, or nothing when neither exists).
//! O(n log n) in the fragment length.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::vocab::Vocab;

/// Byte → token table for the fallback (`<0xXX>`, else the one-byte token).
pub(crate) fn byte_tokens(vocab: &Vocab) -> [Option<u32>; 256] {
    let mut t = [None; 256];
    for (b, slot) in t.iter_mut().enumerate() {
        let hex = format!("<0x{b:02X}>");
        *slot = vocab.to_id.get(&hex).copied().or_else(|| {
            char::from_u32(b as u32)
                .filter(|_| b < 0x80)
                .and_then(|c| vocab.to_id.get(c.encode_utf8(&mut [0u8; 4]) as &str))
                .copied()
        });
    }
    t
}

#[derive(Clone, Copy)]
struct Symbol {
    start: u32,
    /// Byte length (0: merged into its left neighbour).
    len: u32,
    prev: i32,
    next: i32,
}

/// A candidate merge: highest score first, then lowest left index.
#[derive(Clone, Copy)]
struct Pair {
    score: f32,
    left: u32,
    right: u32,
    size: u32,
}

impl PartialEq for Pair {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Pair {}

impl PartialOrd for Pair {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pair {
    fn cmp(&self, other: &Self) -> Ordering {
        // `+ 0.0` folds -0.0 into 0.0 so that total_cmp agrees with `==` on scores.
        (self.score + 0.0)
            .total_cmp(&(other.score + 0.0))
            .then_with(|| other.left.cmp(&self.left))
    }
}

/// Tokenize one escaped fragment, appending to `out`.
pub(crate) fn encode_fragment(
    vocab: &Vocab,
    bytes_tok: &[Option<u32>; 256],
    text: &str,
    out: &mut Vec<u32>,
) {
    let mut symbols: Vec<Symbol> = Vec::with_capacity(text.len());
    for (start, c) in text.char_indices() {
        let i = symbols.len() as i32;
        symbols.push(Symbol {
            start: start as u32,
            len: c.len_utf8() as u32,
            prev: i - 1,
            next: i + 1,
        });
    }
    if let Some(last) = symbols.last_mut() {
        last.next = -1;
    } else {
        return;
    }
    let mut queue: BinaryHeap<Pair> = BinaryHeap::with_capacity(symbols.len());
    let try_pair = |symbols: &[Symbol], queue: &mut BinaryHeap<Pair>, left: i32, right: i32| {
        if left < 0 || right < 0 {
            return;
        }
        let (l, r) = (symbols[left as usize], symbols[right as usize]);
        let piece = &text[l.start as usize..(r.start + r.len) as usize];
        if let Some(&id) = vocab.to_id.get(piece) {
            queue.push(Pair {
                score: vocab.scores[id as usize],
                left: left as u32,
                right: right as u32,
                size: piece.len() as u32,
            });
        }
    };
    for i in 1..symbols.len() as i32 {
        try_pair(&symbols, &mut queue, i - 1, i);
    }
    while let Some(p) = queue.pop() {
        let (l, r) = (symbols[p.left as usize], symbols[p.right as usize]);
        if l.len == 0 || r.len == 0 || l.len + r.len != p.size {
            continue;
        }
        symbols[p.left as usize].len += r.len;
        symbols[p.left as usize].next = r.next;
        symbols[p.right as usize].len = 0;
        if r.next >= 0 {
            symbols[r.next as usize].prev = p.left as i32;
        }
        try_pair(&symbols, &mut queue, l.prev, p.left as i32);
        try_pair(&symbols, &mut queue, p.left as i32, r.next);
    }
    let mut i = 0i32;
    while i >= 0 {
        let s = symbols[i as usize];
        i = s.next;
        let piece = &text[s.start as usize..(s.start + s.len) as usize];
        match vocab.to_id.get(piece) {
            Some(&id) => out.push(id),
            None => {
                for &b in piece.as_bytes() {
                    if let Some(id) = bytes_tok[b as usize] {
                        out.push(id);
                    }
                }
            }
        }
    }
}
