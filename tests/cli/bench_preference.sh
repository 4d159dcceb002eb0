#!/usr/bin/env bash
# `megatrain bench --stage dpo|kto` on the CPU backend: the reference pass is timed before the steps and reported
# (reference_pass_s, reference_tokens_per_s); a dpo step holds 2 × batch × seq tokens (chosen and rejected), a kto
# step as many (completions and KL sequences); the losses are finite, and step 1's is what policy == reference gives:
# log 2 for DPO's sigmoid, 0.5 for KTO (kl 0, every reward 0); orpo has no reference pass; --pack is refused for dpo in
# one error line.
# Usage: bench_preference.sh MEGATRAIN_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
bench() { MEGATRAIN_BACKEND=cpu "$bin" bench --model "$src/configs/models/demo-tiny.json" --dtype float32 --batch 3 \
  --seq 24 --steps 2 --warmup 0 --json "$@" 2>/dev/null; }
check() {  # json, stage, step 1's loss (or "" for any finite one), whether a reference pass runs (1/0)
  python3 - "$@" <<'PY' || exit 1
import json, math, sys
d, stage, first, referenced = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4] == "1"
def fail(why): sys.exit(f"FAIL: {stage}: {why}: {sys.argv[1][:600]}")
for key in ("stage", "reference_pass_s", "reference_tokens_per_s", "reference_tokens", "median_tokens_per_s"):
    if key not in d: fail(f"{key} missing")
if d["stage"] != stage: fail("stage")
steps = d["steps"]
if len(steps) != 2: fail("two measured steps")
if any(s["tokens"] != 2 * 3 * 24 for s in steps): fail("a step's tokens should be 2 x batch x seq")
if not all(math.isfinite(s["loss"]) for s in steps): fail("a loss is not finite")
if first and abs(steps[0]["loss"] - float(first)) > 1e-6: fail(f"step 1's loss should be {first}")
if referenced != (d["reference_pass_s"] > 0 and d["reference_tokens_per_s"] > 0): fail("the reference pass's figures")
if referenced and d["reference_tokens"] != 2 * 2 * 3 * 24: fail("the reference pass covers both steps' sequences")
PY
}
dpo=$(bench --stage dpo) || { echo "FAIL: bench --stage dpo exited non-zero"; exit 1; }
check "$dpo" dpo "$(python3 -c 'import math; print(math.log(2))')" 1
kto=$(bench --stage kto) || { echo "FAIL: bench --stage kto exited non-zero"; exit 1; }
check "$kto" kto 0.5 1
orpo=$(bench --stage dpo --pref-loss orpo) || { echo "FAIL: bench --stage dpo --pref-loss orpo exited non-zero"; exit 1; }
check "$orpo" dpo "" 0
log=$(MEGATRAIN_BACKEND=cpu "$bin" bench --model "$src/configs/models/demo-tiny.json" --stage dpo --batch 2 --seq 16 \
  --steps 1 --warmup 0 2>&1) || { echo "FAIL: bench --stage dpo (text) exited non-zero"; exit 1; }
grep -qE 'reference pass: [0-9]+ tokens/s in [0-9.]+ s, [0-9.]+x the dpo step' <<<"$log" \
  || { echo "FAIL: no reference pass line with its ratio: $log"; exit 1; }
err=$(MEGATRAIN_BACKEND=cpu "$bin" bench --model "$src/configs/models/demo-tiny.json" --stage dpo --pack 3-9 2>&1 >/dev/null)
[[ $? -ne 0 && $(grep -c -- '--pack 3-9 is for --stage sft' <<<"$err") -eq 1 ]] || { echo "FAIL: dpo --pack: $err"; exit 1; }
echo "ok: $dpo" | cut -c1-200
