#!/usr/bin/env bash
# `megatrain calc-resource`: golden --json plans for known models (tests/cli/calc_resource/*.json), the text
# report, and bad input (unknown model, nonsense sizes, a missing flag without a terminal, a run that fits no
# machine): exit status 1 and one error line naming the problem; --packing's larger cuDNN reserve.
# Usage: calc_resource.sh MEGATRAIN_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0

golden() {
  local name=$1
  shift
  if ! "$bin" calc-resource "$@" --json </dev/null >"$work/$name.json" 2>"$work/$name.err" ||
     ! diff -u "$src/tests/cli/calc_resource/$name.json" "$work/$name.json"; then
    echo "FAIL golden $name"; cat "$work/$name.err"; status=1
  else
    echo "ok   golden $name"
  fi
}

expect_failure() {
  local name=$1 pattern=$2
  shift 2
  "$bin" calc-resource "$@" </dev/null >"$work/$name.out" 2>"$work/$name.err"
  local rc=$?
  if [[ $rc -ne 1 ]] || [[ $(grep -c '^megatrain: error: ' "$work/$name.err") -ne 1 ]] ||
     ! grep -q -- "$pattern" "$work/$name.err"; then
    echo "FAIL $name: rc=$rc"; cat "$work/$name.out" "$work/$name.err"; status=1
  else
    echo "ok   $name: $(cat "$work/$name.err")"
  fi
}

golden qwen2.5-3b_h200_bench --gpu-mem 139 --ram 125 --model qwen2.5-3b --seq 1024 --batch 8 --checkpoint-interval 1
golden qwen2.5-7b_h200_256g --gpu-mem 139 --ram 256 --model qwen2.5-7b --seq 1024 --batch 8 --checkpoint-interval 4
golden llama-3.1-70b_a100_2tb_2ranks --gpu-mem 80 --ram 2048 --ranks 2 --model llama-3.1-70b --seq 4096 --batch 16
# A GPU too small for 36 checkpoints of 32 768 tokens: automatic places them in host RAM (two staging buffers left).
golden qwen2.5-3b_16g_host_checkpoints --gpu-mem 16 --ram 125 --model qwen2.5-3b --seq 32768 --batch 1 \
  --checkpoint-interval 1
golden llama-3.1-70b_a100_512g_nvme --gpu-mem 80 --ram 512 --ranks 2 --model llama-3.1-70b --seq 4096 --batch 16 \
  --checkpoint-interval 2 --offload optimizer+master --nvme-gb 15360 --nvme-gbs 28

# The state tier: RAM and NVMe bytes apart, the step time the traffic imposes, the largest model of each mode.
"$bin" calc-resource --gpu-mem 139 --ram 1536 --ranks 2 --model llama-3.1-70b --seq 4096 --batch 16 --offload optimizer \
  --nvme-gb 15360 --nvme-gbs 48 >"$work/nvme" 2>&1
for want in "host: 8 B/parameter (master 4, Adam m 0, Adam v 0, gradient 4, streaming copy 0)" \
            "NVMe (store.offload optimizer): 8 B/parameter = 525.67 GiB of 14305.11 GiB" \
            "s at 48.0 GB/s, against the GPU's 65.42 s" "of which the next forward (16.41 s) overlaps it: predicted step 72.53 s; hidden from batch 23 × 4096" \
            "largest model by store.offload: none 92.77 B (16 B/parameter RAM); optimizer 185.54 B (8 B/parameter RAM, 8 NVMe"; do
  grep -qF -- "$want" "$work/nvme" || { echo "FAIL offload report lacks '$want'"; cat "$work/nvme"; status=1; }
done

# A config.json path works as well as a name; the text report names every part.
"$bin" calc-resource --gpu-mem 139 --ram 256 --model "$src/configs/models/qwen2.5-7b.json" --seq 1024 >"$work/text" 2>&1
for want in "16 B/parameter (master 4, Adam m 4, Adam v 4, gradient 4, streaming copy 0)" "weight slots" \
            "checkpoints" "layer workspace" "largest trainable model for this RAM" "recommended: batch_size 8" \
            "verdict: fits"; do
  grep -qF -- "$want" "$work/text" || { echo "FAIL text report lacks '$want'"; cat "$work/text"; status=1; }
done

ok=(--gpu-mem 80 --ram 512 --seq 1024)
expect_failure unknown_model "--model 'qwen9-1t' is neither a known model (.*qwen2.5-7b" "${ok[@]}" --model qwen9-1t
printf '{"hidden_size": 8}' >"$work/bad.json"
expect_failure bad_config_json "bad.json" "${ok[@]}" --model "$work/bad.json"
expect_failure negative_gpu "--gpu-mem must be a positive number of GiB, not -3" --gpu-mem -3 --ram 512 --seq 1024 --model qwen2.5-7b
expect_failure zero_ram "--ram must be a positive number of GiB, not 0" --gpu-mem 80 --ram 0 --seq 1024 --model qwen2.5-7b
expect_failure zero_seq "--seq must be positive, not 0" --gpu-mem 80 --ram 512 --seq 0 --model qwen2.5-7b
expect_failure zero_batch "--batch must be positive, not 0" "${ok[@]}" --model qwen2.5-7b --batch 0
expect_failure missing_flag "--gpu-mem is missing (stdin is not a terminal" --ram 512 --seq 1024 --model qwen2.5-7b
expect_failure no_flags_no_tty "--gpu-mem is missing"
expect_failure gpu_too_small "GPU memory: even micro-batch 1 at every checkpoint interval needs more than 1.00 GiB" \
  --gpu-mem 1 --ram 4096 --seq 1024 --model llama-3.1-70b
expect_failure ram_too_small "host RAM: the store needs 1083.41 GiB but 230.40 GiB of 256.00 GiB is usable" \
  --gpu-mem 141 --ram 256 --seq 1024 --model qwen2.5-72b
expect_failure nvme_too_small "NVMe: the state tier needs 788.50 GiB but the paths hold 465.66 GiB" \
  --gpu-mem 80 --ram 512 --ranks 2 --seq 4096 --model llama-3.1-70b --offload optimizer+master --nvme-gb 500
expect_failure bad_offload "--offload must be none, optimizer or optimizer+master, not 'disk'" "${ok[@]}" --model qwen2.5-7b \
  --offload disk
expect_failure bad_checkpoints "--activation-checkpoints must be auto, gpu or host, not 'disk'" "${ok[@]}" \
  --model qwen2.5-7b --activation-checkpoints disk
expect_failure host_checkpoints_beyond_ram "host RAM: the store needs 45.98 GiB and the activation checkpoints \
(training.activation_checkpoints host) 4.50 GiB but 50.40 GiB of 56.00 GiB is usable" --gpu-mem 139 --ram 56 --seq 32768 \
  --batch 1 --checkpoint-interval 1 --model qwen2.5-3b --activation-checkpoints host
expect_failure beyond_positions "--seq 65536 exceeds the 32768 positions of model qwen2.5-3b (max_position_embeddings" \
  --gpu-mem 139 --ram 125 --seq 65536 --batch 1 --model qwen2.5-3b
expect_failure one_sequence_too_long "one sequence of 32768 tokens does not fit: the longest that fits is 15360 tokens" \
  --gpu-mem 20 --ram 1500 --seq 32768 --batch 1 --model qwen2.5-7b
"$bin" calc-resource --gpu-mem 139 --ram 125 --seq 4096 --batch 1 --model qwen2.5-3b </dev/null >"$work/longest" 2>&1
grep -q "^longest trainable sequence (batch 1, every layer recomputing): 32768 tokens; GPU memory holds [0-9]* at" \
  "$work/longest" || { echo "FAIL longest trainable sequence line"; cat "$work/longest"; status=1; }
grep -q "^  with the activation checkpoints in host RAM: 32768 tokens; GPU memory and host RAM hold [0-9]* at \
checkpoint_interval [0-9]* (.* on the GPU, .* of checkpoints in host RAM)" "$work/longest" ||
  { echo "FAIL longest sequence with host checkpoints line"; cat "$work/longest"; status=1; }
"$bin" calc-resource --gpu-mem lots --ram 1 --seq 1 --model x </dev/null >/dev/null 2>&1 && { echo "FAIL --gpu-mem lots accepted"; status=1; }
# --packing plans as train's preflight does with dataset.packing: the cuDNN reserve also holds one segment as long as
# the sequence (at 2 x 32768 the deterministic backward's tiles gather nothing, so the segment's rows add to them).
workspace() {
  "$bin" calc-resource --gpu-mem 139 --ram 1500 --seq 32768 --batch 2 --model qwen2.5-3b "$@" --json </dev/null 2>/dev/null |
    python3 -c "import json, sys; print(json.load(sys.stdin)['gpu']['attention_workspace'])"
}
unpacked=$(workspace) packed=$(workspace --packing)
if [[ -n $unpacked && -n $packed && $packed -gt $unpacked ]]; then
  echo "ok   --packing: cuDNN reserve $unpacked -> $packed B"
else
  echo "FAIL --packing: cuDNN reserve '$unpacked' -> '$packed' B"; status=1
fi

# On a terminal without flags it asks (script(1) provides the terminal).
if command -v script >/dev/null; then
  printf '139\n256\nqwen2.5-7b\n1024\n' | timeout 20 script -qec "$bin calc-resource" /dev/null >"$work/tty" 2>&1
  for want in "GPU memory (GiB):" "host RAM (GiB):" "sequence length (tokens):" "verdict: fits"; do
    grep -qF -- "$want" "$work/tty" || { echo "FAIL interactive run lacks '$want'"; cat "$work/tty"; status=1; }
  done
fi
exit $status
