//! Pre-tokenizers of byte-level BPE: split a text fragment into the words that BPE merges
//! within, exactly as the pinned llama.cpp's `unicode_regex_split` does.
//!
//! Owns: the mapping from `tokenizer.ggml.pre` names to splitters, and the splitters:
//! - `Gpt4o` (`llama4`, `gpt-4o`, ...): llama.cpp has no hand-written splitter for this regex,
//!   so it runs `std::regex` (ECMAScript, backtracking) over a *collapsed* text where every
//!   non-ASCII code point became one byte for its class (letters → one "letter" byte that
//!   counts as both upper and lower case, digits → one "number" byte, whitespace → `\v`, ...).
//!   This module reproduces that engine's leftmost-first backtracking result for the adapted
//!   regex by hand. Consequences kept on purpose: combining marks are not part of words, and any
//!   non-ASCII letter counts as both upper and lower case.
//! - `Llama3` and `Gpt2`: ports of llama.cpp's hand-written matchers (including their quirks).
//! - `Default`: the four-regex cascade llama.cpp uses for `default`/missing `pre`.
//!
//! Invariants: `split` returns non-empty words whose concatenation is the input; words never
//! cross a segment produced by an earlier stage; the work is linear in the input length
//! (each matcher only scans ahead over runs it then consumes or hands to the next match).

use crate::error::TokenizerError;
use crate::unicode::{Class, Flags};

/// A byte-level BPE pre-tokenizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreTokenizer {
    /// llama.cpp `LLAMA_VOCAB_PRE_TYPE_GPT4O` (GGUF `llama4`, `gpt-4o`, ...).
    Gpt4o,
    /// llama.cpp `LLAMA_VOCAB_PRE_TYPE_LLAMA3` (GGUF `llama3`, `llama-bpe`, ...).
    Llama3,
    /// llama.cpp `LLAMA_VOCAB_PRE_TYPE_GPT2` (GGUF `gpt-2`, ...).
    Gpt2,
    /// llama.cpp `LLAMA_VOCAB_PRE_TYPE_DEFAULT` (GGUF `default` or no `pre` key).
    Default,
}

impl PreTokenizer {
    /// The pre-tokenizer llama.cpp picks for a `tokenizer.ggml.pre` value (`None`: key absent).
    pub fn from_name(name: Option<&str>) -> Result<PreTokenizer, TokenizerError> {
        let Some(name) = name else {
            return Ok(PreTokenizer::Default);
        };
        Ok(match name {
            "" | "default" => PreTokenizer::Default,
            "llama4" | "gpt-4o" | "kanana2" | "talkie" | "minimax-m2" => PreTokenizer::Gpt4o,
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral"
            | "midm-2.0" | "lfm2" | "jina-v5-nano" => PreTokenizer::Llama3,
            "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es"
            | "jina-v2-de" | "a.x-4.0" | "mellum" | "modern-bert" => PreTokenizer::Gpt2,
            other => {
                return Err(TokenizerError::UnknownPre {
                    pre: other.to_owned(),
                })
            }
        })
    }

    /// Whether llama.cpp sets `ignore_merges` for this pre-tokenizer (a word that is itself a
    /// token is emitted whole, without running the merges).
    pub fn ignore_merges(self) -> bool {
        self == PreTokenizer::Llama3
    }

    /// Whether llama.cpp's default for `add_bos` (before the GGUF key overrides it) is true.
    pub fn default_add_bos(self) -> bool {
        self == PreTokenizer::Llama3
    }

    /// Split `text` into words (non-empty, in order, concatenating to `text`).
    pub fn split(self, text: &str) -> Vec<&str> {
        let chars: Vec<char> = text.chars().collect();
        if chars.is_empty() {
            return Vec::new();
        }
        let flags: Vec<Flags> = chars.iter().map(|&c| Flags::of(c)).collect();
        let s = Text {
            c: &chars,
            f: &flags,
        };
        let mut segs = vec![chars.len()];
        match self {
            PreTokenizer::Gpt4o => segs = s.apply(&segs, Text::gpt4o),
            PreTokenizer::Llama3 => segs = s.apply(&segs, Text::llama3),
            PreTokenizer::Gpt2 => segs = s.apply(&segs, Text::gpt2),
            PreTokenizer::Default => {
                segs = s.apply(&segs, |t, a, b, o| t.runs(a, b, o, default_punct));
                segs = s.apply(&segs, Text::gpt2);
                segs = s.apply(&segs, |t, a, b, o| t.runs(a, b, o, collapsed_number));
                segs = s.apply(&segs, Text::ascii_digit_triples);
            }
        }
        let mut out = Vec::with_capacity(segs.len());
        let mut rest = text;
        for n in segs {
            let bytes: usize = rest.chars().take(n).map(char::len_utf8).sum();
            let (word, tail) = rest.split_at(bytes);
            out.push(word);
            rest = tail;
        }
        out
    }
}

/// Class set of the first `default` regex, `[\p{P}\$\+<=>\^~\|]+` on collapsed text: non-ASCII
/// punctuation, and ASCII punctuation/symbols except the backtick.
fn default_punct(c: char, f: Flags) -> bool {
    if c.is_ascii() {
        c.is_ascii_punctuation() && c != '`'
    } else {
        !f.ws && f.class == Class::Punctuation
    }
}

/// `\p{N}` on collapsed text: ASCII digits and non-whitespace non-ASCII numbers.
fn collapsed_number(c: char, f: Flags) -> bool {
    if c.is_ascii() {
        c.is_ascii_digit()
    } else {
        !f.ws && f.number()
    }
}

/// The kind of a code point in llama.cpp's collapsed text, as the GPT-4o regex sees it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `A-Z`.
    Upper,
    /// `a-z`.
    Lower,
    /// Any non-ASCII letter (collapsed to one byte that is neither `A-Z` nor `a-z`).
    Both,
    /// `0-9` or a non-ASCII number.
    Number,
    /// `\s`: ASCII whitespace or any non-ASCII whitespace (collapsed to `\v`).
    Space,
    /// Everything else.
    Other,
}

fn kind(c: char, f: Flags) -> Kind {
    match c {
        'A'..='Z' => Kind::Upper,
        'a'..='z' => Kind::Lower,
        '0'..='9' => Kind::Number,
        '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r' | ' ' => Kind::Space,
        _ if c.is_ascii() => Kind::Other,
        _ if f.ws => Kind::Space,
        _ => match f.class {
            Class::Letter => Kind::Both,
            Class::Number => Kind::Number,
            _ => Kind::Other,
        },
    }
}

/// The text being split: code points and their flags.
struct Text<'a> {
    c: &'a [char],
    f: &'a [Flags],
}

impl<'a> Text<'a> {
    /// Run `split` over every segment (`segs` are lengths in code points), collecting the new
    /// segment lengths.
    fn apply<F>(&self, segs: &[usize], split: F) -> Vec<usize>
    where
        F: Fn(&Text<'a>, usize, usize, &mut Vec<usize>),
    {
        let mut out = Vec::with_capacity(segs.len() * 2);
        let mut start = 0;
        for &n in segs {
            split(self, start, start + n, &mut out);
            start += n;
        }
        out
    }

    /// Maximal runs alternating between chars in and out of `class`.
    fn runs(&self, a: usize, b: usize, out: &mut Vec<usize>, class: fn(char, Flags) -> bool) {
        let mut i = a;
        while i < b {
            let inside = class(self.c[i], self.f[i]);
            let mut j = i + 1;
            while j < b && class(self.c[j], self.f[j]) == inside {
                j += 1;
            }
            out.push(j - i);
            i = j;
        }
    }

    /// `[0-9][0-9][0-9]` matches, left to right, with the gaps between them.
    fn ascii_digit_triples(&self, a: usize, b: usize, out: &mut Vec<usize>) {
        let digit = |i: usize| i < b && self.c[i].is_ascii_digit();
        let mut gap_start = a;
        let mut i = a;
        while i + 3 <= b {
            if digit(i) && digit(i + 1) && digit(i + 2) {
                if i > gap_start {
                    out.push(i - gap_start);
                }
                out.push(3);
                i += 3;
                gap_start = i;
            } else {
                i += 1;
            }
        }
        if b > gap_start {
            out.push(b - gap_start);
        }
    }

    /// Flags at `i` if inside `[a, b)`.
    fn get(&self, i: usize, a: usize, b: usize) -> Option<Flags> {
        (a <= i && i < b).then(|| self.f[i])
    }

    /// Code point at `i` if inside `[a, b)`.
    fn cpt(&self, i: usize, a: usize, b: usize) -> Option<char> {
        (a <= i && i < b).then(|| self.c[i])
    }

    /// Length of a contraction (`'s 't 're 've 'm 'll 'd`) starting at `i`, 0 if none.
    /// `fold`: compare ASCII case-insensitively (llama.cpp's `unicode_tolower` only maps
    /// ASCII capitals and U+0130/U+212A onto ASCII, and those two map to `i`/`k`).
    fn contraction(&self, i: usize, b: usize, fold: bool) -> usize {
        if i + 1 >= b || self.c[i] != '\'' {
            return 0;
        }
        let low = |c: char| if fold { c.to_ascii_lowercase() } else { c };
        let n1 = low(self.c[i + 1]);
        if matches!(n1, 's' | 't' | 'm' | 'd') {
            return 2;
        }
        if i + 2 < b {
            let n2 = low(self.c[i + 2]);
            if matches!((n1, n2), ('r', 'e') | ('v', 'e') | ('l', 'l')) {
                return 3;
            }
        }
        0
    }

    /// llama.cpp's hand-written GPT-2 matcher:
    /// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`.
    fn gpt2(&self, a: usize, b: usize, out: &mut Vec<usize>) {
        let letter = |o: Option<Flags>| o.is_some_and(Flags::letter);
        let number = |o: Option<Flags>| o.is_some_and(Flags::number);
        let other = |o: Option<Flags>| o.is_some_and(|f| !(f.ws || f.letter() || f.number()));
        let mut pos = a;
        while pos < b {
            let start = pos;
            let cpt = self.c[pos];
            let n = self.contraction(pos, b, false);
            if n > 0 {
                pos += n;
            } else {
                let space = usize::from(cpt == ' ');
                let f2 = if cpt == ' ' {
                    self.get(pos + 1, a, b)
                } else {
                    Some(self.f[pos])
                };
                if letter(f2) || number(f2) || other(f2) {
                    let same: &dyn Fn(Option<Flags>) -> bool = if letter(f2) {
                        &letter
                    } else if number(f2) {
                        &number
                    } else {
                        &other
                    };
                    pos += space;
                    while same(self.get(pos, a, b)) {
                        pos += 1;
                    }
                } else {
                    pos += self.whitespace_tail(pos, a, b);
                }
            }
            out.push(pos - start);
        }
    }

    /// The `\s+(?!\S)|\s+` tail shared by the GPT-2 and Llama-3 matchers (and "no match":
    /// one code point). Returns the length taken at `pos`.
    fn whitespace_tail(&self, pos: usize, a: usize, b: usize) -> usize {
        let mut n = 0;
        while self.get(pos + n, a, b).is_some_and(|f| f.ws) {
            n += 1;
        }
        if n > 1 && pos + n < b {
            n - 1
        } else {
            n.max(1)
        }
    }

    /// llama.cpp's hand-written Llama-3 matcher: `(?i:'s|'t|'re|'ve|'m|'ll|'d)|
    /// [^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`.
    fn llama3(&self, a: usize, b: usize, out: &mut Vec<usize>) {
        let letter = |o: Option<Flags>| o.is_some_and(Flags::letter);
        let crlf = |o: Option<char>| matches!(o, Some('\r' | '\n'));
        let mut pos = a;
        while pos < b {
            let cpt = self.c[pos];
            let fl = self.f[pos];
            let n = self.contraction(pos, b, true);
            if n > 0 {
                out.push(n);
                pos += n;
                continue;
            }
            let start = pos;
            // [^\r\n\p{L}\p{N}]?\p{L}+
            if !(cpt == '\r' || cpt == '\n' || fl.number())
                && (fl.letter() || letter(self.get(pos + 1, a, b)))
            {
                pos += 1;
                while letter(self.get(pos, a, b)) {
                    pos += 1;
                }
                out.push(pos - start);
                continue;
            }
            // \p{N}{1,3}
            if fl.number() {
                let mut ini = pos;
                while self.get(pos, a, b).is_some_and(Flags::number) {
                    pos += 1;
                    if pos - ini >= 3 {
                        out.push(pos - ini);
                        ini = pos;
                    }
                }
                if pos > ini {
                    out.push(pos - ini);
                }
                continue;
            }
            // ' ?[^\s\p{L}\p{N}]+[\r\n]*' — llama.cpp tests the *current* code point's flags
            // for being defined, so a lone trailing space also lands here (same result).
            let f2 = if cpt == ' ' {
                self.get(pos + 1, a, b)
            } else {
                Some(fl)
            };
            let not_wln = |o: Option<Flags>| o.is_none_or(|f| !(f.ws || f.letter() || f.number()));
            if not_wln(f2) {
                pos += usize::from(cpt == ' ');
                while self
                    .get(pos, a, b)
                    .is_some_and(|f| !(f.ws || f.letter() || f.number()))
                {
                    pos += 1;
                }
                while crlf(self.cpt(pos, a, b)) {
                    pos += 1;
                }
                out.push(pos - start);
                continue;
            }
            // \s*[\r\n]+
            let mut n_ws = 0;
            let mut last_crlf_end = None;
            while self.get(pos + n_ws, a, b).is_some_and(|f| f.ws) {
                if crlf(self.cpt(pos + n_ws, a, b)) {
                    last_crlf_end = Some(pos + n_ws + 1);
                }
                n_ws += 1;
            }
            if let Some(end) = last_crlf_end {
                out.push(end - start);
                pos = end;
                continue;
            }
            pos += self.whitespace_tail(pos, a, b);
            out.push(pos - start);
        }
    }

    /// The adapted GPT-4o regex under ECMAScript leftmost-first backtracking, on llama.cpp's
    /// collapsed text (see the module docs):
    /// ```text
    /// [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?
    /// |[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|...)?
    /// |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
    /// ```
    /// Every position matches one alternative with length ≥ 1, so there are no gaps.
    fn gpt4o(&self, a: usize, b: usize, out: &mut Vec<usize>) {
        let kinds: Vec<Kind> = (a..b).map(|i| kind(self.c[i], self.f[i])).collect();
        let k = |i: usize| if i < b { Some(kinds[i - a]) } else { None };
        let is_up = |i: usize| matches!(k(i), Some(Kind::Upper | Kind::Both));
        let is_low = |i: usize| matches!(k(i), Some(Kind::Lower | Kind::Both));
        let is_space = |i: usize| matches!(k(i), Some(Kind::Space));
        let ch = |i: usize| if i < b { Some(self.c[i]) } else { None };
        // [^\r\n\p{L}\p{N}]
        let is_pre = |i: usize| {
            matches!(k(i), Some(Kind::Space | Kind::Other)) && !matches!(ch(i), Some('\r' | '\n'))
        };
        let mut pos = a;
        while pos < b {
            let len = self.gpt4o_at(pos, b, &is_up, &is_low, &is_space, &is_pre, &k, &ch);
            out.push(len);
            pos += len;
        }
    }

    /// Length of the GPT-4o match at `i` (always ≥ 1).
    #[allow(clippy::too_many_arguments)]
    fn gpt4o_at(
        &self,
        i: usize,
        b: usize,
        is_up: &dyn Fn(usize) -> bool,
        is_low: &dyn Fn(usize) -> bool,
        is_space: &dyn Fn(usize) -> bool,
        is_pre: &dyn Fn(usize) -> bool,
        k: &dyn Fn(usize) -> Option<Kind>,
        ch: &dyn Fn(usize) -> Option<char>,
    ) -> usize {
        // The optional leading [^\r\n\p{L}\p{N}] is greedy; giving it back never helps, since
        // that code point is not a letter and both word alternatives need a letter next.
        let j0 = i + usize::from(is_pre(i));
        let mut j = j0;
        while is_up(j) {
            j += 1;
        }
        // Alternative 1: U* L+ — U* backtracks from its longest run until L+ can start.
        let mut kk = j;
        loop {
            if is_low(kk) {
                let mut e = kk + 1;
                while is_low(e) {
                    e += 1;
                }
                return e + self.contraction(e, b, true) - i;
            }
            if kk == j0 {
                break;
            }
            kk -= 1;
        }
        // Alternative 2: U+ L*.
        if j > j0 {
            let mut e = j;
            while is_low(e) {
                e += 1;
            }
            return e + self.contraction(e, b, true) - i;
        }
        // \p{N}{1,3}
        if k(i) == Some(Kind::Number) {
            let mut e = i + 1;
            while e < i + 3 && k(e) == Some(Kind::Number) {
                e += 1;
            }
            return e - i;
        }
        //  ?[^\s\p{L}\p{N}]+[\r\n/]*
        let other = |x: usize| k(x) == Some(Kind::Other);
        let s0 = if ch(i) == Some(' ') && other(i + 1) {
            i + 1
        } else {
            i
        };
        if other(s0) {
            let mut e = s0 + 1;
            while other(e) {
                e += 1;
            }
            while matches!(ch(e), Some('\r' | '\n' | '/')) {
                e += 1;
            }
            return e - i;
        }
        // \s*[\r\n]+ | \s+(?!\S) | \s+
        let mut e = i;
        let mut last_crlf = None;
        while is_space(e) {
            if matches!(ch(e), Some('\r' | '\n')) {
                last_crlf = Some(e);
            }
            e += 1;
        }
        if let Some(l) = last_crlf {
            return l + 1 - i;
        }
        if e > i {
            if e == b || e - i == 1 {
                return e - i;
            }
            return e - 1 - i;
        }
        // Unreachable for well-formed kinds (every kind is covered above); take one code point.
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(p: PreTokenizer, s: &str) -> Vec<&str> {
        p.split(s)
    }

    #[test]
    fn gpt4o_basics() {
        let p = PreTokenizer::Gpt4o;
        assert_eq!(sp(p, "Hello world"), ["Hello", " world"]);
        assert_eq!(sp(p, "HelloWorld"), ["Hello", "World"]);
        assert_eq!(sp(p, "ABC"), ["ABC"]);
        assert_eq!(sp(p, "ABCdef"), ["ABCdef"]);
        assert_eq!(sp(p, "don't"), ["don't"]);
        assert_eq!(sp(p, "DON'T"), ["DON'T"]);
        assert_eq!(sp(p, "12345"), ["123", "45"]);
        assert_eq!(sp(p, "a  b"), ["a", " ", " b"]);
        assert_eq!(sp(p, "a\n\nb"), ["a", "\n\n", "b"]);
        assert_eq!(sp(p, "x // y"), ["x", " //", " y"]);
        assert_eq!(sp(p, "  "), ["  "]);
        assert_eq!(sp(p, "é"), ["é"]);
        // A combining mark is not part of a word for the adapted regex.
        assert_eq!(sp(p, "e\u{301}t"), ["e", "\u{301}t"]);
    }

    #[test]
    fn llama3_basics() {
        let p = PreTokenizer::Llama3;
        assert_eq!(sp(p, "Hello world"), ["Hello", " world"]);
        assert_eq!(sp(p, "I'M here"), ["I", "'M", " here"]);
        assert_eq!(sp(p, "1234567"), ["123", "456", "7"]);
        assert_eq!(sp(p, "a \n b"), ["a", " \n", " b"]);
        assert_eq!(sp(p, "x!!\n\ny"), ["x", "!!\n\n", "y"]);
    }

    #[test]
    fn gpt2_and_default() {
        assert_eq!(
            sp(PreTokenizer::Gpt2, "it's 2024!"),
            ["it", "'s", " 2024", "!"]
        );
        assert_eq!(
            sp(PreTokenizer::Default, "abc 12345 x,y"),
            ["abc", " ", "123", "45", " x", ",", "y"]
        );
    }

    #[test]
    fn concatenation_is_identity() {
        let s = "Hé said: \"12,345.67\" — don't!\t\u{3000}ok 😀👍🏽 \r\n";
        for p in [
            PreTokenizer::Gpt4o,
            PreTokenizer::Llama3,
            PreTokenizer::Gpt2,
            PreTokenizer::Default,
        ] {
            let w = p.split(s);
            assert_eq!(w.concat(), s, "{p:?}");
            assert!(w.iter().all(|x| !x.is_empty()));
        }
    }
}
