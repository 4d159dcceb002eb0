#!/usr/bin/env bash
# A rank killed in the middle of training (SIGKILL on rank 1 when it receives step 2, through the test-only
# MEGATRAIN_TEST_DIE_AT_STEP) ends the whole job within seconds, with a message naming rank 1; never a hang. Rank 1
# serves only the optimizer with 2 and 3 ranks, and is the second data-parallel compute rank in the "2dp" case.
# Usage: rank_killed.sh MEGATRAIN MPIEXEC SOURCE_DIR
set -uo pipefail
bin=$1 mpiexec=$2 src=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
f=$src/tests/fixtures/llama
for case in 2 3 2dp; do
  np=${case%dp} extra=() sets=()
  ((np > 2)) && extra=(--oversubscribe)
  [[ $case == *dp ]] && sets=(--set training.gpus_per_node=2)
  start=$SECONDS
  MEGATRAIN_TEST_DIE_AT_STEP=2 timeout 60 "$mpiexec" "${extra[@]}" -x MEGATRAIN_TEST_DIE_AT_STEP -np $np "$bin" train \
    --config "$f/train.yaml" --set "model.name=$f/model" --set "dataset.dataset_dir=$f/data" \
    --set "training.output_dir=$work/out$case" "${sets[@]}" >"$work/log" 2>&1
  rc=$? elapsed=$((SECONDS - start))
  if ((rc == 0 || rc == 124 || elapsed > 30)) || ! grep -q "rank 1 .*signal 9" "$work/log"; then
    echo "FAIL $case: rc=$rc after ${elapsed}s:"; cat "$work/log"; exit 1
  fi
  echo "ok   $case: ended in ${elapsed}s, rc=$rc: $(grep 'rank 1 .*signal 9' "$work/log")"
done
