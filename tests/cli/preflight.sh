#!/usr/bin/env bash
# `megatrain train` preflight: a model that cannot fit this machine (the Llama-3.1-70B shape, random init) is
# refused before the host store is allocated — exit 1, one error line naming the host-RAM shortfall and the
# calc-resource suggestion, no output directory, well under the time a 1.2 TB allocation would take.
# Usage: preflight.sh MEGATRAIN_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$src/configs/models/demo" "$work/model"
cp "$src/configs/models/llama-3.1-70b.json" "$work/model/config.json"
MEGATRAIN_BACKEND=cpu timeout 60 "$bin" train --config "$src/configs/demo.yaml" --set "model.name=$work/model" \
  --set "dataset.dataset_dir=$src/data" --set "training.output_dir=$work/out" >"$work/log" 2>&1
rc=$?
line=$(grep '^megatrain: error: ' "$work/log")
if ((rc != 1)) || [[ $(grep -c '^megatrain: error: ' "$work/log") -ne 1 ]] || [[ -e $work/out ]] ||
   ! grep -q "host RAM: the run needs .* GiB (16 B/parameter × 70.554 B parameters plus CPU-backend activations) but only .* is available (MemAvailable); size the run with \`megatrain calc-resource --model $work/model --seq 128 --batch 16 --ranks 1" <<<"$line" ||
   grep -q "host store:" "$work/log"; then
  echo "FAIL: rc=$rc:"; cat "$work/log"; exit 1
fi
echo "ok   $line"
