#!/usr/bin/env bash
# Pre-emption at the time limit on a real localhost Slurm (localhost_slurm.sh): slurm/train_7b.sh runs the llama
# fixture for far more steps than fit in its 1-minute limit, with `--signal=B:USR1@45`. Slurm signals the batch
# shell ahead of the limit; megatrain_job.sh passes the signal to the rank, which finishes its step, writes the
# checkpoint of that step K and exits 75; the script requeues the job; the rerun (restart 1) resumes from step K.
# Bitwise: the rerun's steps K+1.. equal those of a run resumed here from a copy of the same step-K checkpoint,
# and the first run's steps 1..K are kept in metrics.jsonl.
# Usage: time_limit_requeue.sh MEGATRAIN_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
source "$(dirname "${BASH_SOURCE[0]}")/localhost_slurm.sh"
f=$src/tests/fixtures/llama
steps=10000000
out=$B/out
export HDF5_USE_FILE_LOCKING=FALSE
export MEGATRAIN_CONFIG=$f/train.yaml MEGATRAIN_OUTPUT_DIR=$out MEGATRAIN_BIN=$bin
export MEGATRAIN_EXTRA_ARGS="--set model.name=$f/model --set dataset.dataset_dir=$f/data --set training.num_steps=$steps"
# wait_log PATTERN SECONDS: until the job's log matches.
wait_log() {
  for _ in $(seq $(($2 * 5))); do grep -q -- "$1" "$log" 2>/dev/null && return 0; sleep 0.2; done
  scancel "$job" 2>/dev/null; fail "no '$1' in the job log after $2 s"
}
job=$(cd "$src" && sbatch --parsable --ntasks-per-node=1 --time=1 --signal=B:USR1@45 --output="$B/job-%j.log" \
  slurm/train_7b.sh) || fail "sbatch refused slurm/train_7b.sh"
job=${job%%;*}
log=$B/job-$job.log
wait_log "requeueing it to resume" 80
k=$(sed -nE 's/.*stopped by signal 10 after step ([0-9]+) of .*/\1/p' "$log" | head -1)
[[ -n $k ]] || fail "the first run did not stop on SIGUSR1"
ckpt=$out/checkpoints/$(printf 'step-%06d.h5' "$k")
[[ -f $ckpt ]] || fail "no checkpoint of step $k"
cp "$ckpt" "$B/at_stop.h5"
# Once requeued (pending again) and the first run's step gone (its PMIx socket, which the rerun's step of the same
# id binds again), its start is brought forward: Slurm delays a requeued job's start otherwise. slurmd refuses a
# launch whose credential is not newer than the requeue's revocation, in whole seconds: the start waits for the
# second after next.
for _ in $(seq 150); do
  [[ $(squeue -h -j "$job" -o %T 2>/dev/null) == PENDING && ! -e $S/spool/stepd.slurm.pmix.$job.0 ]] && break
  sleep 0.2
done
requeued_at=$(date +%s)
while (( $(date +%s) < requeued_at + 2 )); do sleep 0.2; done
scontrol update JobId="$job" StartTime=now >/dev/null 2>&1
wait_log "megatrain job $job on .* restart 1" 30
wait_log "resuming from .*step-0*$k.h5 at step $k" 30
for _ in $(seq 150); do [[ $(wc -l <"$out/metrics.jsonl") -ge $((k + 3)) ]] && break; sleep 0.2; done
scancel "$job"
wait_job "$job"
echo "ok   job $job: stopped at step $k by SIGUSR1 ahead of its time limit, requeued, resumed at step $k"

# The same continuation here, resumed from the copy of the step-K checkpoint; stopped after 3 steps.
"$bin" train --config "$f/train.yaml" --set "model.name=$f/model" --set "dataset.dataset_dir=$f/data" \
  --set "training.num_steps=$steps" --set "training.output_dir=$B/here" --set "training.resume_from=$B/at_stop.h5" \
  >"$B/here.log" 2>&1 &
here=$!
for _ in $(seq 300); do [[ $(wc -l <"$B/here/metrics.jsonl" 2>/dev/null) -ge 3 ]] && break; sleep 0.1; done
kill -TERM "$here"
wait "$here"
[[ $? -eq 75 ]] || fail "the local continuation did not stop with status 75: $(tail -3 "$B/here.log")"
steps_of() {  # steps_of METRICS: "step loss grad_norm" per line, as the file spells the numbers
  python3 -c 'import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line, parse_float=str)
    print(r["step"], r["loss"], r["grad_norm"])' "$1"
}
[[ "$(steps_of "$out/metrics.jsonl" | head -$k | cut -d' ' -f1 | tr '\n' ' ')" == "$(seq -s ' ' 1 "$k") " ]] ||
  fail "metrics.jsonl does not hold steps 1..$k of the first run"
diff <(steps_of "$out/metrics.jsonl" | sed -n "$((k + 1)),$((k + 3))p") <(steps_of "$B/here/metrics.jsonl" | head -3) ||
  fail "the requeued run's steps $((k + 1))..$((k + 3)) differ from the continuation from step $k"
echo "ok   steps $((k + 1))..$((k + 3)) after the requeue are bitwise those resumed from step $k's checkpoint"
