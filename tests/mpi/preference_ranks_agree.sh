#!/usr/bin/env bash
# Preference training (training.stage dpo or kto) under mpiexec. With 1 and 2 ranks on one compute rank (the second
# an optimizer rank): the reference pass's reference_logps.json is byte for byte the same, and so are the final
# parameters, losses and gradient norms. With 2 data-parallel GPU ranks (training.gpus_per_node 2: each batch's pairs
# or examples shared over the ranks, the reference pass's batches too, gathered on every rank), also with 2
# accumulation passes, and with an evaluation set: the same losses, metrics (rewards, logps, kl) and final parameters
# as one rank within 1e-5 relative, as SFT's data parallelism (the micro-batches follow each rank's plan); the
# reference file is written once, for the same examples.
# Usage: preference_ranks_agree.sh MEGATRAIN MPIEXEC COMPARE SOURCE_DIR CASE [--set key=value ...] (for every run)
set -uo pipefail
bin=$1 mpiexec=$2 compare=$3 src=$4 case=$5
shift 5
case_sets=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
f=$src/tests/fixtures/preference
export OMP_NUM_THREADS=1
run() {  # name, np, train args...
  local name=$1 np=$2
  shift 2
  if ! timeout 120 "$mpiexec" --oversubscribe -np "$np" "$bin" train --config "$f/$case/train.yaml" \
      --set "model.name=$f/$case/model" --set "dataset.dataset_dir=$f/$case/data" \
      --set "training.output_dir=$work/$name" ${case_sets[@]+"${case_sets[@]}"} "$@" >"$work/$name.log" 2>&1; then
    echo "FAIL: $name (mpiexec -np $np) exited with $?:"; cat "$work/$name.log"; exit 1
  fi
  grep -q "reference pass (the starting weights)" "$work/$name.log" || { echo "FAIL: $name: no reference pass"; exit 1; }
}
for np in 1 2; do
  run np$np $np --set training.gpus_per_node=1
  grep -q "host store: .* on $np rank(s)" "$work/np$np.log" || { echo "FAIL: np $np log:"; cat "$work/np$np.log"; exit 1; }
done
cmp "$work/np1/reference_logps.json" "$work/np2/reference_logps.json" || { echo "FAIL: reference passes differ"; exit 1; }
echo "ok   reference_logps.json bitwise the same with -np 1 and 2"
"$compare" "$work/np1" "$work/np2" || exit 1

run dp2 2 --set training.gpus_per_node=2
grep -q "data parallel: 2 GPU rank(s) on each of 1 node(s)" "$work/dp2.log" || { echo "FAIL: dp2 log:"; cat "$work/dp2.log"; exit 1; }
grep -q "each batch shared over 2 GPU ranks" "$work/dp2.log" || { echo "FAIL: dp2 reference pass not shared"; exit 1; }
[[ $(grep -c "reference pass (the starting weights)" "$work/dp2.log") -eq 1 ]] || { echo "FAIL: dp2 logged twice"; exit 1; }
"$compare" --tolerance 1e-5 "$work/np1" "$work/dp2" || exit 1
run one_passes 1 --set training.gpus_per_node=1 --set training.gradient_accumulation_steps=2
run dp2_passes 2 --set training.gpus_per_node=2 --set training.gradient_accumulation_steps=2
"$compare" --tolerance 1e-5 "$work/one_passes" "$work/dp2_passes" || exit 1
eval_sets=(--set dataset.val_size=0.25 --set training.eval_steps=1)
run one_eval 1 --set training.gpus_per_node=1 "${eval_sets[@]}"
run dp2_eval 2 --set training.gpus_per_node=2 "${eval_sets[@]}"
grep -q '"eval_rewards/chosen"' "$work/dp2_eval/metrics.jsonl" || { echo "FAIL: no eval metrics"; exit 1; }
"$compare" --tolerance 1e-5 "$work/one_eval" "$work/dp2_eval" || exit 1
echo "ok   $case: data parallelism agrees with one rank"
