#!/usr/bin/env bash
# A full disk on every write path, on a small tmpfs: a checkpoint save that runs out of room fails with one line
# naming the OS error, the file and the bytes, removes its .tmp and leaves the earlier checkpoint intact; an
# export that runs out of room leaves neither the target nor its temporary directory; metrics.jsonl on a full disk
# is named with the OS error; preflight warns when output_dir has less room than one checkpoint.
# Exit 77 (skipped) where a tmpfs cannot be mounted here (not root, or no CAP_SYS_ADMIN).
# Usage: disk_full.sh MEGATRAIN SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d)
disk=$work/disk
mkdir -p "$disk"
cleanup() { umount "$disk" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
export HDF5_USE_FILE_LOCKING=FALSE
f=$src/tests/fixtures/llama
fail() { echo "FAIL: $1"; for l in "$work"/*.log; do echo "== $l"; tail -20 "$l"; done; exit 1; }
mount_disk() {  # mount_disk BYTES: a fresh tmpfs of that size at $disk
  umount "$disk" 2>/dev/null
  mount -t tmpfs -o "size=$1" tmpfs "$disk" 2>"$work/mount.err" ||
    { echo "skipped: cannot mount a tmpfs here: $(cat "$work/mount.err")"; exit 77; }
}
train() {  # train OUT LOG [more]
  local out=$1 log=$2
  shift 2
  "$bin" train --config "$f/train.yaml" --set "model.name=$f/model" --set "dataset.dataset_dir=$f/data" \
    --set "training.output_dir=$out" "$@" >"$log" 2>&1
}
one_error() {  # one_error LOG PATTERN...: exactly one error line, matching every pattern
  [[ $(grep -c '^megatrain: error: ' "$1") -eq 1 ]] || fail "$1: not exactly one error line"
  local log=$1
  shift
  for p in "$@"; do grep '^megatrain: error: ' "$log" | grep -q -- "$p" || fail "$log: error line lacks '$p'"; done
}

# The size of one checkpoint of this model, on ordinary disk.
train "$work/sizes" "$work/sizes.log" --set training.num_steps=1 || fail "sizing run"
ckpt_bytes=$(stat -c %s "$work/sizes/checkpoints/step-000001.h5")

# Room for one checkpoint and a half: step 1 is saved, step 2 runs out of room (step 1 is still there).
mount_disk $((ckpt_bytes * 3 / 2))
train "$disk/run" "$work/save.log" --set training.num_steps=3 --set training.save_steps=1
rc=$?
[[ $rc -eq 1 ]] || fail "the save on a full disk: exit status $rc"
one_error "$work/save.log" "^megatrain: error: no space left on device: checkpoint $disk/run/checkpoints/step-000002.h5 not written" "bytes" \
  "the partial file is removed"
ls "$disk/run/checkpoints" | grep -q tmp && fail "a .tmp is left: $(ls "$disk/run/checkpoints")"
"$bin" inspect "$disk/run/checkpoints/step-000001.h5" >/dev/null || fail "the step-1 checkpoint is damaged"
echo "ok   checkpoint on a full disk: $(grep '^megatrain: error: ' "$work/save.log" | cut -c1-400)"

# Preflight: less room than one checkpoint is a warning naming output_dir.
mount_disk $((ckpt_bytes / 2))
train "$disk/small" "$work/preflight.log" --set training.num_steps=1
rc=$?
[[ $rc -eq 1 ]] || fail "the run's last save on a full disk: exit status $rc, expected 1"
grep -q "training.output_dir $disk/small: its file system has .* free, less than one checkpoint" "$work/preflight.log" ||
  fail "no preflight warning"
echo "ok   preflight: $(grep -m1 'less than one checkpoint' "$work/preflight.log" | cut -c1-200)"

# An export larger than the disk.
mount_disk $((ckpt_bytes / 6))
"$bin" export --checkpoint "$work/sizes/checkpoints/step-000001.h5" --out "$disk/exported" --dtype float32 \
  >"$work/export.log" 2>&1 && fail "the export on a full disk succeeded"
one_error "$work/export.log" "^megatrain: error: no space left on device: writing .*file $disk/exported.tmp-.* failed after .* of .* bytes"
[[ -z $(ls -A "$disk") ]] || fail "the export left $(ls -A "$disk")"
echo "ok   export on a full disk: $(grep '^megatrain: error: ' "$work/export.log" | cut -c1-300)"

# metrics.jsonl on a disk already full.
mount_disk 1M
mkdir -p "$disk/full"
dd if=/dev/zero of="$disk/filler" bs=64K 2>/dev/null
train "$disk/full" "$work/metrics.log" --set training.num_steps=1
one_error "$work/metrics.log" "^megatrain: error: no space left on device: writing the line of step .* to $disk/full/metrics.jsonl"
echo "ok   metrics on a full disk: $(grep '^megatrain: error: ' "$work/metrics.log" | cut -c1-300)"
