// The rates a run's plan takes (plan/step_rates.h): on a GPU, the machine's cached probe figures, or a new probe
// (the backend's device rates and the host's parameters pass) written to the cache; the H200 node's constants where
// asked (MEGATRAIN_STEP_RATES=constants) or on the CPU backend, whose plan decides nothing by them.
// Invariant: a missing, bad or stale cache file is re-probed with its reason in the log line, never fatal; a cache
// that cannot be written leaves the run on the probed figures, with the reason.
#pragma once
#include <string>

#include "backend/backend.h"
#include "core/runtime_switches.h"
#include "plan/step_bound.h"

namespace mt {

struct PlanRates {
  StepRates rates;
  std::string source;  // one line for the log: which rates, whence, and the figures
  // The machine's cache file and the names it is kept under; empty where the rates are the constants or uncached.
  std::string cache_path, device, host;
};

// cache_dir: where the machine's file lives (step_rates_cache_dir(); empty: no cache, always probed).
PlanRates plan_rates(Backend& backend, StepRatesChoice choice, const std::string& cache_dir);

}  // namespace mt
