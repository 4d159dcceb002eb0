#!/usr/bin/env bash
# `megatrain train` on bad multi-head latent attention configs: an odd qk_rope_head_dim, n_group not dividing the
# experts, an unknown topk_method, a rope type we do not implement, kv_lora_rank missing, num_key_value_heads other
# than the heads: exit status 1, exactly one error line naming the file, the key and the value, and no output_dir.
# (FP8 checkpoints: bad_input_fp8.sh.)
# Usage: bad_input_mla.sh MEGATRAIN_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0

source "$(dirname "$0")/expect_train_failure.sh"

# A model directory beside fixture FIXTURE's: its weights linked, config.json edited by a Python statement on `config`.
edited_model() {  # NAME FIXTURE PYTHON-ON-config
  local dir=$work/model-$1
  mkdir -p "$dir"
  ln -s "$src/tests/fixtures/$2/model/model.safetensors" "$dir/model.safetensors"
  SRC="$src/tests/fixtures/$2/model/config.json" OUT="$dir/config.json" python3 -c "
import json, os
config = json.load(open(os.environ['SRC']))
$3
json.dump(config, open(os.environ['OUT'], 'w'))"
  echo "$dir"
}
fx() { echo --config "$src/tests/fixtures/$1/train.yaml" --set "dataset.dataset_dir=$src/tests/fixtures/$1/data"; }

# shellcheck disable=SC2046
expect_failure odd_rope_dim "config.json: key 'qk_rope_head_dim' must be even, got 7" \
  $(fx deepseek_v3) --set "model.name=$(edited_model odd_rope deepseek_v3 "config['qk_rope_head_dim'] = 7")"
# shellcheck disable=SC2046
expect_failure groups_do_not_divide "config.json: key 'n_group' (3) must divide the 8 experts" \
  $(fx deepseek_v3) --set "model.name=$(edited_model groups deepseek_v3 "config['n_group'] = 3")"
# shellcheck disable=SC2046
expect_failure unknown_topk_method "config.json: key 'topk_method' is 'noaux_tc'; DeepseekV2ForCausalLM routes with greedy or group_limited_greedy" \
  $(fx deepseek_v2) --set "model.name=$(edited_model v2_method deepseek_v2 "config['topk_method'] = 'noaux_tc'")"
# shellcheck disable=SC2046
expect_failure v3_topk_method "config.json: key 'topk_method' is 'greedy'; DeepseekV3ForCausalLM routes with noaux_tc" \
  $(fx deepseek_v3) --set "model.name=$(edited_model v3_method deepseek_v3 "config['topk_method'] = 'greedy'")"
# shellcheck disable=SC2046
expect_failure unsupported_rope "config.json: key 'rope_parameters.rope_type' is 'mrope', a rope type that is not supported" \
  $(fx glm4_moe_lite) --set "model.name=$(edited_model rope glm4_moe_lite "config['rope_parameters']['rope_type'] = 'mrope'")"
# shellcheck disable=SC2046
expect_failure kv_lora_rank_missing "config.json: required key 'kv_lora_rank' is missing" \
  $(fx deepseek_v2) --set "model.name=$(edited_model kv_rank deepseek_v2 "del config['kv_lora_rank']")"
# shellcheck disable=SC2046
expect_failure kv_heads "config.json: key 'num_key_value_heads' (2) must equal num_attention_heads (4)" \
  $(fx deepseek_v3) --set "model.name=$(edited_model kv_heads deepseek_v3 "config['num_key_value_heads'] = 2")"
exit $status
