#!/usr/bin/env python3
"""Write tests/data/corpus.jsonl: the tokenizer golden corpus (one JSON string per line).

Deterministic (fixed seed, no external data). Hand-picked strings cover whitespace runs,
numbers, code, many scripts, emoji sequences, combining marks, RTL text, control characters,
contractions in all cases and special-token spellings of both tokenizers; a seeded random
section mixes the same hazards. Regenerate with:

    python3 crates/muser-tokenizer/tools/gen_corpus.py > crates/muser-tokenizer/tests/data/corpus.jsonl

then regenerate the golden files (scripts/gen-tokenizer-golden.sh).
"""

import json
import random

S = []

# --- whitespace -----------------------------------------------------------------------------
S += [
    "",
    " ",
    "  ",
    "   ",
    "\t",
    "\n",
    "\n\n",
    "\n\n\n\n\n",
    "\r\n",
    " \n ",
    "\t\t\tindented with tabs",
    "    indented with four spaces",
    "trailing spaces   ",
    "   leading spaces",
    "  both  sides  ",
    "word\tword\tword",
    "line one\nline two\n",
    "line one\r\nline two\r\n",
    "a\n\n\nb",
    "a \n\n b",
    "a  b   c    d     e",
    "mixed \t \n \r\n whitespace\t\n",
    "ends with newline\n",
    " " * 40,
    "\n" * 40,
    "x" + " " * 17 + "y",
    "tab\t\t\tthen  spaces  \t  mixed",
    "\u00a0non-breaking\u00a0space",
    "ideographic\u3000space",
    "em\u2003space and thin\u2009space",
    "line\u2028separator and paragraph\u2029separator",
    "\u000bvertical tab\u000cform feed",
    "\u0085next line",
]

# --- English, contractions, case --------------------------------------------------------------
S += [
    "Hello world",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG.",
    "I'm sure you're right, we've seen it, they'll come, he'd go, it's fine, don't.",
    "I'M SURE YOU'RE RIGHT, WE'VE SEEN IT, THEY'LL COME, HE'D GO, IT'S FINE, DON'T.",
    "I'm You'Re We'Ve They'lL He'D It'S Don'T",
    "'s 't 're 've 'm 'll 'd",
    "'S 'T 'RE 'VE 'M 'LL 'D",
    "rock'n'roll y'all o'clock ma'am",
    "McDonald's O'Brien's d'Artagnan",
    "''quoted'' and 'single' and \"double\"",
    "it''s weird''",
    "iPhone HTMLParser XMLHttpRequest getElementById",
    "camelCaseWord snake_case_word SCREAMING_SNAKE_CASE kebab-case-word",
    "ABCdefGHIjkl",
    "aBcDeFgHiJ",
    "A",
    "a",
    "I",
    "OK",
    "Mr. Smith went to Washington D.C. on Jan. 5th.",
    "e.g. i.e. etc. vs. a.m. p.m.",
    "Wait... what?! Really?!?",
    "Supercalifragilisticexpialidocious",
    "Pneumonoultramicroscopicsilicovolcanoconiosis",
    "antidisestablishmentarianism " * 3,
]

# --- numbers ------------------------------------------------------------------------------------
S += [
    "0",
    "7",
    "42",
    "123",
    "1234",
    "12345",
    "123456",
    "1234567",
    "3.14159265358979323846",
    "1,000,000",
    "1 000 000",
    "-42 +17 ±3",
    "0x1F 0b1010 0o777 1e10 6.022e23",
    "2024-11-30T05:16:20Z",
    "+1 (555) 123-4567",
    "Version 1.2.3-beta.4+build.567",
    "12345678901234567890123456789012345678901234567890",
    "9" * 100,
    "In 1492, Columbus sailed 3 ships; in 1969, 2 men walked on the Moon.",
    "x1y22z333w4444",
    "Room 101, Floor 3B, Gate A12",
    "１２３４５ fullwidth digits",
    "٠١٢٣٤٥٦٧٨٩ Arabic-Indic digits",
    "०१२३४५६७८९ Devanagari digits",
    "½ ¾ ⅓ x² y³ 10⁻⁶ H₂O",
    "Ⅻ Ⅳ ⅷ roman numerals",
    "$19.99 €5,00 £3 ¥1000 ₹250 ₿0.001",
    "50% off, 3/4 cup, 2:30pm, 98.6°F",
]

# --- code ---------------------------------------------------------------------------------------
S += [
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "fn main() {\n    println!(\"Hello, {}!\", name);\n}\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "#include <stdio.h>\nint main(void) { return 0; }",
    '{"key": "value", "list": [1, 2, 3], "nested": {"a": null, "b": true}}',
    "<html><head><title>Test</title></head><body><p class=\"x\">Hi</p></body></html>",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
    "ls -la /usr/local/bin | grep -E '^d' && echo \"done\" >> log.txt",
    "https://example.com/path/to/page?query=1&lang=en#section-2",
    "C:\\Users\\Name\\Documents\\file.txt",
    "/usr/lib/x86_64-linux-gnu/libc.so.6",
    "x // comment\ny /* block */ z",
    "a//b///c////d",
    "if (a != b && c <= d || !e) { return -1; }",
    "let v: Vec<Option<&str>> = vec![Some(\"a\"), None];",
    "regex: ^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}$",
    "$ cargo build --release 2>&1 | tee build.log",
    "```python\nprint('hi')\n```",
    "    if x:\n        y = 1\n    else:\n        y = 2\n",
    "\tfunc()\n\t\tnested()\n",
    "lambda x: x**2 + 2*x + 1",
    "a+=1;b-=2;c*=3;d/=4;e%=5;f^=6;g|=7;h&=8;",
    "<?php echo $var; ?>",
    "@decorator\nclass Foo(Bar):\n    pass",
    "key1=value1\nkey2 = value2\n[section]\n",
    "!important; color: #FF00ff; margin: 0 auto;",
    "\\begin{equation} E = mc^2 \\end{equation}",
    "∑_{i=1}^{n} i = n(n+1)/2, ∫₀^∞ e^{-x} dx = 1, √2 ≈ 1.414",
    "→ ← ↑ ↓ ⇒ ⇔ ∀x ∃y: x ≠ y ∧ x ≤ y",
    "| col1 | col2 |\n|------|------|\n| a    | b    |",
    "- item one\n- item two\n  - nested\n1. first\n2. second",
    "**bold** _italic_ `code` ~~strike~~ [link](http://x.y)",
]

# --- scripts ------------------------------------------------------------------------------------
S += [
    "Café, naïve, résumé, déjà vu, fiancée, Zoë, São Paulo",
    "Straße, Größe, Übermäßig, Fußgängerübergänge",
    "Donaudampfschifffahrtselektrizitätenhauptbetriebswerkbauunterbeamtengesellschaft",
    "¿Dónde está el baño? ¡Olé! Señor Muñoz",
    "Zażółć gęślą jaźń",
    "İstanbul, ılık, IĞDIR, şeker",
    "Příliš žluťoučký kůň úpěl ďábelské ódy",
    "Ελληνικά: Καλημέρα κόσμε, ΑΘΗΝΑ",
    "Русский: Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "УКРАЇНСЬКА мова: Ґанок і їжак",
    "Հայերեն: Բարեւ աշխարհ",
    "ქართული: გამარჯობა მსოფლიო",
    "עברית: שלום עולם! מה שלומך?",
    "العربية: مرحبا بالعالم، كيف حالك؟",
    "فارسی: سلام دنیا",
    "اردو: ہیلو دنیا",
    "Mixed RTL: The word שלום means peace, and سلام too.",
    "हिन्दी: नमस्ते दुनिया, क्षत्रिय",
    "বাংলা: হ্যালো বিশ্ব",
    "தமிழ்: வணக்கம் உலகம்",
    "తెలుగు: హలో ప్రపంచం",
    "ગુજરાતી: નમસ્તે",
    "ਪੰਜਾਬੀ: ਸਤ ਸ੍ਰੀ ਅਕਾਲ",
    "ไทย: สวัสดีชาวโลก ภาษาไทย",
    "ລາວ: ສະບາຍດີ",
    "ខ្មែរ: សួស្តីពិភពលោក",
    "မြန်မာ: မင်္ဂလာပါ",
    "සිංහල: ආයුබෝවන්",
    "བོད་ཡིག: བཀྲ་ཤིས་བདེ་ལེགས།",
    "ᠮᠣᠩᠭᠣᠯ ᠪᠢᠴᠢᠭ",
    "አማርኛ: ሰላም ለዓለም",
    "ᏣᎳᎩ Cherokee",
    "中文：你好，世界！我爱自然语言处理。",
    "繁體中文：臺灣的資訊科技產業",
    "日本語：こんにちは世界、カタカナとひらがなと漢字。",
    "ｶﾀｶﾅ half-width katakana",
    "한국어: 안녕하세요 세계, 한글은 아름답습니다.",
    "Tiếng Việt: Xin chào thế giới, người Việt Nam",
    "𝐌𝐚𝐭𝐡 𝑏𝑜𝑙𝑑 𝔉𝔯𝔞𝔨𝔱𝔲𝔯 𝕕𝕠𝕦𝕓𝕝𝕖",
    "ＦｕｌｌＷｉｄｔｈ ＬＡＴＩＮ",
    "ÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏÐÑÒÓÔÕÖØÙÚÛÜÝÞßàáâãäåæçèéêëìíîïðñòóôõöøùúûüýþÿ",
    "ǅungla ǈudevit ǋenovo titlecase",
    "Ꭿ ᏸ ꭰ Cherokee small",
    "𐌰𐌱𐌲 Gothic 𓀀𓀁 hieroglyphs",
    "Ⓐⓑⓒ ⑴⑵ ㊀㊁",
]

# --- combining marks ----------------------------------------------------------------------------
S += [
    "e\u0301",
    "cafe\u0301 vs caf\u00e9",
    "a\u0300\u0301\u0302\u0303\u0304",
    "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034dA\u036b\u0357L\u0321G\u0308O",
    "n\u0303o\u0308",
    "\u0301leading combining mark",
    "Ä\u0308\u0308 doubled",
    "Ångström vs A\u030angstro\u0308m",
    "ñ n\u0303 Ñ N\u0303",
    "क्\u200dष",
]

# --- emoji --------------------------------------------------------------------------------------
S += [
    "😀",
    "😀😃😄😁",
    "I ❤️ Rust 🦀!",
    "👍 👍🏻 👍🏼 👍🏽 👍🏾 👍🏿",
    "👨\u200d👩\u200d👧\u200d👦 family",
    "👩🏽\u200d💻 coder, 🧑🏿\u200d🚀 astronaut",
    "🏳️\u200d🌈 🏴\u200d☠️",
    "🇫🇷🇩🇪🇯🇵🇺🇸 flags",
    "1️⃣ 2️⃣ #️⃣ *️⃣",
    "☺ ☺️ ♥ ♥️ text vs emoji presentation",
    "🏴󠁧󠁢󠁳󠁣󠁴󠁿 Scotland tag sequence",
    "emoji🙂inside🙃words",
    "🤷\u200d♂️🤦🏼\u200d♀️",
    "🫠🫡🫶 newer emoji",
    "(╯°□°)╯︵ ┻━┻",
    "¯\\_(ツ)_/¯",
    "★☆✓✗✔✘☐☑",
]

# --- control and invisible characters ---------------------------------------------------------
S += [
    "\x00",
    "null\x00inside",
    "\x01\x02\x03 low controls",
    "bell\x07 backspace\x08 escape\x1b[31mred\x1b[0m",
    "delete\x7f char",
    "file\x1cgroup\x1drecord\x1eunit\x1fseparators",
    "zero\u200bwidth\u200bspace",
    "zero\u200cwidth\u200dnon-joiner joiner",
    "\ufeffBOM at start",
    "soft\u00adhyphen",
    "left\u200eto\u200fright marks \u202aembedding\u202c",
    "word\u2060joiner",
    "\u180emongolian vowel separator",
    "private use \ue000\uf8ff",
    "noncharacter \ufffe\uffff? no: replacement \ufffd",
    "\U000e0001 tag char",
]

# --- special-token spellings ------------------------------------------------------------------
S += [
    "<|begin_of_text|>",
    "<|begin_of_text|>Hello",
    "<|eot|>",
    "Hello<|eot|>",
    "<|eot|><|eot|>",
    "text <|eot|> more text",
    "<|header_start|>user<|header_end|>\n\nHi there!<|eot|><|header_start|>assistant<|header_end|>\n\n",
    "<|end_of_text|>",
    "<|eom|> <|step|> <|python_start|>print(1)<|python_end|>",
    "<|fim_prefix|>def f():<|fim_suffix|>return 1<|fim_middle|>",
    "<|reserved_special_token_0|>",
    "<|reserved_special_token_5|>x<|reserved_special_token_10|>",
    "<|finetune_right_pad|>",
    "<|eot",
    "<|eot|",
    "eot|>",
    "<<|eot|>>",
    "<|<|eot|>|>",
    "< |eot| >",
    "<|EOT|>",
    "<bos>",
    "<bos>Hello",
    "<eos>",
    "<pad><unk><mask>",
    "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n",
    "<start_of_turn>",
    "<end_of_turn>",
    "<start_of_turn>user",
    "<start_of_image> <end_of_image>",
    "[multimodal]",
    "<unused0> <unused99>",
    "<0x41><0x0A>",
    "<s></s>",
    "<|im_start|>user\nhi<|im_end|>",
    "<|endoftext|>",
    "</start_of_turn>",
    "<start_of_turn><start_of_turn>",
    "<bos><bos>",
    "x<eos>y",
    " <bos> ",
]

# --- long inputs --------------------------------------------------------------------------------
S += [
    "a" * 300,
    "A" * 300,
    "ab" * 150,
    "Ab" * 150,
    "é" * 200,
    "中" * 200,
    "😀" * 100,
    "!" * 200,
    "." * 100 + "?" * 100,
    "-" * 80 + "\n" + "=" * 80,
    "word " * 100,
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt "
    "ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco "
    "laboris nisi ut aliquip ex ea commodo consequat. Duis aute irure dolor in reprehenderit in "
    "voluptate velit esse cillum dolore eu fugiat nulla pariatur.",
    "https://example.com/" + "very-long-path-segment/" * 20,
    "x" * 1000,
]

# --- seeded random mixtures ---------------------------------------------------------------------
POOL = (
    list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
    + list(" \t\n\r  \n\n")
    + list("'\"!?.,;:-_/\\()[]{}<>|@#$%^&*+=~`")
    + list("éÉßñüçØåÆœ")
    + list("αβγΔΩжЖяЯשלוםمرحبانमस्तेक")
    + list("中文日本語한국어ไทย")
    + ["\u0301", "\u0308", "\u200d", "\u200b", "\ufe0f", "\u00a0", "\u3000", "\u2028"]
    + ["😀", "👍", "🏽", "👨", "❤", "🇫", "🇷", "🦀"]
    + ["<|eot|>", "<bos>", "<start_of_turn>", "<|begin_of_text|>", "<eos>", "'s", "'LL"]
    + ["123", "4567", "  ", "   ", "\n\n", "\t\t"]
)
rng = random.Random(20261130)
for _ in range(60):
    n = rng.randint(1, 40)
    S.append("".join(rng.choice(POOL) for _ in range(n)))

seen = set()
for s in S:
    if s in seen:
        continue
    seen.add(s)
    print(json.dumps(s, ensure_ascii=False))
