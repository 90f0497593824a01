#!/usr/bin/env bash
# Run the CUDA tests on the GPU machine (executables from scripts/device/build-tests.sh).
set -uo pipefail
rc=0
for t in .device/tests/*; do
  echo "== $t"
  "$t" --test-threads 1 --nocapture 2>&1 || rc=1
done
exit $rc
