#!/usr/bin/env bash
# Data parallelism on CPU ranks (gradients summed through MPI, the NCCL path's fallback): `train` on a tiny
# fixture with 1 compute rank, with 2 compute ranks sharing one node's store (and with 2 accumulation passes),
# and with 2 simulated nodes of 2 ranks (1 compute rank + 1 optimizer rank each, every node a replica) gives the
# same losses, gradient norms and final parameters as the single rank within 1e-5 relative (the sums run in
# another order); 2 compute ranks with 2 passes, and with packed examples, agree with 1 rank the same way. With
# MEGATRAIN_BACKEND=cuda each compute rank drives its own GPU and gradients are summed with NCCL (needs 2 GPUs;
# exit 77 = skipped otherwise).
# Usage: data_parallel_agrees.sh MEGATRAIN MPIEXEC COMPARE SOURCE_DIR FIXTURE
set -uo pipefail
bin=$1 mpiexec=$2 compare=$3 src=$4 fixture=$5
if [[ ${MEGATRAIN_BACKEND:-} == cuda ]] && (($(nvidia-smi -L 2>/dev/null | wc -l) < 2)); then
  echo "skipped: MEGATRAIN_BACKEND=cuda needs 2 GPUs"; exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
f=$src/tests/fixtures/$fixture
export OMP_NUM_THREADS=1
run() {  # name, np, extra mpiexec/env..., -- train args...
  local name=$1 np=$2
  shift 2
  if ! timeout 180 env "$@" "$mpiexec" --oversubscribe -np "$np" "$bin" train --config "$f/train.yaml" \
      --set "model.name=$f/model" --set "dataset.dataset_dir=$f/data" --set "training.output_dir=$work/$name" \
      ${SETS[@]+"${SETS[@]}"} >"$work/$name.log" 2>&1; then
    echo "FAIL: $name exited with $?:"; cat "$work/$name.log"; exit 1
  fi
}
SETS=(--set training.gpus_per_node=1); run one 1
SETS=(--set training.gpus_per_node=2); run dp2 2
grep -q "data parallel: 2 GPU rank(s) on each of 1 node(s)" "$work/dp2.log" || { echo "FAIL: dp2 log:"; cat "$work/dp2.log"; exit 1; }
SETS=(--set training.gpus_per_node=1); run nodes2 4 MEGATRAIN_TEST_RANKS_PER_NODE=2
grep -q "data parallel: 1 GPU rank(s) on each of 2 node(s)" "$work/nodes2.log" || { echo "FAIL: nodes2 log:"; cat "$work/nodes2.log"; exit 1; }
SETS=(--set training.gpus_per_node=1 --set training.gradient_accumulation_steps=2); run one_passes 1
SETS=(--set training.gpus_per_node=2 --set training.gradient_accumulation_steps=2); run dp2_passes 2
# Checkpoints under data parallelism: saved every step in the background (the second GPU rank serves them from
# its optimizer thread) and a resume after step 2 change nothing, bitwise.
SETS=(--set training.gpus_per_node=2 --set training.save_steps=1); run dp2_saves 2
mkdir -p "$work/dp2_resumed/checkpoints"
cp "$work/dp2_saves/metrics.jsonl" "$work/dp2_resumed/"
cp "$work/dp2_saves/checkpoints/step-000002.h5" "$work/dp2_resumed/checkpoints/"
SETS=(--set training.gpus_per_node=2 --set training.resume_from=auto); run dp2_resumed 2
grep -q "resum" "$work/dp2_resumed.log" || { echo "FAIL: no resume:"; cat "$work/dp2_resumed.log"; exit 1; }
"$compare" "$work/dp2" "$work/dp2_saves" "$work/dp2_resumed" || exit 1
"$compare" --tolerance 1e-5 "$work/one" "$work/dp2" "$work/nodes2" || exit 1
"$compare" --tolerance 1e-5 "$work/one_passes" "$work/dp2_passes" || exit 1
# Packed examples reach the second GPU rank intact (the node's first rank tokenizes and sends them).
SETS=(--set training.gpus_per_node=1 --set dataset.packing=true); run one_packed 1
SETS=(--set training.gpus_per_node=2 --set dataset.packing=true); run dp2_packed 2
"$compare" --tolerance 1e-5 "$work/one_packed" "$work/dp2_packed" || exit 1
# Bad shapes: more GPU ranks per node than ranks, a batch smaller than the ranks; one error line each.
expect_error() {  # name, np, expected text
  local name=$1 np=$2 text=$3
  if timeout 60 "$mpiexec" --oversubscribe -np "$np" "$bin" train --config "$f/train.yaml" --set "model.name=$f/model" \
      --set "dataset.dataset_dir=$f/data" --set "training.output_dir=$work/$name" ${SETS[@]+"${SETS[@]}"} \
      >"$work/$name.log" 2>&1; then
    echo "FAIL: $name succeeded"; exit 1
  fi
  grep -q "$text" "$work/$name.log" || { echo "FAIL: $name did not say '$text':"; cat "$work/$name.log"; exit 1; }
  [[ ! -e $work/$name ]] || { echo "FAIL: $name created its output directory"; exit 1; }
}
SETS=(--set training.gpus_per_node=2); expect_error too_many_gpus 1 "training.gpus_per_node: 2 GPU rank(s) per node, but"
SETS=(--set training.gpus_per_node=2 --set training.batch_size=2 --set training.gradient_accumulation_steps=2)
expect_error batch_too_small 2 "training.batch_size: 2 sequences do not split into 2 data-parallel GPU ranks × 2"
# Only the first node writes: one final checkpoint.
ls "$work/nodes2/checkpoints/"*.h5 >/dev/null || { echo "FAIL: no checkpoint from the first node"; exit 1; }
echo "ok: data parallelism agrees with one rank"
