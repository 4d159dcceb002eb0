#!/usr/bin/env bash
# Checked state (core/tensor_checksum.h, cli/train/model_files.h): a checkpoint with a NaN written into an Adam
# moment or a weight, or with one byte of a weight flipped, is refused by resume and export in one line naming the
# file and the tensor, nothing written; a run whose every step is skipped for a non-finite gradient norm stops after
# training.max_consecutive_skipped_steps with one error line and no final/; `export` run from another directory,
# after the model directory is gone, writes the tokenizer files, the chat template and generation_config.json from
# the checkpoint alone; a byte of the running state tier flipped by another program is refused at the next read in
# one line naming the tier file, the state kind and the tensor.
# Usage: checked_state.sh MEGATRAIN_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$src" || exit 1
export HDF5_USE_FILE_LOCKING=FALSE
status=0
fail() { echo "FAIL $1"; tail -n 5 "$work/err" 2>/dev/null; status=1; }
error_line() { grep '^megatrain: error: ' "$work/err"; }

# A copy of the demo model (its tokenizer, no chat template of its own), trained from a relative path.
cp -r configs/models/demo "$work/model"
cd "$work" || exit 1
demo=(--config "$src/configs/demo.yaml" --set model.name=model --set "dataset.dataset_dir=$src/data"
      --set dataset.max_seq_len=32 --set training.batch_size=4 --set training.logging_steps=1)
"$bin" train "${demo[@]}" --set training.num_steps=2 --set "training.output_dir=$work/run" >"$work/out" 2>"$work/err" ||
  { fail "the demo run"; exit 1; }
ckpt=$work/run/checkpoints/step-000002.h5
offset() {  # offset FILE DATASET: the byte offset of a contiguous dataset's data
  h5dump -p -H -d "$2" "$1" | sed -n 's/.*OFFSET \([0-9]*\).*/\1/p' | head -1
}
poke() {  # poke FILE OFFSET HEX_BYTES: overwrite bytes in place
  printf "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
tensor=$(h5ls "$ckpt/optim/exp_avg" | awk 'NR==1{print $1}')

cp "$ckpt" "$work/nan.h5"
poke "$work/nan.h5" "$(offset "$work/nan.h5" "/optim/exp_avg/$tensor")" '\x00\x00\xc0\x7f'
"$bin" train "${demo[@]}" --set training.num_steps=3 --set "training.output_dir=$work/resumed_nan" \
  --set "training.resume_from=$work/nan.h5" >"$work/out" 2>"$work/err"
rc=$?
if [[ $rc -eq 0 ]]; then fail "a NaN Adam moment is refused on resume"
elif ! error_line | grep -q "^megatrain: error: non-finite value (nan) in checkpoint $work/nan.h5: tensor /optim/exp_avg/$tensor, element 0"; then
  fail "the line names the file and the tensor: $(error_line)"
elif [[ -e $work/resumed_nan ]]; then fail "the refused resume left $work/resumed_nan"
else echo "ok   NaN moment refused: $(error_line | cut -c1-160)"; fi

param=$(h5ls "$ckpt/params" | awk 'NR==1{print $1}')
cp "$ckpt" "$work/flip.h5"
at=$(offset "$work/flip.h5" "/params/$param")
byte=$(od -An -tx1 -j "$at" -N1 "$work/flip.h5" | tr -d ' ')
poke "$work/flip.h5" "$at" "\\x$(printf '%02x' $((0x$byte ^ 0x01)))"  # the lowest mantissa bit: still finite
"$bin" export --checkpoint "$work/flip.h5" --out "$work/flip_export" >"$work/out" 2>"$work/err"
rc=$?
if [[ $rc -eq 0 ]]; then fail "a flipped byte is refused by export"
elif ! error_line | grep -q "^megatrain: error: checksum mismatch in checkpoint $work/flip.h5: tensor /params/$param (stored"; then
  fail "the line names the file and the tensor: $(error_line)"
elif [[ -e $work/flip_export ]] || ls "$work" | grep -q 'flip_export.tmp'; then fail "the refused export wrote nothing"
else echo "ok   flipped byte refused: $(error_line | cut -c1-160)"; fi
"$bin" train "${demo[@]}" --set training.num_steps=3 --set "training.output_dir=$work/resumed_flip" \
  --set "training.resume_from=$work/flip.h5" >"$work/out" 2>"$work/err"
error_line | grep -q "checksum mismatch in checkpoint $work/flip.h5: tensor /params/$param" || fail "resume refuses the flipped byte"

# Every step skipped: the run stops after 3 in a row, with no final model.
"$bin" train "${demo[@]}" --set training.num_steps=20 --set "training.output_dir=$work/diverged" \
  --set training.learning_rate=1e38 --set training.max_grad_norm=0 --set training.max_consecutive_skipped_steps=3 \
  >"$work/out" 2>"$work/err"
rc=$?
if [[ $rc -eq 0 ]]; then fail "a run of skipped steps stops with an error"
elif ! error_line | grep -q "^megatrain: error: non-finite gradient norm in 3 steps in a row (steps [0-9]* to [0-9]*)"; then
  fail "one line says why: $(error_line)"
elif [[ -e $work/diverged/final ]]; then fail "no final/ after the stop"
else echo "ok   skipped steps stop the run: $(error_line | cut -c1-120)"; fi

# Export from elsewhere, the model directory gone: the checkpoint alone gives the tokenizer and chat files.
rm -rf "$work/model"
mkdir -p "$work/elsewhere" && cd "$work/elsewhere" || exit 1
"$bin" export --checkpoint "$ckpt" --out exported >"$work/out" 2>"$work/err" || fail "export from another directory"
for f in tokenizer.json tokenizer_config.json generation_config.json config.json model.safetensors; do
  [[ -f exported/$f ]] || fail "export from another directory writes $f"
done
grep -q '"chat_template"' exported/tokenizer_config.json || fail "the chat template is in tokenizer_config.json"
cmp -s exported/tokenizer_config.json "$work/run/final/tokenizer_config.json" || fail "the export's chat files are final/'s"
[[ $status -eq 0 ]] && echo "ok   export from another directory, model gone: $(ls exported | tr '\n' ' ')"

# The state tier changed under a running job: one byte flipped at the start of every 16 KiB block (every unit's
# first element; a unit being rewritten at that moment is caught by the others) while the process is stopped.
cd "$src" || exit 1
mkdir -p "$work/tier"
"$bin" train "${demo[@]}" --set model.name=configs/models/demo --set training.num_steps=400 \
  --set store.offload=optimizer --set "store.offload_paths=$work/tier" --set "training.output_dir=$work/tiered" \
  >"$work/out" 2>"$work/err" &
pid=$!
for _ in $(seq 600); do [[ $(cat "$work/tiered/metrics.jsonl" 2>/dev/null | wc -l) -ge 2 ]] && break; sleep 0.1; done
kill -STOP "$pid"
tier_file=$(ls "$work"/tier/megatrain-tier-*-rank0.bin)
python3 - "$tier_file" <<'PY'
import os, sys
with open(sys.argv[1], "r+b") as f:
    for at in range(0, os.path.getsize(sys.argv[1]), 16384):
        f.seek(at); b = f.read(1); f.seek(at); f.write(bytes([b[0] ^ 0x01]))
PY
kill -CONT "$pid"
wait "$pid"
rc=$?
if [[ $rc -eq 0 ]]; then fail "a changed tier file is refused"
elif ! error_line | grep -q "^megatrain: error: checksum mismatch in the state tier: $tier_file at offset [0-9]*, the exp_avg\(_sq\)\? of model\.[a-z_.0-9]*"; then
  fail "the line names the tier file, the kind and the tensor: $(error_line)"
elif ls "$work/tier" | grep -q megatrain-tier; then fail "the failed run removes its tier file"
else echo "ok   tier byte flipped mid-run refused: $(error_line | cut -c1-200)"; fi
exit $status
