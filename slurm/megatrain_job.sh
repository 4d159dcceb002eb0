# Sourced by the slurm/train_*.sh batch scripts inside their allocation: starts one megatrain rank per task
# with srun, each bound to its socket's cores and NUMA memory, resuming from the newest checkpoint when the job
# was requeued. Ahead of the time limit (the scripts' `--signal=B:USR1@SECONDS`) or on pre-emption, Slurm signals
# this batch shell: the signal goes on to srun and every rank, the ranks finish their step, write a checkpoint and
# exit with status 75 (megatrain's "stopped for a requeue"), and this script requeues the job, which resumes.
# Invariant: every input comes from environment variables with the defaults the caller set:
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
# A stop signal for this shell goes on to srun, which passes it to every task; srun runs in the background so
# that the shell can take signals while it waits.
srun_pid=
stop_signal=
forward_stop() {
  stop_signal=$1
  echo "megatrain job ${SLURM_JOB_ID:-?}: SIG$1 received; asking every rank to checkpoint and stop"
  [[ -n $srun_pid ]] && kill -USR1 "$srun_pid" 2>/dev/null
  return 0
}
for s in USR1 TERM INT; do trap "forward_stop $s" "$s"; done
srun --mpi="$MEGATRAIN_SRUN_MPI" --kill-on-bad-exit=1 --cpu-bind=verbose,sockets --mem-bind=verbose,local \
  "$MEGATRAIN_BIN" train --config "$MEGATRAIN_CONFIG" \
  --set "training.output_dir=$MEGATRAIN_OUTPUT_DIR" --set "training.resume_from=$MEGATRAIN_RESUME" \
  "${extra_args[@]}" &
srun_pid=$!
[[ -n $stop_signal ]] && kill -USR1 "$srun_pid" 2>/dev/null  # a signal came before srun started
status=0
while kill -0 "$srun_pid" 2>/dev/null; do
  wait "$srun_pid" && status=0 || status=$?  # returns early (>128) when a signal interrupts the wait
done
wait "$srun_pid" && status=0 || status=$?  # the exit status of the finished srun
if [[ $status -eq 75 && -n ${SLURM_JOB_ID:-} ]]; then
  echo "megatrain job $SLURM_JOB_ID: stopped after a checkpoint (status 75); requeueing it to resume"
  scontrol requeue "$SLURM_JOB_ID" && exit 0
  echo "megatrain job $SLURM_JOB_ID: scontrol requeue failed; resubmit the script to resume"
fi
exit "$status"
