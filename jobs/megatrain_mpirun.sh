# Sourced by the jobs/*.sh launchers (one machine, no Slurm): runs `megatrain ARGS...` with one rank per NUMA
# domain (or per GPU where the machine has more GPUs than domains: every GPU gets a rank that drives it), each
# bound to its domain's cores and memory by mpirun (--map-by numa --bind-to numa), and logs the bindings.
# Invariant: every input comes from environment variables with defaults:
#   MEGATRAIN_BIN (megatrain on PATH)   MEGATRAIN_RANKS (max(NUMA domains from lscpu, GPUs from nvidia-smi))
#   MEGATRAIN_MPIRUN (mpirun)             MEGATRAIN_HOME (the repository holding this file)
set -euo pipefail
MEGATRAIN_HOME=${MEGATRAIN_HOME:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
MEGATRAIN_BIN=${MEGATRAIN_BIN:-megatrain}
MEGATRAIN_MPIRUN=${MEGATRAIN_MPIRUN:-mpirun}
if [[ -z ${MEGATRAIN_RANKS:-} ]]; then
  MEGATRAIN_RANKS=$(lscpu -p=NODE 2>/dev/null | grep -v '^#' | sort -u | grep -c . || true)
  ((MEGATRAIN_RANKS > 0)) || MEGATRAIN_RANKS=1
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  if ((${gpus:-0} > MEGATRAIN_RANKS)); then MEGATRAIN_RANKS=$gpus; fi
fi

# A stop signal for this shell (SIGTERM from a scheduler or `kill`, SIGUSR1, Ctrl-C) reaches every rank as SIGUSR1
# through jobs/megatrain-mpirun: the ranks finish their step, write a checkpoint and exit 75, and so does this function.
megatrain_mpirun() {
  echo "megatrain on $(hostname): $MEGATRAIN_RANKS rank(s) over the NUMA domains: $*"
  MEGATRAIN_MPIRUN=$MEGATRAIN_MPIRUN "$MEGATRAIN_HOME/jobs/megatrain-mpirun" -np "$MEGATRAIN_RANKS" --map-by numa \
    --bind-to numa --report-bindings "$MEGATRAIN_BIN" "$@" &
  local pid=$! status=0
  # The launcher turns a stop signal into SIGUSR1 for mpirun; this shell passes on one sent to it.
  for s in USR1 TERM INT; do trap "kill -$s $pid 2>/dev/null" "$s"; done
  while kill -0 "$pid" 2>/dev/null; do
    wait "$pid" && status=0 || status=$?
  done
  wait "$pid" && status=0 || status=$?
  trap - USR1 TERM INT
  return "$status"
}

# train CONFIG_DEFAULT NAME: trains $MEGATRAIN_CONFIG (default CONFIG_DEFAULT) into $MEGATRAIN_OUTPUT_DIR
# (default output/NAME), resuming from its newest checkpoint (MEGATRAIN_RESUME, default auto; set it empty to start afresh).
megatrain_train() {
  local config=${MEGATRAIN_CONFIG:-$MEGATRAIN_HOME/$1} out=${MEGATRAIN_OUTPUT_DIR:-$MEGATRAIN_HOME/output/$2}
  local extra
  read -r -d "" -a extra <<<"${MEGATRAIN_EXTRA_ARGS:-}" || true
  mkdir -p "$out"
  megatrain_mpirun train --config "$config" --set "training.output_dir=$out" \
    --set "training.resume_from=${MEGATRAIN_RESUME-auto}" "${extra[@]}"
}
