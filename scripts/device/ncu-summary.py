#!/usr/bin/env python3
"""Summarise `ncu --csv --metrics ...` output from stdin: per kernel name, launches, total time,
mean DRAM throughput %, SM throughput %, registers, warps active %, grid size.
`--by-grid`: one line per (kernel, grid size), e.g. to tell the matrices of one kernel apart."""
import csv
import sys
from collections import defaultdict

lines = [l for l in sys.stdin if l.startswith('"')]
rows = list(csv.DictReader(lines))
agg = defaultdict(lambda: defaultdict(list))
for r in rows:
    k = r["Kernel Name"].split("(")[0]
    if len(sys.argv) > 1 and sys.argv[1] == "--by-grid":  # one line per (kernel, grid size)
        k = f'{k}/{r["Grid Size"].strip("()").split(",")[0] if "Grid Size" in r else "?"}'
    agg[k][r["Metric Name"]].append(float(r["Metric Value"].replace(",", "") or 0))
tot = sum(sum(v["gpu__time_duration.sum"]) for v in agg.values()) or 1
print(f"{'kernel':<18}{'n':>5}{'time us':>11}{'%':>6}{'dram%':>7}{'sm%':>6}{'GB/s':>8}{'regs':>6}{'warps%':>8}{'grid':>8}")
for k, v in sorted(agg.items(), key=lambda kv: -sum(kv[1]["gpu__time_duration.sum"])):
    t = v["gpu__time_duration.sum"]
    n = len(t)
    mean = lambda m: sum(v[m]) / max(len(v[m]), 1)
    gbs = sum(v["dram__bytes_read.sum"]) / max(sum(t), 1)
    print(f"{k:<18}{n:>5}{sum(t)/1e3:>11.1f}{100*sum(t)/tot:>6.1f}{mean('dram__throughput.avg.pct_of_peak_sustained_elapsed'):>7.1f}"
          f"{mean('sm__throughput.avg.pct_of_peak_sustained_elapsed'):>6.1f}{gbs:>8.0f}{mean('launch__registers_per_thread'):>6.0f}"
          f"{mean('sm__warps_active.avg.pct_of_peak_sustained_active'):>8.1f}{mean('launch__grid_size'):>8.0f}")
