#!/usr/bin/env bash
# store.offload_paths checked before training (preflight): a path that does not exist, one that is not writable
# (a read-only tmpfs as root, chmod otherwise) and one without room (a 1 MiB tmpfs) each end `train` with exit 1
# and one line naming the path and the bytes the tier needs (and has), before the host store or the output
# directory exist. Then the device fills up mid-run (test hook: after the first step's writes another file takes
# the tmpfs's space): the job ends with one line naming the tier file and "No space left on device", and the step-2
# checkpoint written before (synchronously, so that it is complete) is intact; the tier's bytes on the tmpfs were
# counted as RAM by the preflight. The tmpfs cases are skipped where mount is not permitted.
# Usage: offload_paths.sh MEGATRAIN_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d)
trap 'umount "$work/ro" "$work/small" "$work/full" 2>/dev/null; rm -rf "$work"' EXIT
export HDF5_USE_FILE_LOCKING=FALSE MEGATRAIN_BACKEND=cpu
f=$src/tests/fixtures/llama
train() {  # train NAME PATH [args...]: the tier on PATH
  local name=$1 path=$2
  shift 2
  timeout 60 "$bin" train --config "$f/train.yaml" --set "model.name=$f/model" --set "dataset.dataset_dir=$f/data" \
    --set store.offload=optimizer --set "store.offload_paths=$path" --set "training.output_dir=$work/out-$name" "$@" \
    >"$work/$name.log" 2>&1
}
fail() { echo "FAIL: $1"; cat "$work"/*.log; exit 1; }
refused() {  # refused NAME PATTERN: exit 1, one error line matching PATTERN, nothing allocated or written
  local name=$1 pattern=$2 rc=$3
  ((rc == 1)) || fail "$name: exit $rc"
  [[ $(grep -c '^megatrain: error: ' "$work/$name.log") -eq 1 ]] || fail "$name: not one error line"
  grep -q "^megatrain: error: $pattern" "$work/$name.log" || fail "$name: unexpected message"
  ! grep -q "host store:" "$work/$name.log" && [[ ! -e $work/out-$name ]] || fail "$name: went past the preflight"
  echo "ok   $(grep '^megatrain: error: ' "$work/$name.log")"
}

train missing "$work/nowhere"
refused missing "store.offload_paths: $work/nowhere: no such directory (the tier needs .* (.* bytes) there)$" $?

mkdir -p "$work/ro" "$work/small" "$work/full"
if (( $(id -u) == 0 )); then
  mount -t tmpfs -o ro,size=1m tmpfs "$work/ro" 2>/dev/null || { echo "skip tmpfs cases: mount not permitted"; exit 0; }
else
  chmod 555 "$work/ro"
fi
train readonly "$work/ro"
refused readonly "store.offload_paths: $work/ro: not writable (.*); the tier needs .* (.* bytes) there$" $?

(( $(id -u) == 0 )) || { echo "skip space and device-full cases: mount needs root"; exit 0; }
mount -t tmpfs -o size=256k tmpfs "$work/small" || fail "mount small"
train small "$work/small"
refused small "store.offload_paths: $work/small: .* (.* bytes) needed for the tier files of 1 rank(s), 256.0 KiB (262144 bytes) available$" $?

mount -t tmpfs -o size=8m tmpfs "$work/full" || fail "mount full"
MEGATRAIN_TEST_SYNC_SAVE=1 MEGATRAIN_TEST_TIER_FULL_AFTER_WRITES=12 train full "$work/full" --set training.num_steps=4 --set training.save_steps=2
rc=$?
((rc != 0)) || fail "the run with a full device succeeded"
grep -q "error: no space left on device: write of .* bytes at offset .* of .*megatrain-tier-.*-rank0.bin failed" "$work/full.log" ||
  fail "no line naming the tier file and the error"
grep -q "state tier: 384.0 KiB of its files are on a RAM file system (tmpfs or ramfs): they count against host RAM" \
  "$work/full.log" || fail "the tier on tmpfs was not counted as RAM"
"$bin" inspect "$work/out-full/checkpoints/step-000002.h5" >/dev/null || fail "the step-2 checkpoint is damaged"
[[ ! -e $work/out-full/checkpoints/step-000004.h5 ]] || fail "a step-4 checkpoint exists"
ls "$work/full" | grep -q 'megatrain-tier-.*\.bin$' && fail "the tier's file stays on the full device: $(ls "$work/full")"
echo "ok   device full mid-run: $(grep -o 'no space left on device: write.*megatrain-tier-[^ ]*' "$work/full.log" | head -1); step 2 intact, the tier's file removed"
