#!/usr/bin/env bash
# sbatch --nodes=N slurm/multi_node_template.sh — TEMPLATE for data-parallel training over several nodes (each
# node a full replica: one task per socket, one GPU). This build trains on one node only: megatrain refuses a
# job whose ranks span nodes ("multi-node data parallelism arrives with NCCL") before allocating anything, so
# this script becomes useful once the NCCL gradient all-reduce exists. Same environment as train_7b.sh.
#SBATCH --job-name=megatrain-multinode
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
#SBATCH --ntasks-per-socket=1
#SBATCH --gpus-per-node=1
#SBATCH --mem=0
#SBATCH --exclusive
#SBATCH --time=7-00:00:00
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=megatrain-multinode-%j.log
set -euo pipefail
MEGATRAIN_HOME=${MEGATRAIN_HOME:-${SLURM_SUBMIT_DIR:-$PWD}}
export MEGATRAIN_CONFIG=${MEGATRAIN_CONFIG:-$MEGATRAIN_HOME/configs/llama3_70b.yaml}
export MEGATRAIN_OUTPUT_DIR=${MEGATRAIN_OUTPUT_DIR:-$MEGATRAIN_HOME/output/${SLURM_JOB_NAME:-megatrain-multinode}}
source "$MEGATRAIN_HOME/slurm/megatrain_job.sh"
