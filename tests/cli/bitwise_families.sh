#!/usr/bin/env bash
# Training on the CPU backend stays bitwise as recorded: the final weights (sha256 of model.safetensors) and the
# logged losses and gradient norms of each run equal those in the reference files. Two records: the four families
# of the layer-kinds refactor (Llama, Qwen2, Qwen3, Mistral) in four variants each, recorded by main before it
# (tests/fixtures/bitwise_before_layer_kinds.txt); and every family fixture (tests/fixtures/*/train.yaml) and every
# preference fixture (tests/fixtures/preference/*/train.yaml) as its train.yaml says, recorded by main before the
# drivers shared one Trainer (tests/fixtures/bitwise_before_trainer.txt). `--record` rewrites both files.
# OpenBLAS picks its sgemm kernels by CPU (FMA kernels on Haswell and later round differently), so the runs pin
# OPENBLAS_CORETYPE to Prescott, an SSE3 kernel every x86-64 CI machine has, with which the references were recorded.
# Usage: bitwise_families.sh <megatrain> <source dir> [--record]
set -euo pipefail
bin=$1 src=$2 mode=${3:-check}
fixtures=$src/tests/fixtures
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The logged curve of metrics.jsonl: "losses" (each step's grad_norm and loss, as the layer-kinds record has them)
# or "metrics" (every logged value but the times: the preference stages' rewards and log-probabilities among them).
curve() {
  if [ "$1" = losses ]; then grep -o '"grad_norm":[^,]*,"loss":[^,]*' "$2"
  else sed -E 's/"(elapsed_s|step_time_s|tokens_per_s)":[^,}]*,?//g' "$2"; fi
}

# train <curve> <fixture> <variant> [--set ...]: one line "fixture variant weights curve" on stdout.
train() {
  local kind=$1 fixture=$2 name=$3
  shift 3
  local fx=$fixtures/$fixture dir=$work/${fixture//\//-}-$name
  OPENBLAS_CORETYPE=Prescott OMP_NUM_THREADS=2 "$bin" train --config "$fx/train.yaml" --set "model.name=$fx/model" \
    --set "dataset.dataset_dir=$fx/data" --set "training.output_dir=$dir" "$@" >"$dir.log" 2>&1 ||
    { cat "$dir.log" >&2; echo "FAIL: $fixture $name did not train" >&2; exit 1; }
  echo "$fixture $name $(sha256sum <"$dir/final/model.safetensors" | cut -d' ' -f1)" \
    "$(curve "$kind" "$dir/metrics.jsonl" | sha256sum | cut -d' ' -f1)"
}

variants=(
  "fp32|"
  "bf16|--set model.dtype=bfloat16"
  "bf16_passes|--set model.dtype=bfloat16 --set training.gradient_accumulation_steps=2 --set training.micro_batch_size=1"
  "fp32_interval2|--set training.checkpoint_interval=2 --set training.recompute_layers=1"
)
for fixture in llama qwen2 qwen3 mistral; do
  for v in "${variants[@]}"; do
    # shellcheck disable=SC2086
    train losses "$fixture" "${v%%|*}" ${v#*|} >>"$work/layer_kinds.txt"
  done
done
for yaml in "$fixtures"/*/train.yaml "$fixtures"/preference/*/train.yaml; do
  fixture=${yaml#"$fixtures/"}
  train metrics "${fixture%/train.yaml}" as_configured >>"$work/trainer.txt"
done

status=0
for record in layer_kinds:bitwise_before_layer_kinds.txt trainer:bitwise_before_trainer.txt; do
  out=$work/${record%%:*}.txt ref=$fixtures/${record#*:}
  if [ "$mode" = --record ]; then
    cp "$out" "$ref"
    echo "recorded $ref"
  elif ! diff "$ref" "$out"; then
    echo "FAIL: training differs from $ref (lines above: fixture variant weights curve)"
    status=1
  else
    echo "PASS: $(wc -l <"$out") runs bitwise as $ref records"
  fi
done
exit $status
