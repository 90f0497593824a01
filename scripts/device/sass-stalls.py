#!/usr/bin/env python3
"""Stall samples per SASS instruction from `ncu -i REP --page source --print-source sass --csv`
on stdin: the top N instructions by warp-stall samples (all samples) with their share, then the
shares summed per opcode. Usage: ... | python3 sass-stalls.py [N]"""
import csv
import sys
from collections import defaultdict

rows = [r for r in csv.reader(sys.stdin) if r]
try:
    hdr = next(i for i, r in enumerate(rows) if any(c.startswith("Source") for c in r)
               and any("Sampling" in c for c in r))
except StopIteration:
    sys.exit("no source page with stall sampling columns on stdin")
h = rows[hdr]
src = next(i for i, c in enumerate(h) if c.startswith("Source"))
smp = next(i for i, c in enumerate(h) if "Warp Stall Sampling (All" in c)
addr = next((i for i, c in enumerate(h) if "Address" in c), None)
# Per-reason stall columns where the page has them (names vary by ncu version).
reasons = [i for i, c in enumerate(h) if "stall" in c.lower() and "Sampling" not in c]
lines = []
for r in rows[hdr + 1:]:
    try:
        n = float(r[smp].replace(",", ""))
    except (ValueError, IndexError):
        continue
    why = ""
    vals = []
    for i in reasons:
        try:
            vals.append((float(r[i].replace(",", "")), h[i]))
        except (ValueError, IndexError):
            pass
    if vals and max(vals)[0] > 0:
        why = max(vals)[1]
    lines.append((n, r[addr] if addr is not None else "", r[src].strip(), why))
total = sum(x[0] for x in lines) or 1.0
top = int(sys.argv[1]) if len(sys.argv) > 1 else 40
print(f"{len(lines)} instructions, {total:.0f} stall samples")
for n, a, s, why in sorted(lines, reverse=True)[:top]:
    print(f"{100 * n / total:6.2f}%  {a:>8}  {s}" + (f"   [{why}]" if why else ""))
per_op = defaultdict(float)
for n, _, s, _ in lines:
    op = s.split()[0] if s else "?"
    if op.startswith("@"):
        op = s.split()[1] if len(s.split()) > 1 else op
    per_op[op.split(".")[0]] += n
print("per opcode:", ", ".join(f"{op} {100 * n / total:.1f}%" for op, n in
                               sorted(per_op.items(), key=lambda x: -x[1])[:14]))
