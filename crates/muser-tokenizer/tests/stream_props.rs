//! Property tests of the streaming decoder and the encode → decode round trip, on the forged
//! byte-level BPE tokenizer (always available) and on gemma-3-270m when present.
//!
//! Properties: for any text, streaming its ids token by token gives exactly `decode` of the
//! ids (itself equal to the text) and never emits U+FFFD; for any id sequence (arbitrary
//! bytes, so invalid UTF-8 too), the streamed text equals `decode` (U+FFFD where
//! `from_utf8_lossy` puts it) and every `push` result is whole characters by construction.

mod common;

use std::sync::OnceLock;

use muser_tokenizer::{StreamDecoder, Tokenizer};
use proptest::prelude::*;

fn forged_tok() -> &'static Tokenizer {
    static T: OnceLock<Tokenizer> = OnceLock::new();
    T.get_or_init(|| common::forged(2048).1)
}

fn gemma_tok() -> Option<&'static Tokenizer> {
    static T: OnceLock<Option<Tokenizer>> = OnceLock::new();
    T.get_or_init(|| common::gemma().map(|(_, t)| t)).as_ref()
}

fn stream(tok: &Tokenizer, ids: &[u32], render_special: bool) -> (String, Vec<String>) {
    let mut d = StreamDecoder::with_special(tok, render_special);
    let parts: Vec<String> = ids.iter().map(|&i| d.push(i)).collect();
    let tail = d.finish();
    (parts.concat() + &tail, parts)
}

/// Text with multi-byte characters, whitespace runs, marks, ZWJ emoji and special spellings.
fn text() -> impl Strategy<Value = String> {
    let atoms = prop::sample::select(vec![
        "a",
        "Z",
        " ",
        "  ",
        "\n",
        "\t",
        "é",
        "ß",
        "中",
        "日本",
        "😀",
        "👍🏽",
        "👨\u{200d}👩",
        "\u{301}",
        "\u{200b}",
        "’",
        "'s",
        "123",
        "<|eot|>",
        "<end_of_turn>",
        "<bos>",
        "שלום",
        "ไทย",
        "\u{FFFD}",
        "\u{10FFFF}",
        "\u{0}",
    ]);
    (
        prop::collection::vec(atoms, 0..24),
        prop::collection::vec(any::<char>(), 0..8),
    )
        .prop_map(|(a, b)| {
            let mut s: String = a.concat();
            s.extend(b);
            s
        })
}

/// `s` through `encode` → `decode` and the streaming decoder gives back `want` (`s` itself on
/// a byte-level BPE; on SentencePiece, `s` with its space marker U+2581 read as the space it
/// stands for).
fn check_text(
    tok: &Tokenizer,
    s: &str,
    want: &str,
    parse_special: bool,
) -> Result<(), TestCaseError> {
    let ids = tok.encode(s, false, parse_special);
    let decoded = tok.decode(&ids, true);
    prop_assert_eq!(&decoded, want);
    let (streamed, parts) = stream(tok, &ids, true);
    prop_assert_eq!(&streamed, want);
    if !s.contains('\u{FFFD}') {
        for p in &parts {
            prop_assert!(!p.contains('\u{FFFD}'), "U+FFFD emitted for valid input");
        }
    }
    Ok(())
}

/// What a SentencePiece round trip can give back: a literal U+2581 in the input is the space
/// marker itself, so it decodes as a space (as in llama.cpp).
fn sentencepiece_text(s: &str) -> String {
    s.replace('\u{2581}', " ")
}

/// The case proptest found (2026-12-02, CI): a lone U+2581 decodes as a space on gemma.
#[test]
fn gemma_space_marker_in_the_input_decodes_as_a_space() {
    let Some(tok) = gemma_tok() else {
        eprintln!("skipping: gemma-3-270m not present");
        return;
    };
    for s in ["\u{2581}", "a\u{2581}b", "\u{2581}\u{2581} x"] {
        for parse_special in [false, true] {
            check_text(tok, s, &sentencepiece_text(s), parse_special).expect("round trip");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn forged_round_trip_and_stream(s in text(), parse_special in any::<bool>()) {
        check_text(forged_tok(), &s, &s, parse_special)?;
    }

    #[test]
    fn forged_stream_equals_decode_for_any_ids(
        ids in prop::collection::vec(0u32..2048, 0..40),
        render in any::<bool>(),
    ) {
        let tok = forged_tok();
        let (streamed, _) = stream(tok, &ids, render);
        prop_assert_eq!(streamed, tok.decode(&ids, render));
    }

    #[test]
    fn gemma_round_trip_and_stream(s in text(), parse_special in any::<bool>()) {
        if let Some(tok) = gemma_tok() {
            check_text(tok, &s, &sentencepiece_text(&s), parse_special)?;
        }
    }

    #[test]
    fn gemma_stream_equals_decode_for_any_ids(
        // Mostly byte tokens (<0x00>..<0xFF> are ids 238..=493), some ordinary ones.
        ids in prop::collection::vec(prop_oneof![3 => 238u32..494, 1 => 0u32..262_144], 0..40),
        render in any::<bool>(),
    ) {
        if let Some(tok) = gemma_tok() {
            let (streamed, _) = stream(tok, &ids, render);
            prop_assert_eq!(streamed, tok.decode(&ids, render));
        }
    }
}
