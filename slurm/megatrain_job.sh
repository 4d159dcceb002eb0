# Sourced by the slurm/train_*.sh batch scripts inside their allocation: starts one megatrain rank per task
# with srun, each bound to its socket's cores and NUMA memory, resuming from the newest checkpoint when the job
# was requeued. Invariant: every input comes from environment variables with the defaults the caller set:
#   MEGATRAIN_CONFIG      run config (YAML)                      MEGATRAIN_OUTPUT_DIR  metrics, checkpoints, final/
#   MEGATRAIN_BIN         the megatrain binary                   MEGATRAIN_RESUME      training.resume_from (auto)
#   MEGATRAIN_EXTRA_ARGS  more `megatrain train` arguments, e.g. "--set training.num_steps=10"
#   MEGATRAIN_SRUN_MPI    srun's --mpi plugin (pmix: Open MPI's PMIx)
#   MEGATRAIN_OFFLOAD_PATHS  store.offload_paths for this node (comma-separated; the config's otherwise)
set -euo pipefail
: "${MEGATRAIN_CONFIG:?set MEGATRAIN_CONFIG to a run config}"
: "${MEGATRAIN_OUTPUT_DIR:?set MEGATRAIN_OUTPUT_DIR to shared storage}"
MEGATRAIN_BIN=${MEGATRAIN_BIN:-megatrain}
MEGATRAIN_RESUME=${MEGATRAIN_RESUME:-auto}
MEGATRAIN_SRUN_MPI=${MEGATRAIN_SRUN_MPI:-pmix}
read -r -d "" -a extra_args <<<"${MEGATRAIN_EXTRA_ARGS:-}" || true  # words over any lines
# The NVMe state tier's directories (store.offload_paths), when the node's differ from the config's.
[[ -n ${MEGATRAIN_OFFLOAD_PATHS:-} ]] && extra_args=(--set "store.offload_paths=$MEGATRAIN_OFFLOAD_PATHS" "${extra_args[@]}")

mkdir -p "$MEGATRAIN_OUTPUT_DIR"
echo "megatrain job ${SLURM_JOB_ID:-?} on $(hostname): ${SLURM_NTASKS:-1} task(s), restart ${SLURM_RESTART_COUNT:-0}," \
     "config $MEGATRAIN_CONFIG, output $MEGATRAIN_OUTPUT_DIR, resume_from=$MEGATRAIN_RESUME"
# One task per socket (--ntasks-per-socket=1 in the header), its CPUs and memory in that NUMA domain; 'verbose'
# logs each task's mask. Each rank runs one OpenMP thread per core of its domain.
export OMP_PROC_BIND=${OMP_PROC_BIND:-close}
srun --mpi="$MEGATRAIN_SRUN_MPI" --kill-on-bad-exit=1 --cpu-bind=verbose,sockets --mem-bind=verbose,local \
  "$MEGATRAIN_BIN" train --config "$MEGATRAIN_CONFIG" \
  --set "training.output_dir=$MEGATRAIN_OUTPUT_DIR" --set "training.resume_from=$MEGATRAIN_RESUME" \
  "${extra_args[@]}"
