#!/usr/bin/env bash
# configs/qwen3_5_27b.yaml needs hybrid attention, which this build lacks: run against a stand-in model directory
# whose config.json names Qwen3.5's architecture, it must fail with one error line naming the unsupported
# architecture, before creating output_dir — never train silently.
# Usage: hybrid_attention_config.sh MEGATRAIN_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$src/configs/models/demo" "$work/model"
sed -i 's/"LlamaForCausalLM"/"Qwen3_5ForConditionalGeneration"/; s/"model_type": "llama"/"model_type": "qwen3_5"/' \
  "$work/model/config.json"
timeout 60 "$bin" train --config "$src/configs/qwen3_5_27b.yaml" --set "model.name=$work/model" \
  --set "dataset.dataset_dir=$src/data" --set "training.output_dir=$work/out" >"$work/log" 2>&1
rc=$?
if ((rc != 1)) || [[ -e $work/out ]] ||
   ! grep -q "^megatrain: error: .*architecture 'Qwen3_5ForConditionalGeneration' is not supported" "$work/log"; then
  echo "FAIL: rc=$rc"; cat "$work/log"; exit 1
fi
echo "ok   $(grep '^megatrain: error: ' "$work/log")"
