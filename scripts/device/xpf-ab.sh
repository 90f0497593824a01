#!/usr/bin/env bash
# MUSER_CUDA_MVH_XPF=1 (the next piece's activations prefetched into L1) against 0: mvh_persist's
# figures at both, then tg128 on the full forge, alternating (Muser only). Lines into $OUT/xpf.txt.
# Carry .device/muser, .device/mvh_persist. Usage: bash scripts/device/xpf-ab.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
log=$out/xpf.txt
bash scripts/device/forge-bg.sh
for x in 0 1; do
  MUSER_CUDA_MVH_XPF=$x timeout 60 .device/mvh_persist --layers 12 --reps 20 > "$out/persist$x.txt" 2>&1
  echo "XPF=$x rc=$? $(grep -E '^(graph|stream/mvh) ' "$out/persist$x.txt" | tr -s ' ' | tr '\n' ';')" >> "$log"
done
while [ ! -f "$HOME/forge.done" ]; do sleep 2; done
for x in 0 1 0 1; do
  MUSER_CUDA_MVH_XPF=$x timeout 60 .device/muser bench -m "$HOME/full.gguf" --backend cuda \
    -p 0 -n 128 -r 2 > "$out/bench.txt" 2>&1
  echo "XPF=$x: rc=$? $(grep -E "tg128" "$out/bench.txt" | tr -s ' ' | cut -d'(' -f1 | tr '\n' ' ') $(grep -o "mv=[^,]*" "$out/bench.txt" | head -1)" >> "$log"
done
cat "$log"
