#!/usr/bin/env bash
# Where one decode token's time goes on a full-width 4-layer forge (same matrix shapes as the
# full model): the phase profile, ncu per (kernel, grid) — the grid tells the matrices of one
# kernel apart — and ncu's stall sections for the one-token matvecs of the FFN. The route is the
# environment's (MUSER_CUDA_ACTS=f16 for the f16 route); SECTIONS="kernel:launch-skip …" picks
# the kernels whose stall sections are printed (default: the A8 route's, or with
# MUSER_CUDA_ACTS=f16 the f16 route's). DEPTH=N (default 0) decodes after an N-token context
# (`muser bench -d N`) in the ncu sections; the context's prefill launches the same attention and
# norm kernels, so their SECTIONS skip must count them: 4 layers x ceil(N / 512) chunks more per
# per-layer kernel (e.g. DEPTH=32768 SECTIONS="attn_h16_d128:259"); ncu's launch line shows the
# grid, (n_super, 2, 1) for a decode block of the attention — check it before reading on.
# Usage: [MUSER_CUDA_ACTS=f16] [DEPTH=N] bash scripts/device/decode-profile.sh   (~3 min at 0)
set -uo pipefail
M=$PWD/.device/muser
F=$HOME/f4.gguf
[ -f $F ] || $M forge --preset full --layers 4 --seed 7 -o $F > /dev/null
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
echo "== tg64 (graph)"; $M bench -m $F --backend cuda -p 0 -n 64 -r 2 2>&1 | grep tg
echo "== phase profile (eager)"
MUSER_CUDA_PROFILE=1 $M bench -m $F --backend cuda -p 0 -n 32 -r 1 2>&1 | grep -v "^CUDA"
MET=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,sm__throughput.avg.pct_of_peak_sustained_elapsed
echo "== ncu decode (eager, 2 tokens) per kernel and grid"
MUSER_CUDA_GRAPH=0 $NCU --clock-control none --metrics $MET --csv --print-units base \
  $M bench -m $F --backend cuda -p 0 -n 2 -r 0 2>/dev/null | python3 scripts/device/ncu-summary.py --by-grid
if [ "${MUSER_CUDA_ACTS:-}" = f16 ]; then
  DEF="mvh_q4h_s2:4 mvh_q6h_s4:1 residual_norm_h16:0 act_h16:0 attn_h16_d128:0 attn_combine:0"
else
  DEF="mvs_q4_k_t1:4 mvs_q6_k_t1:1 residual_norm_q:0 attn_combine_q:0"
fi
for k in ${SECTIONS:-$DEF}; do
  set -- ${k%%:*} ${k##*:}
  echo "== ncu sections: $1 (launch-skip $2)"
  MUSER_CUDA_GRAPH=0 $NCU --clock-control none -k regex:"^$1\$" --launch-skip $2 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
    $M bench -m $F --backend cuda -p 0 -n 2 -r 0 -d ${DEPTH:-0} 2>/dev/null | grep -vE "^(CUDA|==PROF==)" | grep -E "^\s+[A-Z]|Stall|stall|----" | head -70
done
