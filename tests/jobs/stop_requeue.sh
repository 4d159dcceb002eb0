#!/usr/bin/env bash
# Signals end to end (core/stop_signal.h, jobs/megatrain_mpirun.sh): jobs/train_7b.sh, run from another directory
# with 2 ranks under mpirun, takes SIGTERM as a scheduler sends it, every rank checkpoints, and the script exits 75;
# run again (the requeue) it resumes from that checkpoint and finishes. A second SIGTERM while the stop's checkpoint
# is being written ends the process at once and removes the partial .tmp.
# Usage: stop_requeue.sh MEGATRAIN MPIEXEC SOURCE_DIR
set -uo pipefail
bin=$1 mpiexec=$2 src=$3
work=$(mktemp -d)
pid=
trap '[[ -n $pid ]] && kill -9 "$pid" 2>/dev/null; rm -rf "$work"' EXIT
export HDF5_USE_FILE_LOCKING=FALSE
fail() { echo "FAIL: $1"; tail -n 20 "$work/log"; exit 1; }
wait_steps() {  # wait_steps OUT N
  for _ in $(seq 1800); do
    [[ $(cat "$1/metrics.jsonl" 2>/dev/null | wc -l) -ge $2 ]] && return 0
    kill -0 "$pid" 2>/dev/null || fail "the run ended before step $2"
    sleep 0.1
  done
  fail "no step $2 after 180 s"
}
demo="--set model.name=$src/configs/models/demo --set dataset.dataset_dir=$src/data --set dataset.max_seq_len=32
      --set training.batch_size=4 --set training.num_steps=30 --set training.logging_steps=1"

mkdir -p "$work/elsewhere" && cd "$work/elsewhere" || exit 1
export MEGATRAIN_BIN=$bin MEGATRAIN_MPIRUN=$mpiexec MEGATRAIN_RANKS=2 MEGATRAIN_CONFIG=$src/configs/demo.yaml \
  MEGATRAIN_OUTPUT_DIR=$work/out MEGATRAIN_EXTRA_ARGS=$demo
bash "$src/jobs/train_7b.sh" >"$work/log" 2>&1 &
pid=$!
wait_steps "$work/out" 2
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=
[[ $rc -eq 75 ]] || fail "jobs/train_7b.sh after SIGTERM: exit status $rc, expected 75"
k=$(tail -1 "$work/out/metrics.jsonl" | sed -E 's/.*"step":([0-9]+).*/\1/')
[[ -f $work/out/checkpoints/$(printf 'step-%06d.h5' "$k") && ! -e $work/out/final ]] || fail "no checkpoint of step $k, or a final/"
bash "$src/jobs/train_7b.sh" >"$work/log" 2>&1 || fail "the requeued job (rc=$?)"
grep -q "resuming from .*step-0*$k.h5 at step $k" "$work/log" || fail "the requeued job did not resume from step $k"
[[ -f $work/out/final/model.safetensors && $(grep -c '"step"' "$work/out/metrics.jsonl") -eq 30 ]] || fail "the requeued job did not finish"
echo "ok   jobs/train_7b.sh, 2 ranks: SIGTERM after step $k, exit 75, requeued: resumed and finished"

# A second SIGTERM while the stop's checkpoint is written (held before its rename by a test hook).
MEGATRAIN_TEST_SLOW_RENAME=30 "$bin" train --config "$src/configs/demo.yaml" $demo --set "training.output_dir=$work/second" \
  >"$work/log" 2>&1 &
pid=$!
wait_steps "$work/second" 2
kill -TERM "$pid"
for _ in $(seq 600); do ls "$work/second/checkpoints" 2>/dev/null | grep -q '\.tmp$' && break; sleep 0.1; done
ls "$work/second/checkpoints" | grep -q '\.tmp$' || fail "no .tmp while the stop's checkpoint is written"
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=
[[ $rc -eq 143 ]] || fail "a second SIGTERM during the save: exit status $rc, expected 143"
grep -q "removed the partial checkpoint .*\.tmp" "$work/log" || fail "no line about the partial checkpoint"
[[ -z $(ls -A "$work/second/checkpoints") ]] || fail "left $(ls -A "$work/second/checkpoints")"
echo "ok   second SIGTERM during the save: ended at once, the partial .tmp removed"
