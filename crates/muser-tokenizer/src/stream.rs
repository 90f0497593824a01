//! Streaming detokenizer: turns generated token ids into text as they arrive, never emitting
//! a broken UTF-8 sequence.
//!
//! Owns: the byte buffer between tokens. A token's piece may end in the middle of a UTF-8
//! sequence (byte-fallback and byte-level BPE tokens do); those bytes wait for the next token.
//! Invariants: the concatenation of every `push` result and `finish` equals
//! `Tokenizer::decode` of the same ids with the same `render_special`; a `push` result is
//! always whole characters; invalid bytes become U+FFFD exactly where
//! `String::from_utf8_lossy` would put them (an incomplete sequence at the very end becomes
//! one U+FFFD in `finish`).

use crate::Tokenizer;

/// Incremental decoder over one generated sequence.
pub struct StreamDecoder<'a> {
    tok: &'a Tokenizer,
    render_special: bool,
    first: bool,
    pending: Vec<u8>,
}

impl<'a> StreamDecoder<'a> {
    /// A decoder that renders control tokens as nothing.
    pub fn new(tok: &'a Tokenizer) -> StreamDecoder<'a> {
        StreamDecoder::with_special(tok, false)
    }

    /// A decoder that renders control tokens as their text when `render_special`.
    pub fn with_special(tok: &'a Tokenizer, render_special: bool) -> StreamDecoder<'a> {
        StreamDecoder {
            tok,
            render_special,
            first: true,
            pending: Vec::new(),
        }
    }

    /// Add one token; returns the text that became complete (possibly empty).
    pub fn push(&mut self, id: u32) -> String {
        let piece = self.tok.piece_at(self.first, id, self.render_special);
        self.first = false;
        self.pending.extend_from_slice(piece);
        let mut out = String::new();
        let mut consumed = 0;
        loop {
            match std::str::from_utf8(&self.pending[consumed..]) {
                Ok(s) => {
                    out.push_str(s);
                    consumed = self.pending.len();
                    break;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    let ok = &self.pending[consumed..consumed + valid];
                    // `valid_up_to` guarantees this prefix is valid UTF-8.
                    out.push_str(std::str::from_utf8(ok).unwrap_or_default());
                    consumed += valid;
                    match e.error_len() {
                        // Incomplete sequence at the end: wait for more bytes.
                        None => break,
                        Some(n) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            consumed += n;
                        }
                    }
                }
            }
        }
        self.pending.drain(..consumed);
        out
    }

    /// Bytes waiting for the rest of a UTF-8 sequence.
    pub fn pending_bytes(&self) -> usize {
        self.pending.len()
    }

    /// End of the sequence: flush what is left (an incomplete sequence becomes U+FFFD).
    pub fn finish(self) -> String {
        String::from_utf8_lossy(&self.pending).into_owned()
    }
}
