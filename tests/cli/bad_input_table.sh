#!/usr/bin/env bash
# Bad input and faults across the commands, one table row each (issue #20): the row writes its file, runs the
# command, and expects the exit status and, on failure, exactly one "megatrain: error:" line matching the pattern
# that names the file or the field. Rows: safetensors that do not tile their data region, exports and final/ over
# what megatrain did not write, nesting past 512 levels in every JSON and YAML input, configs from streams,
# datasets that are not regular files, unknown subcommands and out-of-range numeric flags.
# Usage: bad_input_table.sh MEGATRAIN_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HDF5_USE_FILE_LOCKING=FALSE
fx=$src/tests/fixtures/llama
demo=$src/configs/models/demo
status=0

mt() { timeout 60 "$bin" "$@"; }  # every run at most 60 s: a hang fails its row
# row NAME RC PATTERN CMD...: runs CMD (stdin from $stdin, /dev/null by default).
row() {
  local name=$1 rc_want=$2 pattern=$3
  shift 3
  "$@" <"${stdin:-/dev/null}" >"$work/$name.stdout" 2>"$work/$name.stderr"
  local rc=$? errors
  errors=$(grep -c '^megatrain: error: ' "$work/$name.stderr")
  if [[ $rc -ne $rc_want ]] || { [[ $rc_want -ne 0 ]] && { [[ $errors -ne 1 ]] || ! grep -q -- "$pattern" "$work/$name.stderr"; }; }; then
    echo "FAIL $name: rc=$rc (want $rc_want), stderr:"; tail -5 "$work/$name.stderr"; status=1
  else
    echo "ok   $name: rc=$rc $(grep -m1 '^megatrain: error: ' "$work/$name.stderr")"
  fi
}
train_llama() {  # train_llama OUT [more]: one step of the llama fixture
  local out=$1
  shift
  mt train --config "$fx/train.yaml" --set "model.name=$fx/model" --set "dataset.dataset_dir=$fx/data" \
    --set training.num_steps=1 --set "training.output_dir=$out" "$@"
}

# --- safetensors whose tensors do not tile the data region exactly, or whose header disagrees with the data
broken_model() {  # broken_model KIND: the llama fixture's model with model.safetensors broken that way
  local dir=$work/st-$1
  mkdir -p "$dir" && cp "$fx/model/config.json" "$dir/"
  python3 "$src/tests/cli/broken_safetensors.py" "$fx/model/model.safetensors" "$dir/model.safetensors" "$1"
  echo "$dir"
}
row st_inner_bytes 1 "model.safetensors: 16 bytes after the last tensor" train_llama "$work/o" --set "model.name=$(broken_model inner_bytes)"
row st_gap 1 "leave a gap: tensor 'lm_head.weight' ends at 16384 (16 bytes between)" train_llama "$work/o" --set "model.name=$(broken_model gap)"
row st_overlap 1 "data_offsets \[16380, 32764\] overlap: tensor 'lm_head.weight' ends at 16384" train_llama "$work/o" --set "model.name=$(broken_model overlap)"
row st_appended 1 "4 bytes after the last tensor: the file holds" train_llama "$work/o" --set "model.name=$(broken_model appended)"
row st_shape 1 "tensor 'lm_head.weight' holds 16384 bytes but shape \[128,33\] of F32 needs 16896" train_llama "$work/o" --set "model.name=$(broken_model shape)"
row st_header_length 1 "header length .* exceeds the file" train_llama "$work/o" --set "model.name=$(broken_model header_length)"
row st_truncated 1 "model.safetensors: tensor '.*' data_offsets .* lie outside the data area" train_llama "$work/o" --set "model.name=$(broken_model truncated)"
row st_deep_header 1 "model.safetensors: header: JSON nested deeper than 512 levels" train_llama "$work/o" --set "model.name=$(broken_model deep_header)"
[[ ! -e $work/o ]] || { echo "FAIL: a refused run created its output_dir"; status=1; }

# --- exports and final/ never replace what megatrain did not write
train_llama "$work/run" >"$work/run.log" 2>&1 || { echo "FAIL: the llama run for a checkpoint"; cat "$work/run.log"; exit 1; }
ckpt=$work/run/checkpoints/step-000001.h5
echo "my notes" >"$work/a_file"
row export_onto_file 1 "export $work/a_file: exists and is not a directory" mt export --checkpoint "$ckpt" --out "$work/a_file"
[[ $(cat "$work/a_file") == "my notes" ]] || { echo "FAIL: export_onto_file changed the file"; status=1; }
mkdir -p "$work/user_dir" && echo "keep" >"$work/user_dir/notes.txt"
row export_onto_user_dir 1 "export $work/user_dir: the directory exists and is not empty; pass --overwrite" mt export --checkpoint "$ckpt" --out "$work/user_dir"
[[ $(cat "$work/user_dir/notes.txt") == keep ]] || { echo "FAIL: export_onto_user_dir changed the directory"; status=1; }
row export_fresh 0 "" mt export --checkpoint "$ckpt" --out "$work/exported"
row export_again 1 "exported: the directory exists and is not empty (an earlier export); pass --overwrite" mt export --checkpoint "$ckpt" --out "$work/exported"
row export_overwrite 0 "" mt export --checkpoint "$ckpt" --out "$work/exported" --overwrite
[[ -f $work/exported/model.safetensors && -f $work/exported/megatrain_manifest.json ]] || { echo "FAIL: export_overwrite"; status=1; }
ls -d "$work"/exported.* 2>/dev/null && { echo "FAIL: temporary export directories left"; status=1; }
mkdir -p "$work/run2/final" && echo "mine" >"$work/run2/final/notes.txt"
row final_holds_user_file 1 "final model $work/run2/final: the directory holds 'notes.txt', which megatrain did not write" train_llama "$work/run2"
[[ $(cat "$work/run2/final/notes.txt") == mine && ! -e $work/run2/checkpoints ]] || { echo "FAIL: final_holds_user_file touched output_dir"; status=1; }
row final_rerun_refused 1 "training.output_dir $work/run holds an earlier run's checkpoints (.*step-000001.h5, the newest of 1)" train_llama "$work/run"
row final_rerun_overwrite_replaces_ours 0 "" train_llama "$work/run" --set training.overwrite_output_dir=true

# --- nesting deeper than 512 levels in every JSON and YAML input
deep() { python3 -c "import sys; sys.stdout.write('$1' * $2)"; }
mkdir -p "$work/deep_config" && cp "$fx/model/model.safetensors" "$work/deep_config/" && deep '[' 100000 >"$work/deep_config/config.json"
row config_json_deep 1 "model config $work/deep_config/config.json: JSON nested deeper than 512 levels" train_llama "$work/o" --set "model.name=$work/deep_config"
mkdir -p "$work/deep_tokenized" && cp "$fx/data/dataset_info.json" "$work/deep_tokenized/" && { deep '[' 100000; echo; } >"$work/deep_tokenized/train.jsonl"
row tokenized_record_deep 1 "deep_tokenized/train.jsonl:1: JSON nested deeper than 512 levels" train_llama "$work/o" --set "dataset.dataset_dir=$work/deep_tokenized"
mkdir -p "$work/deep_records"
echo '{"deep": {"file_name": "deep.json"}}' >"$work/deep_records/dataset_info.json"
{ echo -n '[{"instruction": "a", "output": '; deep '[' 100000; echo '}]'; } >"$work/deep_records/deep.json"
demo_train() {  # demo_train [more]: the README demo, one step
  mt train --config "$src/configs/demo.yaml" --set "model.name=$demo" --set "dataset.dataset_dir=$src/data" \
    --set training.num_steps=1 --set "training.output_dir=$work/o" "$@"
}
row dataset_record_deep 1 "deep_records/deep.json: JSON nested deeper than 512 levels" demo_train --set "dataset.dataset_dir=$work/deep_records" --set dataset.name=deep
mkdir -p "$work/deep_tokenizer" && cp "$demo"/*.json "$work/deep_tokenizer/" && deep '{"a":' 100000 >"$work/deep_tokenizer/tokenizer.json"
row tokenizer_json_deep 1 "deep_tokenizer/tokenizer.json: JSON nested deeper than 512 levels" demo_train --set "model.name=$work/deep_tokenizer"
deep '[' 100000 >"$work/deep_ids"
stdin=$work/deep_ids row decode_deep 1 "stdin line 1: JSON nested deeper than 512 levels" mt tokenize --model "$demo" --decode
{ echo -n 'model: {name: '; deep '[' 100000; deep ']' 100000; echo '}'; } >"$work/deep_flow.yaml"
row yaml_flow_deep 1 "deep_flow.yaml:.*YAML nested deeper than 512 levels" mt train --config "$work/deep_flow.yaml"
python3 -c "print(''.join(' ' * i + 'k:\n' for i in range(600)) + ' ' * 600 + 'x')" >"$work/deep_block.yaml"
row yaml_block_deep 1 "deep_block.yaml:.*YAML nested deeper than 512 levels" mt train --config "$work/deep_block.yaml"
row yaml_set_deep 1 "--set model.name=.*YAML nested deeper than 512 levels" train_llama "$work/o" --set "model.name=$(deep '[' 600)"

# --- configs from streams; inputs that are not regular files
row config_pipe 0 "" mt train --config <(cat "$fx/train.yaml") --set "model.name=$fx/model" --set "dataset.dataset_dir=$fx/data" --set training.num_steps=1 --set "training.output_dir=$work/pipe"
stdin=$fx/train.yaml row config_stdin 0 "" mt train --config /dev/stdin --set "model.name=$fx/model" --set "dataset.dataset_dir=$fx/data" --set training.num_steps=1 --set "training.output_dir=$work/stdin"
row config_directory 1 "$work: is a directory, not a configuration file" mt train --config "$work"
row config_dev_null 1 "/dev/null: model.name is required" mt train --config /dev/null
mkdir -p "$work/fifo_data" && cp "$fx/data/dataset_info.json" "$work/fifo_data/" && mkfifo "$work/fifo_data/train.jsonl"
row dataset_fifo 1 "dataset 'fixture': $work/fifo_data/train.jsonl: is a FIFO (named pipe), not a regular file" train_llama "$work/o" --set "dataset.dataset_dir=$work/fifo_data"
mkdir -p "$work/dir_data/train.jsonl" && cp "$fx/data/dataset_info.json" "$work/dir_data/"
row dataset_directory 1 "dataset 'fixture': $work/dir_data/train.jsonl: is a directory, not a regular file" train_llama "$work/o" --set "dataset.dataset_dir=$work/dir_data"

# --- subcommands and numeric flags
row unknown_subcommand 1 "unknown subcommand 'trian' (one of: train, " mt trian --config x.yaml
row bench_layers 1 "--layers: -1 is below the minimum 0" mt bench --model "$demo" --layers -1
row bench_micro_batch 1 "--micro-batch: -1 is below the minimum 0" mt bench --model "$demo" --micro-batch -1
row bench_seq 1 "--seq: 0 is below the minimum 1" mt bench --model "$demo" --seq 0
row bench_batch 1 "--batch: 'x' is not an integer >= 1" mt bench --model "$demo" --batch x
row bench_slots 1 "--slots: 65 is above the maximum 64" mt bench --model "$demo" --slots 65
row bench_optim_params 1 "--params: '-5' is not a positive number" mt bench-optim --params -5
row bench_optim_steps 1 "--steps: 0 is below the minimum 1" mt bench-optim --params 1e6 --steps 0
row calc_resource_seq 1 "--seq must be positive, not 0" mt calc-resource --gpu-mem 80 --ram 512 --model qwen2.5-7b --seq 0
row calc_resource_gpu 1 "--gpu-mem must be a positive number of GiB, not 0" mt calc-resource --gpu-mem 0 --ram 512 --model qwen2.5-7b --seq 1024
row preview_n 1 "-n: -1 is below the minimum 0" mt preview-data --config "$fx/train.yaml" -n -1
[[ ! -e $work/o ]] || { echo "FAIL: a refused run created its output_dir"; status=1; }
exit $status
