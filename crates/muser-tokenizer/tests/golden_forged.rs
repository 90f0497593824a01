//! Forged Muse Glimmer tokenizers (gpt2 BPE + `llama4` pre-tokenizer): our ids equal
//! llama-tokenize's on the whole corpus for the 2048-token `tiny` vocabulary and the full
//! 202048-token one; round trip and streaming on the corpus.

mod common;

use common::{compare, corpus, forged, golden, show};
use muser_tokenizer::{ModelKind, PreTokenizer, StreamDecoder};

fn check(name: &str, n_vocab: usize) {
    let (_g, tok) = forged(n_vocab);
    assert_eq!(tok.n_vocab(), n_vocab);
    assert_eq!(tok.kind(), ModelKind::Bpe(PreTokenizer::Gpt4o));
    let corpus = corpus();
    let gold = golden(name).unwrap_or_else(|| panic!("tests/data/golden-{name}.jsonl"));
    let (a, b) = compare(name, &tok, &corpus, &gold);
    assert_eq!(
        (a, b),
        (corpus.len(), corpus.len()),
        "{name} ids differ from llama-tokenize's. If muser-forge's vocabulary changed (corpus, \
         BPE trainer, special tokens), regenerate the golden files: \
         scripts/gen-tokenizer-golden.py --models tiny,tiny-full,chat"
    );
}

#[test]
fn tiny_ids_match_llama_tokenize() {
    check("tiny", 2048);
}

#[test]
fn full_vocab_ids_match_llama_tokenize() {
    check("tiny-full", 202_048);
}

#[test]
fn full_vocab_special_ids_and_eog() {
    let (_g, tok) = forged(202_048);
    assert_eq!(tok.bos(), Some(200_000));
    assert_eq!(tok.eos(), Some(200_001));
    assert_eq!(tok.eot(), Some(200_008));
    assert!(tok.add_bos());
    // llama.cpp logs "EOG token = 200001 <|end_of_text|>, 200008 <|eot|>" for this file.
    assert_eq!(tok.eog_ids(), vec![200_001, 200_008]);
    assert_eq!(tok.token_text(200_008), Some("<|eot|>"));
    assert_eq!(tok.token_to_piece(200_008, false), b"");
    assert_eq!(tok.token_to_piece(200_008, true), b"<|eot|>");
}

#[test]
fn tiny_round_trip_and_stream() {
    let (_g, tok) = forged(2048);
    for s in corpus() {
        for special in [true, false] {
            let ids = tok.encode(&s, false, special);
            assert_eq!(tok.decode(&ids, true), s, "round trip of {}", show(&s));
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
