#!/usr/bin/env bash
# training.activation_checkpoints: the demo trained with its checkpoints in host slots (copied out and back through
# two staging buffers) gives the losses, gradient norms and final weights of the run with them in backend memory,
# bitwise; a host placement whose checkpoints do not fit the host RAM is refused before any allocation: exit 1, one
# error line naming the config, the key, the bytes and the RAM available, no output directory.
# Usage: host_checkpoints.sh MEGATRAIN_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
common=(--config "$src/configs/demo.yaml" --set "model.name=$src/configs/models/demo" --set "dataset.dataset_dir=$src/data" --set training.num_steps=3
        --set training.logging_steps=1 --set training.checkpoint_interval=1)
for placement in gpu host; do
  MEGATRAIN_BACKEND=cpu timeout 120 "$bin" train "${common[@]}" --set training.activation_checkpoints=$placement \
    --set "training.output_dir=$work/$placement" >"$work/$placement.log" 2>&1 ||
    { echo "FAIL train with activation_checkpoints $placement"; cat "$work/$placement.log"; exit 1; }
  grep -o '"grad_norm":[^,]*,"loss":[^,]*' "$work/$placement/metrics.jsonl" >"$work/$placement.losses"
done
if [[ $(wc -l <"$work/host.losses") -ne 3 ]] || ! cmp -s "$work/gpu.losses" "$work/host.losses" ||
   ! cmp -s "$work/gpu/final/model.safetensors" "$work/host/final/model.safetensors"; then
  echo "FAIL host checkpoints train differently"; paste "$work/gpu.losses" "$work/host.losses"; status=1
else
  echo "ok   host checkpoints: the same 3 losses, gradient norms and final weights"
fi
grep -q "activation checkpoints in host slots" "$work/host.log" || { echo "FAIL no host placement logged"; status=1; }

# 4 checkpoints of 10 000 000 × 128 tokens × 128 × 4 B: far beyond any test machine's RAM.
MEGATRAIN_BACKEND=cpu timeout 60 "$bin" train "${common[@]}" --set training.activation_checkpoints=host \
  --set training.batch_size=10000000 --set "training.output_dir=$work/big" >"$work/big.log" 2>&1
rc=$?
line=$(grep '^megatrain: error: ' "$work/big.log")
if ((rc != 1)) || [[ $(grep -c '^megatrain: error: ' "$work/big.log") -ne 1 ]] || [[ -e $work/big ]] ||
   ! grep -q "demo.yaml: training.activation_checkpoints host: the activation checkpoints in host RAM take 1220.70 GiB (4 checkpoints of 1280000000 tokens at checkpoint_interval 1), .* GiB with the rest of the run, but .* of host RAM is available (MemAvailable)" <<<"$line"; then
  echo "FAIL: rc=$rc:"; cat "$work/big.log"; status=1
else
  echo "ok   $line"
fi
exit $status
