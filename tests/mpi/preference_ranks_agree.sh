#!/usr/bin/env bash
# Preference training (training.stage dpo) under mpiexec with 1 and 2 ranks: the reference pass's
# reference_logps.json is byte for byte the same, and so are the final parameters, losses and gradient norms.
# Usage: preference_ranks_agree.sh MEGATRAIN MPIEXEC COMPARE SOURCE_DIR CASE
set -uo pipefail
bin=$1 mpiexec=$2 compare=$3 src=$4 case=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
f=$src/tests/fixtures/preference
for np in 1 2; do
  if ! timeout 120 "$mpiexec" -np $np "$bin" train --config "$f/$case/train.yaml" --set "model.name=$f/model" \
      --set "dataset.dataset_dir=$f/data" --set "training.output_dir=$work/np$np" >"$work/np$np.log" 2>&1; then
    echo "FAIL: mpiexec -np $np exited with $?:"; cat "$work/np$np.log"; exit 1
  fi
  grep -q "host store: .* on $np rank(s)" "$work/np$np.log" || { echo "FAIL: np $np log:"; cat "$work/np$np.log"; exit 1; }
  grep -q "reference pass (the starting weights)" "$work/np$np.log" || { echo "FAIL: no reference pass"; exit 1; }
done
cmp "$work/np1/reference_logps.json" "$work/np2/reference_logps.json" || { echo "FAIL: reference passes differ"; exit 1; }
echo "ok   reference_logps.json bitwise the same with -np 1 and 2"
"$compare" "$work/np1" "$work/np2"
