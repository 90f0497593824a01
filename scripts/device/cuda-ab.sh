#!/usr/bin/env bash
# Issue 4/5 working call on the GPU machine: the CUDA tests, then a decode A/B of route switches
# on the full-size forge (tg128, one repetition after warm-up each), an automatic pick of the
# fastest combination (written to $HOME/best.env for the receipts call), and ncu detail
# (stall reasons, L1/L2/DRAM throughput) for the decode matvec kernels.
# Needs $HOME/full.gguf (scripts/device/cuda-setup.sh starts the forge) and .device/.
# Usage: scripts/device/cuda-ab.sh OUTDIR
set -uo pipefail
OUT=${1:?outdir}
M=$PWD/.device/muser
FULL=$HOME/full.gguf
bash scripts/device/cuda-tests.sh > $OUT/tests.log 2>&1; echo "tests rc=$?"
grep -E "^test |test result|skipping|panicked" $OUT/tests.log | tail -40
while [ ! -f $HOME/forge.done ]; do sleep 2; done
cat $HOME/forge.log | tail -2
python3 scripts/device/ab-pick.py --muser $M --model $FULL --out $HOME/best.env --log $OUT/ab.log \
  "MUSER_CUDA_XSMEM=0" \
  "MUSER_CUDA_XSMEM=0 MUSER_CUDA_FUSE=1" \
  "MUSER_CUDA_FUSE=1" \
  "@attn MUSER_CUDA_FUSE=1 MUSER_CUDA_ATTN_HPB=4" \
  "@attn MUSER_CUDA_FUSE=1 MUSER_CUDA_ATTN_HPB=4 MUSER_CUDA_ATTN_SUPER=128" \
  "@attn MUSER_CUDA_FUSE=1 MUSER_CUDA_ATTN_HPB=2 MUSER_CUDA_ATTN_SUPER=64" \
  "@mv MUSER_CUDA_FUSE=1 MUSER_CUDA_MVA_MINB=4" \
  "@mv MUSER_CUDA_FUSE=1 MUSER_CUDA_MVA_ROWS=2" \
  "@mv MUSER_CUDA_FUSE=1 MUSER_CUDA_MVA_ROWS=2 MUSER_CUDA_MVA_MINB=6" \
  "@mv MUSER_CUDA_FUSE=1 MUSER_CUDA_MVA_ROWS=8" \
  "@ld MUSER_CUDA_FUSE=1 MUSER_CUDA_LD16=words"
cat $HOME/best.env
[ -n "${NO_NCU:-}" ] && exit 0
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for x in 1 0; do
  echo "== ncu MUSER_CUDA_XSMEM=$x" >> $OUT/ncu.txt
  MUSER_CUDA_FUSE=1 MUSER_CUDA_XSMEM=$x MUSER_CUDA_GRAPH=0 timeout 200 $NCU --clock-control none \
    -k regex:'mv[sp]_q[46]_k_t1' --launch-skip 40 --launch-count 3 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats \
    $M bench -m $FULL --backend cuda -p 0 -n 1 -r 0 >> $OUT/ncu.txt 2>&1
done
grep -E "==|mv[sp]_q|Duration|DRAM Throughput|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|L1/TEX Cache Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Stall|stall" $OUT/ncu.txt | head -120
