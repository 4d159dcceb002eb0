#!/usr/bin/env bash
# jobs/smoke.sh — a minute-long check that a machine trains: the demo config (tiny random-init model on the CPU
# or GPU) for 20 steps with the NUMA-bound rank layout of the real jobs, from any directory (the demo model and data
# of MEGATRAIN_HOME), starting over in its output directory each time.
# Environment: MEGATRAIN_OUTPUT_DIR (output/smoke), MEGATRAIN_BIN, MEGATRAIN_RANKS, MEGATRAIN_EXTRA_ARGS.
set -euo pipefail
source "${MEGATRAIN_HOME:-$(dirname "$0")/..}/jobs/megatrain_mpirun.sh"
MEGATRAIN_RESUME=${MEGATRAIN_RESUME-} MEGATRAIN_EXTRA_ARGS="--set training.num_steps=20 --set training.overwrite_output_dir=true
  --set model.name=$MEGATRAIN_HOME/configs/models/demo --set dataset.dataset_dir=$MEGATRAIN_HOME/data ${MEGATRAIN_EXTRA_ARGS:-}" \
  megatrain_train configs/demo.yaml smoke
