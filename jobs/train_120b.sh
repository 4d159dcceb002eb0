#!/usr/bin/env bash
# jobs/train_120b.sh — what slurm/train_120b.sh does, on one machine without Slurm: one rank per NUMA domain
# (mpirun --map-by numa --bind-to numa), resuming from the newest checkpoint when rerun. Run from the repository
# root. Environment: MEGATRAIN_CONFIG (configs/gpt_oss_120b.yaml, as slurm/train_120b.sh; configs/qwen2_5_72b.yaml is
# the dense 72 B), MEGATRAIN_OUTPUT_DIR (output/train_120b), MEGATRAIN_BIN, MEGATRAIN_RANKS, MEGATRAIN_EXTRA_ARGS,
# MEGATRAIN_RESUME (auto).
set -euo pipefail
source "${MEGATRAIN_HOME:-$(dirname "$0")/..}/jobs/megatrain_mpirun.sh"
megatrain_train configs/gpt_oss_120b.yaml train_120b
