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
//! Implementation: one Aho-Corasick pass finds every occurrence of every special token
//! (overlaps included); the occurrences are then accepted in llama.cpp's priority order,
//! skipping any that overlaps an already claimed span. Same result, O(text + occurrences).
//! Ties in length are broken by token id (llama.cpp's `std::sort` leaves that order
//! unspecified; it only matters for two same-length special tokens overlapping in the text).

use std::collections::BTreeMap;

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
        Specials { ac, ids, always }
    }

    /// Split `text` into raw fragments and special tokens.
    pub fn partition<'t>(&self, text: &'t str, parse_special: bool) -> Vec<Fragment<'t>> {
        if text.is_empty() {
            return Vec::new();
        }
        let mut found: Vec<(usize, usize, usize)> = Vec::new(); // (priority, start, end)
        if let Some(ac) = &self.ac {
            for m in ac.find_overlapping_iter(text) {
                let p = m.pattern().as_usize();
                if parse_special || self.always[p] {
                    found.push((p, m.start(), m.end()));
                }
            }
        }
        if found.is_empty() {
            return vec![Fragment::Text(text)];
        }
        found.sort_unstable();
        let mut claimed: BTreeMap<usize, (usize, u32)> = BTreeMap::new(); // start → (end, id)
        for (p, s, e) in found {
            let overlaps = claimed
                .range(..e)
                .next_back()
                .is_some_and(|(_, &(end, _))| end > s);
            if !overlaps {
                claimed.insert(s, (e, self.ids[p]));
            }
        }
        let mut out = Vec::with_capacity(claimed.len() * 2 + 1);
        let mut pos = 0;
        for (s, (e, id)) in claimed {
            if s > pos {
                out.push(Fragment::Text(&text[pos..s]));
            }
            out.push(Fragment::Token(id));
            pos = e;
        }
        if pos < text.len() {
            out.push(Fragment::Text(&text[pos..]));
        }
        out
    }
}
