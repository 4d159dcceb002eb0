#!/usr/bin/env bash
# sbatch slurm/train_120b.sh — full-parameter training on one node: one H200 and 2-3 TB of RAM on two sockets: 120B-class models at 16 B/parameter (1.75 TiB for 120 B); the default config is the mixture of experts GLM-4.5-Air (106.85 B parameters, 13.4 B active: 1592 GiB of store, so at least 1769 GiB of RAM; the preflight refuses smaller nodes, naming the RAM the store needs).
# One task per socket bound to its NUMA domain, one GPU, all the node's memory; requeue-safe: a requeued job
# resumes from the newest checkpoint in $MEGATRAIN_OUTPUT_DIR/checkpoints. Submit from the repository root
# (or set MEGATRAIN_HOME); size other machines with `megatrain calc-resource`.
# Environment (defaults): MEGATRAIN_CONFIG (configs/glm4_5_air.yaml; configs/qwen2_5_72b.yaml for the dense 72B), MEGATRAIN_OUTPUT_DIR (output/$SLURM_JOB_NAME under the
# submit dir; use shared storage), MEGATRAIN_BIN (megatrain on PATH), MEGATRAIN_EXTRA_ARGS, MEGATRAIN_RESUME (auto).
#SBATCH --job-name=megatrain-120b
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --ntasks-per-socket=1
#SBATCH --gpus=1
#SBATCH --mem=0
#SBATCH --exclusive
#SBATCH --time=14-00:00:00
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=megatrain-120b-%j.log
set -euo pipefail
MEGATRAIN_HOME=${MEGATRAIN_HOME:-${SLURM_SUBMIT_DIR:-$PWD}}
export MEGATRAIN_CONFIG=${MEGATRAIN_CONFIG:-$MEGATRAIN_HOME/configs/glm4_5_air.yaml}
export MEGATRAIN_OUTPUT_DIR=${MEGATRAIN_OUTPUT_DIR:-$MEGATRAIN_HOME/output/${SLURM_JOB_NAME:-megatrain-120b}}
source "$MEGATRAIN_HOME/slurm/megatrain_job.sh"
