#!/usr/bin/env bash
# A learning rate that blows the weights up makes the gradient norm non-finite: the step is skipped and
# logged on every rank (never applied), identically with 1, 2 and 3 ranks.
# Usage: skipped_step.sh MEGATRAIN MPIEXEC COMPARE SOURCE_DIR
set -uo pipefail
bin=$1 mpiexec=$2 compare=$3 src=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
f=$src/tests/fixtures/qwen2
for np in 1 2 3; do
  extra=()
  ((np > 2)) && extra=(--oversubscribe)
  timeout 120 "$mpiexec" "${extra[@]}" -np $np "$bin" train --config "$f/train.yaml" --set "model.name=$f/model" \
    --set "dataset.dataset_dir=$f/data" --set "training.output_dir=$work/np$np" --set training.learning_rate=1e38 \
    --set training.max_grad_norm=0 >"$work/np$np.log" 2>&1 || { echo "FAIL np $np:"; cat "$work/np$np.log"; exit 1; }
  grep -q "gradient norm is not finite; update skipped" "$work/np$np.log" || { echo "FAIL: no skip logged (np $np):"; cat "$work/np$np.log"; exit 1; }
  grep -q '"skipped":true' "$work/np$np/metrics.jsonl" || { echo "FAIL: no skipped step in metrics (np $np)"; exit 1; }
done
"$compare" "$work/np1" "$work/np2" "$work/np3"
