#!/usr/bin/env bash
# `megatrain train` on bad mixture-of-experts input: more experts per token than experts, an unsupported router
# (Mixtral's random router_jitter_noise), a checkpoint missing one expert's tensor (Llama 4: a fused expert tensor, or
# one of the wrong shape), Llama 4's no_rope_layers of the wrong length, GPT-OSS MXFP4 blocks and scales that do not
# match the expert tensor's shape (or a missing scales tensor, or another quant_method): exit status 1, exactly one
# error line naming the file and the field or tensor, and no output_dir.
# Usage: bad_input_moe.sh MEGATRAIN_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0

source "$(dirname "$0")/expect_train_failure.sh"

# A copy of a fixture model: config.json edited by a Python statement on `config`, the tensor `drop` left out of
# model.safetensors (rewritten from its header; no torch needed), and tensor `reshape`'s header shape replaced
# (the same number of elements, so that only the shape is wrong).
broken_model() {  # NAME FIXTURE PYTHON-ON-config [TENSOR-TO-DROP [TENSOR=JSON-SHAPE]]
  local dir=$work/model-$1
  mkdir -p "$dir"
  SRC="$src/tests/fixtures/$2/model" OUT="$dir" DROP="${4:-}" RESHAPE="${5:-}" python3 -c "
import json, os, struct
src, out, drop = os.environ['SRC'], os.environ['OUT'], os.environ['DROP']
reshape = dict([os.environ['RESHAPE'].split('=', 1)]) if os.environ['RESHAPE'] else {}
config = json.load(open(src + '/config.json'))
$3
json.dump(config, open(out + '/config.json', 'w'))
data = open(src + '/model.safetensors', 'rb').read()
n = struct.unpack('<Q', data[:8])[0]
header = json.loads(data[8:8 + n])
body = data[8 + n:]
kept, chunks, offset = {}, [], 0
for name, t in header.items():
    if name == '__metadata__':
        kept[name] = t
        continue
    if name == drop:
        continue
    a, b = t['data_offsets']
    chunks.append(body[a:b])
    kept[name] = dict(t, data_offsets=[offset, offset + b - a])
    if name in reshape:
        kept[name]['shape'] = json.loads(reshape[name])
    offset += b - a
text = json.dumps(kept).encode()
open(out + '/model.safetensors', 'wb').write(struct.pack('<Q', len(text)) + text + b''.join(chunks))"
  echo "$dir"
}
fx() { echo --config "$src/tests/fixtures/$1/train.yaml" --set "dataset.dataset_dir=$src/tests/fixtures/$1/data"; }

# shellcheck disable=SC2046
expect_failure top_k_above_experts "'num_experts_per_tok' (5) must be between 1 and 'num_local_experts' (4)" \
  $(fx mixtral) --set "model.name=$(broken_model top_k mixtral "config['num_experts_per_tok'] = 5")"
# shellcheck disable=SC2046
expect_failure qwen_top_k_above_experts "'num_experts_per_tok' (9) must be between 1 and 'num_local_experts' (4)" \
  $(fx qwen3_moe) --set "model.name=$(broken_model qwen_top_k qwen3_moe "config['num_experts_per_tok'] = 9")"
# shellcheck disable=SC2046
expect_failure unsupported_router "'router_jitter_noise' must be 0" \
  $(fx mixtral) --set "model.name=$(broken_model jitter mixtral "config['router_jitter_noise'] = 0.01")"
# shellcheck disable=SC2046
expect_failure missing_expert_tensor "model.layers.1.block_sparse_moe.experts.2.w3.weight" \
  $(fx mixtral) --set "model.name=$(broken_model missing mixtral "pass" model.layers.1.block_sparse_moe.experts.2.w3.weight)"
# shellcheck disable=SC2046
expect_failure llama4_top_k_above_experts "'num_experts_per_tok' (5) must be between 1 and 'num_local_experts' (4)" \
  $(fx llama4) --set "model.name=$(broken_model llama4_top_k llama4 "config['num_experts_per_tok'] = 5")"
# shellcheck disable=SC2046
expect_failure llama4_missing_fused_experts "tensor 'model.layers.3.feed_forward.experts.down_proj' not found" \
  $(fx llama4) --set "model.name=$(broken_model llama4_missing llama4 "pass" model.layers.3.feed_forward.experts.down_proj)"
# shellcheck disable=SC2046
expect_failure llama4_fused_experts_shape \
  "tensor 'model.layers.1.feed_forward.experts.gate_up_proj' in model.safetensors has shape \\[4, 32, 48\\], expected \\[4, 32, 40\\]" \
  $(fx llama4) --set "model.name=$(broken_model llama4_shape llama4 "config['intermediate_size'] = 20")"
# shellcheck disable=SC2046
expect_failure llama4_no_rope_layers "key 'no_rope_layers' must list 4 flags (num_hidden_layers)" \
  $(fx llama4) --set "model.name=$(broken_model llama4_nope llama4 "config['no_rope_layers'] = [1, 1, 0]")"
experts=model.layers.1.mlp.experts
# shellcheck disable=SC2046
expect_failure mxfp4_blocks_shape "tensor '$experts.gate_up_proj_blocks' in model.safetensors has shape .4, 32, 2, 16., expected .4, 64, 1, 16. (MXFP4 form of '$experts.gate_up_proj' .4, 32, 64.)" \
  $(fx gpt_oss_mxfp4) --set "model.name=$(broken_model blocks gpt_oss_mxfp4 "pass" "" "$experts.gate_up_proj_blocks=[4,32,2,16]")"
# shellcheck disable=SC2046
expect_failure mxfp4_scales_shape "tensor '$experts.down_proj_scales' in model.safetensors has shape .4, 16, 2., expected .4, 32, 1." \
  $(fx gpt_oss_mxfp4) --set "model.name=$(broken_model scales gpt_oss_mxfp4 "pass" "" "$experts.down_proj_scales=[4,16,2]")"
# shellcheck disable=SC2046
expect_failure mxfp4_scales_missing "tensor '$experts.down_proj_scales' not found (MXFP4 form of '$experts.down_proj')" \
  $(fx gpt_oss_mxfp4) --set "model.name=$(broken_model no_scales gpt_oss_mxfp4 "pass" "$experts.down_proj_scales")"
# shellcheck disable=SC2046
expect_failure quant_method "key 'quantization_config.quant_method' must be mxfp4 (dequantised on load), got 'fp8'" \
  $(fx gpt_oss_mxfp4) --set "model.name=$(broken_model fp8 gpt_oss_mxfp4 "config['quantization_config']['quant_method'] = 'fp8'")"
exit $status
