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
# Over the state tier (a scratch directory): the state traffic in GB/s and the probed disk ceiling beside it, each
# state byte read and written once a step (12 B per parameter each way in optimizer+master: 24 B of traffic).
tier=$(mktemp -d)
trap 'rm -rf "$tier"' EXIT
out=$(timeout 120 "$mpiexec" -np 2 "$bin" bench-optim --params 300000 --steps 3 --warmup 1 --dtype bfloat16 \
  --offload optimizer+master --offload-paths "$tier" --probe-gb 0.07 --json 2>/dev/null) ||
  { echo "FAIL: bench-optim --offload"; exit 1; }
per_step=$(grep -Eo '"state_traffic_bytes_per_step":[0-9.e+]*' <<<"$out" | cut -d: -f2)
if ! grep -Eq '"state_traffic_gb_per_s":[0-9.]*[1-9]' <<<"$out" || ! grep -Eq '"disk_mixed_gb_per_s":[0-9.]*[1-9]' <<<"$out" ||
   ! python3 -c "import sys; b=float(sys.argv[1]); sys.exit(0 if 24*300000 <= b <= 24*(300000+2*4096*5) else 1)" "$per_step" ||
   [[ -n "$(ls -A "$tier")" ]]; then
  echo "FAIL --offload: $out; left: $(ls "$tier")"; exit 1
fi
echo "ok   --offload optimizer+master -np 2: $out"
