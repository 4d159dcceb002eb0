#!/usr/bin/env bash
# LLaMA-Factory's checkpoint layout (cli/train/hf_checkpoints.h): with training.save_hf_checkpoints each save also
# writes <output_dir>/checkpoint-<step>/, the weights of that step as `export` writes them from the HDF5 checkpoint,
# loadable by transformers; save_total_limit keeps the newest N of both kinds; overwrite_output_dir removes the
# earlier run's.
# Usage: hf_checkpoints.sh MEGATRAIN_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$src" || exit 1
export HDF5_USE_FILE_LOCKING=FALSE
fail() { echo "FAIL $1"; tail -n 5 "$work/err" 2>/dev/null; exit 1; }
out=$work/run
"$bin" train --config configs/demo.yaml --set dataset.max_seq_len=32 --set training.batch_size=4 \
  --set training.num_steps=6 --set training.save_steps=2 --set training.save_total_limit=2 \
  --set training.save_hf_checkpoints=true --set "training.output_dir=$out" >"$work/out" 2>"$work/err" || fail "train"
[[ $(cd "$out" && ls -d checkpoint-* | tr '\n' ' ') == "checkpoint-4 checkpoint-6 " ]] || fail "kept: $(ls "$out")"
[[ $(ls "$out/checkpoints" | tr '\n' ' ') == "step-000004.h5 step-000006.h5 " ]] || fail "kept: $(ls "$out/checkpoints")"
"$bin" export --checkpoint "$out/checkpoints/step-000004.h5" --out "$work/exported" >"$work/out" 2>"$work/err" || fail "export"
for f in model.safetensors tokenizer.json tokenizer_config.json generation_config.json; do
  cmp -s "$work/exported/$f" "$out/checkpoint-4/$f" || fail "checkpoint-4/$f is not the export of step-000004.h5"
done
python3 -c "import json, sys; sys.exit(json.load(open(sys.argv[1])) != json.load(open(sys.argv[2])))" \
  "$work/exported/config.json" "$out/checkpoint-4/config.json" || fail "checkpoint-4/config.json is not the export's"
cmp -s "$out/checkpoint-6/model.safetensors" "$out/final/model.safetensors" || fail "checkpoint-6 is not final/"
echo "ok   checkpoint-4/ and checkpoint-6/ kept (save_total_limit 2), each the export of its HDF5 checkpoint"
if python3 -c "import torch, transformers" 2>/dev/null; then
  python3 - "$out/checkpoint-4" <<'PY' || fail "transformers loads checkpoint-4"
import sys, torch, transformers
model = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1])
tokenizer = transformers.AutoTokenizer.from_pretrained(sys.argv[1])
ids = tokenizer("Hello", return_tensors="pt").input_ids
assert torch.isfinite(model(ids).logits).all()
print(f"ok   transformers loads checkpoint-4: {sum(p.numel() for p in model.parameters())} parameters")
PY
else
  echo "note transformers is not installed here: the load by from_pretrained is not checked"
fi
# resume_from_checkpoint as LLaMA-Factory users write it: a checkpoint-N/ directory (its HDF5 checkpoint beside it).
"$bin" train --config configs/demo.yaml --set dataset.max_seq_len=32 --set training.batch_size=4 \
  --set training.num_steps=7 --set "training.resume_from=$out/checkpoint-6/" --set "training.output_dir=$work/from_hf" \
  >"$work/out2" 2>"$work/err" || fail "resume from checkpoint-6/"
grep -q "resuming from $out/checkpoints/step-000006.h5 at step 6" "$work/err" || fail "checkpoint-6/ resumes step-000006.h5"
echo "ok   resume_from checkpoint-6/ resumes from checkpoints/step-000006.h5"
"$bin" train --config configs/demo.yaml --set dataset.max_seq_len=32 --set training.batch_size=4 \
  --set training.num_steps=2 --set training.save_steps=2 --set training.save_hf_checkpoints=true \
  --set training.overwrite_output_dir=true --set "training.output_dir=$out" >"$work/out2" 2>"$work/err" || fail "overwrite"
[[ $(cd "$out" && ls -d checkpoint-* | tr '\n' ' ') == "checkpoint-2 " ]] || fail "overwrite_output_dir left $(ls "$out")"
echo "ok   overwrite_output_dir removes the earlier run's checkpoint-N/ too"
