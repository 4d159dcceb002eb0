#!/usr/bin/env bash
# A shared-memory filesystem too small for the host store: one error line from rank 0 naming the directory,
# its free space and the size needed, before any training; no output directory. Needs a tiny tmpfs
# (mount as root); skipped (77) where mounting is not allowed.
# Usage: shm_too_small.sh MEGATRAIN MPIEXEC SOURCE_DIR
set -uo pipefail
bin=$1 mpiexec=$2 src=$3
work=$(mktemp -d)
mkdir "$work/shm"
if ! mount -t tmpfs -o size=256k tmpfs "$work/shm" 2>/dev/null; then
  rm -rf "$work"; echo "skipped: cannot mount a tmpfs here"; exit 77
fi
trap 'umount "$work/shm"; rm -rf "$work"' EXIT
f=$src/tests/fixtures/llama
OMPI_MCA_osc_sm_backing_directory=$work/shm timeout 60 "$mpiexec" -np 2 "$bin" train --config "$f/train.yaml" \
  --set "model.name=$f/model" --set "dataset.dataset_dir=$f/data" --set "training.output_dir=$work/out" >"$work/log" 2>&1
rc=$?
line=$(grep '^megatrain: error: ' "$work/log")
if ((rc == 0)) || [[ $(grep -c '^megatrain: error: ' "$work/log") -ne 1 ]] || [[ -e $work/out ]] ||
   ! grep -q "\[rank 0 on .*\] host store: $work/shm has 256.0 KiB free, but .* needs .*KiB" <<<"$line"; then
  echo "FAIL: rc=$rc:"; cat "$work/log"; exit 1
fi
echo "ok   $line"
