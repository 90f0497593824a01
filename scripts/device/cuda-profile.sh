#!/usr/bin/env bash
# Where the CUDA route's time goes, on a full-width 4-layer forge (same matrix shapes as the
# full model, 1.6 GB): tok/s per decode-matvec variant, the phase profile, and ncu per kernel.
# Usage: scripts/device/cuda-profile.sh OUTDIR
set -uo pipefail
OUT=${1:?outdir}
M=$PWD/.device/muser
F=$HOME/f4.gguf
[ -f $F ] || $M forge --preset full --layers ${LAYERS:-4} --seed 7 -o $F > /dev/null
for acts in ${ACTS_LIST:-a16 f32}; do
  echo "== MUSER_CUDA_ACTS=$acts"; MUSER_CUDA_ACTS=$acts $M bench -m $F --backend cuda -p 512 -n 64 -r 2 2>&1 | grep -v "^CUDA"
done
[ -n "${QUICK:-}" ] && exit 0
echo "== phase profile (eager)"
MUSER_CUDA_PROFILE=1 $M bench -m $F --backend cuda -p 512 -n 32 -r 1 2>&1 | grep -v "^CUDA"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
MET=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,sm__throughput.avg.pct_of_peak_sustained_elapsed
echo "== ncu decode (eager, 2 tokens)"
MUSER_CUDA_GRAPH=0 $NCU --clock-control none --metrics $MET --csv --print-units base \
  $M bench -m $F --backend cuda -p 0 -n 2 -r 0 2>/dev/null | python3 scripts/device/ncu-summary.py
[ -n "${NO_PREFILL_NCU:-}" ] && exit 0
echo "== ncu prefill (16 tokens)"
$NCU --clock-control none --metrics $MET --csv --print-units base \
  $M bench -m $F --backend cuda -p 16 -n 0 -r 0 2>/dev/null | python3 scripts/device/ncu-summary.py
