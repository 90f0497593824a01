//! Special-token partitioning (llama.cpp `tokenizer_st_partition`): text that spells a
//! special token's content is cut out as that token before the model's tokenizer runs.
//!
//! Owns: the list of special tokens (attribute control, user-defined or unknown) and their
//! priority, and the partition of a text into raw fragments and token ids.
//! llama.cpp's rule, reproduced exactly: special tokens are taken one at a time, longest text
//! first; each one claims its leftmost non-overlapping occurrences inside the still-unclaimed
//! raw fragments. Control and unknown tokens only take part when `parse_special` is on;
//! user-defined tokens always do. (The LSTRIP/RSTRIP attributes llama.cpp gives a few models
//! by name — phi-3, some BERTs — are not modelled; no supported model sets them.)
//! Implementation: one Aho-Corasick pass finds which special tokens occur in the text at all;
//! only those are then applied in llama.cpp's priority order, each with a left-to-right
//! non-overlapping substring search over the remaining raw fragments — the same result, with
//! work proportional to (tokens that occur) × (text length) instead of llama.cpp's
//! (all special tokens) × (text length).
//! Ties in length are broken by token id (llama.cpp's `std::sort` leaves that order
//! unspecified; it only matters for two same-length special tokens overlapping in the text).

use aho_corasick::AhoCorasick;

use crate::vocab::{attr, Vocab};

/// A piece of partitioned input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fragment<'t> {
    /// Raw text for the model's tokenizer (never empty).
    Text(&'t str),
    /// A special token.
    Token(u32),
}

pub(crate) struct Specials {
    /// Automaton over the special tokens' texts; pattern index = index into `ids`.
    ac: Option<AhoCorasick>,
    /// Token id per pattern, in priority order (longest text first, then lowest id).
    ids: Vec<u32>,
    /// Whether the pattern takes part without `parse_special` (user-defined tokens).
    always: Vec<bool>,
    /// Text per pattern.
    texts: Vec<String>,
}

impl Specials {
    pub fn new(vocab: &Vocab) -> Specials {
        let mut ids: Vec<u32> = (0..vocab.n_vocab() as u32)
            .filter(|&id| {
                vocab.attr(id) & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0
            })
            .collect();
        ids.sort_by_key(|&id| (std::cmp::Reverse(vocab.texts[id as usize].len()), id));
        let always = ids
            .iter()
            .map(|&id| vocab.attr(id) & (attr::CONTROL | attr::UNKNOWN) == 0)
            .collect();
        let ac = if ids.is_empty() {
            None
        } else {
            // Building only fails for absurd automaton sizes; then no text can be split out,
            // which `partition` treats like a vocabulary without special tokens.
            AhoCorasick::new(ids.iter().map(|&id| vocab.texts[id as usize].as_bytes())).ok()
        };
        let texts = ids
            .iter()
            .map(|&id| vocab.texts[id as usize].clone())
            .collect();
        Specials {
            ac,
            ids,
            always,
            texts,
        }
    }

    /// Split `text` into raw fragments and special tokens.
    pub fn partition<'t>(&self, text: &'t str, parse_special: bool) -> Vec<Fragment<'t>> {
        if text.is_empty() {
            return Vec::new();
        }
        // Which patterns occur (as priorities, i.e. pattern indices), deduplicated.
        let mut present: Vec<usize> = Vec::new();
        if let Some(ac) = &self.ac {
            let mut seen = vec![0u64; self.ids.len().div_ceil(64)];
            for m in ac.find_overlapping_iter(text) {
                let p = m.pattern().as_usize();
                let (w, bit) = (p / 64, 1u64 << (p % 64));
                if seen[w] & bit == 0 && (parse_special || self.always[p]) {
                    seen[w] |= bit;
                    present.push(p);
                }
            }
        }
        if present.is_empty() {
            return vec![Fragment::Text(text)];
        }
        present.sort_unstable();
        // Spans of `text`: `(start, end, Some(id))` for tokens, `None` for raw text.
        let mut spans: Vec<(usize, usize, Option<u32>)> = vec![(0, text.len(), None)];
        let mut next = Vec::with_capacity(spans.len() * 2);
        for p in present {
            let id = self.ids[p];
            let needle = self.texts[p].as_str();
            next.clear();
            for &(s, e, tok) in &spans {
                if tok.is_some() {
                    next.push((s, e, tok));
                    continue;
                }
                let mut pos = s;
                for (off, m) in text[s..e].match_indices(needle) {
                    let (ms, me) = (s + off, s + off + m.len());
                    if ms > pos {
                        next.push((pos, ms, None));
                    }
                    next.push((ms, me, Some(id)));
                    pos = me;
                }
                if pos < e {
                    next.push((pos, e, None));
                }
            }
            std::mem::swap(&mut spans, &mut next);
        }
        spans
            .into_iter()
            .map(|(s, e, tok)| match tok {
                Some(id) => Fragment::Token(id),
                None => Fragment::Text(&text[s..e]),
            })
            .collect()
    }
}
