#!/usr/bin/env bash
# Checkpoints written in the background (DESIGN.md §6): an -np 2 run saving every 2 steps from snapshots, its
# background writes held back 2 s by a test hook, trains on while they are written (step 3 is logged before the
# step-2 file is complete) and produces checkpoints with the same content (inspect --json) and the same final
# model as the same run saving synchronously. The run's last save (step 6) is synchronous.
# Usage: checkpoint_background.sh MEGATRAIN MPIEXEC COMPARE SOURCE_DIR
set -uo pipefail
bin=$1 mpiexec=$2 compare=$3 src=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HDF5_USE_FILE_LOCKING=FALSE
f=$src/tests/fixtures/llama
train() {  # train OUT [args...]
  local out=$1
  shift
  timeout 120 "$mpiexec" -x HDF5_USE_FILE_LOCKING -x "MEGATRAIN_TEST_SLOW_SAVE=${MEGATRAIN_TEST_SLOW_SAVE:-}" \
    -x "MEGATRAIN_TEST_SYNC_SAVE=${MEGATRAIN_TEST_SYNC_SAVE:-}" \
    -np 2 "$bin" train --config "$f/train.yaml" --set "model.name=$f/model" --set "dataset.dataset_dir=$f/data" \
    --set training.num_steps=6 --set training.save_steps=2 --set "training.output_dir=$out" "$@" >>"$out.log" 2>&1
}
fail() { echo "FAIL: $1"; for l in "$work"/*.log; do echo "== $l"; cat "$l"; done; exit 1; }
state() {  # the content of a checkpoint, without its file name
  "$bin" inspect --json "$1" | grep -v '"file"' || fail "inspect $1"
}

MEGATRAIN_TEST_SLOW_SAVE=2 train "$work/bg" || fail "background run"
MEGATRAIN_TEST_SYNC_SAVE=1 train "$work/sync" || fail "synchronous run"
grep -q "checkpoint step 2: snapshot of .* (the training stall)" "$work/bg.log" || fail "no snapshot line"
grep -q "saved checkpoint .*step-000002.h5 (step 2): .* GB/s (in the background)" "$work/bg.log" ||
  fail "no background save line"
grep -q "checkpoint step 6: saving synchronously (the run's last save" "$work/bg.log" || fail "last save not synchronous"
grep -q "checkpoint step 2: saving synchronously (MEGATRAIN_TEST_SYNC_SAVE)" "$work/sync.log" ||
  fail "the synchronous run did not say so"
grep -q "background" "$work/sync.log" && fail "the synchronous run saved in the background"
step3=$(grep -n "step     3/6" "$work/bg.log" | head -1 | cut -d: -f1)
saved2=$(grep -n "saved checkpoint .*step-000002.h5" "$work/bg.log" | head -1 | cut -d: -f1)
[[ -n $step3 && -n $saved2 && $step3 -lt $saved2 ]] || fail "step 3 did not train while step 2 was written"
for s in 2 4 6; do
  file=checkpoints/step-00000$s.h5
  [[ -f $work/bg/$file && ! -e $work/bg/$file.tmp ]] || fail "background $file missing or left as .tmp"
  [[ "$(state "$work/bg/$file")" == "$(state "$work/sync/$file")" ]] || fail "$file differs (background vs sync)"
done
"$compare" "$work/sync" "$work/bg" || fail "the background run's model differs from the synchronous run's"
sed -n 's/.*\(checkpoint step [0-9]*: snapshot of [^;]*\);.*/\1/p; s/.*\(saved checkpoint .*(in the background)\).*/\1/p' \
  "$work/bg.log"
echo "ok   background saves equal synchronous ones; training went on while they were written"
