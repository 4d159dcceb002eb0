// The host's parameters pass rate (parameters/s): the optimizer service's adamw_params (optim/adamw.h), the update
// the next forward waits for, over a slice of fp32 state with its bf16 copy, on the calling thread's OpenMP team (a
// store rank's threads), as plan/step_bound.h's StepRates::parameters_pass_params counts it per rank.
// Invariant: one untimed pass first (the slice's pages touched), then whole passes until at least target_seconds
// have gone; the state is the probe's own and freed on return.
#pragma once
#include <cstdint>

namespace mt {

// 16 M parameters: 288 MB of state and copy, past the last-level cache of the hosts we train on.
inline constexpr int64_t kParametersPassProbeSlice = int64_t{16} << 20;

double measure_parameters_pass_rate(int64_t slice_params = kParametersPassProbeSlice, double target_seconds = 0.15);

}  // namespace mt
