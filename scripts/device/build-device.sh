#!/usr/bin/env bash
# Build here everything a device call runs (the device has no Rust) into the git-ignored
# .device/ folder that `run` carries: the CUDA test executables (build-tests.sh), the muser
# binary, the kernel benchmarks mvb_bench, mmq_bench and mvh_bench and the mvh_persist
# experiment, stripped.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/device/build-tests.sh
cargo build --release -p muser-cli
cargo build --release -p muser-cuda --example mvb_bench --example mmq_bench --example mvh_bench \
  --example mvh_persist
strip -o .device/muser target/release/muser
strip -o .device/mvb_bench target/release/examples/mvb_bench
strip -o .device/mmq_bench target/release/examples/mmq_bench
strip -o .device/mvh_bench target/release/examples/mvh_bench
strip -o .device/mvh_persist target/release/examples/mvh_persist
ls -la .device .device/tests
