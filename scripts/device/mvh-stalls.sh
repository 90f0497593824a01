#!/usr/bin/env bash
# Which SASS instructions the one-token f16 matmuls' warps stall on (ncu PC sampling, source
# page), on the 4-layer full-width forge, eager (MUSER_CUDA_GRAPH=0), one launch each of
# mvh_glu_q4h_s2 (FFN gate + up) and mvh_q4h_s8 (Q / attention gate); then
# scripts/device/decode-account.sh (warm-cache ncu per kernel; ACCOUNT=0 skips it). Every line
# into $OUT/stalls.txt. KERNELS picks others. Carry .device/muser. ~4 min (~2 without the table).
# SAMPLE_INTERVAL (0..31: every 2^(5+n) cycles) samples small kernels finer than ncu's auto.
# Usage: [KERNELS="mvh_glu_q4h_s2 ..."] [ACCOUNT=0] [SAMPLE_INTERVAL=0] bash scripts/device/mvh-stalls.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
log=$out/stalls.txt
source scripts/device/f4-ncu.sh
for k in ${KERNELS:-mvh_glu_q4h_s2 mvh_q4h_s8}; do
  MUSER_CUDA_GRAPH=0 timeout 150 $NCU --clock-control none --cache-control none \
    -k regex:"^$k\$" --launch-skip 8 --launch-count 1 --section SourceCounters \
    --section WarpStateStats ${SAMPLE_INTERVAL:+--warp-sampling-interval $SAMPLE_INTERVAL} -o "$HOME/st-$k" -f $M bench -m "$F" --backend cuda -p 0 -n 8 -r 1 \
    > "$out/ncu-run.txt" 2>&1
  echo "== $k rc=$?" >> "$log"
  timeout 100 $NCU -i "$HOME/st-$k.ncu-rep" --page source --print-source sass --csv \
    > "$HOME/st-$k.csv" 2> "$out/ncu-src-err.txt"
  python3 scripts/device/sass-stalls.py 45 < "$HOME/st-$k.csv" >> "$log" 2>&1
done
if [ "${ACCOUNT:-1}" != 0 ]; then
  bash scripts/device/decode-account.sh "$out" > /dev/null 2>&1
  cat "$out/account.txt" >> "$log"
fi
cat "$log"
