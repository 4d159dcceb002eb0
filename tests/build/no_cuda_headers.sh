#!/usr/bin/env bash
# A CPU-only build (-DMEGATRAIN_CUDA=OFF) must not need the CUDA toolkit: no translation unit of it may include a
# CUDA, cuBLAS or NCCL header, nor one of ours under the CUDA wing kernels/. The proof is the compiler's own dependency
# output: every object's depfile (<object>.o.d, written by -MD) lists each header it read.
# Usage: no_cuda_headers.sh BUILD_DIR HAVE_CUDA   (HAVE_CUDA ON: a CUDA build, where the check does not apply: 77)
set -uo pipefail
build=$1 have_cuda=$2
[[ $have_cuda == ON ]] && { echo "skipped: a CUDA build (MEGATRAIN_HAVE_CUDA=ON) includes CUDA headers by design"; exit 77; }
# Objects of our targets only (<target>.dir/): CMake's own compiler probes (CMakeFiles/<version>/, CheckCUDA/, present
# where nvcc is installed) are not translation units of the build.
mapfile -t depfiles < <(find "$build/CMakeFiles" "$build/tests/CMakeFiles" -path '*.dir/*' -name '*.o.d' 2>/dev/null | sort)
# Every compiled source has one: far fewer means the depfiles are not where this script looks.
sources=$(find "$build/CMakeFiles" "$build/tests/CMakeFiles" -path '*.dir/*' -name '*.o' 2>/dev/null | wc -l)
(( ${#depfiles[@]} > 0 && ${#depfiles[@]} == sources )) ||
  { echo "FAIL: ${#depfiles[@]} depfiles for $sources objects under $build (is this a built Makefile/Ninja tree?)"; exit 1; }
pattern='(/cuda[A-Za-z0-9_]*\.h|/cuda/std/|/cublas[A-Za-z0-9_]*\.h|/nccl[A-Za-z0-9_]*\.h|/crt/host_|/kernels/(ops|attention|runtime)/)'
status=0
for d in "${depfiles[@]}"; do
  hits=$(tr ' \\' '\n\n' <"$d" | grep -E "$pattern" | sort -u)
  if [[ -n $hits ]]; then
    echo "FAIL: ${d#"$build"/} includes: $(tr '\n' ' ' <<<"$hits")"
    status=1
  fi
done
[[ $status -eq 0 ]] && echo "ok   ${#depfiles[@]} translation units of the CPU build, none includes a CUDA header"
exit $status
