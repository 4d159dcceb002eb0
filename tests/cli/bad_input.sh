#!/usr/bin/env bash
# `megatrain train` on bad input: exit status 1, exactly one error line naming the problem, and no output_dir.
# Usage: bad_input.sh MEGATRAIN_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fixture=$src/tests/fixtures/llama
status=0

source "$(dirname "$0")/expect_train_failure.sh"

base=(--config "$fixture/train.yaml" --set "model.name=$fixture/model" --set "dataset.dataset_dir=$fixture/data")
expect_failure unknown_key "training.batch_sise" "${base[@]}" --set training.batch_sise=4
expect_failure bad_value "lr_scheduler" "${base[@]}" --set training.lr_scheduler=cosin
expect_failure missing_config "nope.yaml" --config "$work/nope.yaml"
expect_failure missing_model "$work/absent" "${base[@]}" --set "model.name=$work/absent"
expect_failure unknown_dataset "nosuch" "${base[@]}" --set dataset.name=nosuch
expect_failure beyond_positions "dataset.max_seq_len 128 exceeds the 64 positions of model $fixture/model (max_position_embeddings 64)" \
  "${base[@]}" --set dataset.max_seq_len=128
printf 'model: {name: x\n' >"$work/broken.yaml"
expect_failure yaml_syntax "broken.yaml:" --config "$work/broken.yaml"

# The layer-kinds families: a copy of a fixture model with one field or tensor broken.
broken_model() {  # NAME FIXTURE PYTHON-EXPRESSION-ON-config: a model dir whose config.json is edited
  local dir=$work/model-$1
  mkdir -p "$dir" && cp "$src/tests/fixtures/$2/model/model.safetensors" "$dir/"
  CONFIG="$src/tests/fixtures/$2/model/config.json" OUT="$dir/config.json" python3 -c "
import json, os
config = json.load(open(os.environ['CONFIG']))
$3
json.dump(config, open(os.environ['OUT'], 'w'))"
  echo "$dir"
}
fx() { echo --config "$src/tests/fixtures/$1/train.yaml" --set "dataset.dataset_dir=$src/tests/fixtures/$1/data"; }
# shellcheck disable=SC2046
expect_failure remote_code_without_flag "model.trust_remote_code: true" $(fx internlm2) \
  --set "model.name=$src/tests/fixtures/internlm2/model" --set model.trust_remote_code=false
# shellcheck disable=SC2046
expect_failure layer_types_length "'layer_types' must list 4 layer types" $(fx gemma3) \
  --set "model.name=$(broken_model layer_types gemma3 "config['layer_types'] = config['layer_types'][:3]")"
# shellcheck disable=SC2046
expect_failure heads_not_dividing "num_attention_heads (4) is not a multiple of num_key_value_heads (3)" $(fx phi3) \
  --set "model.name=$(broken_model heads phi3 "config['num_key_value_heads'] = 3")"
# shellcheck disable=SC2046
expect_failure fused_tensor_shape "qkv_proj.weight' in model.safetensors has shape" $(fx phi3) \
  --set "model.name=$(broken_model shape phi3 "config['num_key_value_heads'] = 4")"
# The hybrid linear-attention family (Qwen3.5).
# shellcheck disable=SC2046
expect_failure hybrid_layer_type "'layer_types' entry 1 must be linear_attention or full_attention" $(fx qwen3_5) \
  --set "model.name=$(broken_model hybrid_type qwen3_5 "config['layer_types'][1] = 'mamba'")"
# shellcheck disable=SC2046
expect_failure hybrid_heads "'linear_num_value_heads' (3) is not a multiple of linear_num_key_heads (2)" $(fx qwen3_5) \
  --set "model.name=$(broken_model hybrid_heads qwen3_5 "config['linear_num_value_heads'] = 3")"
# The LayerNorm families (StarCoder2, Cohere, Cohere2).
# shellcheck disable=SC2046
expect_failure logit_scale "key 'logit_scale' must be a positive number, got -1" $(fx cohere) \
  --set "model.name=$(broken_model logit_scale cohere "config['logit_scale'] = -1")"
# shellcheck disable=SC2046
expect_failure window_pattern "key 'sliding_window_pattern' must be positive, got 0" $(fx cohere2) \
  --set "model.name=$(broken_model window_pattern cohere2 \
    "config.pop('layer_types'); config['sliding_window_pattern'] = 0")"
# shellcheck disable=SC2046
expect_failure norm_epsilon "key 'norm_epsilon' must be positive" $(fx starcoder2) \
  --set "model.name=$(broken_model norm_epsilon starcoder2 "config['norm_epsilon'] = 0")"
exit $status
