#!/usr/bin/env bash
# Evaluation under MPI: a val_size set evaluated every 2 steps gives the same eval_loss lines (and training) with 1
# compute rank, with 2 compute ranks each evaluating its own batches of the set (sums through MPI; within 1e-5
# relative, the sums run in another order), and bitwise with 2 host-store ranks behind one compute rank.
# Usage: eval_ranks_agree.sh MEGATRAIN MPIEXEC COMPARE SOURCE_DIR FIXTURE
set -uo pipefail
bin=$1 mpiexec=$2 compare=$3 src=$4 fixture=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
f=$src/tests/fixtures/$fixture
export OMP_NUM_THREADS=1
run() {  # name, np, gpus_per_node
  if ! timeout 180 "$mpiexec" --oversubscribe -np "$2" "$bin" train --config "$f/train.yaml" \
      --set "model.name=$f/model" --set "dataset.dataset_dir=$f/data" --set "training.output_dir=$work/$1" \
      --set training.gpus_per_node="$3" --set dataset.val_size=5 --set training.eval_steps=2 \
      --set training.batch_size=4 >"$work/$1.log" 2>&1; then
    echo "FAIL: $1 exited with $?:"; cat "$work/$1.log"; exit 1
  fi
  [[ $(grep -c '"eval_loss"' "$work/$1/metrics.jsonl") -eq 2 ]] || { echo "FAIL: $1 metrics:"; cat "$work/$1/metrics.jsonl"; exit 1; }
}
run one 1 1
run store2 2 1
run dp2 2 2
"$compare" "$work/one" "$work/store2" || exit 1
"$compare" --tolerance 1e-5 "$work/one" "$work/dp2"
