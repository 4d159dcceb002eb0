#!/usr/bin/env bash
# Runs the CUDA gated-MLP activations (kernels/ops/glu.cu: SwiGLU, GeGLU, the non-gated activation; clamped_swiglu.cu:
# GPT-OSS's) forward and backward on the CPU through emu_cuda.h, through their launchers, and compares them with the
# CPU reference, on a machine without a GPU: fp32 and bf16 should agree bit for bit (the same per-element expressions
# with the host's expf and tanhf; on a GPU CUDA's expf and tanhf, and nvcc's fused multiply-adds, may move fp32 by a
# few ulp), every element outside the outputs' rows × cols (the columns between cols and ld, guards before and after)
# untouched, and each launch on the path its launcher's rule picks (16-byte vectors or scalar). By hand, after editing
# the kernels; never in CI.
# Usage: tools/kernel_emulation/run_glu.sh [CPU_BUILD_DIR]   (a CPU build with mt_backend built)
set -euo pipefail
source "$(dirname "$0")/emu_env.sh"
# Each kernel file as a C++ file (emu_rewrite.py); the launchers' declarations from kernels.h.
python3 - "$src/kernels/ops" "$work" "$here" <<'PY'
import re, sys
ops, work = sys.argv[1], sys.argv[2]
sys.path.insert(0, sys.argv[3])
from emu_rewrite import HEAD, rewrite
for name in ('glu', 'clamped_swiglu'):
    open(f'{work}/{name}_emu.cpp', 'w').write(rewrite(open(f'{ops}/{name}.cu').read(), ops))
decls = [l for l in open(f'{ops}/kernels.h').read().splitlines()
         if re.match(r'template <typename T> void (glu|clamped_swiglu)_(forward|backward)\(', l)]
assert len(decls) == 4, decls
open(f'{work}/kernels_emu.h', 'w').write(
    HEAD + 'namespace mt::cuda {\n' + '\n'.join(decls) + '\n}  // namespace mt::cuda\n')
PY
for f in glu clamped_swiglu; do
  g++ -O1 -std=c++20 -I"$src/src" -I"$src" -I"$here" -I"$work" -c "$work/${f}_emu.cpp" -o "$work/$f.o" &
done
wait
g++ -O1 -std=c++20 -fopenmp -I"$src/src" -I"$src" -I"$here" -I"$work" "$here/glu.cpp" "$work/glu.o" \
  "$work/clamped_swiglu.o" "$build/libmt_backend.a" "$build/libmt_core.a" -lfmt -o "$work/glu"
# Dense (ld = cols) with n odd, n a multiple of the vector width with cols not, and cols one; the fused [g | u]
# buffer (ld = 2·cols) with cols a multiple of 8 (vectors), of 4 only (fp32 vectors, bf16 scalar) and of neither;
# separate g, u rows with padding columns (ld = cols + 3: scalar; cols + 8); misaligned pointers; one large enough
# that the grid-stride loops go round several times; each activation gated and not, and the clamped SwiGLU.
fail=0
for dt in f b; do
  for shape in "7 9 dense" "4 6 dense" "6 16 dense" "5 1 dense" "5 24 fused" "3 12 fused" "4 10 fused" "3 5 fused" \
    "5 8 pad3" "5 16 pad8" "3 16 shift" "300 64 fused" "70 19 dense"; do
    for op in silu gelu silu-up0 gelu-up0 clamped; do
      "$work/glu" $dt $shape $op || fail=1
    done
  done
done
exit $fail
