#!/usr/bin/env bash
# One run per output directory, resumed or overwritten as LLaMA-Factory spells it (cli/train/output_lock.h,
# cli/train/resume.h), with readable outputs: a LLaMA-Factory YAML rerun on its output_dir is refused in one line
# naming the newest checkpoint, its files untouched; resume_from_checkpoint: true resumes it and a path resumes
# from that file; overwrite_output_dir: true starts over; a second run on a running run's directory is refused
# naming the first's pid and host, and the first ends intact; a run killed with SIGKILL does not block the next;
# final/ and the checkpoints get the umask's permissions.
# Usage: output_dir.sh MEGATRAIN_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d)
pid=
trap '[[ -n $pid ]] && kill -9 "$pid" 2>/dev/null; rm -rf "$work"' EXIT
cd "$src" || exit 1
export HDF5_USE_FILE_LOCKING=FALSE
status=0
fail() { echo "FAIL $1"; tail -n 5 "$work/err" 2>/dev/null; status=1; }

lf() {  # lf FILE MAX_STEPS [more keys]: a LLaMA-Factory YAML on the demo model
  local file=$1 steps=$2
  shift 2
  { cat <<YAML
model_name_or_path: configs/models/demo
stage: sft
finetuning_type: full
dataset: alpaca_en_demo
template: chatml
cutoff_len: 64
max_samples: 16
output_dir: $work/lf_out
logging_steps: 1
save_steps: 2
per_device_train_batch_size: 2
max_steps: $steps
learning_rate: 1.0e-3
report_to: none
YAML
    printf '%s\n' "$@"; } >"$file"
}
train_lf() { "$bin" train --config "$1" --set model.init=random >"$work/out" 2>"$work/err"; }

lf "$work/a.yaml" 4
train_lf "$work/a.yaml" || fail "the first LLaMA-Factory run (rc=$?)"
before=$(cat "$work/lf_out/metrics.jsonl" "$work"/lf_out/checkpoints/* | md5sum)
train_lf "$work/a.yaml"
rc=$?
line=$(grep 'error' "$work/err")
if [[ $rc -eq 0 ]]; then fail "a rerun on a run's output_dir is refused"
elif [[ $(grep -c . <<<"$line") -ne 1 ]] || ! grep -q "holds an earlier run's checkpoints (.*step-000004.h5, the newest of 2); set training.resume_from: auto .* or training.overwrite_output_dir: true" <<<"$line"; then
  fail "one line naming the newest checkpoint and both remedies: $line"
elif [[ $(cat "$work/lf_out/metrics.jsonl" "$work"/lf_out/checkpoints/* | md5sum) != "$before" ]]; then
  fail "the refused run left the earlier run's files as they were"
else echo "ok   rerun refused: ${line#*error: }"; fi

lf "$work/b.yaml" 6 "resume_from_checkpoint: true"
if ! train_lf "$work/b.yaml"; then fail "resume_from_checkpoint: true (rc=$?)"
elif ! grep -q "resuming from .*step-000004.h5 at step 4" "$work/err"; then fail "resumed from the newest checkpoint"
elif [[ $(grep -c '"step"' "$work/lf_out/metrics.jsonl") -ne 6 ]]; then fail "metrics.jsonl holds steps 1 to 6"
else echo "ok   resume_from_checkpoint: true resumes at step 4"; fi

lf "$work/c.yaml" 3 "resume_from_checkpoint: $work/lf_out/checkpoints/step-000002.h5"
if ! train_lf "$work/c.yaml"; then fail "resume_from_checkpoint: PATH (rc=$?)"
elif ! grep -q "resuming from .*step-000002.h5 at step 2" "$work/err"; then fail "resumed from the named file"
else echo "ok   resume_from_checkpoint: PATH resumes at step 2"; fi

lf "$work/d.yaml" 2 "overwrite_output_dir: true"
if ! train_lf "$work/d.yaml"; then fail "overwrite_output_dir: true (rc=$?)"
elif ! grep -q "overwrite_output_dir: removed the earlier run's [0-9]* checkpoint(s)" "$work/err"; then fail "says what it removed"
elif [[ $(ls "$work/lf_out/checkpoints") != "step-000002.h5" ]]; then fail "only the new run's checkpoint is left: $(ls "$work/lf_out/checkpoints")"
elif [[ $(grep -c '"step"' "$work/lf_out/metrics.jsonl") -ne 2 ]]; then fail "metrics.jsonl is the new run's"
else echo "ok   overwrite_output_dir: true starts over"; fi

# Two runs on one directory: the second is refused while the first trains, its state tier file untouched, and the
# first ends intact.
mkdir -p "$work/tier"
demo=(--config configs/demo.yaml --set dataset.max_seq_len=32 --set training.batch_size=4 --set training.logging_steps=1
      --set "training.output_dir=$work/busy" --set store.offload=optimizer --set "store.offload_paths=$work/tier")
"$bin" train "${demo[@]}" --set training.num_steps=30 >"$work/first.log" 2>&1 &
pid=$!
for _ in $(seq 600); do [[ -s $work/busy/metrics.jsonl ]] && break; sleep 0.1; done
kill -STOP "$pid"  # held mid-run (with its lock) while the second run tries, however fast its steps are
"$bin" train "${demo[@]}" --set training.num_steps=30 --set training.resume_from=auto >"$work/out" 2>"$work/err"
rc=$?
tier_files=$(ls "$work/tier")
kill -CONT "$pid"
wait "$pid"
first=$?
line=$(grep 'error' "$work/err")
if [[ $rc -eq 0 ]]; then fail "a second run on a busy output_dir is refused"
elif ! grep -q "another run is using training.output_dir $work/busy (pid $pid on host $(hostname)" <<<"$line"; then
  fail "the refusal names the first run's pid and host: $line"
elif [[ $first -ne 0 || $(grep -c '"step"' "$work/busy/metrics.jsonl") -ne 30 || ! -f $work/busy/final/model.safetensors ]]; then
  fail "the first run ends intact (rc=$first)"
elif [[ $tier_files != megatrain-tier-*-rank0.bin ]]; then fail "the first run's state tier file outlives the refused run: '$tier_files'"
elif [[ -e $work/busy/.megatrain.lock || -n $(ls "$work/tier") ]]; then fail "the lock and tier files are removed at the end"
else echo "ok   second run refused: ${line#*error: }"; fi
pid=

# A run killed outright leaves its lock file; the next run takes it.
killed=(--config configs/demo.yaml --set dataset.max_seq_len=32 --set training.batch_size=4 --set training.logging_steps=1
        --set "training.output_dir=$work/killed")
"$bin" train "${killed[@]}" --set training.num_steps=30 >"$work/killed.log" 2>&1 &
pid=$!
for _ in $(seq 600); do [[ -s $work/killed/metrics.jsonl ]] && break; sleep 0.1; done
kill -9 "$pid"
wait "$pid" 2>/dev/null
pid=
if [[ ! -e $work/killed/.megatrain.lock ]]; then fail "a killed run leaves its lock file (the test's premise)"
elif ! "$bin" train "${killed[@]}" --set training.num_steps=2 --set training.overwrite_output_dir=true >"$work/out" 2>"$work/err"; then
  fail "a stale lock does not block the next run"
else echo "ok   a killed run's lock does not block the next run"; fi

# Permissions: the umask's, on final/, its files and the checkpoints.
for mask in 022 027; do
  out=$work/mode_$mask
  (umask $mask; "$bin" train "${demo[@]}" --set training.num_steps=1 --set "training.output_dir=$out" >"$work/out" 2>"$work/err")
  want_dir=$(printf '%o' $((0777 & ~0$mask))) want_file=$(printf '%o' $((0666 & ~0$mask)))
  modes="$(stat -c %a "$out/final") $(stat -c %a "$out/final/config.json") $(stat -c %a "$out/final/model.safetensors") $(stat -c %a "$out/checkpoints/step-000001.h5") $(stat -c %a "$out/metrics.jsonl")"
  if [[ $modes != "$want_dir $want_file $want_file $want_file $want_file" ]]; then
    fail "umask $mask: final/, config.json, model.safetensors, the checkpoint, metrics.jsonl are $modes"
  else echo "ok   umask $mask: $modes"; fi
done
exit $status
