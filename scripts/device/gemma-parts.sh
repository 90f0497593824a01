#!/usr/bin/env bash
# The real gemma-3-270m (253 MB) does not fit one device call's 64 MiB carry. Split it here into
# 60 MB parts under .devgemma/ (git-ignored), then make back-to-back `run` calls — each within
# the 30 s the machine stays warm — carrying one part each:
#   call i:  carry [".devgemma/gemma.partNN"], command: mkdir -p $HOME/g && cp .devgemma/gemma.part* $HOME/g/
#   last:    carry [".device", ".devllama"], command:
#            cat $HOME/g/gemma.part* > $HOME/gemma.gguf && sha256sum $HOME/gemma.gguf && \
#            FIXTURES=gemma GEMMA=$HOME/gemma.gguf scripts/device/cuda-issue4.sh $OUT parity
# Expected SHA-256: a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818.
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.devgemma/' .git/info/exclude 2>/dev/null || echo '/.devgemma/' >> .git/info/exclude
MODEL=$(scripts/fetch-default-model.sh)
mkdir -p .devgemma
split -b 60000000 -d "$MODEL" .devgemma/gemma.part
ls -la .devgemma
