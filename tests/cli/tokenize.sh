#!/usr/bin/env bash
# `megatrain tokenize`: encodes stdin line by line (ids as in tests/tokenizer/fixtures, which `tokenizers` wrote),
# decodes id arrays back to the same text, and fails with one error line on bad input.
# Usage: tokenize.sh MEGATRAIN_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fixtures=$src/tests/tokenizer/fixtures
status=0

# check NAME EXPECTED ACTUAL
check() {
  if [[ "$2" == "$3" ]]; then echo "ok   $1"; else echo "FAIL $1: expected"; echo "$2"; echo "got"; echo "$3"; status=1; fi
}

printf 'Hello, world!\n你好，世界！这是一个测试。\n\n' >"$work/text"
check encode "[539,11,267,529,0]
[807,814,282,544,274,886,247,358,408,162,113,233,315,243,281]
[]" "$("$bin" tokenize --model "$fixtures/llama3" <"$work/text")"
check encode_bos "[903,539,11,267,529,0]
[903,807,814,282,544,274,886,247,358,408,162,113,233,315,243,281]
[903]" "$("$bin" tokenize --model "$fixtures/llama3" --add-special-tokens <"$work/text")"
check encode_sentencepiece "[1,824,267,913,259]" \
  "$(echo 'Hello, world!' | "$bin" tokenize --model "$fixtures/llama2" --add-special-tokens)"

# Round trip: every line of mixed text decodes to itself (JSON strings), special tokens included.
printf '%s\n' 'The quick brown fox — 中文, 日本語 😀👨‍👩‍👧' '  spaces  and	tabs ' '<|im_start|>user' 'DON'"'"'T 12345' >"$work/mixed"
"$bin" tokenize --model "$fixtures/qwen2" <"$work/mixed" >"$work/ids"
"$bin" tokenize --model "$fixtures/qwen2" --decode <"$work/ids" >"$work/decoded"
check round_trip '"The quick brown fox — 中文, 日本語 😀👨‍👩‍👧"
"  spaces  and\ttabs "
"<|im_start|>user"
"DON'"'"'T 12345"' "$(cat "$work/decoded")"
check line_count "4" "$(wc -l <"$work/ids" | tr -d ' ')"

# expect_failure NAME PATTERN ARGS... (stdin from $work/stdin): exit 1, one error line matching PATTERN.
expect_failure() {
  local name=$1 pattern=$2
  shift 2
  "$bin" tokenize "$@" <"$work/stdin" >/dev/null 2>"$work/$name.stderr"
  local rc=$?
  if [[ $rc -ne 1 ]] || [[ $(grep -c '^megatrain: error: ' "$work/$name.stderr") -ne 1 ]] ||
    ! grep -q -- "$pattern" "$work/$name.stderr"; then
    echo "FAIL $name: rc=$rc, stderr:"; cat "$work/$name.stderr"; status=1
  else
    echo "ok   $name: $(cat "$work/$name.stderr")"
  fi
}
echo 'text' >"$work/stdin"
expect_failure missing_model "$work/absent/tokenizer.json: no such file" --model "$work/absent"
printf '[1,2]\nnot json\n' >"$work/stdin"
expect_failure bad_ids "stdin line 2: expected a JSON array of token ids" --model "$fixtures/gpt2" --decode
echo '[1,99999]' >"$work/stdin"
expect_failure unknown_id "token id 99999 is not in the vocabulary" --model "$fixtures/gpt2" --decode
exit $status
