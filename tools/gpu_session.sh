#!/usr/bin/env bash
# One GPU-machine session, run from the repository root with a bundle made by `tools/bundle.sh --tests`
# in bundle/: the CUDA op table, the PyTorch-parity fixtures on the CUDA backend, pipeline variants, the
# benchmarks and the PyTorch reference. Logs go to $OUT; a short table is printed last.
# Usage: tools/gpu_session.sh [quick|full|dp|families|new-families|hybrid|nvme|moe|moe-keep|moe-imbalance|mla|pref|steptime|longseq|attention|softcap|segments|survey|figures|ragged|nondeterministic|tiles|ab]
# (quick: the tests, with BF16_REPORT_S=N then tools/bf16_report.py on each bf16 parity run for up to N seconds;
# full: the tests and the one-GPU benchmarks with PyTorch's; dp: the tests and the data-parallel part, on 2 or more GPUs; families: the tests, then Qwen2.5-3B batch 64 and Qwen2.5-7B batch 32 with this build and,
# where bundle_base/ holds an earlier build, with that one in the same call, then Gemma-2-9B and Phi-4 at batch 32 with
# as many layers as the host RAM holds; new-families: the tests, then Qwen2.5-7B at batch 32 × 1024 and, at the same
# batch, each newer family's shape in configs/models/ that NEW_FAMILY_SHAPES names (shape:layers[:first layer], layers 0 = all
# of them; default the 3-9B dense shapes and the larger ones trimmed to what 125 GiB of host RAM holds), each also with
# bundle_base/'s build where it holds one; hybrid: the tests, then MiniMax-Text-01's first layer (lightning attention, 8 of its
# 32 experts) at 8 × 4096, then the Qwen3.5-27B shape with 12 of its 64 layers (9 Gated
# DeltaNet, 3 gated attention: what 125 GiB of host RAM holds at 16 B/parameter) at batch 32 × 1024 and 8 × 4096, and
# the same 4096 run with per-op device times, whose gated_delta_rule rows time the delta-rule kernels against the GEMMs
# of the same step, `bench-delta-rule` at 8 × 4096 with the chunked and the recurrent kernel, transformers' torch
# chunked delta rule and flash-linear-attention's Triton one where its wheels are carried in pywheels/ (pip download
# fla-core einops --no-deps -d pywheels) on that shape (tools/bench_delta_rule.py: 8 × 4096 and 1 × 32768) and the Qwen3.5-35B-A3B shape
# with 6 of its 40 layers at 8 × 4096; nvme: the state tier on a scratch directory of the machine's disk ($NVME_DIR, default .nvme-scratch
# here, removed after): bench-optim in each offload mode with the disk probe's ceiling, then Qwen2.5-3B batch 64 × 1024
# in each mode with the plan's predicted step time next to the measured; SKIP_TESTS=1 skips the op table and parity;
# moe: the tests, then Qwen3-30B-A3B at 64 × 4096 with and without the optimizer, GPT-OSS-120B's one layer, the
# Qwen3-30B-A3B and Mixtral-8x7B layer shapes with as many layers as 125 GiB of RAM holds at
# the plan's recommended batch, the expert GEMMs as a loop, grouped and through CUTLASS (MEGATRAIN_MOE_GEMM; and the
# probe tests_gpu "[.moe_gemm_bench]": each expert GEMM alone against a dense GEMM of its FLOPs), a step-time sweep over
# tokens per step on the Qwen3-30B-A3B shape, and 2 Llama 4 Scout layers at 16 × 4096 and 4 × 16384 (chunked); longseq: the tests, then Qwen2.5-3B at 8 × 8192 and 2 × 32768, then batch
# 1 at the longest sequence the plan predicts for Qwen2.5-3B and Qwen2.5-7B on this GPU (`calc-resource`'s
# longest_sequence.gpu_memory_tokens and its checkpoint interval), capped at the issue's targets, 524 288 and 262 144
# tokens (LONGSEQ_3B / LONGSEQ_7B override; one step, LONGSEQ_TIMEOUT s); attention (about 300 s): tests_gpu
# "[cudnn],[attention]" (not the whole op table) and "[.long_attention]", the parity fixtures on CUDA, then Qwen2.5-3B 8 × 8192, 2 × 32768 and
# 32 × 1024 with MEGATRAIN_ATTENTION=ours and =auto (each bench's attention plan and per-direction choice noted);
# ATTENTION_PROBE=1 adds the probe (tests_gpu "[.attention_bench]": cuDNN plans, engines, ours-vs-cuDNN TFLOP/s) and
# tools/bench_torch_attention.py at the same shapes, with and without deterministic algorithms); softcap: tests_gpu "[cudnn],[attention]", the parity fixtures on
# CUDA, the probe (with Gemma-2-9B's soft-capped head_dim-256 shapes), then Gemma-2-9B with 24 of its 42 layers at
# 32 × 1024 with MEGATRAIN_ATTENTION=ours and =auto (each bench's attention plan and cuDNN graph lines noted);
# segments: tests_gpu "[segments]" first, then "[cudnn],[attention]" and the parity fixtures on CUDA, the packed probe
# (tests_gpu "attention probe: packed segments on our kernel and on cuDNN's virtual batch"), then with
# MEGATRAIN_ATTENTION=ours and =auto Qwen2.5-3B packed (`bench --pack`: 8 × 4096 of 64-2048-token examples after 3
# warm-up steps, 2 × 32768 of 2048-16384 after 2) and 2 Llama 4 Scout layers at 4 × 16384 (its 8192-token chunks),
# each pair's losses and step times side by side, and each auto run's cuDNN graph builds); survey: tests_gpu
# "[.attention_survey]" (every engine config cuDNN offers the deterministic and the accumulator backward at 4 × 8192
# and 1 × 32768, timed) and the probe up to 32768 tokens, with the node's cuDNN and, where PyTorch's wheel carries its
# own, with that one (SURVEY_LIBS: which of the two, default "node torch"), and with the cuDNN libraries in the
# directory SURVEY_CUDNN where set (as unpacked from the nvidia-cudnn-cu13 wheel; SURVEY_PROBE=0 leaves the probe out),
# then tools/bench_torch_attention.py and tools/bench_flash_attn_cute.py in the same call; figures (about 400 s): tests_gpu
# "[cudnn],[attention],[segments]" and the parity fixtures on CUDA, the probe up to 32768 tokens,
# tools/bench_torch_attention.py with and without deterministic algorithms, tools/bench_flash_attn_cute.py
# (FlashAttention's CuTe-DSL kernels, where the flash-attn-4 wheel and its dependencies are carried in pywheels/: pip
# download --pre flash-attn-4 nvidia-cutlass-dsl-libs-cu13 --no-deps, with nvidia-cutlass-dsl, its -libs-base and
# -libs-core, quack-kernels, apache-tvm-ffi, torch-c-dlpack-ext, cuda-bindings, cuda-pathfinder and einops), then
# Qwen2.5-3B at 32 × 1024, 8 × 8192 and 2 × 32768 (MEGATRAIN_ATTENTION=auto; FIGURES_SKIP_BENCH=1 leaves them out):
# the attention issue's figures side by side in one call; ragged (about 400 s): the tests as figures runs them, then with
# MEGATRAIN_CUDNN_RAGGED=1 and =0 (ragged forward and backward, or padded graphs with gathers and staging) the packed
# probe, Qwen2.5-3B packed (8 × 4096 of 64-2048-token examples, 2 × 32768 of 2048-16384 unless RAGGED_SKIP_LONG=1)
# and Qwen2.5-3B at 32 × 1000 (staged into the 1024 bucket), each pair's losses, step and fwd+bwd times side by side,
# with the deterministic backward or, RAGGED_DETERMINISTIC=0, the non-deterministic one; nondeterministic (about 300 s): the tests
# as figures runs them (the op table's non-deterministic rows among them), then Qwen2.5-3B at 8 × 8192 and 2 × 32768
# with MEGATRAIN_ATTENTION_DETERMINISTIC=0 and =1; tiles (about 400 s): the tests as figures runs them, the padding
# probe (with the tiled backward of 2 × 32768 rows unpadded, padded all valid, 20000 and 9000 valid), the packed probe,
# then Qwen2.5-3B packed (2 × 32768 of 2048-16384-token documents, 8 × 4096 of 64-2048-token examples) and unpacked at
# 2 × 32768; ab: the tests as figures runs them, then, where bundle_base/megatrain holds an earlier build (the
# libraries of bundle/; tools/bundle_base.sh COMMIT makes it), Qwen2.5-3B at 32 × 1024, 8 × 8192, 2 × 32768 and 2 × 32768 packed (2048-16384), Qwen2.5-7B
# at 32 × 1024 and Qwen3-30B-A3B's 10 layers at 64 × 4096 (AB_SHAPES: "model:layers batch seq steps [--pack L-H]"
# shapes separated by ";", layers 0 = all), the earlier build and this one in turn on each shape, AB_ROUNDS times
# (default 1), then each build's median fwd+bwd and step over its measured steps (each run's last left out: it waits
# for the final update) and their ratio, then, where bundle_base/tests_gpu holds the earlier build's op table, the
# packed attention probe on both builds AB_PROBE_ROUNDS times (default 2); mla: tests_gpu
# "[cudnn_graph],[cudnn],[mla]" and the MLA parity fixtures
# on CUDA, the latent-attention probe (tests_gpu "[.mla_bench]": cuDNN and ours at q/k 192, value 128, against head
# dim 128), then GLM-4.7-Flash and DeepSeek-V2-Lite (MoE layers 1-4; MLA_SHAPES: shape:layers:first) at 32 × 1024
# with MEGATRAIN_ATTENTION=ours and =auto; moe-keep: tests_gpu "[moe]" and the [moe-keep] fixtures on CUDA,
# Qwen3-30B-A3B 10 layers at 64 × 4096 with the plan's MoE layers keeping and with none, and DeepSeek-V3's layers 3-4
# with 32 of its experts at 32 × 4096 (DSV3_BATCHES); moe-imbalance: Qwen3-30B-A3B 10 layers at 64 × 4096 balanced,
# then with `bench --moe-hot-expert` (expert 0 of every layer chosen by about half of the tokens), the hot run's
# speed over the balanced one's and each one's busiest expert (SKIP_TESTS=1 for these alone); pref: tests_gpu "[cross_entropy]" and the [preference]
# fixtures on CUDA, then Qwen2.5-7B's SFT step at 64 × 1024, its DPO step at 32 pairs × 2 × 1024 (`bench --stage dpo`,
# after the reference pass over the bench's batches) and, unless PREF_SKIP_KTO=1, its KTO step at 32 × (1 + KL) × 1024,
# in the same call, with the preference issue's two ratios: the DPO step's tokens/s over SFT's (target >= 0.95) and
# the reference pass's tokens/s over the DPO step's (target >= 2.5); steptime (about 900 s: split it with
# STEPTIME_GROUPS, which of qwen3b qwen30b qwen7b gptoss dsv3 torch run, default all): tests_gpu "[cuda][rates]" (the
# step-rate probe), then the plan's predicted step next to the measured one (steady steps) on Qwen2.5-3B at 8-64 × 1024,
# Qwen3-30B-A3B 10 layers at 64 × 4096 with the plan's MoE layers keeping and with none, Qwen2.5-7B at 32 and 64,
# GPT-OSS-120B's layer at 104 × 4096 and DeepSeek-V3's layers 3-4 with 32 experts at 32 × 4096 (the call's first bench
# probes the rates, cached under $OUT/cache, and logs them; the rest plan on them, taken to the fitted ones by
# plan/step_rates.h; each run whose plan took another pass count than the memory rule's, or more layers recomputing
# than memory asks, runs again with the memory's), then PyTorch at 8 and 16 × 1024
set -uo pipefail
mode=${1:-full}
out=${OUT:-/tmp/megatrain-gpu}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/bundle/lib:${LD_LIBRARY_PATH:-}
export MEGATRAIN_SOURCE_DIR=$PWD MEGATRAIN_BINARY_DIR=$out/scratch OMP_NUM_THREADS=16
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Every bench plans on the card's rates, probed by the first and cached under $out/cache (runtime.step_rates'
# default since 183625f); named here so that an earlier build in bundle_base/, whose default may be the H200's
# constants, plans on the same rates and an A/B compares builds, not plans.
export XDG_CACHE_HOME=$out/cache MEGATRAIN_STEP_RATES=${MEGATRAIN_STEP_RATES:-cached}
b=bundle
summary=()
note() { summary+=("$1"); echo "== $1"; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >"$out/gpu.txt" 2>&1
if [[ -z ${SKIP_OP_TABLE:-}${SKIP_TESTS:-} ]]; then
  gpu_tests=()
  [[ $mode == attention || $mode == softcap || $mode == segments ]] && gpu_tests=("[cudnn],[attention]")
  [[ $mode == figures || $mode == ragged || $mode == nondeterministic || $mode == tiles || $mode == ab ]] &&
    gpu_tests=("[cudnn],[attention],[segments]")
  [[ $mode == mla ]] && gpu_tests=("[cudnn_graph],[cudnn],[mla]")
  [[ $mode == moe-keep ]] && gpu_tests=("[moe]")
  [[ $mode == pref ]] && gpu_tests=("[cross_entropy]")
  if [[ $mode == segments ]]; then
    timeout 120 $b/tests_gpu "[segments]" >"$out/tests_gpu_segments.log" 2>&1
    note "tests_gpu [segments] rc=$? $(tail -n 2 "$out/tests_gpu_segments.log" | tr '\n' ' ')"
  fi
  timeout ${TESTS_GPU_TIMEOUT:-300} $b/tests_gpu "${gpu_tests[@]}" >"$out/tests_gpu.log" 2>&1
  note "tests_gpu ${gpu_tests[*]} rc=$? $(tail -n 2 "$out/tests_gpu.log" | tr '\n' ' ')"
  if [[ $mode == attention ]]; then  # the tiled backward at 20 K and 32 K tokens (minutes of CPU reference)
    timeout 300 $b/tests_gpu "[.long_attention]" >"$out/tests_gpu_long_attention.log" 2>&1
    note "tests_gpu [.long_attention] rc=$? $(tail -n 2 "$out/tests_gpu_long_attention.log" | tr '\n' ' ')"
  fi
fi
if [[ -z ${SKIP_TESTS:-} ]]; then
  parity=("[parity]")
  [[ $mode == mla ]] && parity=("[mla]")
  [[ $mode == moe-keep ]] && parity=("[moe-keep]")
  [[ $mode == pref ]] && parity=("[preference]")
  MEGATRAIN_BACKEND=cuda timeout ${PARITY_TIMEOUT:-300} $b/tests_integration "${parity[@]}" >"$out/parity_cuda.log" 2>&1
  note "${parity[*]} on cuda rc=$? $(tail -n 2 "$out/parity_cuda.log" | tr '\n' ' ')"
  if [[ -n ${BF16_REPORT_S:-} ]]; then  # tools/bf16_report.py over the bf16 runs the parity fixtures left, for that long
    mkdir -p "$out/scratch" && ln -sf "$PWD/$b/megatrain" "$out/scratch/megatrain"
    report_end=$(($(date +%s) + BF16_REPORT_S))
    for run in "$out"/scratch/test-scratch/parity-bf16-*; do
      [[ -d $run && $(date +%s) -lt $report_end ]] || continue
      case=${run##*/parity-bf16-}
      timeout 60 python3 tools/bf16_report.py "$case" --build "$out/scratch" >"$out/bf16_$case.log" 2>&1
      note "  bf16 $case: $(grep -E 'median ratio|not covered' "$out/bf16_$case.log" | tail -n 1)"
    done
  fi
fi
[[ $mode == quick ]] && { printf '%s\n' "${summary[@]}"; exit 0; }

# name, ranks (GPUs), bench arguments...: one `megatrain bench --json` under mpiexec, the host's $THREADS
# (default 16) optimizer threads split over the ranks.
bench() {
  local name=$1 n=$2
  shift 2
  OMP_NUM_THREADS=$((${THREADS:-16} / n)) timeout "${BENCH_TIMEOUT:-150}" mpiexec -np "$n" $b/megatrain bench --json --gpus-per-node "$n" "$@" \
    >"$out/bench_$name.json" 2>"$out/bench_$name.log"
  local rc=$?
  note "bench $name rc=$rc $(python3 -c "import json; d=json.load(open('$out/bench_$name.json')); print('gpus %d layers %d step %.3fs (fwd+bwd %.3f, optimizer %.3f) tok/s %.0f TFLOP/s %.1f (6N) %.1f (model) H2D %.1f D2H %.1f GB/s busy %.0f%% peak %.1f GiB' % (d['gpus'], d['layers'], d['median_step_s'], d['median_fwd_bwd_s'], d['median_optimizer_s'], d['median_tokens_per_s'], d['median_tflops'], d.get('median_model_tflops', 0), d['median_h2d_gbs'], d['median_d2h_gbs'], 100*d['median_compute_busy'], d['peak_gpu_memory_gib']))" 2>/dev/null || tail -n 3 "$out/bench_$name.log")"
}
# The PYTHONPATH that carries the wheels in pywheels/, unpacked into /tmp/megatrain-pylib (nothing installs on the
# device machine), with the directory the CuTe DSL's .pth file would add; $PYTHONPATH alone where there are none.
pywheels_path() {
  local pylib=/tmp/megatrain-pylib
  if compgen -G "pywheels/*.whl" >/dev/null; then
    [[ -d $pylib ]] || { mkdir -p $pylib && for w in pywheels/*.whl; do python3 -m zipfile -e "$w" $pylib; done; }
    echo "$pylib:$pylib/nvidia_cutlass_dsl/dsl_packages${PYTHONPATH:+:$PYTHONPATH}"
  else
    echo "${PYTHONPATH:-}"
  fi
}
# FlashAttention's CuTe-DSL kernels (the flash-attn-4 wheel and its dependencies carried in pywheels/) at the probe's
# shapes, deterministic and not (tools/bench_flash_attn_cute.py).
flash_cute_bench() {
  PYTHONPATH=$(pywheels_path) timeout "${FLASH_CUTE_TIMEOUT:-300}" python3 tools/bench_flash_attn_cute.py \
    >"$out/flash_attn_cute.log" 2>&1
  note "flash_attn.cute rc=$? $(grep -E '^batch|not available|^flash' "$out/flash_attn_cute.log" | tr '\n' ' ')"
}
# A bench's steps as (loss, step, fwd+bwd) triples.
bench_steps() {
  python3 -c "import json; print([(round(s['loss'],5), round(s['step_s'],3), round(s['fwd_bwd_s'],3)) for s in json.load(open('$out/bench_$1.json'))['steps']])" 2>&1 | tail -n 1
}
# name, bench arguments: where the plan of bench_$name chose another pass count than the memory rule's, the same
# bench with the memory rule's; else where it chose more layers to recompute than memory asks, the same bench with only
# those (the step-time choices' A/B, in the same call).
memory_choice() {
  local name=$1 memory
  shift
  memory=$(python3 -c "import json; d = json.load(open('$out/bench_$name.json')); \
print('passes %d' % d['memory_passes'] if d['passes'] != d['memory_passes'] else \
'recompute-layers %d' % d['memory_recompute_layers'] if d['recompute_layers'] > d['memory_recompute_layers'] else '')" \
    2>/dev/null)
  [[ -n $memory ]] && bench "${name}_${memory/ /}" 1 "$@" --${memory/ / }
}
torch_bench() {  # batch
  timeout 150 python3 tools/bench_torch_train.py --model configs/models/qwen2.5-3b.json --batch "$1" --seq 1024 \
    --steps 3 --warmup 1 >"$out/torch_qwen3b_b$1.json" 2>"$out/torch_qwen3b_b$1.log"
  note "torch qwen3b_b$1 rc=$? $(tail -c 300 "$out/torch_qwen3b_b$1.json" 2>/dev/null)"
}
qwen3b=(--model configs/models/qwen2.5-3b.json --seq 1024 --steps 3 --warmup 1)
q30=(--model configs/models/qwen3-30b-a3b.json --layers 10 --seq 4096 --steps 3 --warmup 1 --batch 64)

if [[ $mode == full ]]; then
  for batch in 16 32 64; do bench "qwen3b_b$batch" 1 "${qwen3b[@]}" --batch $batch; done
  bench qwen3b_12l 1 "${qwen3b[@]}" --batch 8 --layers 12
  bench qwen3b_36l 1 "${qwen3b[@]}" --batch 8
  (($(nproc) >= 32)) && THREADS=32 bench qwen3b_b32_32threads 1 "${qwen3b[@]}" --batch 32
  torch_bench 16
  torch_bench 32
fi
if [[ $mode == families ]]; then  # most wanted first: what runs out of time comes back as far as it got
  steps=(--seq 1024 --steps 3 --warmup 1)
  for build in bundle bundle_base; do
    [[ -x $build/megatrain ]] && b=$build bench "qwen3b_b64_$build" 1 --model configs/models/qwen2.5-3b.json "${steps[@]}" --batch 64
  done
  bench gemma2_9b_24l_b32 1 --model configs/models/gemma-2-9b.json --layers 24 "${steps[@]}" --batch 32
  bench phi4_14l_b32 1 --model configs/models/phi-4.json --layers 14 "${steps[@]}" --batch 32
  for build in bundle bundle_base; do
    [[ -x $build/megatrain ]] && b=$build bench "qwen7b_b32_$build" 1 --model configs/models/qwen2.5-7b.json "${steps[@]}" --batch 32
  done
fi
if [[ $mode == new-families ]]; then  # the Qwen2.5-7B baseline first, in the same call
  steps=(--seq 1024 --steps 3 --warmup 1 --batch 32)
  bench qwen7b_b32 1 --model configs/models/qwen2.5-7b.json "${steps[@]}"
  for shape in ${NEW_FAMILY_SHAPES:-granite-3.3-8b-base:0 c4ai-command-r7b-12-2024:0 olmo-3-1025-7b:0 hunyuan-7b-instruct:0 \
    exaone-4.0-32b:10 seed-oss-36b-instruct:10 smollm3-3b:0 olmo-2-0325-32b:12}; do
    IFS=: read -r name layers first <<<"$shape"
    picked=()
    [[ $layers != 0 ]] && picked=(--layers "$layers")
    [[ -n $first ]] && picked+=(--first-layer "$first")
    bench "${name}_b32" 1 --model "configs/models/$name.json" "${picked[@]}" "${steps[@]}"
    # An earlier build beside it where bundle_base/ holds one (the LM head's logits rows unpadded before 1c60e2d: the
    # vocabularies that are not multiples of 64 show what the padding gives).
    [[ -x bundle_base/megatrain ]] &&
      b=bundle_base bench "${name}_b32_base" 1 --model "configs/models/$name.json" "${picked[@]}" "${steps[@]}"
  done
  note "new families at 32 x 1024 (step, TFLOP/s 6N, model): $(python3 -c "import glob, json, os
for f in sorted(glob.glob('$out/bench_*_b32*.json')):
    try: d = json.load(open(f))
    except Exception: continue
    print('%s %.3f s %.1f %.1f;' % (os.path.basename(f)[6:-5], d['steady_step_s'], d['median_tflops'], d['median_model_tflops']), end=' ')")"
fi
if [[ $mode == hybrid ]]; then
  # MiniMax-Text-01's first layer (lightning attention, its recurrent kernel) with 8 of its 32 experts: 4.07 G
  # parameters with the embedding and head (with all 32, 7.9 G: more than 125 GiB of host RAM at 16 B/parameter; the
  # thirtieth session's bench was killed), and the same with per-op device times.
  python3 -c "import json; d = json.load(open('configs/models/minimax-text-01.json')); d['num_local_experts'] = 8; \
print(json.dumps(d))" >"$out/minimax-text-01-8-experts.json"
  bench minimax_text_01_8e_1l_b8_s4096 1 --model "$out/minimax-text-01-8-experts.json" --layers 1 --batch 8 \
    --seq 4096 --steps 3 --warmup 1
  MEGATRAIN_PROFILE_OPS=1 bench minimax_text_01_8e_1l_b8_s4096_ops 1 --model "$out/minimax-text-01-8-experts.json" \
    --layers 1 --batch 8 --seq 4096 --steps 3 --warmup 1
  note "op times (bench_minimax_text_01_8e_1l_b8_s4096_ops.log): $(grep -E 'lightning_attention|grouped_linear' \
    "$out/bench_minimax_text_01_8e_1l_b8_s4096_ops.log" | head -n 4 | tr -s ' ' | tr '\n' ';')"
  qwen35=(--model configs/models/qwen3.5-27b.json --layers 12 --steps 3 --warmup 1)
  bench qwen35_27b_12l_b32_s1024 1 "${qwen35[@]}" --batch 32 --seq 1024
  bench qwen35_27b_12l_b8_s4096 1 "${qwen35[@]}" --batch 8 --seq 4096
  MEGATRAIN_PROFILE_OPS=1 bench qwen35_27b_12l_b8_s4096_ops 1 "${qwen35[@]}" --batch 8 --seq 4096
  for kernel in chunked recurrent; do  # the delta rule alone at the 27B's linear-attention heads, 8 x 4096
    MEGATRAIN_DELTA_RULE=$kernel timeout 300 $b/megatrain bench-delta-rule --model configs/models/qwen3.5-27b.json \
      --batch 8 --seq 4096 --steps 3 --warmup 1 >"$out/delta_rule_$kernel.log" 2>&1
    note "bench-delta-rule $kernel rc=$? $(tail -n 3 "$out/delta_rule_$kernel.log" | tr -s ' ' | tr '\n' ';')"
  done
  note "op times (bench_qwen35_27b_12l_b8_s4096_ops.log): $(grep -E 'gated_delta_rule|causal_conv1d|linear_|attention_(for|back)' \
    "$out/bench_qwen35_27b_12l_b8_s4096_ops.log" | tr -s ' ' | tr '\n' ';' | cut -c1-600)"
  # flash-linear-attention beside torch's fallback: its wheels (fla-core, einops) carried in pywheels/.
  PYTHONPATH=$(pywheels_path) timeout 300 python3 tools/bench_delta_rule.py >"$out/bench_delta_rule_torch.log" 2>&1
  note "torch and fla chunked delta rule rc=$? $(grep -E '^[0-9]+ x|not available' "$out/bench_delta_rule_torch.log" | tr -s ' ' | tr '\n' ';')"
  bench qwen35_35b_a3b_6l_b8_s4096 1 --model configs/models/qwen3.5-35b-a3b.json --layers 6 --steps 3 --warmup 1 \
    --batch 8 --seq 4096
fi

if [[ $mode == segments ]]; then
  timeout 300 $b/tests_gpu "attention probe: packed segments on our kernel and on cuDNN's virtual batch" \
    >"$out/probe_segments.log" 2>&1
  note "packed probe rc=$? $(grep -E '^packed:|forward:|cuDNN vs ours' "$out/probe_segments.log" | tr -s ' ' | tr '\n' ';')"
  qwen3b_packed=(--model configs/models/qwen2.5-3b.json)
  scout=(--model configs/models/llama-4-scout-17b-16e.json --layers 2 --batch 4 --seq 16384 --steps 3 --warmup 1)
  for choice in ours auto; do
    MEGATRAIN_ATTENTION=$choice bench "qwen3b_b8_s4096_pack_$choice" 1 "${qwen3b_packed[@]}" --batch 8 --seq 4096 \
      --pack 64-2048 --warmup 3 --steps 4
    MEGATRAIN_ATTENTION=$choice bench "qwen3b_b2_s32768_pack_$choice" 1 "${qwen3b_packed[@]}" --batch 2 --seq 32768 \
      --pack 2048-16384 --warmup 2 --steps 2
    MEGATRAIN_ATTENTION=$choice bench "scout_2l_b4_s16384_$choice" 1 "${scout[@]}"
  done
  for run in qwen3b_b8_s4096_pack qwen3b_b2_s32768_pack scout_2l_b4_s16384; do
    note "losses and step times $run ours/auto: $(python3 -c "import json; l=[[(round(s['loss'],5), round(s['step_s'],3)) for s in json.load(open('$out/bench_'+'$run'+'_'+c+'.json'))['steps']] for c in ('ours','auto')]; print(l)" 2>&1 | tail -n 1)"
    note "cuDNN graphs built in $run auto: $(grep -c 'built in' "$out/bench_${run}_auto.log") taking $(grep -o 'built in [0-9]* ms' "$out/bench_${run}_auto.log" | awk '{s+=$3} END {print s+0}') ms; our kernel: $(grep -o 'our kernel ([^)]*' "$out/bench_${run}_auto.log" | sort | uniq -c | head -n 3 | tr -s ' ' | tr '\n' ';')"
  done
fi

if [[ $mode == nvme ]]; then
  scratch=${NVME_DIR:-$PWD/.nvme-scratch}
  mkdir -p "$scratch"
  note "nvme scratch $scratch: $(df -h --output=fstype,avail "$scratch" | tail -n 1)"
  for m in optimizer optimizer+master; do
    OMP_NUM_THREADS=${THREADS:-16} timeout 150 $b/megatrain bench-optim --params 5e8 --steps 3 --warmup 1 --dtype bfloat16 \
      --offload $m --offload-paths "$scratch" --probe-gb 4 --json >"$out/optim_$m.json" 2>"$out/optim_$m.log"
    note "bench-optim --offload $m rc=$? $(python3 -c "import json; d=json.load(open('$out/optim_$m.json')); print('%s %s: update %.2fs, state traffic %.2f GB/s; disk write %.2f read %.2f mix %.2f GB/s: %.0f%%' % (d['io'], 'O_DIRECT' if d['direct_io'] else 'buffered', d['update_s'], d['state_traffic_gb_per_s'], d['disk_write_gb_per_s'], d['disk_read_gb_per_s'], d['disk_mixed_gb_per_s'], 100*d['fraction_of_ceiling']))" 2>/dev/null || tail -n 3 "$out/optim_$m.log")"
  done
  for m in none optimizer optimizer+master; do
    name=qwen3b_b64_offload_${m/+/_}
    OMP_NUM_THREADS=${THREADS:-16} timeout 280 $b/megatrain bench --json "${qwen3b[@]}" --batch 64 --steps 4 \
      --stream-dtype bfloat16 --offload $m --offload-paths "$scratch" --probe-gb 4 >"$out/bench_$name.json" 2>"$out/bench_$name.log"
    note "bench $name rc=$? $(python3 -c "import json; d=json.load(open('$out/bench_$name.json')); print('steady step %.3fs (median of all %.3f; fwd+bwd %.3f, optimizer %.3f) TFLOP/s %.1f host %d B/param; plan: nvme %.3fs gpu %.3fs predicted %.3fs (steady %+.1f%%)' % (d['steady_step_s'], d['median_step_s'], d['median_fwd_bwd_s'], d['median_optimizer_s'], d['median_tflops'], d['host_bytes_per_parameter'], d['plan_nvme_step_s'], d['plan_gpu_step_s'], d['predicted_step_s'], 100*(d['steady_step_s']-d['predicted_step_s'])/d['predicted_step_s']))" 2>/dev/null || tail -n 3 "$out/bench_$name.log")"
  done
  rm -rf "$scratch"
fi

if [[ $mode == moe ]]; then  # most wanted first
  # 16 B/parameter: 125 GiB × 0.9 holds ~7.5 G parameters: Qwen3-30B-A3B layers are 0.62 G (embedding and head
  # 0.62 G), Mixtral-8x7B's 1.45 G (0.26 G). calc-resource: compute-bound from ~63 K tokens per pass (Qwen3-30B-A3B,
  # seq 4096) and ~33 K (Mixtral-8x7B).
  moe=(--seq 4096 --steps 3 --warmup 1)
  q30=(--model configs/models/qwen3-30b-a3b.json --layers 10)
  # The #15 figures (docs/PERFORMANCE.md, twelfth session): Qwen3-30B-A3B at 64 × 4096 (the plan's micro-batch of 8,
  # layer 0's optimizer state on the GPU) with more steps than the rest (steps vary by 0.1-0.4 s), the same without
  # the optimizer (what the step takes when it never waits for the parameters pass), and GPT-OSS-120B's one layer at
  # the plan's 104 × 4096 (every region GPU-resident).
  bench qwen3_30b_a3b_10l_b64 1 "${q30[@]}" --seq 4096 --steps 6 --warmup 1 --batch 64
  bench qwen3_30b_a3b_10l_b64_skip_update 1 "${q30[@]}" "${moe[@]}" --batch 64 --skip-update
  bench gpt_oss_120b_1l_b104 1 --model configs/models/gpt-oss-120b.json --layers 1 "${moe[@]}" --batch 104
  bench qwen3_30b_a3b_10l_b16_loop 1 "${q30[@]}" "${moe[@]}" --batch 16
  MEGATRAIN_MOE_GEMM=grouped bench qwen3_30b_a3b_10l_b16_grouped 1 "${q30[@]}" "${moe[@]}" --batch 16
  bench mixtral_8x7b_4l_b8_loop 1 --model configs/models/mixtral-8x7b.json --layers 4 "${moe[@]}" --batch 8
  MEGATRAIN_MOE_GEMM=grouped bench mixtral_8x7b_4l_b8_grouped 1 --model configs/models/mixtral-8x7b.json --layers 4 \
    "${moe[@]}" --batch 8
  MEGATRAIN_MOE_GEMM=cutlass bench qwen3_30b_a3b_10l_b16_cutlass 1 "${q30[@]}" "${moe[@]}" --batch 16
  MEGATRAIN_MOE_GEMM=cutlass bench mixtral_8x7b_4l_b8_cutlass 1 --model configs/models/mixtral-8x7b.json --layers 4 \
    "${moe[@]}" --batch 8
  timeout 300 $b/tests_gpu "[.moe_gemm_bench]" >"$out/moe_gemm_bench.log" 2>&1
  note "tests_gpu [.moe_gemm_bench] rc=$? $(grep -c '^moe_gemm_bench' "$out/moe_gemm_bench.log") lines"
  for batch in 2 4 8 32; do bench "qwen3_30b_a3b_10l_b${batch}_sweep" 1 "${q30[@]}" "${moe[@]}" --batch $batch; done
  # Llama 4 Scout: 2.2 G parameters a layer (embedding and head 2.07 G), so 2 layers; at 16384 tokens a sequence the
  # chunked layers attend in chunks of 8192 (chunk ids as segments, the window at the chunk).
  scout=(--model configs/models/llama-4-scout-17b-16e.json --layers 2 --steps 3 --warmup 1)
  bench llama4_scout_2l_b16 1 "${scout[@]}" --seq 4096 --batch 16
  bench llama4_scout_2l_b4_s16384 1 "${scout[@]}" --seq 16384 --batch 4
fi

if [[ $mode == longseq ]]; then
  qwen3b_long=(--model configs/models/qwen2.5-3b.json --steps 2 --warmup 1)
  bench qwen3b_b8_s8192 1 "${qwen3b_long[@]}" --batch 8 --seq 8192
  bench qwen3b_b2_s32768 1 "${qwen3b_long[@]}" --batch 2 --seq 32768
  gpu_gib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -n 1 | awk '{print $1 / 1024}')
  ram_gib=$(awk '/MemTotal/ {print $2 / 1048576}' /proc/meminfo)
  for spec in "3b 524288 ${LONGSEQ_3B:-}" "7b 262144 ${LONGSEQ_7B:-}"; do
    read -r size target override <<<"$spec"
    plan=$($b/megatrain calc-resource --gpu-mem "$gpu_gib" --ram "$ram_gib" --model "qwen2.5-$size" --seq 1024 \
      --batch 1 --json 2>/dev/null)
    read -r longest interval < <(python3 -c "import json, sys; s = json.loads(sys.argv[1])['longest_sequence']; \
print(s['gpu_memory_tokens'], s['checkpoint_interval'])" "$plan")
    seq=${override:-$((longest < target ? longest : target))}
    note "qwen2.5-$size: the plan's longest sequence on this GPU ${longest} tokens (checkpoint_interval $interval); bench at $seq"
    BENCH_TIMEOUT=${LONGSEQ_TIMEOUT:-560} bench "qwen${size}_b1_s$seq" 1 --model "configs/models/qwen2.5-$size.json" \
      --batch 1 --seq "$seq" --checkpoint-interval "$interval" --steps 1 --warmup 0
  done
fi
if [[ $mode == attention ]]; then  # the 3B step with our attention and with auto (cuDNN per direction), side by side
  if [[ -n ${ATTENTION_PROBE:-} ]]; then
    timeout 240 $b/tests_gpu "[.attention_bench]" >"$out/attention_probe.log" 2>&1
    note "attention probe rc=$? $(grep -E 'probe|shape|cuDNN (forward|backward)|TFLOP/s' "$out/attention_probe.log" | tr '\n' ' ')"
    timeout 240 python3 tools/bench_torch_attention.py >"$out/torch_attention.log" 2>&1
    note "torch attention rc=$? $(tr '\n' ' ' <"$out/torch_attention.log" | tail -c 900)"
    timeout 240 python3 tools/bench_torch_attention.py --deterministic >"$out/torch_attention_det.log" 2>&1
    note "torch attention, deterministic algorithms rc=$? $(grep -E '^batch' "$out/torch_attention_det.log" | tr '\n' ' ')"
  fi
  for shape in "8 8192 2" "2 32768 2" "32 1024 3"; do
    read -r batch seq steps <<<"$shape"
    for impl in ours auto; do
      name="qwen3b_b${batch}_s${seq}_attention_$impl"
      MEGATRAIN_ATTENTION=$impl BENCH_TIMEOUT=${ATTENTION_BENCH_TIMEOUT:-100} bench "$name" 1 \
        --model configs/models/qwen2.5-3b.json --steps "$steps" --warmup 1 --batch "$batch" --seq "$seq"
      note "  $name: $(grep -m 3 -E 'attention plan|attention: MEGATRAIN|our kernel \(' "$out/bench_$name.log" | cut -c 1-300 | tr '\n' ' ')"
    done
  done
fi
if [[ $mode == survey ]]; then  # cuDNN's backward engine configs with the node's cuDNN and with PyTorch's wheel's
  torch_cudnn=$(python3 -c "import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], 'lib'))" 2>/dev/null)
  for lib in ${SURVEY_LIBS:-node torch} ${SURVEY_CUDNN:+extra}; do
    path=$LD_LIBRARY_PATH
    if [[ $lib == torch ]]; then
      [[ -n $torch_cudnn && -d $torch_cudnn ]] || { note "survey: no cuDNN in PyTorch's wheel"; continue; }
      path=$torch_cudnn:$path
    fi
    [[ $lib == extra ]] && path=$SURVEY_CUDNN:$path
    LD_LIBRARY_PATH=$path timeout 240 $b/tests_gpu "[.attention_survey]" >"$out/survey_$lib.log" 2>&1
    note "survey ($lib cuDNN) rc=$? $(grep -E 'survey:|TFLOP/s|finalize' "$out/survey_$lib.log" | cut -c 1-200 | tr '\n' ' ')"
    [[ ${SURVEY_PROBE:-1} == 0 ]] && continue
    LD_LIBRARY_PATH=$path MEGATRAIN_PROBE_MAX_SEQ=32768 timeout 200 $b/tests_gpu \
      "attention probe: cuDNN plans and ours-vs-cuDNN TFLOP/s" >"$out/probe_$lib.log" 2>&1
    note "probe ($lib cuDNN) rc=$? $(grep -E 'probe:|shape|cuDNN backward|TFLOP/s' "$out/probe_$lib.log" | cut -c 1-260 | tr '\n' ' ')"
  done
  timeout 200 python3 tools/bench_torch_attention.py >"$out/torch_attention.log" 2>&1
  note "torch attention rc=$? $(tr '\n' ' ' <"$out/torch_attention.log" | tail -c 900)"
  flash_cute_bench
fi
if [[ $mode == figures ]]; then  # the attention issue's figures, side by side
  MEGATRAIN_PROBE_MAX_SEQ=32768 timeout 200 $b/tests_gpu "attention probe: cuDNN plans and ours-vs-cuDNN TFLOP/s" \
    >"$out/attention_probe.log" 2>&1
  note "attention probe rc=$? $(grep -E '^shape|TFLOP/s' "$out/attention_probe.log" | cut -c 1-220 | tr '\n' ' ')"
  timeout 150 python3 tools/bench_torch_attention.py >"$out/torch_attention.log" 2>&1
  note "torch attention rc=$? $(grep -E '^batch' "$out/torch_attention.log" | tr '\n' ' ')"
  timeout 150 python3 tools/bench_torch_attention.py --deterministic >"$out/torch_attention_det.log" 2>&1
  note "torch attention, deterministic algorithms rc=$? $(grep -E '^batch' "$out/torch_attention_det.log" | tr '\n' ' ')"
  flash_cute_bench
  if [[ -z ${FIGURES_SKIP_BENCH:-} ]]; then  # the attention figures alone where set
    bench qwen3b_b32_s1024 1 --model configs/models/qwen2.5-3b.json --batch 32 --seq 1024 --steps 3 --warmup 1
    bench qwen3b_b8_s8192 1 --model configs/models/qwen2.5-3b.json --batch 8 --seq 8192 --steps 2 --warmup 1
    bench qwen3b_b2_s32768 1 --model configs/models/qwen2.5-3b.json --batch 2 --seq 32768 --steps 2 --warmup 1
  fi
fi
if [[ $mode == ragged ]]; then  # cuDNN's ragged graphs against its padded ones with their gathers and staging
  export MEGATRAIN_ATTENTION_DETERMINISTIC=${RAGGED_DETERMINISTIC:-1}  # after the tests: the probe and the benches
  for ragged in 1 0; do
    MEGATRAIN_CUDNN_RAGGED=$ragged timeout 200 $b/tests_gpu \
      "attention probe: packed segments on our kernel and on cuDNN's virtual batch" >"$out/probe_segments_$ragged.log" 2>&1
    note "packed probe, ragged $ragged rc=$? $(grep -E '^packed:|forward:' "$out/probe_segments_$ragged.log" | tr -s ' ' | tr '\n' ';')"
    MEGATRAIN_CUDNN_RAGGED=$ragged bench "qwen3b_b8_s4096_pack_ragged$ragged" 1 --model configs/models/qwen2.5-3b.json \
      --batch 8 --seq 4096 --pack 64-2048 --warmup 3 --steps 4
    MEGATRAIN_CUDNN_RAGGED=$ragged bench "qwen3b_b32_s1000_ragged$ragged" 1 --model configs/models/qwen2.5-3b.json \
      --batch 32 --seq 1000 --warmup 2 --steps 3
    [[ -z ${RAGGED_SKIP_LONG:-} ]] && MEGATRAIN_CUDNN_RAGGED=$ragged bench "qwen3b_b2_s32768_pack_ragged$ragged" 1 \
      --model configs/models/qwen2.5-3b.json --batch 2 --seq 32768 --pack 2048-16384 --warmup 2 --steps 2
  done
  for run in qwen3b_b8_s4096_pack qwen3b_b2_s32768_pack qwen3b_b32_s1000; do
    for ragged in 1 0; do note "  $run ragged $ragged (loss, step, fwd+bwd): $(bench_steps "${run}_ragged$ragged")"; done
  done
fi
if [[ $mode == tiles ]]; then  # the tiled backward of padded calls: what padded rows cost, packed documents
  timeout 150 $b/tests_gpu "[.attention_padding]" >"$out/probe_padding.log" 2>&1
  note "padding probe rc=$? $(grep -E '^padding:' "$out/probe_padding.log" | tr '\n' ';')"
  timeout 200 $b/tests_gpu "attention probe: packed segments on our kernel and on cuDNN's virtual batch" \
    >"$out/probe_segments.log" 2>&1
  note "packed probe rc=$? $(grep -E '^packed:|forward:' "$out/probe_segments.log" | tr -s ' ' | tr '\n' ';')"
  bench qwen3b_b2_s32768_pack 1 --model configs/models/qwen2.5-3b.json --batch 2 --seq 32768 --pack 2048-16384 \
    --warmup 2 --steps 2
  bench qwen3b_b8_s4096_pack 1 --model configs/models/qwen2.5-3b.json --batch 8 --seq 4096 --pack 64-2048 \
    --warmup 3 --steps 4
  bench qwen3b_b2_s32768 1 --model configs/models/qwen2.5-3b.json --batch 2 --seq 32768 --warmup 1 --steps 2
  for run in qwen3b_b2_s32768_pack qwen3b_b8_s4096_pack qwen3b_b2_s32768; do
    note "losses, step and fwd+bwd times $run: $(bench_steps "$run")"
  done
fi
if [[ $mode == ab && -x bundle_base/megatrain ]]; then  # an earlier build against this one, shape by shape
  # model:layers batch seq steps [pack] (layers 0: all of them); AB_ROUNDS rounds of base then this build per shape
  # (alternating, so that the node's drift falls on both), then each build's median fwd+bwd and step over its rounds'
  # measured steps and this build's ratio to the earlier one's.
  IFS=';' read -r -a shapes <<<"${AB_SHAPES:-qwen2.5-3b:0 32 1024 3;qwen2.5-3b:0 8 8192 2;qwen2.5-3b:0 2 32768 2;\
qwen2.5-3b:0 2 32768 2 --pack 2048-16384;qwen2.5-7b:0 32 1024 3;qwen3-30b-a3b:10 64 4096 3}"
  for shape in "${shapes[@]}"; do
    read -r model batch seq steps pack <<<"$shape"
    layers=${model#*:} model=${model%%:*}
    for round in $(seq 1 "${AB_ROUNDS:-1}"); do
      for build in bundle_base bundle; do
        name="${model}_l${layers}_b${batch}_s${seq}${pack:+_pack}_${build}_r$round"
        b=$build bench "$name" 1 --model "configs/models/$model.json" $( ((layers > 0)) && echo --layers "$layers") \
          --batch "$batch" --seq "$seq" --warmup 2 --steps "$steps" $pack
        note "  $name steps (loss, step, fwd+bwd): $(bench_steps "$name")"
      done
    done
    tag="${model}_l${layers}_b${batch}_s${seq}${pack:+_pack}"
    note "  $tag: $(python3 -c "import glob, json, statistics as st, sys
def steps(build):  # each run's measured steps but its last, which waits for the final update (bench's steady step)
    runs = [json.load(open(f))['steps'] for f in sorted(glob.glob('$out/bench_${tag}_%s_r*.json' % build))]
    return [s for r in runs for s in (r[:-1] if len(r) > 1 else r)]
base, new = steps('bundle_base'), steps('bundle')
med = lambda xs, k: st.median(s[k] for s in xs)
print('median fwd+bwd %.3f s -> %.3f s (%.3fx), step %.3f s -> %.3f s (%.3fx) over %d and %d steps' % (
    med(base, 'fwd_bwd_s'), med(new, 'fwd_bwd_s'), med(new, 'fwd_bwd_s') / med(base, 'fwd_bwd_s'),
    med(base, 'step_s'), med(new, 'step_s'), med(new, 'step_s') / med(base, 'step_s'), len(base), len(new)))" 2>&1 | tail -n 1)"
  done
  # The packed attention probe on both builds where bundle_base/ holds the earlier tests_gpu: AB_PROBE_ROUNDS rounds
  # (default 2) of the earlier then this one, each case's forward and backward TFLOP/s.
  if [[ -x bundle_base/tests_gpu ]]; then
    for round in $(seq 1 "${AB_PROBE_ROUNDS:-2}"); do
      for build in bundle_base bundle; do
        timeout 150 $build/tests_gpu "attention probe: packed segments on our kernel and on cuDNN's virtual batch" \
          >"$out/probe_packed_${build}_r$round.log" 2>&1
        note "  packed probe $build round $round rc=$?: $(grep -E 'forward:' "$out/probe_packed_${build}_r$round.log" | tr -s ' ' | tr '\n' ';')"
      done
    done
  fi
fi
if [[ $mode == nondeterministic ]]; then  # MEGATRAIN_ATTENTION_DETERMINISTIC=0 against the default, side by side
  for shape in "8 8192" "2 32768"; do
    read -r batch seq <<<"$shape"
    for det in 0 1; do
      MEGATRAIN_ATTENTION_DETERMINISTIC=$det bench "qwen3b_b${batch}_s${seq}_deterministic$det" 1 \
        --model configs/models/qwen2.5-3b.json --batch "$batch" --seq "$seq" --warmup 1 --steps 2
      note "  $(grep -m 1 'attention plan' "$out/bench_qwen3b_b${batch}_s${seq}_deterministic$det.log" | cut -c 1-250)"
    done
  done
fi
if [[ $mode == softcap ]]; then  # Gemma-2-9B's soft-capped attention: cuDNN's score-modifier graph against ours
  timeout 300 $b/tests_gpu "[.attention_bench]" >"$out/attention_probe.log" 2>&1
  note "attention probe rc=$? $(grep -E 'probe|shape|cuDNN (forward|backward)|TFLOP/s' "$out/attention_probe.log" | tr '\n' ' ')"
  for impl in ours auto; do
    name="gemma2_9b_24l_b32_attention_$impl"
    MEGATRAIN_ATTENTION=$impl BENCH_TIMEOUT=${ATTENTION_BENCH_TIMEOUT:-200} bench "$name" 1 \
      --model configs/models/gemma-2-9b.json --layers 24 --seq 1024 --steps 3 --warmup 1 --batch 32
    note "  $name: $(grep -m 4 -E 'attention plan|attention: MEGATRAIN|attention (forward|backward) batch' \
      "$out/bench_$name.log" | cut -c 1-300 | tr '\n' ' ')"
  done
fi
if [[ $mode == mla ]]; then  # latent attention (q/k 192, value 128) on cuDNN against our kernel
  timeout 200 $b/tests_gpu "[.mla_bench]" >"$out/mla_probe.log" 2>&1
  note "mla probe rc=$? $(grep -E '^mla:' "$out/mla_probe.log" | cut -c 1-300 | tr '\n' ';')"
  for shape in ${MLA_SHAPES:-glm-4.7-flash:4:1 deepseek-v2-lite:4:1}; do
    IFS=: read -r name layers first <<<"$shape"
    for impl in ours auto; do
      MEGATRAIN_ATTENTION=$impl bench "${name}_b32_$impl" 1 --model "configs/models/$name.json" --layers "$layers" \
        --first-layer "$first" --seq 1024 --steps 3 --warmup 1 --batch 32
      note "  ${name} $impl: $(grep -m 3 -E 'attention plan|attention: MEGATRAIN|attention (forward|backward) batch' \
        "$out/bench_${name}_b32_$impl.log" | cut -c 1-240 | tr '\n' ' ')"
    done
    note "  ${name} (loss, step, fwd+bwd) ours: $(bench_steps "${name}_b32_ours") auto: $(bench_steps "${name}_b32_auto")"
  done
fi
if [[ $mode == moe-keep ]]; then  # MoE layers keeping their expert activations, and DeepSeek-V3's layers
  q30=(--model configs/models/qwen3-30b-a3b.json --layers 10 --seq 4096 --steps 4 --warmup 1 --batch 64)
  bench qwen3_30b_a3b_10l_b64_keep_auto 1 "${q30[@]}"
  note "  $(grep -m 1 'MoE:' "$out/bench_qwen3_30b_a3b_10l_b64_keep_auto.log" | cut -c 1-300)"
  bench qwen3_30b_a3b_10l_b64_keep0 1 "${q30[@]}" --moe-keep-layers 0
  note "  keep auto / keep 0 (loss, step, fwd+bwd): $(bench_steps qwen3_30b_a3b_10l_b64_keep_auto) / $(bench_steps qwen3_30b_a3b_10l_b64_keep0)"
  # DeepSeek-V3's MoE layers (3 and 4) with 32 of its 256 experts: the same attention and the same work per token
  # (top 8, one shared expert), in 2 × 1.4 G parameters that 125 GiB of host RAM holds at 16 B/parameter (its own
  # layers are 11.4 G each).
  python3 -c "import json; d = json.load(open('configs/models/deepseek-v3.json')); d['n_routed_experts'] = 32; \
print(json.dumps(d))" >"$out/deepseek-v3-32-experts.json"
  for batch in ${DSV3_BATCHES:-32}; do
    bench "deepseek_v3_32e_2l_b${batch}" 1 --model "$out/deepseek-v3-32-experts.json" --layers 2 --first-layer 3 \
      --seq 4096 --steps 3 --warmup 1 --batch "$batch"
    note "  $(grep -m 2 -E 'attention plan|MoE:' "$out/bench_deepseek_v3_32e_2l_b${batch}.log" | cut -c 1-240 | tr '\n' ' ')"
  done
fi
if [[ $mode == moe-imbalance ]]; then  # issue #46's imbalanced batch: one expert chosen by half of the tokens
  bench qwen3_30b_a3b_10l_b64_balanced 1 "${q30[@]}"
  bench qwen3_30b_a3b_10l_b64_hot 1 "${q30[@]}" --moe-hot-expert
  note "  hot / balanced: $(python3 -c "import json; b, h = (json.load(open('$out/bench_qwen3_30b_a3b_10l_b64_%s.json' % k)) \
for k in ('balanced', 'hot')); print('steady step %.3f s / %.3f s: %.3f of the balanced speed; busiest expert %.3f / %.3f of the tokens' % \
(h['steady_step_s'], b['steady_step_s'], b['steady_step_s'] / h['steady_step_s'], h['moe_busiest_expert_share'], \
b['moe_busiest_expert_share']))" 2>&1 | tail -n 1)"
fi
if [[ $mode == steptime ]]; then  # the plan's step-time model against measured steps, on the card it runs on
  timeout 60 $b/tests_gpu "[cuda][rates]" >"$out/tests_gpu_rates.log" 2>&1
  note "tests_gpu [cuda][rates] rc=$? $(tail -n 2 "$out/tests_gpu_rates.log" | tr '\n' ' ')"
  groups=" ${STEPTIME_GROUPS:-qwen3b qwen7b qwen30b gptoss dsv3 torch} "
  export MEGATRAIN_STEP_RATES=probe  # the call's first bench probes the rates (cached under $out/cache)
  steptime_bench() {  # the rest plan on them
    bench "$@"
    [[ $MEGATRAIN_STEP_RATES == probe ]] && note "  $(grep -m 1 'step rates' "$out/bench_$1.log" | cut -c 1-300)"
    export MEGATRAIN_STEP_RATES=cached
  }
  if [[ $groups == *" qwen3b "* ]]; then
    steptime_bench steptime_qwen3b_b8 1 "${qwen3b[@]}" --batch 8
    for batch in 16 32 64; do
      steptime_bench "steptime_qwen3b_b$batch" 1 "${qwen3b[@]}" --batch $batch
      memory_choice "steptime_qwen3b_b$batch" "${qwen3b[@]}" --batch $batch
    done
  fi
  if [[ $groups == *" qwen30b "* ]]; then
    steptime_bench steptime_qwen30b_10l_b64 1 "${q30[@]}"
    memory_choice steptime_qwen30b_10l_b64 "${q30[@]}"
  fi
  if [[ $groups == *" qwen7b "* ]]; then
    for batch in 32 64; do
      qwen7b=(--model configs/models/qwen2.5-7b.json --seq 1024 --steps 3 --warmup 1 --batch $batch)
      steptime_bench "steptime_qwen7b_b$batch" 1 "${qwen7b[@]}"
      memory_choice "steptime_qwen7b_b$batch" "${qwen7b[@]}"
    done
  fi
  [[ $groups == *" qwen30b "* ]] && steptime_bench steptime_qwen30b_10l_b64_keep0 1 "${q30[@]}" --moe-keep-layers 0
  [[ $groups == *" gptoss "* ]] && steptime_bench steptime_gptoss120b_1l_b104 1 --model configs/models/gpt-oss-120b.json \
    --layers 1 --seq 4096 --steps 3 --warmup 1 --batch 104
  if [[ $groups == *" dsv3 "* ]]; then
    python3 -c "import json; d = json.load(open('configs/models/deepseek-v3.json')); d['n_routed_experts'] = 32; \
print(json.dumps(d))" >"$out/deepseek-v3-32-experts.json"
    steptime_bench steptime_dsv3_32e_2l_b32 1 --model "$out/deepseek-v3-32-experts.json" --layers 2 --first-layer 3 \
      --seq 4096 --steps 3 --warmup 1 --batch 32
  fi
  [[ $groups == *" torch "* ]] && { torch_bench 8; torch_bench 16; }
  for f in "$out"/bench_steptime_*.json; do
    note "  $(python3 -c "import json, sys; d = json.load(open(sys.argv[1])); p, m = d['predicted_step_s'], d['steady_step_s']; \
print('%-40s batch %3d x %5d passes %d (memory %d) mb %d recompute %d (memory %d) keep %d: measured %.3f s, predicted %.3f s (%+.1f %%), busy %.0f %%' % \
(sys.argv[1].split('bench_')[-1][:-5], d['batch'], d['seq'], d['passes'], d.get('memory_passes', -1), d['micro_batch'], \
d['recompute_layers'], d.get('memory_recompute_layers', -1), d['moe_keep_layers'], \
m, p, 100 * (p - m) / m, 100 * d['median_compute_busy']))" "$f" 2>&1 | tail -n 1)"
  done
fi
if [[ $mode == pref ]]; then  # the preference issue's figures: the same tokens per step, SFT then DPO (then KTO)
  qwen7b=(--model configs/models/qwen2.5-7b.json --seq 1024 --steps 3 --warmup 1)
  BENCH_TIMEOUT=${BENCH_TIMEOUT:-300} bench qwen7b_sft_b64 1 "${qwen7b[@]}" --batch 64
  BENCH_TIMEOUT=${BENCH_TIMEOUT:-300} bench qwen7b_dpo_p32 1 "${qwen7b[@]}" --stage dpo --batch 32
  [[ -n ${PREF_SKIP_KTO:-} ]] || BENCH_TIMEOUT=${BENCH_TIMEOUT:-300} bench qwen7b_kto_e32 1 "${qwen7b[@]}" --stage kto --batch 32
  for stage in dpo_p32 kto_e32; do
    [[ -f $out/bench_qwen7b_$stage.json ]] || continue
    note "  $stage: $(python3 -c "import json; s=json.load(open('$out/bench_qwen7b_sft_b64.json')); p=json.load(open('$out/bench_qwen7b_$stage.json')); \
print('step %.0f tok/s = %.3f of SFT %.0f (target >= 0.95); reference pass %.3f s, %.0f tok/s = %.2fx the step (target >= 2.5); tokens per step %d / SFT %d; losses %s' % \
(p['median_tokens_per_s'], p['median_tokens_per_s'] / s['median_tokens_per_s'], s['median_tokens_per_s'], p['reference_pass_s'], p['reference_tokens_per_s'], \
p['reference_to_step_tokens_per_s'], p['steps'][0]['tokens'], s['steps'][0]['tokens'], [round(x['loss'], 5) for x in p['steps']]))" 2>&1 | tail -n 1)"
  done
fi
# Data parallelism on every visible GPU (at least 2): the fixtures against one GPU, then weak scaling of the bench
# (the same sequences per GPU).
gpus=$(nvidia-smi -L | wc -l)
if [[ $mode == dp ]] && ((gpus >= 2)); then
  MEGATRAIN_BACKEND=cuda timeout 200 bash tests/mpi/data_parallel_agrees.sh $b/megatrain mpiexec $b/mpi_compare_runs \
    "$PWD" llama >"$out/dp_llama.log" 2>&1
  note "data parallel llama on $gpus GPUs rc=$? $(grep -E '^(ok|FAIL)' "$out/dp_llama.log" | tail -n 3 | tr '\n' ' ')"
  bench dp1_b16 1 "${qwen3b[@]}" --batch 16
  bench dp2_b32 2 "${qwen3b[@]}" --batch 32
  bench dp1_b32 1 "${qwen3b[@]}" --batch 32
  bench dp2_b64 2 "${qwen3b[@]}" --batch 64
fi
printf '%s\n' "${summary[@]}"
