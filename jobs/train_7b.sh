#!/usr/bin/env bash
# jobs/train_7b.sh — what slurm/train_7b.sh does, on one machine without Slurm: one rank per NUMA domain
# (mpirun --map-by numa --bind-to numa), resuming from the newest checkpoint when rerun. Run from the repository
# root. Environment: MEGATRAIN_CONFIG (configs/qwen_7b.yaml), MEGATRAIN_OUTPUT_DIR (output/train_7b), MEGATRAIN_BIN,
# MEGATRAIN_RANKS, MEGATRAIN_EXTRA_ARGS, MEGATRAIN_RESUME (auto).
set -euo pipefail
source "${MEGATRAIN_HOME:-$(dirname "$0")/..}/jobs/megatrain_mpirun.sh"
megatrain_train configs/qwen_7b.yaml train_7b
