#!/usr/bin/env bash
# Where the one-token f16 matmuls' arithmetic sits on the critical path (docs/cuda-f16.md,
# session 28: ~25 of 103 µs per layer beyond the same grid's loads): ncu's speed-of-light,
# occupancy, warp-state (stall reasons) and source counters (stall samples per SASS line)
#   1. for mvh_persist's eager launches of `mvh_q4h_s4` (one layer's five matrices: skip the
#      warm-up's 3 × 5 of a 1-layer run), and its no-arithmetic twin `stream_chains_q4h_s4`;
#   2. for the engine's decode kernels on a 4-layer full-width forge, eager (MUSER_CUDA_GRAPH=0),
#      one launch each of mvh_glu_q4h_s2 (FFN), mvh_q6h_s4 (FFN down), mvh_q4h_s8 (Q / gate),
#      mvh_q4h_s2 (the output).
# Carry .device/muser, .device/mvh_persist. ~3 min. Usage: bash scripts/device/mvh-profile.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
log=$out/profile.txt
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
SECTIONS="--section SpeedOfLight --section Occupancy --section WarpStateStats --section SourceCounters --section LaunchStats"
summary() {
  grep -E "Duration|Registers Per|Achieved Occupancy|DRAM Throughput|Memory Throughput|Stall|Issue Slot|Issued Ipc|Warp Cycles Per|Block Limit" "$1" | head -40
}
timeout 120 $NCU --clock-control none -k regex:'^mvh_q4h_s4$' --launch-skip 15 --launch-count 5 \
  $SECTIONS .device/mvh_persist --layers 1 --reps 1 > "$out/ncu-persist-mvh.txt" 2>&1
echo "== mvh_q4h_s4 (mvh_persist, 5 matrices) rc=$?" >> "$log"; summary "$out/ncu-persist-mvh.txt" >> "$log"
timeout 120 $NCU --clock-control none -k regex:'^stream_chains_q4h_s4$' --launch-count 5 \
  $SECTIONS .device/mvh_persist --layers 1 --reps 1 > "$out/ncu-persist-stream.txt" 2>&1
echo "== stream_chains_q4h_s4 rc=$?" >> "$log"; summary "$out/ncu-persist-stream.txt" >> "$log"
.device/muser forge --preset full --layers 4 --seed 7 -o "$HOME/f4.gguf" > /dev/null 2>&1
for k in mvh_glu_q4h_s2 mvh_q6h_s4 mvh_q4h_s8 mvh_q4h_s2; do
  MUSER_CUDA_GRAPH=0 timeout 150 $NCU --clock-control none -k regex:"^$k\$" --launch-skip 8 \
    --launch-count 1 $SECTIONS .device/muser bench -m "$HOME/f4.gguf" --backend cuda -p 0 -n 8 -r 1 \
    > "$out/ncu-$k.txt" 2>&1
  echo "== $k rc=$?" >> "$log"; summary "$out/ncu-$k.txt" >> "$log"
done
cat "$log"
