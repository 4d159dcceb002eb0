// The rates a run's plan takes (see plan_rates.h).
#include "cli/runtime/plan_rates.h"

#include <unistd.h>

#include <array>

#include "core/error.h"
#include "optim/parameters_pass_probe.h"
#include "plan/step_rates.h"

namespace mt {
namespace {

std::string host_name() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return "unknown-host";
  return name.data();
}

}  // namespace

PlanRates plan_rates(Backend& backend, StepRatesChoice choice, const std::string& cache_dir) {
  const StepRates constants;
  if (backend.host_memory())
    return {constants, "step rates: the H200 node's constants (the CPU backend's plan decides nothing by them)"};
  if (choice == StepRatesChoice::constants)
    return {constants, "step rates: the H200 node's constants (MEGATRAIN_STEP_RATES=constants): " +
                           describe_step_rates(constants)};
  const std::string device = backend.device_name(), host = host_name();
  const std::string path = cache_dir.empty() ? std::string() : step_rates_cache_path(cache_dir, device, host);
  const ProbedRates p = cached_or_probed(path, device, host, choice == StepRatesChoice::probe, [&] {
    const std::optional<DeviceRates> d = backend.measure_rates();
    MT_ASSERT(d.has_value(), "a GPU backend measures its rates");
    MeasuredRates m;
    m.device = device;
    m.host = host;
    m.gemm_flops = d->gemm_flops;
    m.h2d_bytes = d->h2d_bytes;
    m.d2h_bytes = d->d2h_bytes;
    m.parameters_pass_params = measure_parameters_pass_rate();
    return m;
  });
  return {step_rates_of(p.rates),
          MT_FORMAT("step rates of {} on {}, {}: {}", device, host, p.source, describe_measured_rates(p.rates)), path,
          device, host};
}

}  // namespace mt
