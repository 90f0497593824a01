#!/usr/bin/env python3
"""Where a decode token's time goes inside the replayed CUDA graph, from
`nsys stats --report cuda_gpu_trace --format csv` (nsys profile --cuda-graph-trace=node) on
stdin: tokens are cut at each `embed*` kernel; per token the wall time, the time some kernel
ran (union of intervals) and the idle rest; per (kernel, grid x) the summed duration and count
per token over the last tokens; then one middle layer's kernels in start order (offset, duration,
gap to the latest end before it). Usage: ... | python3 nsys-graph.py [TOKENS]"""
import csv
import sys
from collections import defaultdict

rows = [r for r in csv.reader(sys.stdin) if r]
hdr = next(i for i, r in enumerate(rows) if any("Start" in c for c in r) and any("Name" in c for c in r))
h = rows[hdr]
col = {name: i for i, name in enumerate(h)}
def find(*keys):
    for k in keys:
        for name, i in col.items():
            if name.startswith(k):
                return i
    raise SystemExit(f"no column {keys} in {h}")
cs, cd, cn, cg = find("Start"), find("Duration"), find("Name"), find("GrdX")
ks = []
for r in rows[hdr + 1:]:
    try:
        ks.append((int(float(r[cs])), int(float(r[cd])), r[cn].split("(")[0].strip(), r[cg]))
    except (ValueError, IndexError):
        continue
ks = [k for k in ks if k[3] not in ("", None)]  # kernels only (memcpy/memset have no grid)
ks.sort()
starts = [i for i, k in enumerate(ks) if k[2].startswith("embed")]
want = int(sys.argv[1]) if len(sys.argv) > 1 else 8
toks = list(zip(starts, starts[1:]))[-want:]
if not toks:
    raise SystemExit("no token boundaries (embed kernels) found")
per = defaultdict(lambda: [0, 0])
walls, busys = [], []
for a, b in toks:
    t0, t1 = ks[a][0], ks[b][0]
    busy, end = 0, t0
    for s, d, n, g in ks[a:b]:
        e = s + d
        if e > end:
            busy += e - max(s, end)
            end = e
        per[(n, g)][0] += d
        per[(n, g)][1] += 1
    walls.append(t1 - t0)
    busys.append(busy)
nt = len(toks)
w, bz = sum(walls) / nt / 1e3, sum(busys) / nt / 1e3
print(f"tokens {nt}: wall {w:.1f} us/token ({1e6 / w:.1f} tok/s), some kernel running {bz:.1f} us, idle {w - bz:.1f} us")
print(f"{'kernel/grid':34} {'n/tok':>6} {'us/tok':>9} {'us each':>8} {'%wall':>6}")
for (n, g), (d, c) in sorted(per.items(), key=lambda x: -x[1][0]):
    print(f"{n + '/' + g:34} {c / nt:6.1f} {d / nt / 1e3:9.1f} {d / c / 1e3:8.2f} {100 * d / nt / 1e3 / w:6.1f}")
a, b = toks[-1]
seq = ks[a:b]
L = len(seq)
mid = seq[L // 2: L // 2 + 40]
print("\none stretch of the last token, start order (offset us, duration us, gap us):")
end = mid[0][0]
for s, d, n, g in mid:
    print(f"  {(s - mid[0][0]) / 1e3:8.2f} {d / 1e3:7.2f} {(s - end) / 1e3:6.2f}  {n}/{g}")
    end = max(end, s + d)
