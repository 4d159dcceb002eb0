#!/usr/bin/env bash
# A real single-node Slurm on localhost (munged, slurmctld, slurmd under one fresh temp dir; a GRES gpu backed
# by a stand-in device file so `--gpus=1` runs unchanged) runs the real slurm/train_7b.sh with the demo config
# through sbatch: the job must complete (sacct -c, jobcomp file), its rank must be bound as the script says
# (srun's cpu-bind/mem-bind lines, megatrain's binding line), metrics and checkpoints must exist; then
# `scontrol requeue` reruns it and the rerun resumes from the newest checkpoint; then slurm/multi_node_template.sh
# (on this one node: 2 tasks, both training on their shares of each batch, data parallelism on CPU ranks) must
# complete with 2 compute ranks. Slurm is shut down cleanly.
# Exit 77 (skipped) only where Slurm cannot start here (not root, packages missing, daemons refuse to run).
# Usage: train_job.sh MEGATRAIN_BINARY SOURCE_DIR   (recipe: ../shared/notes/slurm-localhost.md)
set -uo pipefail
bin=$1 src=$2
source "$(dirname "${BASH_SOURCE[0]}")/localhost_slurm.sh"

out=$B/out
export MEGATRAIN_CONFIG=$src/configs/demo.yaml MEGATRAIN_OUTPUT_DIR=$out MEGATRAIN_BIN=$bin
export MEGATRAIN_EXTRA_ARGS="--set model.name=$src/configs/models/demo --set dataset.dataset_dir=$src/data
  --set training.num_steps=4 --set training.save_steps=2 --set training.logging_steps=1"  # over two lines on purpose
# run_job SCRIPT SBATCH_ARGS...: submits SCRIPT from the repository, waits for it and requires it COMPLETED; sets
# job and log.
run_job() {
  local script=$1
  shift
  job=$(cd "$src" && sbatch --parsable "$@" --output="$B/job-%j.log" "$script") || fail "sbatch refused $script"
  job=${job%%;*}
  wait_job "$job"
  log=$B/job-$job.log
  local state
  state=$(sacct -c -n -X -j "$job" -o State,ExitCode 2>/dev/null | head -1 | xargs)
  [[ $state == "COMPLETED 0:0" ]] || fail "$script: job $job ended '$state'"
}
# This node has one socket, so one task (the header asks for one per socket on two-socket nodes).
run_job slurm/train_7b.sh --ntasks-per-node=1
grep -q "cpu-bind=.*task *0 .*mask" "$log" || fail "no srun cpu-bind line for task 0"
grep -q "mem-bind=" "$log" || fail "no srun mem-bind line"
grep -q "rank 0 on .*: NUMA node 0, cpus .*bound by" "$log" || fail "no megatrain binding line"
grep -q "megatrain job $job on .* restart 0" "$log" || fail "no job banner"
[[ $(grep -c '"step"' "$out/metrics.jsonl" 2>/dev/null) -eq 4 ]] || fail "metrics.jsonl does not hold 4 steps"
ls "$out"/checkpoints/*.h5 >/dev/null 2>&1 || fail "no checkpoint in $out/checkpoints"
[[ -f $out/final/model.safetensors ]] || fail "no final model"
echo "ok   job $job COMPLETED: $(grep -m1 'cpu-bind=' "$log" | xargs); $(grep -m1 'bound by' "$log" | cut -c12-)"

# Requeue: the same job runs again and resumes from its newest checkpoint (step 4 of 4: nothing left to train).
scontrol requeue "$job" || fail "scontrol requeue $job"
# As in time_limit_requeue.sh: once pending again with the first run's step gone, the start is brought forward
# (Slurm delays a requeued job otherwise), in the second after next (slurmd refuses a credential not newer than the
# requeue's revocation, in whole seconds).
for _ in $(seq 150); do
  [[ $(squeue -h -j "$job" -o %T 2>/dev/null) == PENDING && ! -e $S/spool/stepd.slurm.pmix.$job.0 ]] && break
  sleep 0.2
done
requeued_at=$(date +%s)
while (( $(date +%s) < requeued_at + 2 )); do sleep 0.2; done
scontrol update JobId="$job" StartTime=now >/dev/null 2>&1
for _ in $(seq 800); do grep -q "restart 1" "$log" 2>/dev/null && break; sleep 0.3; done
wait_job "$job"
grep -q "megatrain job $job on .* restart 1" "$log" || fail "the requeued job did not run again"
grep -q "resuming from .*step-0*4.h5 at step 4" "$log" || fail "the requeued job did not resume from step 4"
echo "ok   requeued job $job resumed: $(grep -m1 'resuming from' "$log" | cut -c12-)"

# The multi-node template, scaled to this node: 2 tasks on its one socket, each a data-parallel compute rank.
dp_out=$B/dp_out
export MEGATRAIN_OUTPUT_DIR=$dp_out
export MEGATRAIN_EXTRA_ARGS="--set model.name=$src/configs/models/demo --set dataset.dataset_dir=$src/data
  --set training.num_steps=2 --set training.logging_steps=1 --set training.gpus_per_node=2"
run_job slurm/multi_node_template.sh --nodes=1 --ntasks-per-node=2 --ntasks-per-socket=2 --gpus-per-node=1
grep -q "data parallel: 2 GPU rank(s) on each of 1 node(s)" "$log" || fail "the template job did not train on 2 ranks"
[[ $(grep -c '"step"' "$dp_out/metrics.jsonl" 2>/dev/null) -eq 2 ]] || fail "template: metrics.jsonl does not hold 2 steps"
echo "ok   multi-node template job $job COMPLETED: $(grep -m1 'data parallel:' "$log" | cut -c12-)"
