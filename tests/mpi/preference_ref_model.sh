#!/usr/bin/env bash
# training.ref_model (the reference log-probabilities from another model directory: here the model a first run of the
# preference fixture CASE trained) under mpiexec: with 2 ranks on one compute rank the reference file, losses and final parameters are bitwise
# those of one rank; with 2 data-parallel GPU ranks (each reference batch shared over them, the node's store refilled
# with the reference weights and then the starting ones between barriers) the reference file holds the one-rank
# values within 1e-5 relative (as preference_ranks_agree.sh's data parallelism), also on 2 nodes of 2 (each node's
# leading rank refilling its own store), is written once, and training
# proceeds from the starting weights (step 1's policy log-probabilities are those of a run without
# ref_model) to the one-rank run's losses and parameters within 1e-5.
# Usage: preference_ref_model.sh MEGATRAIN MPIEXEC COMPARE SOURCE_DIR CASE [--set key=value ...] (for every run)
set -uo pipefail
bin=$1 mpiexec=$2 compare=$3 src=$4 case=$5
shift 5
case_sets=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
f=$src/tests/fixtures/preference/$case
export OMP_NUM_THREADS=1
run() {  # name, np, train args...
  local name=$1 np=$2
  shift 2
  if ! timeout 120 "$mpiexec" --oversubscribe -np "$np" "$bin" train --config "$f/train.yaml" \
      --set "model.name=$f/model" --set "dataset.dataset_dir=$f/data" --set "training.output_dir=$work/$name" \
      ${case_sets[@]+"${case_sets[@]}"} "$@" >"$work/$name.log" 2>&1; then
    echo "FAIL: $name (mpiexec -np $np) exited with $?:"; cat "$work/$name.log"; exit 1
  fi
}
run trained 1 --set training.gpus_per_node=1
ref=(--set "training.ref_model=$work/trained/final")
run one 1 --set training.gpus_per_node=1 "${ref[@]}"
run np2 2 --set training.gpus_per_node=1 "${ref[@]}"
run dp2 2 --set training.gpus_per_node=2 "${ref[@]}"
MEGATRAIN_TEST_RANKS_PER_NODE=2 run nodes 4 --set training.gpus_per_node=2 "${ref[@]}"
grep -q "data parallel: 2 GPU rank(s) on each of 2 node(s)" "$work/nodes.log" || { echo "FAIL: nodes log:"; cat "$work/nodes.log"; exit 1; }
for name in one np2 dp2 nodes; do
  [[ $(grep -c "reference pass ($work/trained/final)" "$work/$name.log") -eq 1 ]] \
    || { echo "FAIL: $name: one reference pass from the ref_model expected:"; cat "$work/$name.log"; exit 1; }
done
grep -q "each batch shared over 2 GPU ranks" "$work/dp2.log" || { echo "FAIL: dp2 reference pass not shared"; exit 1; }
cmp "$work/one/reference_logps.json" "$work/np2/reference_logps.json" \
  || { echo "FAIL: ref_model reference passes differ with -np 1 and 2 on one compute rank"; exit 1; }
python3 - "$work" <<'PY' || exit 1
import json, sys
w = sys.argv[1]
load = lambda name: json.load(open(f"{w}/{name}/reference_logps.json"))
start, one = load("trained"), load("one")
worst = 0
for name in ("dp2", "nodes"):
    other = load(name)
    if one["train_pairs"] != other["train_pairs"]: sys.exit(f"FAIL: the {name} reference file is for other examples")
    if len(one["train"]) != len(other["train"]): sys.exit(f"FAIL: {name}: {len(other['train'])} reference values")
    worst = max([worst] + [abs(a - b) / max(abs(a), 1e-12) for a, b in zip(one["train"], other["train"])])
if worst > 1e-5:
    sys.exit(f"FAIL: ref_model reference log-probabilities with data-parallel ranks differ from one rank's ({worst:.3g})")
if min(abs(a - b) for a, b in zip(start["train"], one["train"])) < 1e-6:
    sys.exit("FAIL: the ref_model's reference equals the starting weights' in some pair: was the ref_model used?")
# Training starts from the model's own weights again: step 1's policy log-probabilities are the first run's.
step1 = lambda name: json.loads(open(f"{w}/{name}/metrics.jsonl").readline())
for name in ("one", "dp2", "nodes"):
    for key in ("logps/chosen", "logps/rejected"):
        a, b = step1("trained")[key], step1(name)[key]
        if abs(a - b) > 1e-5 * abs(a): sys.exit(f"FAIL: {name}: step 1's {key} {b} is not the starting weights' {a}")
print(f"ok   ref_model reference with data-parallel ranks within {worst:.2g} of one rank's")
PY
"$compare" "$work/one" "$work/np2" || exit 1
"$compare" --tolerance 1e-5 "$work/one" "$work/dp2" "$work/nodes" || exit 1
echo "ok   $case ref_model: one rank, 2 ranks on one compute rank, 2 data-parallel ranks and 2 nodes of 2 agree"
