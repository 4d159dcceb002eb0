# A real single-node Slurm on localhost for the tests of tests/slurm (sourced after `bin` and `src` are set):
# munged, slurmctld and slurmd under one fresh temp dir $B, a GRES gpu backed by a stand-in device file so that
# `--gpus=1` runs unchanged; shut down cleanly on exit. Defines skip, fail, dump_logs and wait_job.
# Exit 77 (skipped) only where Slurm cannot start here (not root, packages missing, daemons refuse to run).
# (recipe: ../shared/notes/slurm-localhost.md)
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

