#!/usr/bin/env bash
# sbatch --nodes=N slurm/multi_node_template.sh — data-parallel training over several nodes with several GPUs:
# each node holds a full replica of the host store (one task per socket, bound to it); the first
# training.gpus_per_node tasks of each node (auto: one per visible GPU, up to the node's tasks) each drive one
# GPU on their share of the global batch, and layer gradients are summed over every GPU with NCCL before they
# leave it. Adjust --nodes, --gpus-per-node and --ntasks-per-node (at least one task per GPU; with more GPUs than
# sockets use --ntasks-per-node=GPUS without --ntasks-per-socket). batch_size is the global batch over every
# GPU. Needs a shared filesystem for the config, data and output. Same environment as train_7b.sh.
#SBATCH --job-name=megatrain-multinode
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
#SBATCH --ntasks-per-socket=1
#SBATCH --gpus-per-node=2
#SBATCH --mem=0
#SBATCH --exclusive
#SBATCH --time=7-00:00:00
#SBATCH --requeue
#SBATCH --signal=B:USR1@900
#SBATCH --open-mode=append
#SBATCH --output=megatrain-multinode-%j.log
set -euo pipefail
MEGATRAIN_HOME=${MEGATRAIN_HOME:-${SLURM_SUBMIT_DIR:-$PWD}}
export MEGATRAIN_CONFIG=${MEGATRAIN_CONFIG:-$MEGATRAIN_HOME/configs/llama3_70b.yaml}
export MEGATRAIN_OUTPUT_DIR=${MEGATRAIN_OUTPUT_DIR:-$MEGATRAIN_HOME/output/${SLURM_JOB_NAME:-megatrain-multinode}}
source "$MEGATRAIN_HOME/slurm/megatrain_job.sh"
