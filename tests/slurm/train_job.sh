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
skip() { echo "skipped: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "needs root (munged runs as user munge)"
for c in munged slurmctld slurmd sbatch squeue sacct scontrol sinfo runuser; do
  command -v "$c" >/dev/null || skip "$c not installed (scripts/install_deps.sh installs slurm-wlm and munge)"
done
[[ -r /etc/munge/munge.key ]] || skip "no /etc/munge/munge.key"

B=$(mktemp -d /tmp/mt_slurm.XXXXXX)
chmod 755 "$B"                            # munge's socket directory needs o+x on every parent
M=$B/munge S=$B/slurm
export SLURM_CONF=$S/slurm.conf
pids=()
cleanup() {
  scontrol shutdown >/dev/null 2>&1
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && kill -9 "$p" 2>/dev/null
  done
  [[ -S $M/munge.socket.2 ]] && runuser -u munge -- munged --stop --socket="$M/munge.socket.2" >/dev/null 2>&1
  rm -rf "$B"
}
trap cleanup EXIT
dump_logs() { for f in "$M/munged.log" "$S/slurmctld.log" "$S/slurmd.log" "$B"/job-*.log; do [[ -f $f ]] && { echo "== $f"; tail -40 "$f"; }; done; }

mkdir -p "$M" "$S/state" "$S/spool" "$B/fakedev"
chown munge:munge "$M" && chmod 755 "$M"
install -o munge -g munge -m 400 /etc/munge/munge.key "$M/munge.key"
runuser -u munge -- munged --socket="$M/munge.socket.2" --key-file="$M/munge.key" --log-file="$M/munged.log" \
  --pid-file="$M/munged.pid" --seed-file="$M/munged.seed" || { dump_logs; skip "munged does not start"; }
mknod "$B/fakedev/nvidia0" c 1 3 || skip "cannot create the stand-in GPU device"

# The node as slurmd sees it, under the name localhost, with 95% of its memory; random ports.
node=$(slurmd -C | head -1 | sed -E 's/^NodeName=[^ ]+ //')
mem=$(sed -E 's/.*RealMemory=([0-9]+).*/\1/' <<<"$node")
node=$(sed -E "s/RealMemory=[0-9]+/RealMemory=$((mem * 95 / 100))/" <<<"$node")
port=$((20000 + RANDOM % 20000))
cat >"$SLURM_CONF" <<CONF
ClusterName=ci
SlurmctldHost=localhost
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$M/munge.socket.2
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/slurmctld.log
SlurmdLogFile=$S/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
MpiDefault=pmix
MailProg=/bin/true
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$S/jobcomp.txt
GresTypes=gpu
NodeName=localhost NodeAddr=127.0.0.1 $node Gres=gpu:1 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
echo "NodeName=localhost Name=gpu File=$B/fakedev/nvidia[0-0]" >"$S/gres.conf"
slurmctld -f "$SLURM_CONF" || { dump_logs; skip "slurmctld does not start"; }
slurmd -f "$SLURM_CONF" -N localhost || { dump_logs; skip "slurmd does not start"; }
for f in "$S/slurmctld.pid" "$S/slurmd.pid" "$M/munged.pid"; do
  for _ in $(seq 50); do [[ -s $f ]] && break; sleep 0.1; done
  [[ -s $f ]] && pids+=("$(cat "$f")")
done
for _ in $(seq 150); do [[ $(sinfo -h -o %T 2>/dev/null) == idle ]] && break; sleep 0.2; done
[[ $(sinfo -h -o %T 2>/dev/null) == idle ]] || { dump_logs; skip "the node does not become idle"; }

fail() { echo "FAIL: $*"; dump_logs; exit 1; }
# wait_job ID: polls squeue (every 0.3 s, at most 240 s) until the job has left the queue.
wait_job() {
  for _ in $(seq 800); do [[ -z $(squeue -h -j "$1" 2>/dev/null) ]] && return 0; sleep 0.3; done
  scancel "$1"; fail "job $1 still queued or running after 240 s"
}

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
scontrol update JobId="$job" StartTime=now >/dev/null 2>&1  # Slurm delays a requeued job's start otherwise
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
