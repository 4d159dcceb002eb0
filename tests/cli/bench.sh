#!/usr/bin/env bash
# `megatrain bench` on the CPU backend: a tiny shape runs its steps and prints one JSON object with the
# documented medians (16 B/parameter by default, 18 with a bf16 streaming copy); --moe-keep-layers on a MoE shape;
# --moe-hot-expert sends about half of the tokens to one expert (of 16, top 2) and is refused on a dense shape; a bad
# shape path fails with one error line.
# Usage: bench.sh MEGATRAIN_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work_err=$(mktemp) work_dir=$(mktemp -d)
trap 'rm -rf "$work_err" "$work_dir"' EXIT
json=$(MEGATRAIN_BACKEND=cpu "$bin" bench --model "$src/configs/models/demo-tiny.json" --batch 2 --seq 32 --steps 2 \
  --warmup 1 --json 2>/dev/null) || { echo "FAIL: bench exited non-zero"; exit 1; }
for key in median_step_s steady_step_s median_tokens_per_s median_tflops median_h2d_gbs median_d2h_gbs median_compute_busy \
           steady_compute_wait_s plan_first_pass_wait_s plan_recommended_pass_batch median_parameters_pass_s median_moments_pass_s \
           peak_gpu_memory_gib host_bytes_per_parameter; do
  grep -q "\"$key\":" <<<"$json" || { echo "FAIL: $key missing in: $json"; exit 1; }
done
python3 -c 'import json, sys; d = json.loads(sys.argv[1]); assert d["median_parameters_pass_s"] > 0 and d["parameters_pass_gparams_per_s"] > 0 and all(s["parameters_pass_s"] > 0 for s in d["steps"])' "$json" \
  || { echo "FAIL: the optimizer's parameters pass of the updates before the timed steps should be reported: $json"; exit 1; }
grep -q '"host_bytes_per_parameter":16' <<<"$json" || { echo "FAIL: the default store (fp32 master streamed) should hold 16 B/parameter"; exit 1; }
copy=$(MEGATRAIN_BACKEND=cpu "$bin" bench --model "$src/configs/models/demo-tiny.json" --batch 2 --seq 32 --steps 1 \
  --warmup 0 --stream-dtype bfloat16 --json 2>/dev/null) || { echo "FAIL: bench --stream-dtype bfloat16 exited non-zero"; exit 1; }
grep -q '"host_bytes_per_parameter":18' <<<"$copy" || { echo "FAIL: a bf16 streaming copy should make 18 B/parameter"; exit 1; }
# --pack: packed examples train (the model FLOPs count their own keys: fewer than the whole sequence's); a bad
# range is one error line naming the flag.
packed=$(MEGATRAIN_BACKEND=cpu "$bin" bench --model "$src/configs/models/demo-tiny.json" --batch 2 --seq 32 --steps 1 \
  --warmup 0 --pack 3-9 --json 2>/dev/null) || { echo "FAIL: bench --pack 3-9 exited non-zero"; exit 1; }
python3 -c 'import json, sys; a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2]); assert b["steps"][0]["model_tflops"] / b["steps"][0]["tflops"] < a["steps"][0]["model_tflops"] / a["steps"][0]["tflops"]' "$json" "$packed" \
  || { echo "FAIL: packed examples should count fewer attention FLOPs a token: $packed"; exit 1; }
err=$(MEGATRAIN_BACKEND=cpu "$bin" bench --model "$src/configs/models/demo-tiny.json" --pack 9-3 2>&1 >/dev/null)
[[ $? -ne 0 && $(grep -c -- '--pack must be LO-HI' <<<"$err") -eq 1 ]] || { echo "FAIL: bad --pack: $err"; exit 1; }
# --moe-keep-layers: the last MoE layers keep their expert activations, as asked (the CPU backend keeps none by
# itself); the JSON and the log line say how many.
for keep in auto 1; do
  flag=(); [[ $keep == auto ]] || flag=(--moe-keep-layers "$keep")
  moe=$(MEGATRAIN_BACKEND=cpu "$bin" bench --model "$src/tests/fixtures/mixtral/model" --batch 2 --seq 16 --steps 1 \
    --warmup 0 "${flag[@]}" --json 2>"$work_err") || { echo "FAIL: bench --moe-keep-layers $keep exited non-zero"; exit 1; }
  want=$([[ $keep == auto ]] && echo 0 || echo "$keep")
  grep -q "\"moe_keep_layers\":$want" <<<"$moe" && grep -q "bench: MoE: $want of 3 MoE layers keep" "$work_err" \
    || { echo "FAIL: --moe-keep-layers $keep: $(grep MoE "$work_err") $moe" | cut -c1-400; exit 1; }
done
# --moe-hot-expert: Mixtral's fixture shape with 16 experts (top 2: 1/8 of the tokens each when balanced); the busiest
# expert's share of a forward's tokens near a half with the flag, far below it without, and said on the log line.
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); d["num_local_experts"] = 16; json.dump(d, open(sys.argv[2], "w"))' \
  "$src/tests/fixtures/mixtral/model/config.json" "$work_dir/config.json"
for hot in 0 1; do
  flag=(); ((hot)) && flag=(--moe-hot-expert)
  share[$hot]=$(MEGATRAIN_BACKEND=cpu "$bin" bench --model "$work_dir/config.json" --batch 4 --seq 32 --steps 1 --warmup 0 \
    "${flag[@]}" --json 2>"$work_err" | python3 -c 'import json, sys; print(json.load(sys.stdin)["moe_busiest_expert_share"])') \
    || { echo "FAIL: bench ${flag[*]} on 16 experts exited non-zero: $(tail -n 2 "$work_err")"; exit 1; }
done
python3 -c 'import sys; cold, hot = map(float, sys.argv[1:]); assert 0.4 <= hot <= 0.7 and cold < hot - 0.2, (cold, hot)' "${share[0]}" "${share[1]}" \
  || { echo "FAIL: --moe-hot-expert: the busiest expert's share ${share[1]} (balanced ${share[0]})"; exit 1; }
MEGATRAIN_BACKEND=cpu "$bin" bench --model "$work_dir/config.json" --batch 4 --seq 32 --steps 1 --warmup 0 --moe-hot-expert \
  >/dev/null 2>"$work_err" || { echo "FAIL: bench --moe-hot-expert without --json exited non-zero"; exit 1; }
grep -q "the busiest expert took .* of a forward's tokens on average (--moe-hot-expert)" "$work_err" \
  || { echo "FAIL: --moe-hot-expert: no log line: $(grep 'experts with tokens' "$work_err")"; exit 1; }
err=$(MEGATRAIN_BACKEND=cpu "$bin" bench --model "$src/configs/models/demo-tiny.json" --moe-hot-expert 2>&1 >/dev/null)
[[ $? -eq 1 && $(grep -c '^megatrain: error: bench: --moe-hot-expert needs mixture-of-experts layers' <<<"$err") -eq 1 ]] \
  || { echo "FAIL: --moe-hot-expert on a dense shape: $err"; exit 1; }
err=$("$bin" bench --model "$src/configs/models/absent.json" 2>&1 >/dev/null)
[[ $? -eq 1 && $(grep -c '^megatrain: error: ' <<<"$err") -eq 1 ]] || { echo "FAIL: bad shape: $err"; exit 1; }
echo "ok: $json" | cut -c1-200
