#!/usr/bin/env bash
# calc-resource's advice is the plan's (cli/calc_resource_command.cpp): the recommended micro-batch is the one the
# GPU plan uses; the mixture-of-experts step bound is figured at the given --gpu-tflops and --pcie-gbs; a run that
# does not fit names every shortfall and the settings that fix each, and applying a fix it says fits makes the
# re-planned run fit (Qwen3.5-27B on a 24 GiB GPU with 512 GiB of RAM: model.stream_dtype bfloat16; Qwen2.5-7B in
# 64 GiB of RAM: store.offload optimizer).
# Usage: calc_resource_advice.sh MEGATRAIN_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
cd "$src" || exit 1
status=0
fail() { echo "FAIL $1"; status=1; }
calc() { "$bin" calc-resource "$@" </dev/null 2>&1; }

# advice_applied NAME WANT_FIX FLAGS_OF_THE_FIX -- RUN FLAGS: the verdict lists the fix as fitting; with it, it fits.
advice_applied() {
  local name=$1 fix=$2 applied=$3
  shift 4
  local out
  out=$(calc "$@") && fail "$name: fits without the fix"
  grep -q "^verdict: does not fit: .*fixes, each planned again: .*$fix (fixes [^)]*: then it fits)" <<<"$out" ||
    fail "$name: the verdict lists '$fix' as a fix that fits: $(grep '^verdict' <<<"$out")"
  # shellcheck disable=SC2086
  out=$(calc "$@" $applied) || fail "$name: with $applied the run still does not fit: $(grep '^verdict' <<<"$out")"
  grep -q "^verdict: fits$" <<<"$out" || fail "$name: re-planned with $applied"
  echo "ok   $name: '$fix' listed as fitting, and with $applied the plan fits"
}
advice_applied qwen3.5-27b_24g "model.stream_dtype: bfloat16" "--stream-dtype bfloat16" -- \
  --gpu-mem 24 --ram 512 --model qwen3.5-27b --seq 2048
advice_applied qwen2.5-7b_64g "store.offload: optimizer" "--offload optimizer" -- \
  --gpu-mem 80 --ram 64 --model qwen2.5-7b --seq 1024

# Both short: each shortfall named.
out=$(calc --gpu-mem 8 --ram 64 --model qwen2.5-7b --seq 4096)
grep -q "^verdict: does not fit: host RAM: .*; GPU memory: .*; " <<<"$out" || fail "both shortfalls named: $(grep '^verdict' <<<"$out")"

# The recommended micro-batch is the plan's (70B on an 80 GiB A100: the plan uses 1 where 6 would fit).
out=$(calc --gpu-mem 80 --ram 2048 --ranks 2 --model llama-3.1-70b --seq 4096 --batch 16)
plan=$(sed -n 's/^GPU (.*micro_batch_size \([0-9]*\),.*/\1/p' <<<"$out")
recommended=$(sed -n 's/^recommended: .*micro_batch_size \([0-9]*\),.*/\1/p' <<<"$out")
[[ -n $plan && $plan == "$recommended" ]] || fail "recommended micro_batch_size $recommended, the plan's $plan"

# The mixture of experts' step bound at the given rates.
out=$(calc --gpu-mem 80 --ram 512 --model mixtral-8x7b --seq 1024 --gpu-tflops 100 --pcie-gbs 25)
grep -q "^compute-bound from: .* per pass at 25 GB/s) .* at 100 TFLOP/s" <<<"$out" ||
  fail "the step bound uses --gpu-tflops and --pcie-gbs: $(grep '^compute-bound' <<<"$out" | cut -c1-200)"
[[ $status -eq 0 ]] && echo "ok   both shortfalls named; recommended micro-batch $recommended is the plan's; MoE bound at 100 TFLOP/s, 25 GB/s"
exit $status
