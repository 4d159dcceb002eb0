#!/usr/bin/env bash
# The LLaMA-Factory workflow end to end on the demo model: an example YAML from LLaMA-Factory's examples/train_full/
# (paths and sizes made local and tiny) trains as it is, with its val_size evaluated; `convert-config` prints our
# YAML for it; continued pre-training (stage pt) reads a .txt corpus, in memory or streamed, and resumes mid-corpus
# with the same blocks; bad LLaMA-Factory values and refused keys end
# with one error line naming the file and the key, nothing written.
# Usage: workflow.sh MEGATRAIN_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$src" || exit 1
status=0
fail() { echo "FAIL $1"; cat "$work/out" "$work/err" 2>/dev/null | tail -n 20; status=1; }

# LLaMA-Factory 0.9.5 examples/train_full/llama3_full_sft.yaml, with the model, dataset, template and sizes swapped
# for the demo's (the comments say what the original has).
write_lf() {
  cat >"$work/lf.yaml" <<YAML
### model
model_name_or_path: configs/models/demo  # meta-llama/Meta-Llama-3-8B-Instruct
trust_remote_code: true

### method
stage: sft
do_train: true
finetuning_type: full
deepspeed: examples/deepspeed/ds_z3_config.json  # choices: [ds_z0_config.json, ds_z2_config.json, ds_z3_config.json]

### dataset
dataset: alpaca_en_demo  # identity,alpaca_en_demo
template: chatml  # llama3
cutoff_len: 128  # 2048
max_samples: 10  # 1000
overwrite_cache: true
preprocessing_num_workers: 16
dataloader_num_workers: 0  # 4

### output
output_dir: $work/lf_out  # saves/llama3-8b/full/sft
logging_steps: 1  # 10
save_steps: 500
plot_loss: true
overwrite_output_dir: true
save_only_model: false
report_to: none  # choices: [none, wandb, tensorboard, swanlab, mlflow]

### train
per_device_train_batch_size: 2  # 1
gradient_accumulation_steps: 2
learning_rate: 1.0e-5
num_train_epochs: 1.0  # 3.0
lr_scheduler_type: cosine
warmup_ratio: 0.1
bf16: true
ddp_timeout: 180000000
resume_from_checkpoint: null

### eval
val_size: 0.2  # commented out in the original
per_device_eval_batch_size: 1
eval_strategy: steps
eval_steps: 1  # 500
YAML
}
write_lf
"$bin" train --config "$work/lf.yaml" --set model.init=random >"$work/out" 2>"$work/err"
rc=$?
if [[ $rc -ne 0 ]]; then fail "LLaMA-Factory YAML trains (rc=$rc)"
elif ! grep -q "LLaMA-Factory keys that change nothing here, ignored: .*deepspeed (ZeRO" "$work/err"; then
  fail "one warning names the ignored keys"
elif [[ $(grep -c '"eval_loss"' "$work/lf_out/metrics.jsonl") -ne 2 ]]; then fail "eval after each of the 2 steps"
elif ! grep -q "training.num_train_epochs 1.0: 2 steps" "$work/err"; then fail "epochs resolved to steps"
elif [[ ! -f "$work/lf_out/final/model.safetensors" ]]; then fail "final model"
elif ! python3 -c "import json, sys; c = json.load(open(sys.argv[1])); sys.exit(not (c['eos_token'] == '<|im_end|>'
    and \"'<|im_start|>user\\n' + content + '<|im_end|>\\n<|im_start|>assistant\\n'\" in c['chat_template']))" \
    "$work/lf_out/final/tokenizer_config.json"; then fail "final/ carries the chatml chat_template and its EOS"
elif ! grep -q '"eos_token_id"' "$work/lf_out/final/generation_config.json"; then fail "generation_config.json"
elif [[ ! -f "$work/lf_out/training_loss.png" || ! -f "$work/lf_out/all_results.json" ]]; then fail "plot_loss, all_results"
else echo "ok   LLaMA-Factory YAML trains: $(grep -c . "$work/lf_out/metrics.jsonl") metrics lines"; fi

"$bin" convert-config "$work/lf.yaml" >"$work/out" 2>"$work/err"
if [[ $? -ne 0 ]]; then fail "convert-config"
else
  for want in "name: configs/models/demo" "dtype: bfloat16" "max_seq_len: 128" "val_size: 0.2" "stage: sft" \
              "batch_size: 4" "num_train_epochs: 1.0" "lr_scheduler: cosine" "warmup_ratio: 0.1" "eval_steps: 1"; do
    grep -q "^  $want\$" "$work/out" || fail "convert-config prints '$want'"
  done
  echo "ok   convert-config"
fi
# No template: LLaMA-Factory parses the tokenizer's own chat template, else uses `empty` (the demo has none).
grep -v '^template:' "$work/lf.yaml" >"$work/lf_no_template.yaml"
"$bin" convert-config "$work/lf_no_template.yaml" >"$work/out" 2>"$work/err"
if [[ $? -ne 0 ]] || ! grep -q '^  template: empty$' "$work/out"; then fail "convert-config without template"
else echo "ok   convert-config without template: empty, as LLaMA-Factory"; fi
# A pt YAML: LLaMA-Factory cuts blocks per batch of preprocessing_batch_size documents (1000 unless set).
sed 's/^stage: sft/stage: pt/' "$work/lf.yaml" >"$work/lf_pt.yaml"
"$bin" convert-config "$work/lf_pt.yaml" >"$work/out" 2>"$work/err"
if [[ $? -ne 0 ]] || ! grep -q '^  preprocessing_batch_size: 1000$' "$work/out"; then fail "convert-config pt batch size"
else echo "ok   convert-config stage pt: preprocessing_batch_size 1000"; fi
# A kto YAML: its KL shift runs in blocks of preprocessing_batch_size records; set, it is kept (unset: ours is 1000).
{ sed 's/^stage: sft/stage: kto/' "$work/lf.yaml"; echo "preprocessing_batch_size: 500"; } >"$work/lf_kto.yaml"
"$bin" convert-config "$work/lf_kto.yaml" >"$work/out" 2>"$work/err"
if [[ $? -ne 0 ]] || ! grep -q '^  preprocessing_batch_size: 500$' "$work/out"; then fail "convert-config kto batch size"
else echo "ok   convert-config stage kto: preprocessing_batch_size 500, the KL shift's blocks"; fi

# Continued pre-training: one document per line of a .txt file, EOS appended, cut into 32-token blocks; a run resumed
# from its step-2 checkpoint continues with the same blocks (the same losses, bitwise).
mkdir -p "$work/pt"
for i in $(seq 1 40); do echo "Document $i of the corpus: plain text for continued pre-training."; done >"$work/pt/corpus.txt"
echo '{"corpus": {"file_name": "corpus.txt", "columns": {"prompt": "text"}}}' >"$work/pt/dataset_info.json"
pt=(--config configs/demo.yaml --set training.stage=pt --set dataset.name=corpus --set "dataset.dataset_dir=$work/pt"
    --set dataset.max_seq_len=32 --set training.num_steps=4 --set training.batch_size=4 --set training.logging_steps=1)
"$bin" train "${pt[@]}" --set training.save_steps=2 --set "training.output_dir=$work/pt_a" >"$work/out" 2>"$work/err"
rc=$?
if [[ $rc -ne 0 ]]; then fail "stage pt trains (rc=$rc)"
elif ! grep -Eq "training.stage pt: 40 documents, [0-9]+ tokens in [0-9]+ blocks of 32 tokens" "$work/err"; then
  fail "pt counts logged"
else echo "ok   stage pt: $(grep -o 'training.stage pt: .*' "$work/err")"; fi
"$bin" train "${pt[@]}" --set "training.resume_from=$work/pt_a/checkpoints/step-000002.h5" \
  --set "training.output_dir=$work/pt_b" >"$work/out" 2>"$work/err"
rc=$?
straight=$(grep -o '"loss":[^,]*' "$work/pt_a/metrics.jsonl" | tail -n 2)
resumed=$(grep -o '"loss":[^,]*' "$work/pt_b/metrics.jsonl" 2>/dev/null | tail -n 2)
if [[ $rc -ne 0 ]]; then fail "stage pt resumes (rc=$rc)"
elif [[ -z "$straight" || "$straight" != "$resumed" ]]; then fail "resumed pt steps 3-4: '$resumed' vs '$straight'"
else echo "ok   stage pt resumed mid-corpus: the same blocks and losses"; fi

# dataset.streaming: the same corpus read as training goes gives the in-memory path's blocks (shuffle off: corpus
# order), so the same losses; resumed from its step-2 checkpoint it continues with the same blocks.
ordered=("${pt[@]}" --set dataset.shuffle=false --set training.save_steps=2)
"$bin" train "${ordered[@]}" --set "training.output_dir=$work/pt_mem" >"$work/out" 2>"$work/err" &&
"$bin" train "${ordered[@]}" --set dataset.streaming=true --set "training.output_dir=$work/pt_stream" \
  >"$work/out" 2>"$work/err" &&
"$bin" train "${ordered[@]}" --set dataset.streaming=true --set "training.output_dir=$work/pt_stream_b" \
  --set "training.resume_from=$work/pt_stream/checkpoints/step-000002.h5" >"$work/out" 2>"$work/err"
rc=$?
in_memory=$(grep -o '"loss":[^,]*' "$work/pt_mem/metrics.jsonl" 2>/dev/null)
streamed=$(grep -o '"loss":[^,]*' "$work/pt_stream/metrics.jsonl" 2>/dev/null)
resumed=$(grep -o '"loss":[^,]*' "$work/pt_stream_b/metrics.jsonl" 2>/dev/null)
if [[ $rc -ne 0 ]]; then fail "dataset.streaming runs (rc=$rc)"
elif [[ -z "$streamed" || "$streamed" != "$in_memory" ]]; then fail "streamed losses differ from in-memory ones"
elif [[ "$resumed" != "$(tail -n 2 <<<"$streamed")" ]]; then fail "resumed stream: '$resumed'"
else echo "ok   dataset.streaming: the in-memory blocks, and resumed mid-corpus with the same blocks"; fi

# expect_error NAME PATTERN: exit 1, one error line matching PATTERN, no output directory.
expect_error() {
  rm -rf "$work/lf_out"
  "$bin" train --config "$work/lf.yaml" --set model.init=random >"$work/out" 2>"$work/err"
  local rc=$?
  if [[ $rc -ne 1 ]] || [[ $(grep -c '^megatrain: error: ' "$work/err") -ne 1 ]] || ! grep -q -- "$2" "$work/err" ||
     [[ -e "$work/lf_out" ]]; then fail "$1 (rc=$rc)"; else echo "ok   $1: $(grep '^megatrain: error: ' "$work/err")"; fi
}
write_lf; sed -i 's/^learning_rate: .*/learning_rate: fast/' "$work/lf.yaml"
expect_error lf_bad_value "$work/lf.yaml: learning_rate: 'fast' is not a number"
write_lf; sed -i 's/^finetuning_type: full/finetuning_type: lora/' "$work/lf.yaml"
expect_error lf_lora "$work/lf.yaml: finetuning_type: 'lora': MegaTrain trains every parameter (full)"
write_lf; sed -i 's/^stage: sft/stage: rm/' "$work/lf.yaml"
expect_error lf_stage "$work/lf.yaml: stage: 'rm' is not one of sft, pt, dpo, kto"
write_lf; sed -i 's/^stage: sft/stage: dpo/' "$work/lf.yaml"
expect_error lf_stage_dpo "training.stage dpo trains on preference pairs; this entry has no \"ranking\": true"
write_lf; sed -i 's/^stage: sft/stage: kto/' "$work/lf.yaml"
expect_error lf_stage_kto "training.stage kto trains on examples tagged desirable or not; this entry names no columns.kto_tag"
write_lf; sed -i 's/^val_size: .*/val_size: 500/' "$work/lf.yaml"
expect_error lf_val_size "$work/lf.yaml: dataset.val_size: 500.0 holds out 500 of the 10 examples"
write_lf; echo "eval_dataset: held_out" >>"$work/lf.yaml"; sed -i '/^val_size/d' "$work/lf.yaml"
expect_error lf_eval_dataset "$work/lf.yaml: dataset.eval_dataset 'held_out': .*no dataset named 'held_out'"
exit $status
