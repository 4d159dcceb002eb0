#!/usr/bin/env bash
# Runs the CUDA cross-entropy (kernels/ops/cross_entropy.cu) on the CPU through emu_cuda.h, beside the version of the
# same file in git's HEAD (or REF), on a machine without a GPU: rows ld elements apart must give bit for bit the earlier
# kernel's results where ld = V (the same path and sums), and where ld pads V (the LM head's logits rows,
# backend/head_chunk.h) the earlier kernel's on the packed rows to a few ulps (the 4-wide path where it took the scalar
# one), with every padding column and guard untouched. By hand, after editing the kernel; never in CI.
# Usage: tools/kernel_emulation/run_cross_entropy.sh [CPU_BUILD_DIR] [REF]   (a CPU build with mt_core built)
set -euo pipefail
source "$(dirname "$0")/emu_env.sh"
ref=${2:-HEAD}
git -C "$src" show "$ref:kernels/ops/cross_entropy.cu" >"$work/cross_entropy_ref.cu"
python3 - "$src/kernels/ops" "$work" "$here" <<'PY'
import re, sys
ops, work = sys.argv[1], sys.argv[2]
sys.path.insert(0, sys.argv[3])
from emu_rewrite import HEAD, rewrite
open(f'{work}/cross_entropy_emu.cpp', 'w').write(rewrite(open(f'{ops}/cross_entropy.cu').read(), ops))
ref = open(f'{work}/cross_entropy_ref.cu').read()
open(f'{work}/cross_entropy_ref_emu.cpp', 'w').write(rewrite(ref, ops, 'mt::cuda_ref'))
decl = [l for l in open(f'{ops}/kernels.h').read().splitlines() if l.startswith('template <typename T> void cross_entropy(')]
ref_decl = re.search(r'template <typename T>\s*void cross_entropy\(([^)]*)\)', ref).group(1)
open(f'{work}/kernels_emu.h', 'w').write(
    HEAD + 'namespace mt::cuda {\n' + '\n'.join(decl) + '\n}  // namespace mt::cuda\n' +
    'namespace mt::cuda_ref {\ntemplate <typename T> void cross_entropy(' + ref_decl + ');\n}  // namespace mt::cuda_ref\n')
PY
for f in cross_entropy cross_entropy_ref; do
  g++ -O1 -std=c++20 -I"$src/src" -I"$src" -I"$here" -I"$work" -c "$work/${f}_emu.cpp" -o "$work/$f.o" &
done
wait
g++ -O1 -std=c++20 -I"$src/src" -I"$src" -I"$here" -I"$work" "$here/cross_entropy.cpp" "$work/cross_entropy.o" \
  "$work/cross_entropy_ref.o" "$build/libmt_core.a" -lfmt -o "$work/cross_entropy"
# Packed rows with V a multiple of 4 (the 4-wide path) and not (scalar); padded rows (V odd, even, a multiple of 4
# with ld past it); a misaligned logits pointer (scalar); soft-capped and not; fp32 and bf16 dlogits.
fail=0
for dt in f b; do
  for shape in "3 64 64" "5 37 37" "4 1001 1001" "3 1001 1024" "4 998 1024" "2 4096 4160" "3 37 64 shift" \
    "2 5 8"; do
    read -r rows V ld shift <<<"$shape"
    for cap in 0 5; do
      "$work/cross_entropy" $dt $rows $V $ld $cap $shift || fail=1
    done
  done
done
exit $fail
