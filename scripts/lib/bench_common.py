"""Shared by scripts/bench-cpu.py, scripts/bench-cuda.py (and parity.py for hashing): file hashing, pairing Muser's
`muser bench --json` results with llama-bench's JSON rows, writing the receipt and the table."""
import hashlib
import json
from pathlib import Path


def sha256(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def llama_figure(llama: list, test: str, depth: int = 0):
    """(avg tok/s, stddev) of llama-bench's row for Muser's test name ("pp512", "tg128@d2048")."""
    n = int(test[2:].split("@")[0])
    for r in llama:
        if r.get("n_depth", 0) != depth:
            continue
        if test.startswith("pp") and r["n_prompt"] == n and r["n_gen"] == 0:
            return r["avg_ts"], r["stddev_ts"]
        if test.startswith("tg") and r["n_gen"] == n and r["n_prompt"] == 0:
            return r["avg_ts"], r["stddev_ts"]
    return None, None


def paired_rows(muser: dict, llama: list) -> list:
    """One row per Muser result with llama.cpp's figure beside it and the ratio."""
    rows = []
    for r in muser["results"]:
        depth = r.get("depth", 0)
        lt, ls = llama_figure(llama, r["test"], depth)
        rows.append({"test": r["test"], "depth": depth, "muser_tok_per_s": r["tok_per_s"],
                     "muser_stddev": r["stddev"], "llama_tok_per_s": lt, "llama_stddev": ls,
                     "ratio": (r["tok_per_s"] / lt) if lt else None})
    return rows


def add_bandwidth_shares(rows: list, bytes_per_tok, gbps, kind: str) -> None:
    """Decode reads every weight once per token: each engine's tg figure as weight GB/s and as
    a share of the measured `kind` bandwidth (`copy` on CUDA, `read` on the CPU)."""
    if not bytes_per_tok or not gbps:
        return
    for row in rows:
        if not row["test"].startswith("tg"):
            continue
        for who in ("muser", "llama"):
            tps = row[f"{who}_tok_per_s"]
            if tps:
                row[f"{who}_weight_gb_per_s"] = bytes_per_tok * tps / 1e9
                row[f"{who}_pct_of_{kind}_bandwidth"] = 100 * bytes_per_tok * tps / 1e9 / gbps


def write_receipt(out: str, receipt: dict, rows: list) -> None:
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(receipt, indent=2) + "\n")
    print(f"{'test':>12} {'muser':>10} {'llama.cpp':>10} {'ratio':>7}")
    for r in rows:
        lt = f"{r['llama_tok_per_s']:.1f}" if r["llama_tok_per_s"] else "-"
        ratio = f"{r['ratio']:.2f}" if r["ratio"] else "-"
        print(f"{r['test']:>12} {r['muser_tok_per_s']:>10.1f} {lt:>10} {ratio:>7}")
    print(f"receipt: {out}")
