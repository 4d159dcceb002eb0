#!/usr/bin/env bash
# `megatrain train` on a tiny fixture under mpiexec with 1, 2 and 3 ranks (3 oversubscribed): bitwise the
# same final parameters and the same losses, gradient norms and skipped steps (DESIGN.md §4).
# Usage: ranks_agree.sh MEGATRAIN MPIEXEC COMPARE SOURCE_DIR FIXTURE [--set k=v ...]
set -uo pipefail
bin=$1 mpiexec=$2 compare=$3 src=$4 fixture=$5
shift 5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
f=$src/tests/fixtures/$fixture
for np in 1 2 3; do
  extra=()
  ((np > 2)) && extra=(--oversubscribe)
  if ! timeout 120 "$mpiexec" "${extra[@]}" -np $np "$bin" train --config "$f/train.yaml" --set "model.name=$f/model" \
      --set "dataset.dataset_dir=$f/data" --set "training.output_dir=$work/np$np" "$@" >"$work/np$np.log" 2>&1; then
    echo "FAIL: mpiexec -np $np exited with $?:"; cat "$work/np$np.log"; exit 1
  fi
  grep -q "host store: .* on $np rank(s)" "$work/np$np.log" || { echo "FAIL: np $np log:"; cat "$work/np$np.log"; exit 1; }
done
grep -h "rank .* on .*: NUMA" "$work/np3.log"
"$compare" "$work/np1" "$work/np2" "$work/np3"
