#!/usr/bin/env bash
# Why the f16 prefill tiles (`mmt_*`, mmt_h16.cu) run at ~185 TFLOPS (docs/cuda.md, "The f16
# route"): ncu's speed-of-light, occupancy, warp-state (stall reasons), launch and shared-memory
# sections for one `mmt_q4h_s4` launch of mvh_bench (skip 36: O's 24 launches, then FFN gate/up's
# 12 at 128 tokens — so FFN gate/up at 512 tokens), one `mmt_q6h_s4` (skip 12: Q6_K FFN down at
# 512), then the default route's `mmq_q4_k_a8` on FFN up (mmq_bench --a8, skip 36: attn_q's 36). After build-device.sh here; carry
# .device/mvh_bench and .device/mmq_bench. ~2 min.
# Usage: bash scripts/device/mmt-profile.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
SECTIONS="--section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis_Tables --section ComputeWorkloadAnalysis"
for k in "mmt_q4h_s4 36 mvh_bench" "mmt_q6h_s4 12 mvh_bench" "mmq_q4_k_a8 36 mmq_bench --a8"; do
  set -- $k
  name=$1 skip=$2; shift 2
  timeout 150 $NCU --clock-control none -k regex:"^$name\$" --launch-skip $skip --launch-count 1 \
    $SECTIONS .device/"$@" > "$out/ncu-$name.txt" 2>&1
  echo "== $name rc=$?"
  grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Stall|Issue Slot|Issued Ipc|Tensor|Shared Memory|Block Limit" "$out/ncu-$name.txt" | head -40
done
