#!/usr/bin/env bash
# Today's four families (Llama, Qwen2, Qwen3, Mistral) train bitwise as they did before the layer-kinds refactor:
# the final weights (sha256 of model.safetensors) and the logged losses and gradient norms of each run equal those
# the previous main recorded in tests/fixtures/bitwise_before_layer_kinds.txt. `--record` rewrites that file.
# OpenBLAS picks its sgemm kernels by CPU (FMA kernels on Haswell and later round differently), so the runs pin
# OPENBLAS_CORETYPE to Prescott, an SSE3 kernel every x86-64 CI machine has, with which the reference was recorded.
# Usage: bitwise_families.sh <megatrain> <source dir> [--record]
set -euo pipefail
bin=$1 src=$2 mode=${3:-check}
ref=$src/tests/fixtures/bitwise_before_layer_kinds.txt
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

variants=(
  "fp32|"
  "bf16|--set model.dtype=bfloat16"
  "bf16_passes|--set model.dtype=bfloat16 --set training.gradient_accumulation_steps=2 --set training.micro_batch_size=1"
  "fp32_interval2|--set training.checkpoint_interval=2 --set training.recompute_layers=1"
)
out=$work/result.txt
for case in llama qwen2 qwen3 mistral; do
  fx=$src/tests/fixtures/$case
  for v in "${variants[@]}"; do
    name=${v%%|*} args=${v#*|}
    dir=$work/$case-$name
    # shellcheck disable=SC2086
    OPENBLAS_CORETYPE=Prescott OMP_NUM_THREADS=2 "$bin" train --config "$fx/train.yaml" --set "model.name=$fx/model" \
      --set "dataset.dataset_dir=$fx/data" --set "training.output_dir=$dir" $args >"$dir.log" 2>&1 ||
      { cat "$dir.log"; echo "FAIL: $case $name did not train"; exit 1; }
    weights=$(sha256sum "$dir/final/model.safetensors" | cut -d' ' -f1)
    curve=$(grep -o '"grad_norm":[^,]*,"loss":[^,]*' "$dir/metrics.jsonl" | sha256sum | cut -d' ' -f1)
    echo "$case $name $weights $curve" >>"$out"
  done
done
if [ "$mode" = --record ]; then
  cp "$out" "$ref"
  echo "recorded $ref"
  exit 0
fi
if ! diff "$ref" "$out"; then
  echo "FAIL: training differs from the recorded bitwise reference (lines above: case variant weights curve)"
  exit 1
fi
echo "PASS: $(wc -l <"$out") runs bitwise as recorded"
