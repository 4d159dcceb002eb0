// mpi_compare_runs [--tolerance REL] REF OTHER...: exit 0 when every OTHER training output directory holds
// bitwise the same final parameters (final/model.safetensors, tensor by tensor, raw bytes) and the same per-step
// metrics (loss, grad_norm, lr, skipped) as REF; otherwise prints the first difference and exits 1. With
// --tolerance, loss and grad_norm may differ by REL relatively and each fp32 tensor by ‖Δ‖ ≤ REL·‖ref‖ (runs
// that sum in another order: data parallelism); the largest differences seen are printed.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace {

std::vector<nlohmann::json> read_metrics(const std::filesystem::path& dir) {
  std::ifstream in(dir / "metrics.jsonl");
  if (!in) throw std::runtime_error((dir / "metrics.jsonl").string() + ": cannot open");
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("eval_loss")) {  // an evaluation line
      rows.push_back({{"step", j.at("step")}, {"eval_loss", j.at("eval_loss")}, {"eval_examples", j.at("eval_examples")}});
      continue;
    }
    rows.push_back({{"loss", j.at("loss")}, {"grad_norm", j.at("grad_norm")}, {"lr", j.at("lr")},
                    {"skipped", j.value("skipped", false)}});
  }
  return rows;
}

double g_tolerance = 0;                    // 0: bitwise
double g_worst_metric = 0, g_worst_tensor = 0;

double relative(double a, double b) { return a == b ? 0.0 : std::abs(a - b) / std::max(std::abs(a), 1e-30); }

bool metrics_agree(const nlohmann::json& a, const nlohmann::json& b) {
  if (g_tolerance == 0) return a == b;
  if (a.contains("eval_loss") || b.contains("eval_loss")) {
    if (!a.contains("eval_loss") || !b.contains("eval_loss") || a.at("step") != b.at("step") ||
        a.at("eval_examples") != b.at("eval_examples"))
      return false;
    const double r = relative(a.at("eval_loss").get<double>(), b.at("eval_loss").get<double>());
    g_worst_metric = std::max(g_worst_metric, r);
    return r <= g_tolerance;
  }
  if (a.at("lr") != b.at("lr") || a.at("skipped") != b.at("skipped")) return false;
  for (const char* key : {"loss", "grad_norm"}) {
    const double r = relative(a.at(key).get<double>(), b.at(key).get<double>());
    g_worst_metric = std::max(g_worst_metric, r);
    if (r > g_tolerance) return false;
  }
  return true;
}

bool tensors_agree(const mt::StTensor& t, const mt::StTensor& u) {
  if (std::memcmp(t.data, u.data, t.nbytes) == 0) return true;
  if (g_tolerance == 0 || t.dtype != mt::StDType::F32) return false;
  const auto* x = reinterpret_cast<const float*>(t.data);
  const auto* y = reinterpret_cast<const float*>(u.data);
  double diff = 0, norm = 0;
  for (size_t i = 0; i < t.nbytes / 4; ++i) {
    diff += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
    norm += static_cast<double>(x[i]) * x[i];
  }
  const double r = std::sqrt(diff / std::max(norm, 1e-300));
  g_worst_tensor = std::max(g_worst_tensor, r);
  return r <= g_tolerance;
}

// Empty when equal, else the first difference.
std::string compare(const std::filesystem::path& ref, const std::filesystem::path& other) {
  const auto a = read_metrics(ref), b = read_metrics(other);
  if (a.size() != b.size()) return "metrics: " + std::to_string(a.size()) + " vs " + std::to_string(b.size()) + " rows";
  for (size_t k = 0; k < a.size(); ++k)
    if (!metrics_agree(a[k], b[k]))
      return "metrics row " + std::to_string(k + 1) + ": " + a[k].dump() + " vs " + b[k].dump();
  const mt::SafetensorsFile fa(ref / "final" / "model.safetensors"), fb(other / "final" / "model.safetensors");
  if (fa.tensors().size() != fb.tensors().size()) return "different tensor counts";
  for (const auto& [name, t] : fa.tensors()) {
    const auto it = fb.tensors().find(name);
    if (it == fb.tensors().end()) return "tensor " + name + " missing";
    const mt::StTensor& u = it->second;
    if (t.dtype != u.dtype || t.shape != u.shape || t.nbytes != u.nbytes) return "tensor " + name + ": other shape";
    if (!tensors_agree(t, u)) return "tensor " + name + ": values differ";
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  int first = 1;
  if (argc > 2 && std::string(argv[1]) == "--tolerance") {
    g_tolerance = std::atof(argv[2]);
    first = 3;
  }
  if (argc < first + 2 || (first == 3 && g_tolerance <= 0)) {
    std::fprintf(stderr, "usage: mpi_compare_runs [--tolerance REL] REF_DIR OTHER_DIR...\n");
    return 2;
  }
  try {
    for (int i = first + 1; i < argc; ++i) {
      g_worst_metric = g_worst_tensor = 0;
      const std::string diff = compare(argv[first], argv[i]);
      if (!diff.empty()) {
        std::printf("FAIL %s vs %s: %s (largest relative differences so far: metrics %.3g, tensors %.3g)\n",
                    argv[first], argv[i], diff.c_str(), g_worst_metric, g_worst_tensor);
        return 1;
      }
      if (g_tolerance == 0)
        std::printf("ok   %s is bitwise %s\n", argv[i], argv[first]);
      else
        std::printf("ok   %s agrees with %s: metrics within %.3g, tensors within %.3g relative\n", argv[i],
                    argv[first], g_worst_metric, g_worst_tensor);
    }
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  return 0;
}
