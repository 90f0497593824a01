#!/usr/bin/env bash
# MUSER_CUDA_MVH_AHEAD=2 (two weight pieces ahead in registers per f16 matmul chain) against the
# default 1, one call, every line into $OUT/ahead.txt as it comes:
#   1. mvh_persist at 1 and 2 (the launch-boundary experiment's graph figure per layer);
#   2. the same logits bit for bit: `muser eval --route cuda` on the tiny forge (96 tokens, in
#      one chunk — the prefill kernels — and one by one — the decode kernels) at 1 and 2;
#   3. pp512 / tg128 on the full forge (Muser only), 1 and 2 alternating, twice.
# Carry .device/muser, .device/mvh_persist. Usage: bash scripts/device/ahead-ab.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
log=$out/ahead.txt
# The alternating register sets (MUSER_CUDA_MVH_PP, 3 by default since session 39) do not combine
# with this switch: its A/B (both arms, so its baseline is PP=0, not the current default) runs on the
# plain schedule.
export MUSER_CUDA_MVH_PP=0
bash scripts/device/forge-bg.sh
for a in 1 2; do
  MUSER_CUDA_MVH_AHEAD=$a timeout 120 .device/mvh_persist --layers 12 --reps 20 > "$out/persist$a.txt" 2>&1
  echo "AHEAD=$a rc=$? $(grep -E '^(graph|launches|stream/mat) ' "$out/persist$a.txt" | tr -s ' ' | tr '\n' ';')" >> "$log"
done
.device/muser forge --preset tiny --seed 1 -o "$out/tiny.gguf" > /dev/null 2>&1
python3 -c "import json; print(json.dumps([(i * 37 + 11) % 500 + 1 for i in range(96)]))" > "$out/toks.json"
for c in 512 1; do
  for a in 1 2; do
    MUSER_CUDA_MVH_AHEAD=$a timeout 120 .device/muser eval -m "$out/tiny.gguf" --tokens "$out/toks.json" \
      --route cuda --chunk $c --dump-logits "$out/logits$a.f32" > "$out/eval$a.txt" 2>&1
    echo "eval chunk $c AHEAD=$a rc=$? $(sha256sum < "$out/logits$a.f32" | cut -c1-16)" >> "$log"
  done
  cmp -s "$out/logits1.f32" "$out/logits2.f32" && echo "chunk $c: logits identical" >> "$log" \
    || echo "chunk $c: LOGITS DIFFER" >> "$log"
done
rm -f "$out/tiny.gguf"
while [ ! -f "$HOME/forge.done" ]; do sleep 2; done
for a in 1 2 1 2; do
  MUSER_CUDA_MVH_AHEAD=$a timeout 150 .device/muser bench -m "$HOME/full.gguf" --backend cuda \
    -p 512 -n 128 -r 2 > "$out/bench.txt" 2>&1
  echo "AHEAD=$a: rc=$? $(grep -E "pp512|tg128" "$out/bench.txt" | tr -s ' ' | cut -d'(' -f1 | tr '\n' ' ') $(grep -o "mv=[^,]*" "$out/bench.txt" | head -1)" >> "$log"
done
cat "$log"
