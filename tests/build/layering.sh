#!/usr/bin/env bash
# The CUDA wing's place in the layering, from the sources' own #include lines: nothing under src/ includes the wing
# (kernels/) except the backend choice (src/cli/runtime/backend_select.cpp, which makes the CUDA backend); src/backend/
# (the op interface and the CPU reference) includes nothing of it; and the wing includes nothing of src/cli/ nor of
# src/engine/ (the interfaces it implements, the weight stream, gradient sink, checkpoint store and gradient reducer,
# are src/transfer/'s, below the engine); src/transfer/ itself includes nothing of ours outside it (pure interfaces,
# so that anything may implement them). A new include across these lines fails the suite, naming the file and the
# line.
# Usage: layering.sh SOURCE_DIR
set -uo pipefail
src=$1
status=0
fail() { echo "FAIL: $1"; status=1; }
# file:line:#include "x" for every quoted include under the given directory.
includes() { grep -rnE '^\s*#\s*include\s+"' "$src/$1" --include='*.h' --include='*.cuh' --include='*.cpp' --include='*.cu' |
  sed -E "s#^$src/##; s#^([^:]*:[0-9]+):\s*\#\s*include\s+\"([^\"]+)\".*#\1 \2#"; }
allowed_wing_users='^src/cli/runtime/backend_select\.cpp:'
while read -r at path; do
  [[ $path == kernels/* ]] || continue
  [[ $at =~ $allowed_wing_users ]] && continue
  fail "$at includes the CUDA wing's $path (only the backend choice may)"
done < <(includes src)
while read -r at path; do
  [[ $path == cli/* ]] && fail "$at includes $path: the CUDA wing includes nothing of the commands"
  [[ $path == engine/* ]] && fail "$at includes $path: the CUDA wing includes nothing of the engine"
done < <(includes kernels)
while read -r at path; do
  [[ $path == transfer/* ]] || fail "$at includes $path: the transfer interfaces include nothing of ours outside them"
done < <(includes src/transfer)
[[ $status -eq 0 ]] && echo "ok   the CUDA wing: used by the backend choice alone; it includes nothing of the commands or the engine; the transfer interfaces stand alone"
exit $status
