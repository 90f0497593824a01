#!/usr/bin/env python3
"""Decode A/B of CUDA route switches on one model: each variant is `[@group] VAR=V ...`, run as
`muser bench -p 0 -n 128 -r REPS` with those variables. The best variant of each group is
merged with the best ungrouped one, the merge is measured too, and the fastest setting overall
is written as `export` lines to --out. Every figure goes to --log and stdout."""
import argparse, os, re, subprocess, sys

ap = argparse.ArgumentParser()
ap.add_argument("--muser", required=True)
ap.add_argument("--model", required=True)
ap.add_argument("--out", required=True)
ap.add_argument("--log", required=True)
ap.add_argument("--reps", default="1")
ap.add_argument("variants", nargs="+")
a = ap.parse_args()
log = open(a.log, "a")


def bench(env_s):
    env = dict(os.environ)
    for kv in env_s.split():
        k, v = kv.split("=", 1)
        env[k] = v
    r = subprocess.run([a.muser, "bench", "-m", a.model, "--backend", "cuda", "-p", "0",
                        "-n", "128", "-r", a.reps], env=env, capture_output=True, text=True)
    text = r.stdout + r.stderr
    log.write(f"== {env_s}\n{text}\n")
    m = re.search(r"tg128\s+([0-9.]+)", text)
    route = re.search(r"^route (\S+)", text, re.M)
    tps = float(m.group(1)) if m else 0.0
    print(f"{tps:8.2f} tok/s  {env_s}  {route.group(1) if route else text[-300:]}", flush=True)
    return tps


res = {}
groups = {}
for v in a.variants:
    g = None
    if v.startswith("@"):
        g, v = v.split(" ", 1)
    res[v] = bench(v)
    groups.setdefault(g, []).append(v)
base = max(groups[None], key=lambda v: res[v])
merged = dict(kv.split("=", 1) for kv in base.split())
for g, vs in groups.items():
    if g is None:
        continue
    best = max(vs + [base], key=lambda v: res[v])
    merged.update(kv.split("=", 1) for kv in best.split())
m = " ".join(f"{k}={v}" for k, v in merged.items())
if m not in res:
    res[m] = bench(m)
best = max(res, key=lambda v: res[v])
print(f"best: {res[best]:.2f} tok/s  {best}")
with open(a.out, "w") as f:
    for kv in best.split():
        f.write(f"export {kv}\n")
