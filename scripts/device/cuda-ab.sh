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
# AB_VARIANTS: a bash-quoted list replacing the default variants.
if [ -n "${AB_VARIANTS:-}" ]; then
  eval "V=($AB_VARIANTS)"
else
  V=("MUSER_CUDA_MVA_ROWS=2" "MUSER_CUDA_FUSE=0" "MUSER_CUDA_XSMEM=0" "MUSER_CUDA_PIPE=0"
     "@mv MUSER_CUDA_MVA_ROWS=1" "@mv MUSER_CUDA_MVA_ROWS=4" "@mv MUSER_CUDA_MVA_ROWS=1 MUSER_CUDA_MVA_MINB=6"
     "@ld MUSER_CUDA_LD16=words")
fi
python3 scripts/device/ab-pick.py --muser $M --model $FULL --out $HOME/best.env --log $OUT/ab.log "${V[@]}"
cat $HOME/best.env
[ -n "${NO_NCU:-}" ] && exit 0
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
source $HOME/best.env
MET=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,sm__throughput.avg.pct_of_peak_sustained_elapsed
echo "== ncu decode, one token, eager, first ${NCU_COUNT:-400} kernels ($(cat $HOME/best.env | tr '\n' ' '))" | tee $OUT/ncu.txt
MUSER_CUDA_GRAPH=0 timeout 240 $NCU --clock-control none --metrics $MET --csv --print-units base -c ${NCU_COUNT:-400} \
  $M bench -m $FULL --backend cuda -p 0 -n 1 -r 0 2>/dev/null | python3 scripts/device/ncu-summary.py | tee -a $OUT/ncu.txt
