#!/usr/bin/env bash
# `megatrain calc-resource` on a terminal with no flags asks its questions; driven through a pseudo-terminal with our
# quick-start guide's answers (24 GiB GPU, 128 GiB RAM, the hub id Qwen/Qwen2.5-7B, 1024 tokens) it prints a batch
# recommendation. Usage: calc_resource_terminal.sh MEGATRAIN_BINARY SOURCE_DIR
set -uo pipefail
bin=$1
out=$(HF_HUB_CACHE=/nonexistent python3 - "$bin" <<'PY'
import os, pty, select, sys
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], [sys.argv[1], "calc-resource"])
answers = [b"24", b"128", b"Qwen/Qwen2.5-7B", b"1024"]
seen = b""
while True:
    ready, _, _ = select.select([fd], [], [], 60)  # a guard against a hang, not a timing check
    if not ready:
        break
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        break
    if not chunk:
        break
    seen += chunk
    if answers and seen.rstrip().endswith(b":"):
        os.write(fd, answers.pop(0) + b"\n")
_, status = os.waitpid(pid, 0)
sys.stdout.write(seen.decode("utf-8", "replace"))
sys.stdout.write("\nexit %d\n" % os.waitstatus_to_exitcode(status))
PY
)
for want in "GPU memory (GiB):" "host RAM (GiB):" "model (a hub id such as Qwen/Qwen2.5-7B" "sequence length (tokens):" \
            "recommended: batch_size" "exit 0"; do
  if ! grep -qF -- "$want" <<<"$out"; then echo "FAIL terminal session lacks '$want'"; echo "$out"; exit 1; fi
done
echo "ok   calc-resource on a terminal: $(grep -F 'recommended: batch_size' <<<"$out" | head -n 1)"
