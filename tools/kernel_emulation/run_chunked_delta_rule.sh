#!/usr/bin/env bash
# Runs the chunked CUDA delta rule's kernels (kernels/ops/gated_delta_rule_chunked.cu) on the CPU through emu_cuda.h and
# compares them with the CPU reference, on a machine without a GPU: fp32 (chunks of 32) should agree to about 1e-6,
# bf16 (chunks of 64) to a few 1e-3. By hand, after editing the kernels; slow (a thread per CUDA thread), never in CI.
# Usage: tools/kernel_emulation/run_chunked_delta_rule.sh [CPU_BUILD_DIR]   (a CPU build with mt_backend built)
set -euo pipefail
source "$(dirname "$0")/emu_env.sh"
# The kernels without their launchers (which enqueue on CUDA streams), shared memory from emu_cuda.h.
python3 - "$src/kernels/ops/gated_delta_rule_chunked.cu" "$work/kernels_emu.h" <<'PY'
import sys
s = open(sys.argv[1]).read()
body = s[s.index('namespace mt::cuda {'):]
start = body.index('template <typename K, typename S>\nvoid launch(')
body = body[:start] + body[body.index('}  // namespace\n', start):]
body = body[:body.index('template <typename T>\nvoid gated_delta_rule_chunked_forward(')] + '}  // namespace mt::cuda\n'
body = body.replace('extern __shared__ __align__(128) unsigned char smem[];', 'unsigned char* smem = emu_smem;')
body = body.replace('static_assert(chunk_of<float> <= threads && chunk_of<__nv_bfloat16> <= threads);', '')
open(sys.argv[2], 'w').write('#include "emu_cuda.h"\n' + body)
PY
g++ -O1 -std=c++20 -fopenmp -I"$src/src" -I"$src" -I"$here" -I"$work" "$here/chunked_delta_rule.cpp" \
  "$build/libmt_backend.a" "$build/libmt_core.a" -lfmt -o "$work/chunked_delta_rule"
# Within, at and past chunk ends; partial column tiles; packed examples inside chunks and starting them; padding;
# head dims that are not multiples of 8 (the element-by-element tile copies); two k heads.
for args in "70 16 48 30 f" "41 32 16 32 f" "100 48 40 0 f" "13 16 16 5 f" "70 18 10 30 f" "40 16 24 15 f 2" \
  "150 32 48 40 b" "130 128 128 64 b" "90 20 24 30 b" "75 32 16 20 b 2"; do
  "$work/chunked_delta_rule" $args
done
