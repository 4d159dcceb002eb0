#!/usr/bin/env bash
# Checkpoint files from the command line: `inspect` (text and --json) of a saved checkpoint; a truncated, a
# corrupted and a non-HDF5 file, and a checkpoint of another model shape given to resume_from, each fail with
# exactly one error line and exit status 1; `export` round trip: the exported float32 safetensors equal, byte
# for byte, the final model the run exported from the same parameters; h5ls shows the tree; `train` with a
# checkpoint as model.name starts from its parameters (with lr 0 its final model equals the export).
# Usage: checkpoints.sh MEGATRAIN_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HDF5_USE_FILE_LOCKING=FALSE
status=0
train() {  # train FIXTURE OUT [args...]
  local f=$src/tests/fixtures/$1 out=$2
  shift 2
  "$bin" train --config "$f/train.yaml" --set "model.name=$f/model" --set "dataset.dataset_dir=$f/data" \
    --set training.num_steps=2 --set "training.output_dir=$out" "$@" >"$out.log" 2>&1
}
check() {  # check NAME COMMAND...: the command succeeds
  local name=$1
  shift
  if "$@" >"$work/$name.out" 2>&1; then echo "ok   $name"; else echo "FAIL $name:"; cat "$work/$name.out"; status=1; fi
}
expect_error() {  # expect_error NAME PATTERN ARGS...: exit 1, one error line matching PATTERN
  local name=$1 pattern=$2
  shift 2
  "$bin" "$@" >"$work/$name.stdout" 2>"$work/$name.stderr"
  local rc=$?
  if [[ $rc -ne 1 ]] || [[ $(grep -c '^megatrain: error: ' "$work/$name.stderr") -ne 1 ]] ||
     ! grep -q -- "$pattern" "$work/$name.stderr"; then
    echo "FAIL $name: rc=$rc, stderr:"; cat "$work/$name.stderr"; status=1
  else
    echo "ok   $name: $(grep '^megatrain: error: ' "$work/$name.stderr")"
  fi
}

train llama "$work/llama" || { echo "FAIL train llama:"; cat "$work/llama.log"; exit 1; }
ckpt=$work/llama/checkpoints/step-000002.h5
check inspect_text bash -c "\"$bin\" inspect \"$ckpt\" | grep -q 'step 2, ' && \"$bin\" inspect \"$ckpt\" | grep -q 'model.embed_tokens.weight .*float32'"
check inspect_json bash -c "\"$bin\" inspect --json \"$ckpt\" | grep -q '\"step\": 2'"
check h5ls bash -c "h5ls -r \"$ckpt\" | grep -q '/optim/exp_avg_sq/model.norm.weight' || ! command -v h5ls"

head -c $(($(stat -c %s "$ckpt") / 2)) "$ckpt" >"$work/truncated.h5"
expect_error truncated "truncated.h5" inspect "$work/truncated.h5"
cp "$ckpt" "$work/corrupt.h5"
dd if=/dev/urandom of="$work/corrupt.h5" bs=1 seek=8 count=40 conv=notrunc status=none
expect_error corrupt "corrupt.h5" inspect "$work/corrupt.h5"
echo "not a checkpoint" >"$work/text.h5"
expect_error not_hdf5 "not an HDF5 file" inspect "$work/text.h5"

train qwen2 "$work/qwen2" || { echo "FAIL train qwen2:"; cat "$work/qwen2.log"; exit 1; }
f=$src/tests/fixtures/llama
expect_error other_model "another model" train --config "$f/train.yaml" --set "model.name=$f/model" \
  --set "dataset.dataset_dir=$f/data" --set "training.output_dir=$work/other" \
  --set "training.resume_from=$work/qwen2/checkpoints/step-000002.h5"

check export "$bin" export --checkpoint "$ckpt" --out "$work/exported" --dtype float32
check export_equal cmp "$work/exported/model.safetensors" "$work/llama/final/model.safetensors"
check export_config test -f "$work/exported/config.json"
f=$src/tests/fixtures/llama
"$bin" train --config "$f/train.yaml" --set "model.name=$ckpt" --set "dataset.dataset_dir=$f/data" \
  --set training.num_steps=1 --set training.learning_rate=0 --set "training.output_dir=$work/from_ckpt" \
  >"$work/from_ckpt.log" 2>&1 || { echo "FAIL train from a checkpoint:"; cat "$work/from_ckpt.log"; status=1; }
check from_checkpoint_logged grep -q "initialised the weights from checkpoint .*step-000002.h5" "$work/from_ckpt.log"
check from_checkpoint_equal cmp "$work/exported/model.safetensors" "$work/from_ckpt/final/model.safetensors"
exit $status
