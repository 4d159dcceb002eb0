#!/usr/bin/env bash
# sbatch slurm/train_deepseek_v3.sh — full-parameter SFT of DeepSeek-V3 (671.03 B parameters, 37.55 B active;
# configs/deepseek_v3.yaml) on one node: one H200, 4.5 TB of RAM on two sockets and 15 TB of NVMe over 4 drives for the
# fp32 master and the Adam moments (store.offload optimizer+master: 6 B/parameter of RAM = 3749.65 GiB, 12 on NVMe =
# 7499.31 GiB; the activation checkpoints, 213.50 GiB, page-locked in RAM). calc-resource predicts 445 s a step at
# batch 64 x 4096 with 50 GB/s of NVMe (322 s of state traffic against 164 s of GPU compute at 450 TFLOP/s; the NVMe
# hidden from batch 504 x 4096). Until MoE layers stream in groups of experts the preflight refuses the H200: one MoE
# layer's weight slots and gradient buffers (135.5 GiB) do not fit beside the rest (see the config's header).
# The config names the hub's FP8 checkpoint (deepseek-ai/DeepSeek-V3 in the Hugging Face cache), dequantised on load:
# no conversion step.
# One task per socket bound to its NUMA domain, one GPU, all the node's memory; requeue-safe: a requeued job resumes
# from the newest checkpoint in $MEGATRAIN_OUTPUT_DIR/checkpoints. Submit from the repository root (or set
# MEGATRAIN_HOME). Environment (defaults): MEGATRAIN_CONFIG (configs/deepseek_v3.yaml), MEGATRAIN_OFFLOAD_PATHS (the
# config's store.offload_paths, comma-separated), MEGATRAIN_OUTPUT_DIR (output/$SLURM_JOB_NAME under the submit dir;
# use shared storage), MEGATRAIN_BIN, MEGATRAIN_EXTRA_ARGS, MEGATRAIN_RESUME (auto).
#SBATCH --job-name=megatrain-deepseek-v3
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --ntasks-per-socket=1
#SBATCH --gpus=1
#SBATCH --mem=0
#SBATCH --exclusive
#SBATCH --time=14-00:00:00
#SBATCH --requeue
#SBATCH --signal=B:USR1@1800
#SBATCH --open-mode=append
#SBATCH --output=megatrain-deepseek-v3-%j.log
set -euo pipefail
MEGATRAIN_HOME=${MEGATRAIN_HOME:-${SLURM_SUBMIT_DIR:-$PWD}}
export MEGATRAIN_CONFIG=${MEGATRAIN_CONFIG:-$MEGATRAIN_HOME/configs/deepseek_v3.yaml}
export MEGATRAIN_OUTPUT_DIR=${MEGATRAIN_OUTPUT_DIR:-$MEGATRAIN_HOME/output/${SLURM_JOB_NAME:-megatrain-deepseek-v3}}
source "$MEGATRAIN_HOME/slurm/megatrain_job.sh"
