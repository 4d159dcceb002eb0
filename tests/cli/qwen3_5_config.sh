#!/usr/bin/env bash
# configs/qwen3_5_27b.yaml loads and trains: run as written (template qwen3_5, packing, its optimizer) against a
# stand-in model directory — the demo tokenizer and a 2-layer Qwen3.5 config (one Gated DeltaNet layer, one gated
# full-attention layer), random init — for 2 steps, and it must log the hybrid layers and finish.
# Usage: qwen3_5_config.sh MEGATRAIN_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/model"
cp "$src/configs/models/demo/tokenizer.json" "$src/configs/models/demo/tokenizer_config.json" "$work/model/"
cat >"$work/model/config.json" <<'JSON'
{"architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text", "vocab_size": 1859, "hidden_size": 64,
 "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
 "max_position_embeddings": 4096, "layer_types": ["linear_attention", "full_attention"], "linear_num_key_heads": 2,
 "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4,
 "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25},
 "eos_token_id": 2, "pad_token_id": 0, "tie_word_embeddings": false}
JSON
timeout 120 "$bin" train --config "$src/configs/qwen3_5_27b.yaml" --set "model.name=$work/model" \
  --set model.init=random --set model.dtype=float32 --set "dataset.dataset_dir=$src/data" \
  --set dataset.max_seq_len=256 --set training.num_steps=2 --set training.batch_size=2 --set training.save_steps=0 \
  --set "training.output_dir=$work/out" >"$work/log" 2>&1
rc=$?
if ((rc != 0)) || ! grep -q "gated deltanet 2/4 heads × 16/16, conv 4" "$work/log" ||
   ! grep -q "step     2/2" "$work/log" || [[ ! -e $work/out/final/model.safetensors ]]; then
  echo "FAIL: rc=$rc"; cat "$work/log"; exit 1
fi
echo "ok   $(grep 'step     2/2' "$work/log" | cut -c1-80)"
