#!/usr/bin/env bash
# A rank killed in the middle of training (SIGKILL on rank 1 when it receives step 2, through the test-only
# MEGATRAIN_TEST_DIE_AT_STEP) ends the whole job within seconds, with a message naming rank 1; never a hang.
# Usage: rank_killed.sh MEGATRAIN MPIEXEC SOURCE_DIR
set -uo pipefail
bin=$1 mpiexec=$2 src=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
f=$src/tests/fixtures/llama
for np in 2 3; do
  extra=()
  ((np > 2)) && extra=(--oversubscribe)
  start=$SECONDS
  MEGATRAIN_TEST_DIE_AT_STEP=2 timeout 60 "$mpiexec" "${extra[@]}" -x MEGATRAIN_TEST_DIE_AT_STEP -np $np "$bin" train \
    --config "$f/train.yaml" --set "model.name=$f/model" --set "dataset.dataset_dir=$f/data" \
    --set "training.output_dir=$work/out$np" >"$work/log" 2>&1
  rc=$? elapsed=$((SECONDS - start))
  if ((rc == 0 || rc == 124 || elapsed > 30)) || ! grep -q "rank 1 .*signal 9" "$work/log"; then
    echo "FAIL np $np: rc=$rc after ${elapsed}s:"; cat "$work/log"; exit 1
  fi
  echo "ok   np $np: ended in ${elapsed}s, rc=$rc: $(grep 'rank 1 .*signal 9' "$work/log")"
done
