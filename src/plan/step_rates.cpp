// The measured rates, StepRates from them, and their cache (see step_rates.h).
#include "plan/step_rates.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "core/error.h"
#include "io/json_fields.h"

namespace mt {

template <>
struct JsonFields<MeasuredRates> {
  using R = MeasuredRates;
  static constexpr auto table =
      std::make_tuple(MT_JSON_FIELD(R, probe), MT_JSON_FIELD(R, device), MT_JSON_FIELD(R, host),
                      MT_JSON_FIELD(R, gemm_flops), MT_JSON_FIELD(R, h2d_bytes), MT_JSON_FIELD(R, d2h_bytes),
                      MT_JSON_FIELD(R, parameters_pass_params), MT_JSON_FIELD(R, training_parameters_pass_params));
};

namespace {

bool positive_rate(double v) { return std::isfinite(v) && v > 0; }

std::string file_name_part(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_') c = '-';
  return s;
}

}  // namespace

StepRates step_rates_of(const MeasuredRates& m) {
  StepRates r;
  r.gpu_flops = m.gemm_flops * kLayerGemmPerProbeGemm * kStepFlopsPerGemmFlop;
  r.pcie_bytes = std::min(m.h2d_bytes, m.d2h_bytes);
  r.parameters_pass_params = m.training_parameters_pass_params > 0
                                 ? m.training_parameters_pass_params
                                 : m.parameters_pass_params * kTrainingPassPerProbePass;
  return r;
}

StepRates slowest_rates(const std::vector<StepRates>& all) {
  MT_ASSERT(!all.empty(), "the slowest of no rates");
  StepRates r = all.front();
  for (const StepRates& s : all) {
    r.gpu_flops = std::min(r.gpu_flops, s.gpu_flops);
    r.pcie_bytes = std::min(r.pcie_bytes, s.pcie_bytes);
    r.parameters_pass_params = std::min(r.parameters_pass_params, s.parameters_pass_params);
  }
  return r;
}

std::string step_rates_cache_dir() {
  struct Base {
    const char* key;
    const char* below;  // the cache's directory under the variable's
  };
  for (const Base& base : {Base{"XDG_CACHE_HOME", "megatrain"}, Base{"HOME", ".cache/megatrain"}}) {
    const char* value = std::getenv(base.key);
    if (value != nullptr && *value != '\0') return (std::filesystem::path(value) / base.below).string();
  }
  return "";
}

std::string step_rates_cache_path(const std::string& dir, const std::string& device, const std::string& host) {
  return (std::filesystem::path(dir) / ("step_rates-" + file_name_part(device) + "-" + file_name_part(host) + ".json"))
      .string();
}

std::optional<MeasuredRates> read_step_rates(const std::string& path, const std::string& device,
                                             const std::string& host, std::string& why) {
  std::ifstream in(path);
  if (!in) {
    why = MT_FORMAT("no file {}", path);
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  MeasuredRates m;
  try {
    from_named_json(nlohmann::json::parse(text.str()), path, m);
  } catch (const nlohmann::json::exception& e) {
    why = MT_FORMAT("{}: not JSON ({})", path, e.what());
    return std::nullopt;
  } catch (const Error& e) {
    why = e.what();
    return std::nullopt;
  }
  if (m.probe != kStepRatesProbeVersion)
    why = MT_FORMAT("{}: probe version {}, not {}", path, m.probe, kStepRatesProbeVersion);
  else if (m.device != device || m.host != host)
    why = MT_FORMAT("{}: measured on {} of {}, not {} of {}", path, m.device, m.host, device, host);
  else if (!positive_rate(m.gemm_flops) || !positive_rate(m.h2d_bytes) || !positive_rate(m.d2h_bytes) ||
           !positive_rate(m.parameters_pass_params) ||
           !(m.training_parameters_pass_params == 0 || positive_rate(m.training_parameters_pass_params)))
    why = MT_FORMAT("{}: a rate that is not finite and positive", path);
  else
    return m;
  return std::nullopt;
}

void write_step_rates(const std::string& path, const MeasuredRates& m) {
  const std::filesystem::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), ec);
  MT_REQUIRE(!ec, "cannot make the step rates' directory {}: {}", target.parent_path().string(), ec.message());
  // One temporary file per process: the ranks of a node may probe and write at once.
  const std::filesystem::path temporary = MT_FORMAT("{}.{}.tmp", target.string(), getpid());
  {
    std::ofstream out(temporary);
    out << to_named_json(m).dump(2) << '\n';
    MT_REQUIRE(out.good(), "cannot write the step rates to {}", temporary.string());
  }
  std::filesystem::rename(temporary, target, ec);
  MT_REQUIRE(!ec, "cannot rename {} to {}: {}", temporary.string(), path, ec.message());
}

std::string record_training_pass_rate(const std::string& path, const std::string& device, const std::string& host,
                                      double params_per_s) {
  if (path.empty()) return "training's parameters pass rate not kept: no cache directory ($XDG_CACHE_HOME, $HOME)";
  if (!positive_rate(params_per_s)) return "training's parameters pass rate not kept: none measured";
  std::string why;
  std::optional<MeasuredRates> m = read_step_rates(path, device, host, why);
  if (!m) return MT_FORMAT("training's parameters pass rate not kept: {}", why);
  m->training_parameters_pass_params = params_per_s;
  try {
    write_step_rates(path, *m);
  } catch (const Error& e) {
    return MT_FORMAT("training's parameters pass rate not kept: {}", e.what());
  }
  return MT_FORMAT("training's parameters pass, {:.2f} G parameters/s a store rank, kept in {} for the next plans",
                   params_per_s / 1e9, path);
}

ProbedRates cached_or_probed(const std::string& path, const std::string& device, const std::string& host, bool reprobe,
                             const std::function<MeasuredRates()>& probe) {
  std::string why = path.empty() ? "no cache directory ($XDG_CACHE_HOME, $HOME)" : "asked to probe again";
  if (!reprobe && !path.empty())
    if (const std::optional<MeasuredRates> cached = read_step_rates(path, device, host, why))
      return {*cached, MT_FORMAT("cached in {}", path)};
  ProbedRates p{probe(), ""};
  std::string kept = path.empty() ? "not cached" : MT_FORMAT("cached in {}", path);
  if (!path.empty()) {
    try {
      write_step_rates(path, p.rates);
    } catch (const Error& e) {
      kept = MT_FORMAT("not cached: {}", e.what());
    }
  }
  p.source = MT_FORMAT("measured ({}; {})", why, kept);
  return p;
}

std::string describe_measured_rates(const MeasuredRates& m) {
  const StepRates r = step_rates_of(m);
  return MT_FORMAT("GEMM {:.0f} TFLOP/s (a step {:.0f} model TFLOP/s), H2D {:.1f} / D2H {:.1f} GB/s, parameters "
                   "pass {:.2f} G/s ({:.2f} in training{})", m.gemm_flops / 1e12, r.gpu_flops / 1e12,
                   m.h2d_bytes / 1e9, m.d2h_bytes / 1e9, m.parameters_pass_params / 1e9,
                   r.parameters_pass_params / 1e9, m.training_parameters_pass_params > 0 ? ", as measured" : "");
}

std::string describe_step_rates(const StepRates& r) {
  return MT_FORMAT("a step {:.0f} model TFLOP/s, PCIe {:.1f} GB/s each way, parameters pass {:.2f} G/s",
                   r.gpu_flops / 1e12, r.pcie_bytes / 1e9, r.parameters_pass_params / 1e9);
}

}  // namespace mt
