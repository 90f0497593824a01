#!/usr/bin/env bash
# First call of a device session: unpack the pinned llama.cpp CUDA build into $HOME/llama and
# start forging the full-size model in a detached session ($HOME/full.gguf; $HOME/forge.done
# when finished), so the following calls (e.g. gemma parts) overlap with it.
set -uo pipefail
mkdir -p $HOME/llama $HOME/g
cp .device/muser $HOME/muser
[ -f $HOME/llama/llama-bench ] || [ -n "$(find $HOME/llama -name llama-bench)" ] || \
  cat .devllama/llama-cuda-sm90.tar.xz.part0* | xz -d | tar x -C $HOME/llama
bash scripts/device/forge-bg.sh $HOME/muser
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv
echo setup done
