#!/usr/bin/env bash
# Makes a relocatable directory: the megatrain binary (and, with --tests, the test binaries) at its top and
# the shared libraries a compute node may lack in lib/ (found with ldd); binaries get rpath $ORIGIN/lib.
# Left out on purpose: the C/C++ runtime, the GPU driver, the CUDA runtime and libraries (NCCL and cuDNN among them: cuDNN's
# libcudnn.so.9 loads its engine libraries, ~500 MB, from its own directory at run time; NVRTC, 104 MB, which cuDNN
# compiles its runtime-fusion kernels with and cudnn-frontend's graph links), and MPI/hwloc/numa
# (a node's MPI must match its launcher). Usage: tools/bundle.sh [--tests] [BUILD_DIR] [OUT_DIR]
set -euo pipefail
with_tests=0
if [[ ${1:-} == --tests ]]; then with_tests=1; shift; fi
build=${1:-build}
out=${2:-bundle}
command -v patchelf >/dev/null || { echo "bundle: patchelf is missing (apt-get install patchelf)" >&2; exit 1; }
[[ -x $build/megatrain ]] || { echo "bundle: $build/megatrain not found; build first" >&2; exit 1; }

rm -rf "$out"
mkdir -p "$out/lib"
binaries=("$build/megatrain")
if ((with_tests)); then
  while IFS= read -r t; do binaries+=("$t"); done < <(find "$build/tests" -maxdepth 1 -type f \( -name 'tests_*' -o -name mpi_compare_runs \) -perm -u+x)
fi

# System, driver, CUDA and MPI libraries stay with the node.
keep_on_node='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libstdc\+\+|libgcc_s|libgomp|libcuda\.|libcudart|libcublas|libcudnn|libnvrtc|libnccl|libnvidia|libmpi|libopen-(pal|rte)|libhwloc|libnuma|libevent|libpmix|libz\.|libudev|libutil)'
for b in "${binaries[@]}"; do
  cp "$b" "$out/"
  patchelf --set-rpath '$ORIGIN/lib' "$out/$(basename "$b")"
  ldd "$b" | awk '/=> \// {print $1, $3}' | while read -r name path; do
    [[ $name =~ $keep_on_node ]] && continue
    [[ -e $out/lib/$name ]] || cp -L "$path" "$out/lib/$name"
  done
done
for l in "$out"/lib/*; do patchelf --set-rpath '$ORIGIN' "$l"; done
echo "bundle: $out ($(find "$out" -maxdepth 1 -type f | wc -l) binaries), $out/lib ($(ls "$out/lib" | wc -l) libraries, $(du -sh "$out/lib" | cut -f1))"
