#!/usr/bin/env bash
# One GPU-machine session, run from the repository root with a bundle made by `tools/bundle.sh --tests`
# in bundle/: the CUDA op table, the PyTorch-parity fixtures on the CUDA backend, pipeline variants, the
# benchmarks and the PyTorch reference. Logs go to $OUT; a short table is printed last.
# Usage: tools/gpu_session.sh [quick|full]
set -uo pipefail
mode=${1:-full}
out=${OUT:-/tmp/megatrain-gpu}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/bundle/lib:${LD_LIBRARY_PATH:-}
export MEGATRAIN_SOURCE_DIR=$PWD MEGATRAIN_BINARY_DIR=$out/scratch OMP_NUM_THREADS=16
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
b=bundle
summary=()
note() { summary+=("$1"); echo "== $1"; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >"$out/gpu.txt" 2>&1
timeout 60 $b/tests_gpu >"$out/tests_gpu.log" 2>&1; note "tests_gpu rc=$? $(tail -n 2 "$out/tests_gpu.log" | tr '\n' ' ')"
MEGATRAIN_BACKEND=cuda timeout 90 $b/tests_integration "[parity]" >"$out/parity_cuda.log" 2>&1
note "parity on cuda rc=$? $(tail -n 2 "$out/parity_cuda.log" | tr '\n' ' ')"
[[ $mode == quick ]] && { printf '%s\n' "${summary[@]}"; exit 0; }

bench() {  # name, args...
  local name=$1; shift
  timeout 120 $b/megatrain bench --json "$@" >"$out/bench_$name.json" 2>"$out/bench_$name.log"
  local rc=$?
  note "bench $name rc=$rc $(python3 -c "import json,sys; d=json.load(open('$out/bench_$name.json')); print('step %.3fs tok/s %.0f TFLOP/s %.1f H2D %.1f GB/s D2H %.1f GB/s busy %.0f%% peak %.1f GiB' % (d['median_step_s'], d['median_tokens_per_s'], d['median_tflops'], d['median_h2d_gbs'], d['median_d2h_gbs'], 100*d['median_compute_busy'], d['peak_gpu_memory_gib']))" 2>/dev/null || tail -n 3 "$out/bench_$name.log")"
}
bench qwen3b_b8 --model configs/models/qwen2.5-3b.json --batch 8 --seq 1024 --steps 3 --warmup 1
bench qwen3b_b16 --model configs/models/qwen2.5-3b.json --batch 16 --seq 1024 --steps 3 --warmup 1
bench qwen3b_12l --model configs/models/qwen2.5-3b.json --batch 8 --seq 1024 --steps 2 --warmup 1 --layers 12
timeout 150 python3 tools/bench_torch_train.py --model configs/models/qwen2.5-3b.json --batch 8 --seq 1024 --steps 3 \
  --warmup 1 >"$out/torch_qwen3b_b8.json" 2>"$out/torch_qwen3b_b8.log"
note "torch qwen3b_b8 rc=$? $(cat "$out/torch_qwen3b_b8.json" 2>/dev/null | tail -c 300)"
printf '%s\n' "${summary[@]}"
