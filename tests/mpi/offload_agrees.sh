#!/usr/bin/env bash
# The NVMe state tier changes no number (DESIGN.md §4): the llama fixture trained 4 steps (bf16 compute and stream
# copy, a checkpoint at step 2 and 4) with store.offload optimizer and optimizer+master on a scratch directory is
# bitwise the run without offload — losses, gradient norms, final weights and the checkpoints' optimizer state —
# with -np 1 and -np 2, through io_uring and through the thread pool (MEGATRAIN_TIER_IO=threads); the tier's files
# are gone after a clean exit. A run killed at step 4 (rank 1, -np 2, optimizer+master) leaves its tier files and
# its step-2 checkpoint; the restart in another mode (optimizer, -np 1) removes the stale files, rebuilds the tier
# from the checkpoint and ends bitwise equal to an uninterrupted run without offload; the same step-2 checkpoint
# (written with optimizer+master) resumes without offload, bitwise too. On a ramfs (no O_DIRECT; where root may
# mount one) the tier runs buffered, said once.
# Usage: offload_agrees.sh MEGATRAIN MPIEXEC COMPARE SOURCE_DIR
set -uo pipefail
bin=$1 mpiexec=$2 compare=$3 src=$4
work=$(mktemp -d)
trap 'umount "$work/ramfs" 2>/dev/null; rm -rf "$work"' EXIT
export HDF5_USE_FILE_LOCKING=FALSE
f=$src/tests/fixtures/llama
mkdir -p "$work/tier"
train() {  # train NP OUT [args...]
  local np=$1 out=$2
  shift 2
  timeout 120 "$mpiexec" -x HDF5_USE_FILE_LOCKING -x "MEGATRAIN_TEST_DIE_AT_STEP=${MEGATRAIN_TEST_DIE_AT_STEP:-}" \
    -x "MEGATRAIN_TIER_IO=${MEGATRAIN_TIER_IO:-}" -np "$np" "$bin" train --config "$f/train.yaml" \
    --set "model.name=$f/model" --set "dataset.dataset_dir=$f/data" --set model.dtype=bfloat16 \
    --set model.stream_dtype=bfloat16 --set training.save_steps=2 --set "training.output_dir=$out" "$@" >>"$out.log" 2>&1
}
fail() { echo "FAIL: $1"; for l in "$work"/*.log; do echo "== $l"; cat "$l"; done; exit 1; }
state() { "$bin" inspect --json "$1" | grep -v '"file"' || fail "inspect $1"; }
same() {  # same REF RUN WHAT [STEPS...]: final model and metrics, and each named checkpoint, bitwise
  local ref=$1 run=$2 what=$3
  shift 3
  "$compare" "$work/$ref" "$work/$run" >/dev/null || fail "$what differs from $ref"
  for s in "$@"; do
    [[ "$(state "$work/$ref/checkpoints/step-00000$s.h5")" == "$(state "$work/$run/checkpoints/step-00000$s.h5")" ]] ||
      fail "step-$s checkpoint differs ($what)"
  done
}
tier_empty() { [[ -z "$(ls -A "$work/tier")" ]] || fail "tier files left after $1: $(ls "$work/tier")"; }

train 1 "$work/none" --set training.num_steps=4 || fail "reference run"
for np in 1 2; do
  for mode in optimizer optimizer+master; do
    run=np$np-${mode/+/-}
    train $np "$work/$run" --set training.num_steps=4 --set store.offload=$mode --set "store.offload_paths=$work/tier" ||
      fail "$run"
    grep -q "state tier: store.offload $mode: .* I/O through io_uring, O_DIRECT\|state tier: store.offload $mode: .* I/O through threads" \
      "$work/$run.log" || fail "no state tier line ($run)"
    same none "$run" "$run" 2 4
    tier_empty "$run"
    echo "ok   -np $np store.offload $mode: bitwise the run without offload"
  done
done
MEGATRAIN_TIER_IO=threads train 2 "$work/threads" --set training.num_steps=4 --set store.offload=optimizer+master \
  --set "store.offload_paths=$work/tier" || fail "thread-pool run"
grep -q "I/O through threads (MEGATRAIN_TIER_IO=threads)" "$work/threads.log" || fail "the thread pool was not used"
same none threads "thread pool" 2 4
echo "ok   the thread-pool fallback: bitwise the same"

train 1 "$work/ref6" --set training.num_steps=6 || fail "6-step reference"
MEGATRAIN_TEST_DIE_AT_STEP=4 train 2 "$work/killed" --set training.num_steps=6 --set store.offload=optimizer+master \
  --set "store.offload_paths=$work/tier" && fail "the run was not killed"
[[ -f $work/killed/checkpoints/step-000002.h5 ]] || fail "no step-2 checkpoint of the killed run"
[[ -n "$(ls -A "$work/tier")" ]] || fail "the killed run left no tier files (nothing to test)"
train 1 "$work/killed" --set training.num_steps=6 --set training.resume_from=auto --set store.offload=optimizer \
  --set "store.offload_paths=$work/tier" || fail "resume with store.offload optimizer"
grep -q "resuming from .*step-000002.h5 at step 2" "$work/killed.log" || fail "did not resume from step 2"
grep -q "state tier: removed .*megatrain-tier-.*-rank0.bin (left by a run that did not end cleanly" "$work/killed.log" ||
  fail "the stale tier file was not removed"
same ref6 killed "killed with optimizer+master, resumed with optimizer" 4 6
tier_empty "resumed run"
echo "ok   killed at step 4 (optimizer+master, -np 2): stale tier removed, resumed with optimizer -np 1, bitwise equal"

mkdir -p "$work/back/checkpoints" && cp "$work/killed/checkpoints/step-000002.h5" "$work/back/checkpoints/"
train 2 "$work/back" --set training.num_steps=6 --set training.resume_from=auto || fail "resume without offload"
for s in 4 6; do  # its metrics start at step 3: the checkpoints hold the whole state
  [[ "$(state "$work/ref6/checkpoints/step-00000$s.h5")" == "$(state "$work/back/checkpoints/step-00000$s.h5")" ]] ||
    fail "step-$s checkpoint differs (saved with optimizer+master, resumed without offload)"
done
echo "ok   the step-2 checkpoint written with optimizer+master resumes without offload (-np 2), bitwise equal"

mkdir -p "$work/ramfs"
if mount -t ramfs ramfs "$work/ramfs" 2>/dev/null; then
  train 2 "$work/buffered" --set training.num_steps=4 --set store.offload=optimizer+master \
    --set "store.offload_paths=$work/ramfs" || fail "tier on ramfs"
  [[ $(grep -c "does not allow O_DIRECT; buffered I/O there" "$work/buffered.log") -eq 1 ]] || fail "no single buffered line"
  grep -q "state tier: .* buffered; staging" "$work/buffered.log" || fail "the tier line does not say buffered"
  same none buffered "buffered tier on ramfs" 2 4
  echo "ok   on ramfs (no O_DIRECT) the tier runs buffered, said once, bitwise the same"
else
  echo "skip ramfs: mount not permitted here"
fi
