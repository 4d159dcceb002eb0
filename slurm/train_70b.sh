#!/usr/bin/env bash
# sbatch slurm/train_70b.sh — full-parameter training on one node: one H200 and 1.5 TB of RAM on two sockets (Llama-3.1-70B: 1.16 TiB host store).
# A node with 512 GB of RAM and NVMe drives: MEGATRAIN_CONFIG=configs/llama3_70b_512g.yaml (store.offload
# optimizer+master: 6 B/parameter of RAM, 12 on NVMe) and MEGATRAIN_OFFLOAD_PATHS=/nvme0/megatrain,/nvme1/megatrain,...
# One task per socket bound to its NUMA domain, one GPU, all the node's memory; requeue-safe: a requeued job
# resumes from the newest checkpoint in $MEGATRAIN_OUTPUT_DIR/checkpoints. Submit from the repository root
# (or set MEGATRAIN_HOME); size other machines with `megatrain calc-resource`.
# Environment (defaults): MEGATRAIN_CONFIG (configs/llama3_70b.yaml), MEGATRAIN_OUTPUT_DIR (output/$SLURM_JOB_NAME under the
# submit dir; use shared storage), MEGATRAIN_BIN (megatrain on PATH), MEGATRAIN_EXTRA_ARGS, MEGATRAIN_RESUME (auto).
#SBATCH --job-name=megatrain-70b
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --ntasks-per-socket=1
#SBATCH --gpus=1
#SBATCH --mem=0
#SBATCH --exclusive
#SBATCH --time=7-00:00:00
#SBATCH --requeue
#SBATCH --signal=B:USR1@600
#SBATCH --open-mode=append
#SBATCH --output=megatrain-70b-%j.log
set -euo pipefail
MEGATRAIN_HOME=${MEGATRAIN_HOME:-${SLURM_SUBMIT_DIR:-$PWD}}
export MEGATRAIN_CONFIG=${MEGATRAIN_CONFIG:-$MEGATRAIN_HOME/configs/llama3_70b.yaml}
export MEGATRAIN_OUTPUT_DIR=${MEGATRAIN_OUTPUT_DIR:-$MEGATRAIN_HOME/output/${SLURM_JOB_NAME:-megatrain-70b}}
source "$MEGATRAIN_HOME/slurm/megatrain_job.sh"
