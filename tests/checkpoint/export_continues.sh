#!/usr/bin/env bash
# The PyTorch-parity fixtures continue from an exported model: a checkpoint of the llama fixture taken after one
# step at learning rate 0 (parameters unchanged), exported as float32, trains exactly as the fixture itself —
# bitwise the same losses and final parameters, so the parity test's PyTorch comparison carries over.
# Usage: export_continues.sh MEGATRAIN MPIEXEC COMPARE SOURCE_DIR
set -uo pipefail
bin=$1 compare=$3 src=$4
fixture=$src/tests/fixtures/llama
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
train() {  # output dir, model, extra args...
  local out=$1 model=$2
  shift 2
  "$bin" train --config "$fixture/train.yaml" --set "model.name=$model" --set "dataset.dataset_dir=$fixture/data" \
    --set "training.output_dir=$out" "$@" >"$out.log" 2>&1 || { echo "FAIL: train $out"; cat "$out.log"; exit 1; }
}
train "$work/step0" "$fixture/model" --set training.learning_rate=0 --set training.num_steps=1
"$bin" export --checkpoint "$work/step0/checkpoints/step-000001.h5" --out "$work/exported" --dtype float32 \
  >"$work/export.log" 2>&1 || { echo "FAIL: export"; cat "$work/export.log"; exit 1; }
train "$work/direct" "$fixture/model"
train "$work/from_export" "$work/exported"
"$compare" "$work/direct" "$work/from_export" || exit 1
echo "ok: the fixture trained from its exported checkpoint equals the fixture itself"
