#!/usr/bin/env bash
# Builds an earlier commit's `megatrain` and `tests_gpu` in a git worktree beside this checkout and puts them, stripped,
# in bundle_base/ with rpath $ORIGIN/../bundle/lib: the libraries of bundle/ (tools/bundle.sh), so that
# `tools/gpu_session.sh ab` runs that build and this one side by side on the GPU machine.
# With ccache (base_dir the worktrees' common parent) the sources the two commits share compile once.
# Invariant: this checkout is left as it was (bundle_base/ is ignored); the worktree holds the commit's own pinned
# headers (its install_deps.sh). The earlier build links what this one does only where the two link alike: where a
# commit adds a library, bundle/ must be made by the later one.
# Usage: tools/bundle_base.sh COMMIT [WORKTREE_DIR]   (default ../megatrain-base-<short commit> beside this checkout)
set -euo pipefail
[[ $# -ge 1 ]] || { echo "usage: tools/bundle_base.sh COMMIT [WORKTREE_DIR]" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
commit=$(git -C "$repo" rev-parse --verify "$1^{commit}")
tree=${2:-$(dirname "$repo")/megatrain-base-${commit:0:7}}
[[ -d $tree ]] || git -C "$repo" worktree add --detach "$tree" "$commit" >/dev/null
[[ $(git -C "$tree" rev-parse HEAD) == "$commit" ]] || { echo "bundle_base: $tree is not at $commit" >&2; exit 1; }
bash "$tree/scripts/install_deps.sh" >/dev/null

cmake_args=(-DCMAKE_BUILD_TYPE=Release)
command -v ninja >/dev/null && cmake_args+=(-G Ninja)
command -v ccache >/dev/null && cmake_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
cmake -S "$tree" -B "$tree/build" "${cmake_args[@]}" >/dev/null
cmake --build "$tree/build" -j"$(nproc)" --target megatrain tests_gpu

out=$repo/bundle_base
rm -rf "$out" && mkdir -p "$out"
for binary in "$tree/build/megatrain" "$tree/build/tests/tests_gpu"; do
  cp "$binary" "$out/" && strip "$out/$(basename "$binary")"
  patchelf --set-rpath '$ORIGIN/../bundle/lib' "$out/$(basename "$binary")"
done
echo "bundle_base: $out ($commit: megatrain, tests_gpu) from $tree"
