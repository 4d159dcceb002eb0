// The plan's rates measured on the machine it runs on (the backend's probe, backend/backend.h DeviceRates, and the
// host's parameters pass, optim/parameters_pass_probe.h), how they become plan/step_bound.h's StepRates, and their
// cache: one JSON file per device and host, written once and read by later runs.
// Invariant: StepRates::gpu_flops is the model FLOP/s a whole step sustains, kStepFlopsPerGemmFlop of the probe's
// GEMM rate taken to layer shapes (kLayerGemmPerProbeGemm); the parameters pass is training's where a run on this
// machine measured it (training_parameters_pass_params), else the probe's taken to training's
// (kTrainingPassPerProbePass); PCIe is the slower direction. A cache file is taken only when it has exactly the fields of this probe
// version, this device and host, and finite positive rates; anything else is refused with the reason, never thrown.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "plan/step_bound.h"

namespace mt {

// A step's model FLOP/s over cuBLAS's bf16 GEMM rate on layer shapes, fitted on the H100 80 GB: bench on
// Qwen2.5-7B sustained 487 model TFLOP/s at 97 % compute busy (502 busy) while cuBLAS ran layer-shaped GEMMs at
// 670-775 TFLOP/s (725 the middle): 487 / 725 = 0.67. The rest of a step (attention, norms, the router, the
// element-wise ops and their launches) runs below the GEMM's rate.
inline constexpr double kStepFlopsPerGemmFlop = 0.67;
// The probe against what training sees, both measured on one H100 80 GB (twenty-ninth session, docs/PERFORMANCE.md):
// - the probe's GEMM (kernels/runtime/rate_probe.cu: 8192 × 14336 × 4096) ran 906 TFLOP/s there, faster than the
//   layer-shaped GEMMs (670-775, 725 the middle) that kStepFlopsPerGemmFlop and step_time's shares are fitted on;
// - the probe's parameters pass (optim/parameters_pass_probe.h: the host alone) ran 11.12 G parameters/s, training's
//   6.35-7.27 (6.6 as recorded before), its memory shared with the weight stream's copies. On another H100 node
//   (thirtieth session) the probe gave 3.78 and training 6.43: the probe alone does not tell training's rate, so
//   the first run's measured rate replaces it (record_training_pass_rate).
inline constexpr double kLayerGemmPerProbeGemm = 725.0 / 906.0;
inline constexpr double kTrainingPassPerProbePass = 6.6 / 11.12;
// Bumped when what the probe measures changes: a file of another version is re-probed.
inline constexpr int kStepRatesProbeVersion = 2;

struct MeasuredRates {
  int probe = kStepRatesProbeVersion;
  std::string device, host;         // where they were measured (the backend's device_name(), the host's name)
  double gemm_flops = 0;            // a layer-sized bf16 GEMM's FLOP/s
  double h2d_bytes = 0, d2h_bytes = 0;  // page-locked copies, bytes/s
  double parameters_pass_params = 0;    // the host's parameters pass on one store rank's threads, parameters/s
  // The same pass as a training step ran it on this machine (a store rank's slice over its time, the median of a
  // run's steps), parameters/s; 0 until a run measured it.
  double training_parameters_pass_params = 0;
  bool operator==(const MeasuredRates&) const = default;
};

StepRates step_rates_of(const MeasuredRates& m);
// What every data-parallel GPU rank plans on: each rate the slowest rank's (the step waits for the slowest), so the
// ranks' plans are one plan whatever their machines measured. `all` is not empty.
StepRates slowest_rates(const std::vector<StepRates>& all);

// The cache's directory: $XDG_CACHE_HOME/megatrain, else $HOME/.cache/megatrain; empty where neither is set.
std::string step_rates_cache_dir();
// dir/step_rates-<device>-<host>.json, the names with every character but letters, digits, '.' and '_' as '-'.
std::string step_rates_cache_path(const std::string& dir, const std::string& device, const std::string& host);
// The file's rates for this device and host; none, with the reason in `why`, where the file is missing, unreadable,
// not this probe version's JSON, of another device or host, or holds a rate that is not finite and positive.
std::optional<MeasuredRates> read_step_rates(const std::string& path, const std::string& device,
                                             const std::string& host, std::string& why);
// Writes the file (its directory made where missing) through a temporary file renamed over it; throws mt::Error.
void write_step_rates(const std::string& path, const MeasuredRates& m);
// Training's parameters pass rate (parameters/s per store rank) into the machine's file, where read_step_rates takes
// it; one line for the log says what was done or why not (never thrown).
std::string record_training_pass_rate(const std::string& path, const std::string& device, const std::string& host,
                                      double params_per_s);
struct ProbedRates {
  MeasuredRates rates;
  std::string source;  // "cached in PATH", or "measured (WHY a new probe; cached in PATH | not cached: WHY)"
};
// The file's rates where `reprobe` is false and read_step_rates takes them; else `probe`'s, written to the file
// (path empty: no file, always probed). A file that cannot be written is said in `source`, not thrown.
ProbedRates cached_or_probed(const std::string& path, const std::string& device, const std::string& host, bool reprobe,
                             const std::function<MeasuredRates()>& probe);
// "GEMM 725 TFLOP/s (a step 486 model TFLOP/s), H2D 55.1 / D2H 54.9 GB/s, parameters pass 6.6 G/s".
std::string describe_measured_rates(const MeasuredRates& m);
// The same for rates given directly (the constants, or calc-resource's flags).
std::string describe_step_rates(const StepRates& r);

}  // namespace mt
