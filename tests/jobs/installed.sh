#!/usr/bin/env bash
# Installing like a tool: `cmake --install` into a temporary prefix puts megatrain in PREFIX/bin and the launchers
# in PREFIX/share/megatrain; with PREFIX/bin on PATH, the installed jobs/smoke.sh run from another directory trains.
# `megatrain --version` names the version and the commit; `megatrain` alone prints the usage.
# Usage: installed.sh BUILD_DIR MPIEXEC SOURCE_DIR
set -uo pipefail
build=$1 mpiexec=$2 src=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $1"; tail -n 20 "$work/log"; exit 1; }
cmake --install "$build" --prefix "$work/prefix" >"$work/log" 2>&1 || fail "cmake --install"
for f in bin/megatrain bin/megatrain-mpirun share/megatrain/jobs/smoke.sh share/megatrain/slurm/megatrain_job.sh \
         share/megatrain/configs/demo.yaml share/megatrain/data/dataset_info.json; do
  [[ -e $work/prefix/$f ]] || fail "the install lacks $f"
done
export PATH=$work/prefix/bin:$PATH
version=$(megatrain --version) || fail "megatrain --version"
grep -Eq '^megatrain [0-9]+\.[0-9]+\.[0-9]+ \(commit ([0-9a-f]{12}(-dirty)?|unknown)\)$' <<<"$version" ||
  fail "--version prints the version and commit: $version"
megatrain >"$work/usage" 2>&1 || fail "megatrain alone exits 0 with its usage"
grep -q "train" "$work/usage" && grep -q "export" "$work/usage" && grep -qi "usage" "$work/usage" ||
  fail "megatrain alone prints the usage: $(head -3 "$work/usage")"
mkdir -p "$work/elsewhere" && cd "$work/elsewhere" || exit 1
MEGATRAIN_MPIRUN=$mpiexec MEGATRAIN_OUTPUT_DIR=$work/out MEGATRAIN_EXTRA_ARGS="--set training.num_steps=2" \
  timeout 120 bash "$work/prefix/share/megatrain/jobs/smoke.sh" >"$work/log" 2>&1 || fail "the installed smoke job (rc=$?)"
grep -q '"step":2' "$work/out/metrics.jsonl" && [[ -f $work/out/final/model.safetensors ]] || fail "it trained"
echo "ok   installed under a prefix: $version; the installed jobs/smoke.sh trains from another directory"
