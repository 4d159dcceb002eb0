#!/usr/bin/env bash
# `megatrain train` with every layer recomputing (the CPU default), with every layer keeping its activations
# (training.recompute_layers=0) and with a split (1, on 2 ranks): bitwise the same final parameters, losses and
# gradient norms — the config reaches the engine, and saved internals change nothing (DESIGN.md §4).
# Usage: recompute_agrees.sh MEGATRAIN MPIEXEC COMPARE SOURCE_DIR FIXTURE
set -uo pipefail
bin=$1 mpiexec=$2 compare=$3 src=$4 fixture=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
f=$src/tests/fixtures/$fixture
run() {  # name ranks settings...
  local name=$1 np=$2
  shift 2
  timeout 120 "$mpiexec" -np "$np" "$bin" train --config "$f/train.yaml" --set "model.name=$f/model" \
    --set "dataset.dataset_dir=$f/data" --set "training.output_dir=$work/$name" "$@" >"$work/$name.log" 2>&1 ||
    { echo "FAIL: $name exited with $?:"; cat "$work/$name.log"; exit 1; }
  grep -h "memory plan" "$work/$name.log"
}
run all 1
run none 1 --set training.recompute_layers=0 --set training.checkpoint_interval=2
run split 2 --set training.recompute_layers=1
grep -q "0 of .* layers recompute" "$work/none.log" || { echo "FAIL: recompute_layers=0 not planned"; exit 1; }
"$compare" "$work/all" "$work/none" "$work/split"
