#!/usr/bin/env bash
# jobs/smoke.sh — a minute-long check that a machine trains: the demo config (tiny random-init model on the CPU
# or GPU) for 20 steps with the NUMA-bound rank layout of the real jobs. Run from the repository root.
# Environment: MEGATRAIN_OUTPUT_DIR (output/smoke), MEGATRAIN_BIN, MEGATRAIN_RANKS, MEGATRAIN_EXTRA_ARGS.
set -euo pipefail
source "${MEGATRAIN_HOME:-$(dirname "$0")/..}/jobs/megatrain_mpirun.sh"
MEGATRAIN_RESUME=${MEGATRAIN_RESUME-} MEGATRAIN_EXTRA_ARGS="--set training.num_steps=20 ${MEGATRAIN_EXTRA_ARGS:-}" \
  megatrain_train configs/demo.yaml smoke
