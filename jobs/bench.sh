#!/usr/bin/env bash
# jobs/bench.sh — the GPU streaming benchmark and the optimizer benchmark with the NUMA-bound rank layout
# (docs/PERFORMANCE.md records their figures). Environment: MEGATRAIN_BENCH_MODEL (qwen2.5-3b shape),
# MEGATRAIN_BENCH_BATCH (8), MEGATRAIN_BENCH_SEQ (1024), MEGATRAIN_BIN, MEGATRAIN_RANKS.
set -euo pipefail
source "${MEGATRAIN_HOME:-$(dirname "$0")/..}/jobs/megatrain_mpirun.sh"
"$MEGATRAIN_BIN" bench --model "${MEGATRAIN_BENCH_MODEL:-$MEGATRAIN_HOME/configs/models/qwen2.5-3b.json}" \
  --batch "${MEGATRAIN_BENCH_BATCH:-8}" --seq "${MEGATRAIN_BENCH_SEQ:-1024}" --steps 5
megatrain_mpirun bench-optim --params 2.5e8
