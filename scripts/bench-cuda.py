#!/usr/bin/env python3
"""CUDA benchmark, side by side in one run (run it on the GPU machine): Muser's CUDA route
(`muser bench --backend cuda`) and the pinned llama.cpp CUDA build (`llama-bench -ngl 99 -fa 1`,
the prebuilt from shared/comparator), same GPU, same model file.

Writes a JSON receipt: GPU (name, driver, memory), host CPU, model path and SHA-256, Muser's route
identity, kernel module fingerprints, load report and git commit, llama-bench's build, every
figure (median tok/s and spread), and the ratios Muser ÷ llama.cpp.

Prompt tests (--pp) run at depth 0, generation (--tg) at every --depth (context prefilled untimed,
llama-bench's `-d`). --batch 1,2,4,8 adds Muser's batched decode at depth 0 (B sequences, one
token of each per step; aggregate tok/s and its ratio to B = 1) under "batched_decode": the
pinned llama.cpp build has no multi-sequence benchmark, so these figures are Muser's alone.

Usage: scripts/bench-cuda.py --model M.gguf [--pp 512] [--tg 128] [--depth 0,2048] [--reps 3]
                             [--batch 1,2,4,8] [--muser target/release/muser] [--llama-cuda ~/llama]
                             --out RECEIPT.json
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "lib"))
from bench_common import add_bandwidth_shares, paired_rows, sha256, write_receipt  # noqa: E402



def gpu_info() -> dict:
    out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                          "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    f = [x.strip() for x in out.split(",")]
    return {"name": f[0], "driver": f[1], "memory": f[2], "max_sm_clock": f[3]} if len(f) >= 4 else {"raw": out}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--pp", default="512")
    ap.add_argument("--tg", default="128")
    ap.add_argument("--depth", default="0", help="context depths, e.g. 0,2048,8192,32768")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--batch", default="", help="batched decode row counts, e.g. 1,2,4,8 (Muser only)")
    ap.add_argument("--muser", default="target/release/muser")
    ap.add_argument("--llama-cuda", default=str(Path.home() / "llama"))
    ap.add_argument("--model-sha256", default=None, help="skip hashing (known SHA-256)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    model = Path(a.model).resolve()
    lib = Path(a.llama_cuda)
    env = dict(os.environ, LD_LIBRARY_PATH=str(lib))
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    # Prompt tests at depth 0, generation at every depth (a prompt test at 32K would refill the
    # context for nothing the issue asks for): two invocations per engine, results joined.
    runs = [(a.pp, "0", "0"), ("0", a.tg, a.depth)]
    muser, llama = None, []
    for pp, tg, depth in runs:
        m = json.loads(subprocess.run(
            [a.muser, "bench", "-m", str(model), "--backend", "cuda", "-p", pp, "-n", tg,
             "-d", depth, "-r", str(a.reps), "--json"], check=True, capture_output=True, text=True).stdout)
        if muser is None:
            muser = m
        else:
            muser["results"] += m["results"]
        llama += json.loads(subprocess.run(
            [str(lib / "llama-bench"), "-m", str(model), "-ngl", "99", "-fa", "1", "-p", pp,
             "-n", tg, "-d", depth, "-r", str(a.reps), "-o", "json"], check=True, capture_output=True,
            text=True, env=env).stdout)

    batched = []
    if a.batch:
        b = json.loads(subprocess.run(
            [a.muser, "bench", "-m", str(model), "--backend", "cuda", "-p", "0", "-n", a.tg,
             "-d", "0", "-b", a.batch, "-r", str(a.reps), "--json"], check=True, capture_output=True,
            text=True).stdout)
        batched = [r for r in b["results"] if "batch" in r]
        for r in batched:
            print(f"muser {r['test']} x{r['batch']}: {r['tok_per_s']:.1f} tok/s aggregate "
                  f"({r.get('speedup_vs_batch1', 0):.2f}x one sequence)")

    rows = paired_rows(muser, llama)
    bytes_per_tok, copy = muser.get("decode_weight_bytes"), muser.get("copy_gb_per_s")
    add_bandwidth_shares(rows, bytes_per_tok, copy, "copy")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    receipt = {
        "what": "CUDA benchmark, Muser vs pinned llama.cpp CUDA, one run",
        "started": started,
        "machine": {"gpu": gpu_info(), "cpu_count": os.cpu_count(), "kernel": platform.release(),
                    "host": platform.node()},
        "model": str(model),
        "model_sha256": a.model_sha256 or sha256(model),
        "muser": {"route": muser["route"], "commit": muser.get("commit") or os.environ.get("MUSER_COMMIT") or commit,
                  "load_report": muser.get("load_report"), "kernel_modules": muser.get("kernel_modules"),
                  "reps": muser["reps"]},
        "llama_cpp": {"commit": "0c1e57098bba43ac29e6e3b677cdceebdd22334f",
                      "build": "shared/comparator/llama-cuda-sm90.tar.xz (sha256 c987ff30...)",
                      "llama_bench_build": llama[0].get("build_commit") if llama else None,
                      "flags": "-ngl 99 -fa 1"},
        "decode_weight_bytes": muser.get("decode_weight_bytes"),
        "copy_gb_per_s": muser.get("copy_gb_per_s"),
        "results": rows,
        "batched_decode": {"route": b["route"], "results": batched} if batched else None,
        "raw": {"muser": muser, "llama_bench": llama},
    }
    write_receipt(a.out, receipt, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
