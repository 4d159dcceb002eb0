#!/usr/bin/env bash
# `megatrain train` on FP8 block-quantised checkpoints it cannot read exactly (the deepseek_v3_fp8 fixture edited by
# edited_fp8_checkpoint.py): another fmt, block size or activation scheme; a scale tensor missing (for a trained
# tensor and for the carried MTP tensor) or of the wrong shape; an F8 tensor in a model whose config does not say
# fp8; an e4m3 NaN code; an infinite scale: exit status 1, exactly one error line naming the file, the key or tensor
# and the value, and no output_dir. Then calc-resource sizes the FP8 config exactly as the same config unquantised.
# Usage: bad_input_fp8.sh MEGATRAIN_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0

source "$(dirname "$0")/expect_train_failure.sh"

fixture=$src/tests/fixtures/deepseek_v3_fp8
edited() {  # NAME PYTHON-ON-config [EDIT ...]
  local dir=$work/model-$1
  mkdir -p "$dir"
  python3 "$src/tests/cli/edited_fp8_checkpoint.py" "$fixture/model" "$dir" "${@:2}"
  echo "$dir"
}
fx=(--config "$fixture/train.yaml" --set "dataset.dataset_dir=$fixture/data")
q_a=model.layers.0.self_attn.q_a_proj.weight
mtp=model.layers.2.self_attn.kv_a_proj_with_mqa.weight

expect_failure fmt "config.json: key 'quantization_config.fmt' is 'e5m2'; FP8 weights are read as e4m3" \
  "${fx[@]}" --set "model.name=$(edited fmt "config['quantization_config']['fmt'] = 'e5m2'")"
expect_failure block_size "config.json: key 'quantization_config.weight_block_size' is \[64,64\]; FP8 weights are read in blocks of \[128, 128\]" \
  "${fx[@]}" --set "model.name=$(edited block "config['quantization_config']['weight_block_size'] = [64, 64]")"
expect_failure activation_scheme "config.json: key 'quantization_config.activation_scheme' is 'static'" \
  "${fx[@]}" --set "model.name=$(edited scheme "config['quantization_config']['activation_scheme'] = 'static'")"
expect_failure scale_missing "tensor '$q_a' in model.safetensors is F8_E4M3 but its scale '${q_a}_scale_inv' is not found" \
  "${fx[@]}" --set "model.name=$(edited no_scale "pass" "drop=${q_a}_scale_inv")"
expect_failure carried_scale_missing "tensor '$mtp' in model.safetensors is F8_E4M3 but its scale '${mtp}_scale_inv' is not found" \
  "${fx[@]}" --set "model.name=$(edited no_mtp_scale "pass" "drop=${mtp}_scale_inv")"
expect_failure scale_shape "tensor '${q_a}_scale_inv' in model.safetensors has shape \[2, 1\], expected \[1, 2\] (one scale per 128×128 block of '$q_a' \[16, 160\])" \
  "${fx[@]}" --set "model.name=$(edited scale_shape "pass" "shape=${q_a}_scale_inv=[2, 1]")"
expect_failure not_fp8_config "tensor '$mtp' in model.safetensors is F8_E4M3, but config.json has no quantization_config with quant_method fp8" \
  "${fx[@]}" --set "model.name=$(edited unquantised "del config['quantization_config']")"
expect_failure nan_code "model.safetensors: tensor '$q_a' element 5 is the e4m3 NaN code 0xff" \
  "${fx[@]}" --set "model.name=$(edited nan "pass" "bytes=$q_a@5=ff")"
expect_failure infinite_scale "model.safetensors: tensor '${q_a}_scale_inv' element 1 is inf: a block scale must be finite" \
  "${fx[@]}" --set "model.name=$(edited inf "pass" "bytes=${q_a}_scale_inv@4=0000807f")"

# The scales are not parameters: calc-resource's plan of the FP8 config is the unquantised config's, line for line.
plain=$(edited plain "del config['quantization_config']")
sizing=(--seq 64 --gpu-mem 80 --ram 100)
"$bin" calc-resource --model "$fixture/model/config.json" "${sizing[@]}" 2>&1 | sed "s|$fixture/model/config.json|MODEL|" >"$work/fp8.txt"
"$bin" calc-resource --model "$plain/config.json" "${sizing[@]}" 2>&1 | sed "s|$plain/config.json|MODEL|" >"$work/plain.txt"
if grep -q '^host: 16 B/parameter' "$work/fp8.txt" && diff "$work/fp8.txt" "$work/plain.txt" >/dev/null; then
  echo "ok   calc_resource: $(head -1 "$work/fp8.txt")"
else
  echo "FAIL calc_resource:"; diff "$work/fp8.txt" "$work/plain.txt"; cat "$work/fp8.txt"; status=1
fi
exit $status
