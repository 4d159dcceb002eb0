#!/usr/bin/env bash
# Graceful stop (core/stop_signal.h): a run signalled mid-training finishes its step, writes the checkpoint of that
# step, exits with status 75 and writes no final model; resumed with resume_from auto it ends bitwise equal to the
# uninterrupted run (every step's metrics, the final model). On 1 rank (SIGTERM to the process), on 2 ranks
# (SIGUSR1 to mpiexec, which passes it to both; rank 1 serves the optimizer; and SIGTERM to jobs/megatrain-mpirun in
# front of mpiexec, which exits 75 with the ranks) and on 2 data-parallel compute ranks (SIGUSR1), on the README demo. A second signal ends a run at once: SIGTERM and SIGINT both pending while the process is stopped.
# Usage: graceful_stop.sh MEGATRAIN MPIEXEC COMPARE SOURCE_DIR
set -uo pipefail
bin=$1 mpiexec=$2 compare=$3 src=$4
work=$(mktemp -d)
pid=
trap '[[ -n $pid ]] && kill -9 "$pid" 2>/dev/null; rm -rf "$work"' EXIT
export HDF5_USE_FILE_LOCKING=FALSE
steps=8
args() {  # args OUT [more]: the README demo (about 0.2 s a step here), $steps steps, every step logged
  local out=$1
  shift
  echo train --config "$src/configs/demo.yaml" --set "model.name=$src/configs/models/demo" \
    --set "dataset.dataset_dir=$src/data" --set "training.num_steps=$steps" --set training.logging_steps=1 \
    --set "training.output_dir=$out" "$@"
}
fail() { echo "FAIL: $1"; for l in "$work"/*.log; do echo "== $l"; tail -30 "$l"; done; exit 1; }
# shellcheck disable=SC2046
start() {  # start NP OUT [more]: in the background; sets pid (the process or mpiexec)
  local np=$1 out=$2
  shift 2
  if [[ $np -eq 1 ]]; then
    "$bin" $(args "$out" "$@") >>"$out.log" 2>&1 &
  elif [[ -n ${launcher:-} ]]; then  # jobs/megatrain-mpirun in front of mpiexec
    MEGATRAIN_MPIRUN=$mpiexec "$launcher" -x HDF5_USE_FILE_LOCKING -np "$np" "$bin" $(args "$out" "$@") >>"$out.log" 2>&1 &
  else
    "$mpiexec" -x HDF5_USE_FILE_LOCKING -np "$np" "$bin" $(args "$out" "$@") >>"$out.log" 2>&1 &
  fi
  pid=$!
}
wait_steps() {  # wait_steps OUT N: until metrics.jsonl holds N lines (at most 180 s: ranks start slowly on a loaded machine)
  for _ in $(seq 1800); do
    [[ $(cat "$1/metrics.jsonl" 2>/dev/null | wc -l) -ge $2 ]] && return 0
    kill -0 "$pid" 2>/dev/null || fail "$1: the run ended before step $2"
    sleep 0.1
  done
  fail "$1: no step $2 after 180 s"
}
run() {  # run NP OUT [more]: in the foreground
  local np=$1 out=$2
  shift 2
  start "$np" "$out" "$@"
  wait "$pid"
  local rc=$?
  pid=
  return $rc
}

# stop_and_resume NAME NP SIGNAL [more]: signalled after step 3, then resumed with the same ranks, against the
# uninterrupted run on as many ranks (the gradient norm's sum over rank slices is ordered by the ranks).
stop_and_resume() {
  local name=$1 np=$2 sig=$3
  shift 3
  local out=$work/$name ref=$work/${reference:-$name}.ref
  [[ -d $ref ]] || run "$np" "$ref" "$@" || fail "$name: the uninterrupted run"
  start "$np" "$out" "$@"
  wait_steps "$out" 3
  kill "-$sig" "$pid"
  wait "$pid"
  local rc=$?
  pid=
  [[ $rc -eq 75 ]] || fail "$name: exit status $rc after SIG$sig, expected 75"
  local k
  k=$(tail -1 "$out/metrics.jsonl" | sed -E 's/.*"step":([0-9]+).*/\1/')
  (( k >= 3 && k < steps )) || fail "$name: stopped at step $k"
  grep -q "stopped by signal .* after step $k of $steps; checkpoint written" "$out.log" || fail "$name: no stop line"
  [[ -f $out/checkpoints/$(printf 'step-%06d.h5' "$k") ]] || fail "$name: no checkpoint of step $k"
  [[ ! -e $out/final ]] || fail "$name: a stopped run wrote final/"
  run "$np" "$out" --set training.resume_from=auto "$@" || fail "$name: resume"
  grep -q "resuming from .*step-0*$k.h5 at step $k" "$out.log" || fail "$name: did not resume from step $k"
  "$compare" "$ref" "$out" || fail "$name: stopped at step $k and resumed differs from the uninterrupted run"
  echo "ok   $name: SIG$sig after step $k of $steps, exit 75, checkpoint, resumed: bitwise equal to the uninterrupted run"
}
stop_and_resume one_rank 1 TERM
stop_and_resume two_ranks 2 USR1
# SIGTERM, as a scheduler sends it, to jobs/megatrain-mpirun in front of mpiexec: 75 all the same.
launcher=$src/jobs/megatrain-mpirun reference=two_ranks stop_and_resume two_ranks_launcher 2 TERM
stop_and_resume two_compute_ranks 2 USR1 --set training.gpus_per_node=2

# A second signal: both pending while the process is stopped, delivered together; the run ends at once.
out=$work/second
start 1 "$out"
wait_steps "$out" 3
kill -STOP "$pid" && kill -TERM "$pid" && kill -INT "$pid" && kill -CONT "$pid"
wait "$pid"
rc=$?
pid=
[[ $rc -eq 130 || $rc -eq 143 ]] || fail "second signal: exit status $rc, expected death by SIGINT or SIGTERM"
grep -q "second stop signal: ending now" "$out.log" || fail "second signal: no message"
echo "ok   second signal: ended at once (exit status $rc)"
