#!/usr/bin/env bash
# sbatch slurm/train_120b.sh — full-parameter training on one node: one H200, 1.5 TB of RAM on two sockets and NVMe
# drives for the optimizer state (store.offload optimizer: 8 B/parameter of RAM, 8 on NVMe). The default config is the
# mixture of experts GPT-OSS-120B (configs/gpt_oss_120b.yaml: 116.83 B parameters, 5.71 B active; 870 GiB of RAM and
# 870 GiB of NVMe); MEGATRAIN_CONFIG=configs/glm4_5_air.yaml trains GLM-4.5-Air (106.85 B, 13.4 B active),
# configs/mistral_large_123b.yaml is the dense 123 B, configs/qwen2_5_72b.yaml the dense 72 B. Without NVMe, 2-3 TB of
# RAM (16 B/parameter); the preflight refuses a node that lacks it, naming the RAM and NVMe bytes needed.
# One task per socket bound to its NUMA domain, one GPU, all the node's memory; requeue-safe: a requeued job
# resumes from the newest checkpoint in $MEGATRAIN_OUTPUT_DIR/checkpoints. Submit from the repository root
# (or set MEGATRAIN_HOME); size other machines with `megatrain calc-resource`.
# Environment (defaults): MEGATRAIN_CONFIG (configs/gpt_oss_120b.yaml), MEGATRAIN_OFFLOAD_PATHS (the config's
# store.offload_paths: one directory per NVMe device, comma-separated), MEGATRAIN_OUTPUT_DIR (output/$SLURM_JOB_NAME under the
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
#SBATCH --signal=B:USR1@900
#SBATCH --open-mode=append
#SBATCH --output=megatrain-120b-%j.log
set -euo pipefail
MEGATRAIN_HOME=${MEGATRAIN_HOME:-${SLURM_SUBMIT_DIR:-$PWD}}
export MEGATRAIN_CONFIG=${MEGATRAIN_CONFIG:-$MEGATRAIN_HOME/configs/gpt_oss_120b.yaml}
export MEGATRAIN_OUTPUT_DIR=${MEGATRAIN_OUTPUT_DIR:-$MEGATRAIN_HOME/output/${SLURM_JOB_NAME:-megatrain-120b}}
source "$MEGATRAIN_HOME/slurm/megatrain_job.sh"
