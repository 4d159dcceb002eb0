#!/usr/bin/env bash
# jobs/smoke.sh as a user runs it on one machine without Slurm (two steps instead of twenty): mpirun with one rank
# per NUMA domain bound by --bind-to numa; it must finish, log the launcher's binding and write metrics.
# Usage: smoke.sh MEGATRAIN_BINARY MPIEXEC SOURCE_DIR
set -uo pipefail
bin=$1 mpiexec=$2 src=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
MEGATRAIN_BIN=$bin MEGATRAIN_MPIRUN=$mpiexec MEGATRAIN_OUTPUT_DIR=$work/out \
  MEGATRAIN_EXTRA_ARGS="--set training.num_steps=2 --set model.name=$src/configs/models/demo --set dataset.dataset_dir=$src/data" \
  timeout 120 bash "$src/jobs/smoke.sh" >"$work/log" 2>&1
rc=$?
if ((rc != 0)) || ! grep -q "rank 0 on .*bound by the launcher (--bind-to numa)" "$work/log" ||
   ! grep -q "MCW rank 0" "$work/log" || [[ $(grep -c '"step"' "$work/out/metrics.jsonl" 2>/dev/null) -lt 1 ]]; then
  echo "FAIL: rc=$rc"; cat "$work/log"; exit 1
fi
echo "ok   $(grep -m1 'bound by' "$work/log" | cut -c12-)"
