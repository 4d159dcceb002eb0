#!/usr/bin/env bash
# Production code reads no environment variable outside its allowlist: the runtime switches are read in
# src/core/runtime_switches.cpp (README, "Runtime switches") and the test fault hooks in src/core/fault_hooks.cpp;
# everything else is configuration or a command's option. Each other getenv call under src/ or kernels/ must match
# one of the patterns below, each with why it stays.
# Usage: no_getenv.sh SOURCE_DIR
set -uo pipefail
cd "$1" || exit 1
allowed=(
  '^src/core/runtime_switches\.cpp:'       # the runtime switches' environment overrides
  '^src/core/fault_hooks\.cpp:'            # the test fault hooks (MEGATRAIN_TEST_*)
  '^src/model/model_source\.cpp:.*getenv\(key\)'  # HF_HUB_CACHE, HF_HOME, HOME: the hub cache, as huggingface_hub finds it
  '^src/plan/step_rates\.cpp:.*getenv\(base\.key\)'  # XDG_CACHE_HOME, HOME: the user's cache directory (step rates)
  'getenv\("MEGATRAIN_HOME"\)'             # where an installed megatrain's configs and data live
  'getenv\("OMP_NUM_THREADS"\)'            # OpenMP's own thread count, which the NUMA binding honours and reports
  'getenv\("OMPI_MCA_[A-Za-z_]+"\)'        # Open MPI's binding policy and shared-memory directory, checked at start-up
)
status=0 count=0
while IFS= read -r hit; do
  count=$((count + 1))
  ok=0
  for pattern in "${allowed[@]}"; do
    [[ $hit =~ $pattern ]] && { ok=1; break; }
  done
  (( ok )) || { echo "FAIL: getenv outside the allowlist: $hit"; status=1; }
done < <(grep -rnE --include='*.cpp' --include='*.h' --include='*.cu' --include='*.cuh' 'getenv' src kernels)
(( count > 0 )) || { echo "FAIL: no getenv found at all under $1/src (wrong source directory?)"; exit 1; }
[[ $status -eq 0 ]] && echo "ok   $count getenv calls, all in the allowlist"
exit $status
