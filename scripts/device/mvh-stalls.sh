#!/usr/bin/env bash
# Which SASS instructions the one-token f16 matmuls' warps stall on (ncu PC sampling, source
# page), on the 4-layer full-width forge, eager (MUSER_CUDA_GRAPH=0), one launch each of
# mvh_glu_q4h_s2 (FFN gate + up) and mvh_q4h_s8 (Q / attention gate); then
# scripts/device/decode-account.sh (warm-cache ncu per kernel; ACCOUNT=0 skips it). Every line
# into $OUT/stalls.txt. KERNELS picks others. Carry .device/muser. ~4 min (~2 without the table).
# SAMPLE_INTERVAL (0..31: every 2^(5+n) cycles) samples small kernels finer than ncu's auto.
# A KERNELS entry may carry its launch skip, `name:skip` (default 8); DEPTH=N decodes after an
# N-token context (`muser bench -d N`), whose prefill launches the per-layer kernels 4 x ceil(N /
# 512) times more (the decode attention at depth 32768: `attn_h16_d128:259`, the 4th layer of the
# first decode step, grid (257, 2, 1); the decode-only `attn_combine_m_wide:3`).
# Usage: [KERNELS="mvh_glu_q4h_s2 attn_h16_d128:259 ..."] [DEPTH=N] [ACCOUNT=0] [SAMPLE_INTERVAL=0]
#        bash scripts/device/mvh-stalls.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
log=$out/stalls.txt
source scripts/device/f4-ncu.sh
for ks in ${KERNELS:-mvh_glu_q4h_s2 mvh_q4h_s8}; do
  k=${ks%%:*}
  skip=8
  [ "$k" != "$ks" ] && skip=${ks##*:}
  MUSER_CUDA_GRAPH=0 timeout 150 $NCU --clock-control none --cache-control none \
    -k regex:"^$k\$" --launch-skip $skip --launch-count 1 --section SourceCounters \
    --section WarpStateStats --section LaunchStats ${SAMPLE_INTERVAL:+--warp-sampling-interval $SAMPLE_INTERVAL} -o "$HOME/st-$k" -f $M bench -m "$F" --backend cuda -p 0 -n 8 -r 1 -d ${DEPTH:-0} \
    > "$out/ncu-run.txt" 2>&1
  echo "== $k (launch-skip $skip, depth ${DEPTH:-0}) rc=$?" >> "$log"
  timeout 100 $NCU -i "$HOME/st-$k.ncu-rep" --page details --csv 2>/dev/null \
    | python3 -c 'import csv, sys
want = ("Grid Size", "Duration", "Registers Per Thread", "Warp Cycles Per Issued Instruction")
for r in csv.DictReader(sys.stdin):
    if r.get("Metric Name") in want:
        print("  ", r["Metric Name"], r.get("Metric Value"), r.get("Metric Unit"))' >> "$log"
  timeout 100 $NCU -i "$HOME/st-$k.ncu-rep" --page source --print-source sass --csv \
    > "$HOME/st-$k.csv" 2> "$out/ncu-src-err.txt"
  python3 scripts/device/sass-stalls.py 45 < "$HOME/st-$k.csv" >> "$log" 2>&1
done
if [ "${ACCOUNT:-1}" != 0 ]; then
  bash scripts/device/decode-account.sh "$out" > /dev/null 2>&1
  cat "$out/account.txt" >> "$log"
fi
cat "$log"
