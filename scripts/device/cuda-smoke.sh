#!/usr/bin/env bash
# First light of the CUDA route on the device: forge tiny, run CUDA/CPU/oracle on one prompt,
# compare with `muser parity`, check graph vs eager and serial vs parallel are bit-identical.
# Usage (on the device, repo root): scripts/device/cuda-smoke.sh OUTDIR
set -uo pipefail
OUT=${1:?outdir}
M=.device/muser
W=$HOME/work; mkdir -p $W
[ -f $W/tiny.gguf ] || $M forge --preset tiny --seed 7 -o $W/tiny.gguf >/dev/null
T=.device/tiny-0.tokens.json
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$M eval -m $W/tiny.gguf --tokens $T --route oracle --dump-logits $W/o.f32 -t 16
$M eval -m $W/tiny.gguf --tokens $T --route cpu --dump-logits $W/c.f32 -t 16
$M eval -m $W/tiny.gguf --tokens $T --route cuda --dump-logits $W/g.f32
MUSER_CUDA_SERIAL=1 $M eval -m $W/tiny.gguf --tokens $T --route cuda --dump-logits $W/gs.f32
$M eval -m $W/tiny.gguf --tokens $T --route cuda --chunk 7 --dump-logits $W/g7.f32
N=$(python3 -c "import json;print(len(json.load(open('$T'))))")
$M parity --oracle $W/o.f32 --positions $N --route muser-cuda=$W/g.f32 --route muser-cpu=$W/c.f32 --json $OUT/parity-tiny0.json
sha256sum $W/g.f32 $W/gs.f32 $W/g7.f32
$M generate -m $W/tiny.gguf -p "The quick brown fox" -n 24 --temp 0 --backend cuda --verbose --json > $OUT/gen-graph.json
MUSER_CUDA_GRAPH=0 $M generate -m $W/tiny.gguf -p "The quick brown fox" -n 24 --temp 0 --backend cuda --json > $OUT/gen-eager.json
$M generate -m $W/tiny.gguf -p "The quick brown fox" -n 24 --temp 0 --backend cpu --json > $OUT/gen-cpu.json
python3 - $OUT <<'PY'
import json,sys
o=sys.argv[1]
g=json.load(open(f"{o}/gen-graph.json")); e=json.load(open(f"{o}/gen-eager.json")); c=json.load(open(f"{o}/gen-cpu.json"))
ids=lambda d:[t["id"] for t in d["tokens"]]
lp=lambda d:[t["logprob"] for t in d["tokens"]]
print("graph==eager ids", ids(g)==ids(e), "logprobs", lp(g)==lp(e))
print("graph vs cpu ids", ids(g)==ids(c))
print("timings graph", g["timings"]); print("timings eager", e["timings"])
PY
