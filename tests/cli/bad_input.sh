#!/usr/bin/env bash
# `megatrain train` on bad input: exit status 1, exactly one error line naming the problem, and no output_dir.
# Usage: bad_input.sh MEGATRAIN_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fixture=$src/tests/fixtures/llama
status=0

# expect_failure NAME PATTERN ARGS...: the run fails with one stderr line matching PATTERN, output_dir absent.
expect_failure() {
  local name=$1 pattern=$2
  shift 2
  local out=$work/$name
  "$bin" train "$@" --set "training.output_dir=$out" >"$work/$name.stdout" 2>"$work/$name.stderr"
  local rc=$?
  local errors
  errors=$(grep -c '^megatrain: error: ' "$work/$name.stderr")
  if [[ $rc -ne 1 ]] || [[ $errors -ne 1 ]] || ! grep -q -- "$pattern" "$work/$name.stderr" || [[ -e $out ]]; then
    echo "FAIL $name: rc=$rc, stderr:"; cat "$work/$name.stderr"; status=1
  else
    echo "ok   $name: $(grep '^megatrain: error: ' "$work/$name.stderr")"
  fi
}

base=(--config "$fixture/train.yaml" --set "model.name=$fixture/model" --set "dataset.dataset_dir=$fixture/data")
expect_failure unknown_key "training.batch_sise" "${base[@]}" --set training.batch_sise=4
expect_failure bad_value "lr_scheduler" "${base[@]}" --set training.lr_scheduler=cosin
expect_failure missing_config "nope.yaml" --config "$work/nope.yaml"
expect_failure missing_model "$work/absent" "${base[@]}" --set "model.name=$work/absent"
expect_failure unknown_dataset "nosuch" "${base[@]}" --set dataset.name=nosuch
printf 'model: {name: x\n' >"$work/broken.yaml"
expect_failure yaml_syntax "broken.yaml:" --config "$work/broken.yaml"
exit $status
