// The host's parameters pass rate (see parameters_pass_probe.h).
#include "optim/parameters_pass_probe.h"

#include <chrono>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "optim/adamw.h"

namespace mt {

double measure_parameters_pass_rate(int64_t slice_params, double target_seconds) {
  MT_REQUIRE(slice_params > 0, "the parameters pass probe needs a slice, not {} parameters", slice_params);
  const auto n = static_cast<size_t>(slice_params);
  std::vector<float> param(n, 0.5f), exp_avg(n, 0.01f), exp_avg_sq(n, 1e-4f), grad(n, 0.01f);
  std::vector<std::uint16_t> copy(n);
  AdamWStep hp;
  hp.lr = 1e-4;
  hp.weight_decay = 0.1;
  const auto pass = [&] {
    adamw_params(param.data(), exp_avg.data(), exp_avg_sq.data(), grad.data(), slice_params, hp, true, copy.data());
  };
  pass();
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  int64_t passes = 0;
  double seconds = 0;
  do {
    pass();
    ++passes;
    seconds = std::chrono::duration<double>(Clock::now() - start).count();
  } while (seconds < target_seconds);
  return static_cast<double>(passes * slice_params) / seconds;
}

}  // namespace mt
