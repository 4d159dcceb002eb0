#!/usr/bin/env bash
# `megatrain bench-optim` runs with the training ranks (1 and 2) and reports positive throughputs as JSON, for
# the fused and the split AdamW.
# Usage: bench_optim.sh MEGATRAIN MPIEXEC
set -uo pipefail
bin=$1 mpiexec=$2
for np in 1 2; do
  out=$(timeout 120 "$mpiexec" -np $np "$bin" bench-optim --params 300000 --steps 3 --warmup 1 --json 2>/dev/null) ||
    { echo "FAIL: bench-optim -np $np"; exit 1; }
  if ! grep -q "\"ranks\":$np," <<<"$out" || ! grep -Eq '"params_per_s":[1-9]' <<<"$out" ||
     ! grep -Eq '"split_params_per_s":[1-9]' <<<"$out" || ! grep -Eq '"params_pass_params_per_s":[1-9]' <<<"$out" ||
     ! grep -Eq '"copy_gb_per_s":[0-9.]*[1-9]' <<<"$out"; then
    echo "FAIL -np $np: $out"; exit 1
  fi
  echo "ok   -np $np: $out"
done
