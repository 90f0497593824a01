#!/usr/bin/env python3
"""CPU benchmark, side by side in one run: Muser's CPU route (`muser bench`) and the pinned
llama.cpp CPU build (`llama-bench`), same machine, same model file, same thread count.

Writes a JSON receipt: machine (CPU model, logical CPUs, kernel), model path and SHA-256,
threads, Muser's route identity and git commit, llama-bench's build receipt SHA, every figure
(median tok/s and spread), Muser's peak RSS, and the ratios Muser ÷ llama.cpp.

Each test runs the two engines back to back, `--rounds` times with the order flipped every round
(a drifting machine then biases neither); the receipt keeps every round's ratio and reports the
medians.

Usage: scripts/bench-cpu.py --model M.gguf [--threads 2] [--pp 128,512] [--tg 128] [--reps 3]
                            [--rounds 1] [--muser target/release/muser] [--comparator DIR]
                            --out RECEIPT.json
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "lib"))
from bench_common import add_bandwidth_shares, paired_rows, sha256, write_receipt  # noqa: E402


def median_rows(per_round: list) -> list:
    """Per test: each engine's median tok/s over the rounds, the median of the rounds' ratios,
    and every round's ratio."""
    out = []
    for i, row in enumerate(per_round[0]):
        rs = [r[i] for r in per_round]
        ratios = [r["ratio"] for r in rs if r["ratio"]]
        llama = [r["llama_tok_per_s"] for r in rs if r["llama_tok_per_s"]]
        out.append({**row,
                    "muser_tok_per_s": statistics.median(r["muser_tok_per_s"] for r in rs),
                    "llama_tok_per_s": statistics.median(llama) if llama else None,
                    "ratio": statistics.median(ratios) if ratios else None,
                    "round_ratios": ratios})
    return out


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pp", default="128,512")
    ap.add_argument("--tg", default="128")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--muser", default="target/release/muser")
    ap.add_argument("--comparator", default=str(Path.home() / ".cache/muser/comparator-cpu"))
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    model = Path(a.model).resolve()
    comp = Path(a.comparator)
    bin_dir = comp / "build" / "bin"
    env = dict(os.environ, LD_LIBRARY_PATH=str(bin_dir))

    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    tests = [("pp", n) for n in a.pp.split(",") if n and n != "0"] + \
            [("tg", n) for n in a.tg.split(",") if n and n != "0"]

    def run_muser(kind, n):
        pp, tg = (n, "0") if kind == "pp" else ("0", n)
        return json.loads(subprocess.run(
            [a.muser, "bench", "-m", str(model), "-t", str(a.threads), "-p", pp, "-n", tg,
             "-r", str(a.reps), "--json"], check=True, capture_output=True, text=True).stdout)

    def run_llama(kind, n):
        pp, tg = (n, "0") if kind == "pp" else ("0", n)
        return json.loads(subprocess.run(
            [str(bin_dir / "llama-bench"), "-m", str(model), "-t", str(a.threads), "-p", pp,
             "-n", tg, "-r", str(a.reps), "-o", "json"], check=True, capture_output=True,
            text=True, env=env).stdout)

    # Each test runs Muser and llama.cpp back to back, `--rounds` times, the order flipping
    # every round: a machine whose speed drifts (shared VMs drift by tens of per cent within
    # minutes) then biases neither engine. Each round gives a ratio; the receipt keeps them all
    # and reports their median.
    rounds = []
    for k in range(a.rounds):
        muser = {"results": []}
        llama = []
        for kind, n in tests:
            if k % 2 == 0:
                m, l = run_muser(kind, n), run_llama(kind, n)
            else:
                l, m = run_llama(kind, n), run_muser(kind, n)
            peak = max(muser.get("peak_rss_bytes", 0), m["peak_rss_bytes"])
            muser = {**m, "results": muser["results"] + m["results"], "peak_rss_bytes": peak}
            llama += l
        rounds.append({"muser": muser, "llama_bench": llama, "rows": paired_rows(muser, llama)})
    muser = {**rounds[0]["muser"],
             "peak_rss_bytes": max(r["muser"]["peak_rss_bytes"] for r in rounds)}
    rows = median_rows([r["rows"] for r in rounds])
    # Both engines' decode as a share of the machine's parallel read bandwidth (measured by
    # `muser bench` with the same thread count).
    bytes_per_tok, read = muser.get("decode_weight_bytes"), muser.get("read_gb_per_s")
    add_bandwidth_shares(rows, bytes_per_tok, read, "read")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True).stdout.strip())
    receipt = {
        "what": "CPU benchmark, Muser vs pinned llama.cpp, one run",
        "started": started,
        "machine": {"cpu": cpu_model(), "logical_cpus": os.cpu_count(), "kernel": platform.release(),
                    "host": platform.node()},
        "model": str(model),
        "model_sha256": sha256(model),
        "threads": a.threads,
        "muser": {"route": muser["route"], "commit": muser.get("commit") or commit, "dirty_tree": dirty,
                  "peak_rss_bytes": muser["peak_rss_bytes"], "reps": muser["reps"]},
        "llama_cpp": {"commit": "0c1e57098bba43ac29e6e3b677cdceebdd22334f",
                      "build_receipt_sha256": sha256(comp / "receipt.json"),
                      "llama_bench_build": rounds[0]["llama_bench"][0].get("build_commit"),
                      "backend": rounds[0]["llama_bench"][0].get("backends")},
        "decode_weight_bytes": bytes_per_tok,
        "read_gb_per_s": read,
        "results": rows,
        "rounds": len(rounds),
        "raw": [{"muser": r["muser"], "llama_bench": r["llama_bench"]} for r in rounds],
    }
    write_receipt(a.out, receipt, rows)
    if a.rounds > 1:
        for r in rows:
            print(f"{r['test']:>12} rounds: " + " ".join(f"{x:.2f}" for x in r["round_ratios"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
