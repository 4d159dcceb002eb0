#!/usr/bin/env bash
# sbatch slurm/train_7b.sh — full-parameter training on one node: one H200 and 256 GB of RAM (Qwen2.5-7B: 128 GiB host store).
# One task per socket bound to its NUMA domain, one GPU, all the node's memory; requeue-safe: a requeued job
# resumes from the newest checkpoint in $MEGATRAIN_OUTPUT_DIR/checkpoints. Submit from the repository root
# (or set MEGATRAIN_HOME); size other machines with `megatrain calc-resource`.
# Environment (defaults): MEGATRAIN_CONFIG (configs/qwen_7b.yaml), MEGATRAIN_OUTPUT_DIR (output/$SLURM_JOB_NAME under the
# submit dir; use shared storage), MEGATRAIN_BIN (megatrain on PATH), MEGATRAIN_EXTRA_ARGS, MEGATRAIN_RESUME (auto).
#SBATCH --job-name=megatrain-7b
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --ntasks-per-socket=1
#SBATCH --gpus=1
#SBATCH --mem=0
#SBATCH --exclusive
#SBATCH --time=2-00:00:00
#SBATCH --requeue
#SBATCH --signal=B:USR1@300
#SBATCH --open-mode=append
#SBATCH --output=megatrain-7b-%j.log
set -euo pipefail
MEGATRAIN_HOME=${MEGATRAIN_HOME:-${SLURM_SUBMIT_DIR:-$PWD}}
export MEGATRAIN_CONFIG=${MEGATRAIN_CONFIG:-$MEGATRAIN_HOME/configs/qwen_7b.yaml}
export MEGATRAIN_OUTPUT_DIR=${MEGATRAIN_OUTPUT_DIR:-$MEGATRAIN_HOME/output/${SLURM_JOB_NAME:-megatrain-7b}}
source "$MEGATRAIN_HOME/slurm/megatrain_job.sh"
