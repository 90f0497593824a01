//! gemma-3-270m (SentencePiece-style `llama` tokenizer): our ids equal llama-tokenize's on the
//! whole corpus, with and without special-token parsing; round trip and streaming on it.

mod common;

use common::{compare, corpus, gemma, golden, show};
use muser_tokenizer::StreamDecoder;

#[test]
fn gemma_ids_match_llama_tokenize() {
    let Some((_g, tok)) = gemma() else { return };
    let corpus = corpus();
    let gold = golden("gemma").expect("tests/data/golden-gemma.jsonl");
    let (a, b) = compare("gemma", &tok, &corpus, &gold);
    assert_eq!((a, b), (corpus.len(), corpus.len()), "gemma ids differ");
}

#[test]
fn gemma_flags_and_special_ids() {
    let Some((_g, tok)) = gemma() else { return };
    assert_eq!(tok.n_vocab(), 262_144);
    assert_eq!(tok.bos(), Some(2));
    assert_eq!(tok.eos(), Some(1));
    assert_eq!(tok.eot(), Some(106), "<end_of_turn> found by text");
    assert!(tok.add_bos());
    assert!(!tok.add_eos());
    assert!(!tok.add_space_prefix());
    // llama.cpp logs "EOG token = 1 <eos>, 106 <end_of_turn>, 212 </s>" for this file.
    assert_eq!(tok.eog_ids(), vec![1, 106, 212]);
    assert!(tok.is_eog(106) && tok.is_eog(1) && !tok.is_eog(2));
    assert_eq!(tok.token_text(106), Some("<end_of_turn>"));
    assert_eq!(tok.token_to_piece(106, false), b"");
    assert_eq!(tok.token_to_piece(106, true), b"<end_of_turn>");
    // User-defined tokens render even without render_special.
    assert_eq!(tok.token_to_piece(108, false), b"\n\n");
    // Byte tokens are single bytes.
    let b = tok.token_id("<0xE2>").expect("byte token");
    assert_eq!(tok.token_to_piece(b, false), [0xE2]);
}

#[test]
fn gemma_round_trip_and_stream() {
    let Some((_g, tok)) = gemma() else { return };
    for s in corpus() {
        for special in [true, false] {
            let ids = tok.encode(&s, false, special);
            let text = tok.decode(&ids, true);
            assert_eq!(text, s, "round trip of {}", show(&s));
            let mut dec = StreamDecoder::with_special(&tok, true);
            let mut streamed = String::new();
            for &id in &ids {
                let part = dec.push(id);
                assert!(!part.contains('\u{FFFD}') || s.contains('\u{FFFD}'));
                streamed.push_str(&part);
            }
            streamed.push_str(&dec.finish());
            assert_eq!(streamed, s, "stream of {}", show(&s));
        }
    }
}
