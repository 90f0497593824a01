#!/usr/bin/env python3
"""Accuracy parity (BRIEF §2, issue 3 §7c): the f64 oracle, Muser's fast CPU route and the pinned
llama.cpp CPU build, on the same GGUF and the same token ids (teacher-forced: each prompt plus the
same fixed 64-token continuation), for the fixtures forged `tiny`, forged `small` and gemma-3-270m.

For every fixture and prompt it runs `muser eval --route oracle`, `muser eval --route cpu`,
`scripts/comparator-logits.py` (llama.cpp CPU) and `muser parity`, then pools the positions of a
fixture's prompts: mean KL(oracle ‖ route), top-1 agreement with the oracle, max |Δ normalized
logprob| over plausible tokens (oracle logprob > −10), Muser-vs-llama.cpp agreement (KL, top-1,
first greedy divergence), and the acceptance check (Muser KL ≤ 1.10× llama.cpp's, top-1 ≥
llama.cpp's − 0.01, plausible max error ≤ 1.25× llama.cpp's).

Writes docs/receipts/parity-cpu-<fixture>.json (token ids included: the CI test
`crates/muser-engine/tests/parity_fixtures.rs` replays the forged fixtures from them) and prints
a Markdown table.

`--class cuda` (issue 4, on the GPU machine) measures the CUDA route instead: Muser CUDA
(`muser eval --route cuda`) against the pinned llama.cpp CUDA build (`--llama-cuda DIR`, the
unpacked prebuilt from shared/comparator, full offload), with Muser's CPU route reported for
agreement. It also checks the CUDA route's determinism on every prompt: a second run, serial
capture (`MUSER_CUDA_SERIAL=1`), one token per step through the decode graph (`--chunk 1`), the
same eagerly (`MUSER_CUDA_GRAPH=0`), and an odd chunk (`--chunk 37`) must all give byte-identical
logits. Receipts: parity-cuda-<fixture>.json.

Usage: scripts/parity.py [--fixtures tiny,small,gemma] [--muser target/release/muser]
                         [--threads 2] [--work /tmp/muser-parity] [--class cpu|cuda]
                         [--llama-cuda DIR] [--bindings DIR] [--gemma FILE]
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = ROOT / "crates/muser-engine/tests/data/parity-prompts.json"
CACHE = Path(os.environ.get("MUSER_CACHE", Path.home() / ".cache" / "muser"))
sys.path.insert(0, str(ROOT / "scripts/lib"))
from bench_common import sha256  # noqa: E402

FORGE_SEED = 7
CONTINUATION_TOKENS = 64



def muser_commit(muser: str) -> str:
    """The commit the binary was built from (`muser --version`), else MUSER_COMMIT, else git."""
    out = subprocess.run([muser, "--version"], capture_output=True, text=True).stdout
    if "(commit " in out:
        c = out.split("(commit ", 1)[1].split(")", 1)[0]
        if c != "unknown":
            return c
    return os.environ.get("MUSER_COMMIT") or run(["git", "-C", ROOT, "rev-parse", "HEAD"]).strip()


def run(cmd, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if r.returncode != 0:
        # The command's own message (e.g. a configuration error naming a tensor) says why.
        sys.stderr.write(r.stderr[-4000:])
        raise subprocess.CalledProcessError(r.returncode, r.args, r.stdout, r.stderr)
    return r.stdout


def model_for(fixture: str, muser: str, work: Path, gemma=None) -> Path:
    if fixture == "gemma":
        if gemma:
            return Path(gemma)
        return Path(run([ROOT / "scripts/fetch-default-model.sh"]).strip())
    path = work / f"forged-{fixture}-seed{FORGE_SEED}.gguf"
    if not path.exists():
        run([muser, "forge", "--preset", fixture, "--seed", FORGE_SEED, "-o", path])
    return path


def tokens_for(muser: str, model: Path, prompt: str, continuation: str) -> list[int]:
    p = json.loads(run([muser, "tokenize", "-m", model, "-p", prompt, "--ids"]))
    c = json.loads(run([muser, "tokenize", "-m", model, "-p", continuation, "--ids", "--no-special"]))
    while len(c) < CONTINUATION_TOKENS:
        c = c + c
    return p + c[:CONTINUATION_TOKENS]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", default="tiny,small,gemma")
    ap.add_argument("--muser", default=str(ROOT / "target/release/muser"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", default="/tmp/muser-parity")
    ap.add_argument("--comparator", default=str(CACHE / "comparator-cpu"))
    ap.add_argument("--out-dir", default=str(ROOT / "docs/receipts"))
    ap.add_argument("--class", dest="klass", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--llama-cuda", default=str(Path.home() / "llama"))
    ap.add_argument("--bindings", default=None, help="folder with the sdist's llama_cpp/ (+ diskcache)")
    ap.add_argument("--gemma", default=None, help="gemma-3-270m GGUF (default: fetch script)")
    a = ap.parse_args()
    cuda = a.klass == "cuda"
    mine, theirs = ("muser-cuda", "llama-cuda") if cuda else ("muser-cpu", "llama-cpu")
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    spec = json.loads(PROMPTS.read_text())
    lib = Path(a.comparator) / "build" / "bin"
    table = []
    for fixture in a.fixtures.split(","):
        model = model_for(fixture, a.muser, work, a.gemma)
        determinism = []
        per_prompt = []
        pooled = {}
        for i, prompt in enumerate(spec["prompts"]):
            ids = tokens_for(a.muser, model, prompt, spec["continuation"])
            base = work / f"{fixture}-{i}"
            tok_file = Path(f"{base}.tokens.json")
            tok_file.write_text(json.dumps(ids))
            common = ["-m", model, "--tokens", tok_file, "-t", a.threads]
            run([a.muser, "eval", *common, "--route", "oracle", "--dump-logits", f"{base}.oracle.f32"])
            run([a.muser, "eval", *common, "--route", "cpu", "--dump-logits", f"{base}.muser.f32"])
            if cuda:
                run([a.muser, "eval", *common, "--route", "cuda", "--dump-logits", f"{base}.cuda.f32"])
                variants = {
                    "second run": ({}, []),
                    "serial capture": ({"MUSER_CUDA_SERIAL": "1"}, []),
                    "decode graph, 1 token per step": ({}, ["--chunk", "1"]),
                    "eager, 1 token per step": ({"MUSER_CUDA_GRAPH": "0"}, ["--chunk", "1"]),
                    "chunk 37": ({}, ["--chunk", "37"]),
                }
                ref = sha256(Path(f"{base}.cuda.f32"))
                for vi, (name, (env, extra)) in enumerate(variants.items()):
                    out = f"{base}.cuda-v{vi}.f32"
                    run([a.muser, "eval", *common, "--route", "cuda", *extra, "--dump-logits", out],
                        env={**os.environ, **env})
                    got = sha256(Path(out))
                    determinism.append({"prompt": i, "variant": name, "sha256": got, "identical": got == ref})
                    os.remove(out)
                llama_cmd = [sys.executable, ROOT / "scripts/comparator-logits.py", "--lib", a.llama_cuda,
                             "--model", model, "--tokens", tok_file, "--out", f"{base}.llama.f32",
                             "--threads", a.threads, "--gpu"]
                if a.bindings:
                    llama_cmd += ["--bindings", a.bindings]
                run(llama_cmd)
                routes = ["--route", f"muser-cuda={base}.cuda.f32", "--route", f"llama-cuda={base}.llama.f32",
                          "--route", f"muser-cpu={base}.muser.f32"]
            else:
                llama_cmd = [sys.executable, ROOT / "scripts/comparator-logits.py", "--lib", lib, "--model", model,
                             "--tokens", tok_file, "--out", f"{base}.llama.f32", "--threads", a.threads]
                if a.bindings:
                    llama_cmd += ["--bindings", a.bindings]
                run(llama_cmd)
                routes = ["--route", f"muser-cpu={base}.muser.f32", "--route", f"llama-cpu={base}.llama.f32"]
            run([a.muser, "parity", "--oracle", f"{base}.oracle.f32", "--positions", len(ids),
                 *routes, "--json", f"{base}.parity.json"])
            rep = json.loads(Path(f"{base}.parity.json").read_text())
            per_prompt.append({"prompt": i, "tokens": ids, "report": rep})
            for r in rep["vs_oracle"]:
                pooled.setdefault(r["route"], []).append((len(ids), r["metrics"]))
            for pr in rep["pairs"]:
                pooled.setdefault(f"{pr['a']}~{pr['b']}", []).append((len(ids), pr["metrics"]))
        summary = {}
        for name, items in pooled.items():
            n = sum(k for k, _ in items)
            summary[name] = {
                "positions": n,
                "mean_kl": sum(k * m["mean_kl"] for k, m in items) / n,
                "top1": sum(k * m["top1"] for k, m in items) / n,
                "max_plausible_dlogp": max(m["max_plausible_dlogp"] for _, m in items),
                "first_divergence_per_prompt": [m["first_divergence"] for _, m in items],
            }
        mu, ll = summary[mine], summary[theirs]
        accept = {
            "kl_ok": mu["mean_kl"] <= 1.10 * ll["mean_kl"],
            "top1_ok": mu["top1"] >= ll["top1"] - 0.01,
            "max_err_ok": mu["max_plausible_dlogp"] <= 1.25 * ll["max_plausible_dlogp"],
        }
        if cuda:
            accept["deterministic"] = all(d["identical"] for d in determinism)
        accept["pass"] = all(accept.values())
        route_file = f"{work}/{fixture}-0.cuda.f32.json" if cuda else f"{work}/{fixture}-0.muser.f32.json"
        receipt = {
            "what": f"{a.klass.upper()} accuracy parity vs the f64 oracle (teacher-forced)",
            "fixture": fixture,
            "model": str(model),
            "model_sha256": sha256(model),
            "forge": None if fixture == "gemma" else f"muser forge --preset {fixture} --seed {FORGE_SEED}",
            "muser_route": json.loads(Path(route_file).read_text())["route"],
            "muser_commit": muser_commit(a.muser),
            "llama_cpp": json.loads(Path(f"{work}/{fixture}-0.llama.f32.json").read_text()),
            "threads": a.threads,
            "summary": summary,
            "acceptance": accept,
            "determinism": determinism if cuda else None,
            "host": os.uname().nodename,
            "prompts": per_prompt,
        }
        out = Path(a.out_dir) / f"parity-{a.klass}-{fixture}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(receipt, indent=1) + "\n")
        table.append((fixture, mu, ll, summary[f"{mine}~{theirs}"], accept))
    print("| fixture | route | mean KL | top-1 | max plausible Δlogp |")
    print("|---|---|---:|---:|---:|")
    for fixture, mu, ll, pair, acc in table:
        k = a.klass.upper()
        print(f"| {fixture} | Muser {k} | {mu['mean_kl']:.3e} | {mu['top1']:.4f} | {mu['max_plausible_dlogp']:.3e} |")
        print(f"| {fixture} | llama.cpp {k} | {ll['mean_kl']:.3e} | {ll['top1']:.4f} | {ll['max_plausible_dlogp']:.3e} |")
        print(f"| {fixture} | Muser ~ llama.cpp | {pair['mean_kl']:.3e} | {pair['top1']:.4f} | {pair['max_plausible_dlogp']:.3e} |")
        print(f"| {fixture} | acceptance | {'PASS' if acc['pass'] else 'FAIL'} | | |")
    return 0 if all(t[4]["pass"] for t in table) else 1


if __name__ == "__main__":
    sys.exit(main())
