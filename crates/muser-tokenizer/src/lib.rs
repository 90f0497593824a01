//! Muser's tokenizers: token ids identical to the pinned llama.cpp's `llama_tokenize` for the
//! tokenizers Muser's models use, read from a GGUF.
//!
//! - [`Tokenizer`]: `tokenizer.ggml.model = gpt2` (byte-level BPE with the `llama4`/`gpt-4o`,
//!   `llama3`, `gpt-2` or `default` pre-tokenizer) and `llama` (SentencePiece-style, as in
//!   Gemma 3); special-token splitting, BOS/EOS per the GGUF flags, token → piece, decode,
//!   end-of-generation ids.
//! - [`StreamDecoder`]: incremental detokenization that only ever emits complete UTF-8.
//! - [`ChatTemplate`]: the GGUF's Jinja chat template rendered with `minijinja`, configured
//!   like llama.cpp's template engine.
//!
//! Modules: `vocab` (GGUF keys → vocabulary, flags, special ids), `special` (special-token
//! partition), `pretok` (BPE pre-tokenizers), `unicode` (+ generated `unicode_table`), `bpe`,
//! `spm`, `stream`, `chat`, `error`.
//!
//! Invariants: encoding never panics on any `&str` and is O(n log n) in the text length
//! (plus the special-token scan); `decode` of `encode`'s ids gives back the text (for models
//! without a space prefix and with special tokens rendered), lossy only on invalid UTF-8.

mod bpe;
mod chat;
mod error;
mod fxhash;
mod pretok;
mod special;
mod spm;
mod stream;
mod unicode;
mod unicode_table;
mod vocab;

use muser_gguf::Gguf;

pub use chat::{ChatMessage, ChatTemplate, CHATML_TEMPLATE};
pub use error::TokenizerError;
pub use pretok::PreTokenizer;
pub use stream::StreamDecoder;
pub use vocab::{ModelKind, SpecialIds};

use bpe::Bpe;
use special::{Fragment, Specials};
use vocab::{attr, Vocab};

/// Model-specific encoder state.
enum Engine {
    Spm {
        byte_tokens: Box<[Option<u32>; 256]>,
    },
    Bpe(Box<Bpe>),
}

/// A tokenizer loaded from a GGUF.
pub struct Tokenizer {
    vocab: Vocab,
    engine: Engine,
    specials: Specials,
    /// `token_to_piece(id, render_special = true)` for every token.
    pieces: Vec<Vec<u8>>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("kind", &self.vocab.kind)
            .field("n_vocab", &self.vocab.n_vocab())
            .field("ids", &self.vocab.ids)
            .field("add_bos", &self.vocab.add_bos)
            .field("add_eos", &self.vocab.add_eos)
            .field("add_space_prefix", &self.vocab.add_space_prefix)
            .finish_non_exhaustive()
    }
}

impl Tokenizer {
    /// Build from the GGUF's `tokenizer.ggml.*` keys. Fails with a typed error when the keys
    /// are missing or malformed, or name a model/pre-tokenizer this crate does not implement.
    pub fn from_gguf(g: &Gguf) -> Result<Tokenizer, TokenizerError> {
        let vocab = Vocab::from_gguf(g)?;
        let engine = match vocab.kind {
            ModelKind::Spm => Engine::Spm {
                byte_tokens: Box::new(spm::byte_tokens(&vocab)),
            },
            ModelKind::Bpe(pre) => Engine::Bpe(Box::new(Bpe::from_gguf(g, &vocab, pre)?)),
        };
        let specials = Specials::new(&vocab);
        let mut t = Tokenizer {
            vocab,
            engine,
            specials,
            pieces: Vec::new(),
        };
        t.pieces = (0..t.vocab.n_vocab() as u32)
            .map(|id| t.compute_piece(id))
            .collect();
        Ok(t)
    }

    /// Token ids for `text`, like `llama_tokenize(vocab, text, add_special, parse_special)`:
    /// `add_special` adds BOS (and EOS) as the GGUF's `add_bos_token`/`add_eos_token` say;
    /// `parse_special` lets text that spells a control token become that token (user-defined
    /// tokens are always split out).
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        let v = &self.vocab;
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && v.add_bos {
            if let Some(bos) = v.ids.bos {
                out.push(bos);
            }
        }
        let fragments = self.specials.partition(text, parse_special);
        match &self.engine {
            Engine::Spm { byte_tokens } => {
                let mut prev_special = true;
                let mut buf = String::new();
                for f in fragments {
                    match f {
                        Fragment::Token(id) => {
                            out.push(id);
                            prev_special = true;
                        }
                        Fragment::Text(s) => {
                            buf.clear();
                            if v.add_space_prefix && prev_special {
                                buf.push('▁');
                            }
                            for c in s.chars() {
                                buf.push(if c == ' ' { '▁' } else { c });
                            }
                            spm::encode_fragment(v, byte_tokens, &buf, &mut out);
                            prev_special = false;
                        }
                    }
                }
            }
            Engine::Bpe(bpe) => {
                for f in fragments {
                    match f {
                        Fragment::Token(id) => out.push(id),
                        Fragment::Text(s) => bpe.encode_fragment(v, s, &mut out),
                    }
                }
            }
        }
        if add_special && v.add_eos {
            if let Some(eos) = v.ids.eos {
                out.push(eos);
            }
        }
        out
    }

    /// The bytes token `id` stands for, like `llama_token_to_piece(.., lstrip = 0, special)`:
    /// control and unknown tokens give nothing unless `render_special`; user-defined tokens
    /// always render; byte tokens give one byte (so a piece may be partial UTF-8). An id
    /// outside the vocabulary gives nothing.
    pub fn token_to_piece(&self, id: u32, render_special: bool) -> Vec<u8> {
        self.piece(id, render_special).to_vec()
    }

    /// Borrowed form of [`Tokenizer::token_to_piece`].
    pub fn piece(&self, id: u32, render_special: bool) -> &[u8] {
        if !render_special && self.vocab.attr(id) & (attr::UNKNOWN | attr::CONTROL) != 0 {
            return &[];
        }
        self.pieces.get(id as usize).map_or(&[], Vec::as_slice)
    }

    /// Text of `ids`, like llama.cpp's `llama_detokenize(.., remove_special = false,
    /// unparse_special = render_special)` without its `clean_spaces` post-pass (which only
    /// applies to `gpt-2`/`llama3`/`default`-style BPE and is lossy): the concatenated pieces,
    /// with one leading space dropped from the first piece when the model adds a space
    /// prefix. Invalid UTF-8 becomes U+FFFD.
    pub fn decode(&self, ids: &[u32], render_special: bool) -> String {
        let mut bytes = Vec::with_capacity(ids.len() * 4);
        for (i, &id) in ids.iter().enumerate() {
            bytes.extend_from_slice(self.piece_at(i == 0, id, render_special));
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The piece as it appears at a position in a decoded sequence (`first`: position 0).
    pub(crate) fn piece_at(&self, first: bool, id: u32, render_special: bool) -> &[u8] {
        let p = self.piece(id, render_special);
        if first && self.vocab.add_space_prefix {
            p.strip_prefix(b" ").unwrap_or(p)
        } else {
            p
        }
    }

    /// Number of tokens.
    pub fn n_vocab(&self) -> usize {
        self.vocab.n_vocab()
    }

    /// Beginning-of-sequence token.
    pub fn bos(&self) -> Option<u32> {
        self.vocab.ids.bos
    }

    /// End-of-sequence token.
    pub fn eos(&self) -> Option<u32> {
        self.vocab.ids.eos
    }

    /// End-of-turn token.
    pub fn eot(&self) -> Option<u32> {
        self.vocab.ids.eot
    }

    /// All special ids as llama.cpp resolved them.
    pub fn special_ids(&self) -> SpecialIds {
        self.vocab.ids
    }

    /// Whether generating `id` ends generation (EOS, EOT, EOM and the other tokens llama.cpp
    /// puts in its end-of-generation set).
    pub fn is_eog(&self, id: u32) -> bool {
        self.vocab.eog.contains(&id)
    }

    /// The end-of-generation ids, ascending.
    pub fn eog_ids(&self) -> Vec<u32> {
        self.vocab.eog.iter().copied().collect()
    }

    /// Whether `encode(.., add_special = true, ..)` prepends BOS.
    pub fn add_bos(&self) -> bool {
        self.vocab.add_bos
    }

    /// Whether `encode(.., add_special = true, ..)` appends EOS.
    pub fn add_eos(&self) -> bool {
        self.vocab.add_eos
    }

    /// Whether the SentencePiece model prefixes text with a space.
    pub fn add_space_prefix(&self) -> bool {
        self.vocab.add_space_prefix
    }

    /// The tokenizer algorithm.
    pub fn kind(&self) -> ModelKind {
        self.vocab.kind
    }

    /// The token's text as stored in the GGUF (GPT-2 byte spelling for BPE, `▁` for spaces
    /// in SentencePiece vocabularies).
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.vocab.texts.get(id as usize).map(String::as_str)
    }

    /// The token whose stored text is exactly `text`.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.vocab.to_id.get(text).copied()
    }

    /// Whether the token is a control token (rendered as nothing by default).
    pub fn is_control(&self, id: u32) -> bool {
        self.vocab.attr(id) & attr::CONTROL != 0
    }

    fn compute_piece(&self, id: u32) -> Vec<u8> {
        let a = self.vocab.attr(id);
        let text = &self.vocab.texts[id as usize];
        if a & (attr::UNKNOWN | attr::CONTROL | attr::USER_DEFINED) != 0 {
            return text.as_bytes().to_vec();
        }
        if a & attr::NORMAL != 0 {
            return match &self.engine {
                Engine::Spm { .. } => text.replace('▁', " ").into_bytes(),
                Engine::Bpe(bpe) => gpt2_decode(bpe, text),
            };
        }
        if a & attr::BYTE != 0 {
            return vec![byte_of_byte_token(text)];
        }
        Vec::new()
    }
}

/// llama.cpp's `llama_decode_text`: GPT-2 characters back to bytes; a character outside the
/// table becomes `[UNK_BYTE_0x<hex of its UTF-8>` followed by the whole token text and `]`.
fn gpt2_decode(bpe: &Bpe, text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        match bpe.char_byte.get(&c) {
            Some(&b) => out.push(b),
            None => {
                out.extend_from_slice(b"[UNK_BYTE_0x");
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                }
                out.extend_from_slice(text.as_bytes());
                out.push(b']');
            }
        }
    }
    out
}

/// The byte of a `<0xXX>` token (llama.cpp parses characters 3..5 as hex; garbage gives 0).
fn byte_of_byte_token(text: &str) -> u8 {
    text.get(3..5)
        .and_then(|h| u8::from_str_radix(h, 16).ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn shared_across_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<crate::Tokenizer>();
        send_sync::<crate::ChatTemplate>();
    }
}
