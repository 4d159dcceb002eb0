#!/usr/bin/env bash
# `megatrain preview-data`: the demo config's first examples rendered with the chatml template, trained spans in
# «», the counts line; with template: jinja, the tokenizer's own chat_template.jinja (Qwen2.5's: its default system
# text in every prompt); and one-line errors for a text dataset without a tokenizer, for a template the tokenizer
# cannot write and for template: jinja without a chat template; KTO examples with their tags and KL sequences; a short training run with template: jinja whose
# final/ keeps that template. Usage: preview_data.sh MEGATRAIN_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$src" || exit 1
status=0

fail() { echo "FAIL $1"; cat "$work/out" "$work/err"; status=1; }

"$bin" preview-data --config configs/demo.yaml -n 2 >"$work/out" 2>"$work/err"
rc=$?
if [[ $rc -ne 0 ]]; then fail "preview-data exit status $rc"
elif [[ $(grep -c '^=== example ' "$work/out") -ne 2 ]]; then fail "expected 2 examples"
elif ! grep -q '^<|im_start|>user$' "$work/out"; then fail "no chatml user turn"
elif ! grep -q '<|im_start|>assistant$' "$work/out"; then fail "no chatml assistant turn"
elif ! grep -q '«.*<|im_end|>$' "$work/out"; then fail "trained span with <|im_end|> not marked"
elif ! grep -Eq '^=== [0-9]+ examples, [0-9]+ tokens; 0 truncated to 128 tokens, 0 dropped' "$work/out"; then
  fail "counts line"
else echo "ok   preview-data: $(tail -n 1 "$work/out")"; fi

# KTO examples (stage kto, the kto_en_demo data): each completion with its tag, then its KL sequence.
"$bin" preview-data --config configs/demo.yaml --set dataset.name=kto_en_demo --set training.stage=kto -n 2 \
  >"$work/out" 2>"$work/err"
rc=$?
if [[ $rc -ne 0 ]]; then fail "preview-data kto exit status $rc"
elif ! grep -q '^=== example 1 of 303, desirable: ' "$work/out"; then fail "kto: no desirable example"
elif ! grep -q '^=== example 2 of 303, undesirable: ' "$work/out"; then fail "kto: no undesirable example"
elif [[ $(grep -c '^=== example [12] of 303, KL sequence: ' "$work/out") -ne 2 ]]; then fail "kto: KL sequences"
else echo "ok   preview-data kto: $(tail -n 1 "$work/out")"; fi

# expect_error NAME PATTERN ARGS...: exit status 1 and exactly one error line matching PATTERN.
expect_error() {
  local name=$1 pattern=$2
  shift 2
  "$bin" preview-data --config configs/demo.yaml "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  if [[ $rc -ne 1 ]] || [[ $(grep -c '^megatrain: error: ' "$work/err") -ne 1 ]] || ! grep -q -- "$pattern" "$work/err"
  then fail "$name (rc=$rc)"; else echo "ok   $name: $(grep '^megatrain: error: ' "$work/err")"; fi
}
expect_error no_tokenizer "has text datasets, which need the model's tokenizer, but model.name is the bare config" \
  --set model.name=configs/models/demo-tiny.json
expect_error missing_token "dataset.template 'llama3' needs the token <|eot_id|>" --set dataset.template=llama3
mkdir -p "$work/model"
cp configs/models/demo/* "$work/model/"
cp tests/data/fixtures/jinja/templates/qwen2_5.jinja "$work/model/chat_template.jinja"
"$bin" preview-data --config configs/demo.yaml -n 1 --set model.name="$work/model" --set dataset.template=jinja \
  >"$work/out" 2>"$work/err"
rc=$?
if [[ $rc -ne 0 ]]; then fail "preview-data template: jinja exit status $rc"
elif ! grep -q "chat template: the tokenizer's own ($work/model/chat_template.jinja)" "$work/err"; then
  fail "template: jinja log line"
elif ! grep -q '^You are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>$' "$work/out"; then
  fail "template: jinja default system text"
elif ! grep -q '«.*<|im_end|>$' "$work/out"; then fail "template: jinja trained span with <|im_end|> not marked"
else echo "ok   preview-data template: jinja"; fi
# A short training run with template: jinja: its final/ keeps the tokenizer's own chat template, unchanged.
"$bin" train --config configs/demo.yaml --set model.name="$work/model" --set dataset.template=jinja \
  --set training.num_steps=2 --set training.batch_size=4 --set "training.output_dir=$work/jinja_run" \
  >"$work/out" 2>"$work/err"
rc=$?
if [[ $rc -ne 0 ]]; then fail "train with template: jinja (rc=$rc)"
elif ! cmp -s "$work/model/chat_template.jinja" "$work/jinja_run/final/chat_template.jinja"; then
  fail "final/chat_template.jinja is the tokenizer's own"
elif grep -q '"chat_template"' "$work/jinja_run/final/tokenizer_config.json"; then
  fail "no chat_template written over the tokenizer's own"
else echo "ok   train with template: jinja, final/ keeps the tokenizer's chat template"; fi
expect_error jinja_without_template "dataset.template jinja: the tokenizer in configs/models/demo has no chat template" \
  --set dataset.template=jinja
exit $status
