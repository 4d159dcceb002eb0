#!/usr/bin/env bash
# Checkpoints resume bitwise (DESIGN.md §6): 6 steps uninterrupted equal the same run cut short and resumed
# with `training.resume_from: auto` — final parameters, losses, gradient norms and the step-6 checkpoint's
# optimizer state. Cut short twice: rank 1 killed at step 4 of an -np 2 run (saved every 3 steps; resumed
# with -np 1), and rank 0 killed by SIGKILL inside the step-4 save, between writing the .tmp and renaming it,
# of an -np 1 run (saved every 2 steps; the step-2 file must survive intact; resumed with -np 2).
# Usage: checkpoint_resume.sh MEGATRAIN MPIEXEC COMPARE SOURCE_DIR
set -uo pipefail
bin=$1 mpiexec=$2 compare=$3 src=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HDF5_USE_FILE_LOCKING=FALSE
f=$src/tests/fixtures/llama
train() {  # train NP OUT [args...]
  local np=$1 out=$2
  shift 2
  timeout 120 "$mpiexec" -x HDF5_USE_FILE_LOCKING -x "MEGATRAIN_TEST_DIE_AT_STEP=${MEGATRAIN_TEST_DIE_AT_STEP:-}" \
    -x "MEGATRAIN_TEST_KILL_IN_SAVE=${MEGATRAIN_TEST_KILL_IN_SAVE:-}" \
    -np "$np" "$bin" train --config "$f/train.yaml" --set "model.name=$f/model" --set "dataset.dataset_dir=$f/data" \
    --set training.num_steps=6 --set "training.output_dir=$out" "$@" >>"$out.log" 2>&1
}
fail() { echo "FAIL: $1"; for l in "$work"/*.log; do echo "== $l"; cat "$l"; done; exit 1; }
state() {  # the optimizer state and parameters of a checkpoint, without its file name
  "$bin" inspect --json "$1" | grep -v '"file"' || fail "inspect $1"
}
same_as_ref() {  # same_as_ref RUN WHAT: final model, metrics and the step-6 checkpoint bitwise the reference's
  "$compare" "$work/ref" "$work/$1" || fail "$2 differs from the reference"
  [[ "$(state "$work/ref/checkpoints/step-000006.h5")" == "$(state "$work/$1/checkpoints/step-000006.h5")" ]] ||
    fail "step-6 optimizer state differs ($2)"
}

train 1 "$work/ref" --set training.save_steps=3 || fail "reference run"
[[ -f $work/ref/checkpoints/step-000003.h5 && -f $work/ref/checkpoints/step-000006.h5 ]] || fail "reference checkpoints"
grep -q "saved checkpoint .* GB/s" "$work/ref.log" || fail "no save bandwidth in the log"

MEGATRAIN_TEST_DIE_AT_STEP=4 train 2 "$work/killed" --set training.save_steps=3 && fail "the np 2 run was not killed"
[[ -f $work/killed/checkpoints/step-000003.h5 ]] || fail "no step-3 checkpoint of the killed run"
train 1 "$work/killed" --set training.save_steps=3 --set training.resume_from=auto || fail "resume -np 1"
grep -q "resuming from .*step-000003.h5 at step 3" "$work/killed.log" || fail "did not resume from step 3"
same_as_ref killed "np 2 + resume np 1"
echo "ok   saved with -np 2, killed at step 4, resumed with -np 1: bitwise equal"

MEGATRAIN_TEST_KILL_IN_SAVE=4 train 1 "$work/cut" --set training.save_steps=2 && fail "the save was not killed"
[[ -f $work/cut/checkpoints/step-000004.h5.tmp && ! -e $work/cut/checkpoints/step-000004.h5 ]] ||
  fail "expected step-000004.h5.tmp only: $(ls "$work/cut/checkpoints")"
"$bin" inspect "$work/cut/checkpoints/step-000002.h5" >/dev/null || fail "step-2 checkpoint damaged"
train 2 "$work/cut" --set training.save_steps=2 --set training.resume_from=auto || fail "resume -np 2"
grep -q "resuming from .*step-000002.h5 at step 2" "$work/cut.log" || fail "did not resume from step 2"
same_as_ref cut "killed save + resume np 2"
echo "ok   killed inside the step-4 save: step 2 intact, resumed with -np 2: bitwise equal"
