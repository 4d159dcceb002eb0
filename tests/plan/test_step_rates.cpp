// The plan's measured rates (plan/step_rates.h): StepRates from the probe's figures (the step's model FLOP/s a
// fixed share of the GEMM's, PCIe the slower direction); the cache file per device and host, written and read back
// equal; a file that is not JSON, lacks or adds a key, is of another probe version, device or host, or holds a rate
// that is not positive is refused with its reason and probed again (the host's parameters pass, measured here, is
// the probe's CPU half: positive and finite); training's measured parameters pass, kept in the file, replaces the
// probe's in the rates of later runs.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "catch.h"
#include "optim/parameters_pass_probe.h"
#include "plan/step_rates.h"

namespace {

// A directory of its own under the system's temporary one, removed at the end.
struct TempDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("megatrain_step_rates_" + std::to_string(getpid()));
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() { std::filesystem::remove_all(path); }
};

mt::MeasuredRates h100_figures() {
  mt::MeasuredRates m;
  m.device = "NVIDIA H100 80GB HBM3";
  m.host = "node-7";
  m.gemm_flops = 906e12;  // the H100's probe (twenty-ninth session)
  m.h2d_bytes = 55.1e9;
  m.d2h_bytes = 54.2e9;
  m.parameters_pass_params = 11.12e9;
  return m;
}

void write_text(const std::filesystem::path& p, const std::string& text) { std::ofstream(p) << text; }

}  // namespace

TEST_CASE("step rates from the probe's figures", "[plan][step-rates]") {
  const mt::StepRates r = mt::step_rates_of(h100_figures());
  CHECK(r.gpu_flops == Approx(725e12 * mt::kStepFlopsPerGemmFlop));  // the probe's GEMM taken to layer shapes
  CHECK(r.gpu_flops == Approx(487e12).epsilon(0.01));  // bench's Qwen2.5-7B on the H100, which the factor fits
  CHECK(r.pcie_bytes == 54.2e9);                       // the slower direction
  CHECK(r.parameters_pass_params == Approx(6.6e9));  // the probe alone taken to training
  CHECK(mt::step_rates_cache_path("/c", "NVIDIA H100 80GB HBM3", "node-7.local") ==
        "/c/step_rates-NVIDIA-H100-80GB-HBM3-node-7.local.json");
}

TEST_CASE("data-parallel ranks plan on the slowest rank's rates, each rate on its own", "[plan][step-rates]") {
  const mt::StepRates a{700e12, 55e9, 6.4e9}, b{720e12, 41e9, 7.1e9}, c{690e12, 56e9, 4.2e9};
  const mt::StepRates s = mt::slowest_rates({a, b, c});
  CHECK(s.gpu_flops == 690e12);
  CHECK(s.pcie_bytes == 41e9);
  CHECK(s.parameters_pass_params == 4.2e9);
  CHECK(mt::slowest_rates({b}) == b);
}

TEST_CASE("the step rates' cache: written, read back equal, anything else refused with its reason",
          "[plan][step-rates]") {
  const TempDir dir;
  const mt::MeasuredRates m = h100_figures();
  const std::string path = mt::step_rates_cache_path((dir.path / "nested").string(), m.device, m.host);
  std::string why;
  CHECK_FALSE(mt::read_step_rates(path, m.device, m.host, why));
  CHECK(why == "no file " + path);
  mt::write_step_rates(path, m);  // makes the directory
  const std::optional<mt::MeasuredRates> back = mt::read_step_rates(path, m.device, m.host, why);
  REQUIRE(back);
  CHECK(*back == m);
  CHECK_FALSE(mt::read_step_rates(path, "NVIDIA H200", m.host, why));
  CHECK(why == path + ": measured on NVIDIA H100 80GB HBM3 of node-7, not NVIDIA H200 of node-7");
  CHECK_FALSE(mt::read_step_rates(path, m.device, "node-8", why));

  const auto refused = [&](const std::string& text) {
    write_text(path, text);
    std::string reason;
    CHECK_FALSE(mt::read_step_rates(path, m.device, m.host, reason));
    return reason;
  };
  CHECK(refused("{\"probe\": 1, \"device\": ").rfind(path + ": not JSON", 0) == 0);
  CHECK(refused(R"({"probe": 2, "device": "NVIDIA H100 80GB HBM3", "host": "node-7", "gemm_flops": 7e14,
                   "h2d_bytes": 5e10, "d2h_bytes": 5e10})") == path + ": no key 'parameters_pass_params'");
  CHECK(refused(R"({"probe": 2, "device": "NVIDIA H100 80GB HBM3", "host": "node-7", "gemm_flops": 7e14,
                   "h2d_bytes": 5e10, "d2h_bytes": 5e10, "parameters_pass_params": 6e9,
                   "training_parameters_pass_params": 0, "pcie": 1})") ==
        path + ": unknown key 'pcie'");
  CHECK(refused(R"({"probe": 1, "device": "NVIDIA H100 80GB HBM3", "host": "node-7", "gemm_flops": 7e14,
                   "h2d_bytes": 5e10, "d2h_bytes": 5e10, "parameters_pass_params": 6e9,
                   "training_parameters_pass_params": 0})") == path + ": probe version 1, not 2");
  CHECK(refused(R"({"probe": 2, "device": "NVIDIA H100 80GB HBM3", "host": "node-7", "gemm_flops": 7e14,
                   "h2d_bytes": -5e10, "d2h_bytes": 5e10, "parameters_pass_params": 6e9,
                   "training_parameters_pass_params": 0})") == path + ": a rate that is not finite and positive");
  CHECK(refused(R"({"probe": 2, "device": "NVIDIA H100 80GB HBM3", "host": "node-7", "gemm_flops": 7e14,
                   "h2d_bytes": 5e10, "d2h_bytes": 5e10, "parameters_pass_params": 6e9,
                   "training_parameters_pass_params": -1})") == path + ": a rate that is not finite and positive");
}

TEST_CASE("the host's parameters pass probe, cached once and read by later runs; a corrupt file is probed again",
          "[plan][step-rates]") {
  const TempDir dir;
  mt::MeasuredRates figures = h100_figures();
  int probes = 0;
  const auto probe = [&] {
    ++probes;
    figures.parameters_pass_params = mt::measure_parameters_pass_rate(int64_t{1} << 20, 0.02);
    return figures;
  };
  const std::string path = mt::step_rates_cache_path(dir.path.string(), figures.device, figures.host);
  const mt::ProbedRates first = mt::cached_or_probed(path, figures.device, figures.host, false, probe);
  CHECK(probes == 1);
  CHECK(std::isfinite(first.rates.parameters_pass_params));
  CHECK(first.rates.parameters_pass_params > 0);
  CHECK(first.source == "measured (no file " + path + "; cached in " + path + ")");
  const mt::ProbedRates second = mt::cached_or_probed(path, figures.device, figures.host, false, probe);
  CHECK(probes == 1);
  CHECK(second.rates == first.rates);
  CHECK(second.source == "cached in " + path);
  write_text(path, "{ not json");
  const mt::ProbedRates third = mt::cached_or_probed(path, figures.device, figures.host, false, probe);
  CHECK(probes == 2);
  CHECK(third.source.rfind("measured (" + path + ": not JSON", 0) == 0);
  std::string why;
  CHECK(mt::read_step_rates(path, figures.device, figures.host, why) == third.rates);  // rewritten
  CHECK(mt::cached_or_probed(path, figures.device, figures.host, true, probe).source ==
        "measured (asked to probe again; cached in " + path + ")");
  CHECK(probes == 3);
  CHECK(mt::cached_or_probed("", figures.device, figures.host, false, probe).source ==
        "measured (no cache directory ($XDG_CACHE_HOME, $HOME); not cached)");
  CHECK(probes == 4);
}

TEST_CASE("training's parameters pass rate, kept in the machine's file, replaces the probe's", "[plan][step-rates]") {
  const TempDir dir;
  const mt::MeasuredRates m = h100_figures();
  const std::string path = mt::step_rates_cache_path(dir.path.string(), m.device, m.host);
  // No file yet (the rates were constants, or the cache could not be written): nothing kept, the reason said.
  CHECK(mt::record_training_pass_rate(path, m.device, m.host, 6.43e9) ==
        "training's parameters pass rate not kept: no file " + path);
  mt::write_step_rates(path, m);
  CHECK(mt::record_training_pass_rate("", m.device, m.host, 6.43e9).find("no cache directory") != std::string::npos);
  CHECK(mt::record_training_pass_rate(path, m.device, m.host, 0) ==
        "training's parameters pass rate not kept: none measured");
  CHECK(mt::record_training_pass_rate(path, m.device, m.host, 6.43e9) ==
        "training's parameters pass, 6.43 G parameters/s a store rank, kept in " + path + " for the next plans");
  std::string why;
  const std::optional<mt::MeasuredRates> back = mt::read_step_rates(path, m.device, m.host, why);
  REQUIRE(back);
  CHECK(back->training_parameters_pass_params == 6.43e9);
  CHECK(back->gemm_flops == m.gemm_flops);  // the probe's figures stay
  CHECK(back->parameters_pass_params == m.parameters_pass_params);
  // The plan takes training's rate as it is, not the probe's taken to training (11.12 × 6.6 / 11.12).
  CHECK(mt::step_rates_of(*back).parameters_pass_params == 6.43e9);
  CHECK(mt::step_rates_of(m).parameters_pass_params == Approx(6.6e9));
  CHECK(mt::describe_measured_rates(*back).find("parameters pass 11.12 G/s (6.43 in training, as measured)") !=
        std::string::npos);
  // Another device's file is not touched.
  CHECK(mt::record_training_pass_rate(path, "NVIDIA H200", m.host, 5e9).find("not NVIDIA H200") != std::string::npos);
}
