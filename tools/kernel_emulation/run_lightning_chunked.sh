#!/usr/bin/env bash
# Runs the chunked CUDA lightning attention (kernels/ops/lightning_attention_chunked.cu) on the CPU through emu_cuda.h
# and compares it with the CPU reference, on a machine without a GPU: fp32 should agree to about 1e-6, bf16 to a few
# 1e-3. By hand, after editing the kernel; slow (a thread per CUDA thread), never in CI.
# Usage: tools/kernel_emulation/run_lightning_chunked.sh [CPU_BUILD_DIR]   (a CPU build with mt_backend built)
set -euo pipefail
source "$(dirname "$0")/emu_env.sh"
# The kernel with its launch made an emu_launch, shared memory from emu_cuda.h, kernels.h's declarations.
python3 - "$src/kernels/ops/lightning_attention_chunked.cu" "$src/kernels/ops/kernels.h" "$work/kernels_emu.h" <<'PY'
import re, sys
s = open(sys.argv[1]).read()
decls = [l for l in open(sys.argv[2]).read().splitlines()
         if 'kLightningChunkedMaxHeadDim =' in l or 'lightning_attention_chunked' in l and not l.startswith('//')]
body = s[s.index('namespace mt::cuda {'):]
body = body.replace('namespace mt::cuda {', 'namespace mt::cuda {\n' + '\n'.join(decls), 1)
body = body.replace('extern __shared__ __align__(128) unsigned char smem[];', 'unsigned char* smem = emu_smem;')
body = re.sub(r'MT_CUDA_CHECK\(op, cudaFuncSetAttribute\([^;]*;', '', body)
body = re.sub(r'kernel<<<grid, threads, .*?>>>\(P, L\);',
              'emu_launch(grid.x, threads, L.bytes, [&] { kernel(P, L); }, grid.y);', body)
body = re.sub(r'MT_CHECK_LAUNCH\([^;]*;', '', body)
head = '#include "emu_cuda.h"\nstruct dim3 { unsigned x, y; };\nusing cudaStream_t = void*;\n'
open(sys.argv[3], 'w').write(head + body)
PY
g++ -O1 -std=c++20 -fopenmp -I"$src/src" -I"$src" -I"$here" -I"$work" "$here/lightning_chunked.cpp" \
  "$build/libmt_backend.a" "$build/libmt_core.a" -lfmt -o "$work/lightning_chunked"
# Within one chunk, exactly one, several with a partial last; head dims not multiples of 16 or 8 (padding, the
# unvectorised loads) and past one column tile; packed examples inside and across chunks; strong and near-1 decays.
for args in "37 16 2 1 0 f" "64 32 1 1 0 f" "150 40 2 0.5 0 f" "140 13 3 8 20 f" "200 64 2 0.00001 70 f" \
  "150 32 2 1 0 b" "130 128 1 1 64 b" "90 24 2 8 30 b" "75 96 1 0.5 3 b"; do
  "$work/lightning_chunked" $args
done
