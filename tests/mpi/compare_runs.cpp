// mpi_compare_runs REF OTHER...: exit 0 when every OTHER training output directory holds bitwise the same
// final parameters (final/model.safetensors, tensor by tensor, raw bytes) and the same per-step metrics
// (loss, grad_norm, lr, skipped) as REF; otherwise prints the first difference and exits 1.
#include <cstdio>
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
    rows.push_back({{"loss", j.at("loss")}, {"grad_norm", j.at("grad_norm")}, {"lr", j.at("lr")},
                    {"skipped", j.value("skipped", false)}});
  }
  return rows;
}

// Empty when equal, else the first difference.
std::string compare(const std::filesystem::path& ref, const std::filesystem::path& other) {
  const auto a = read_metrics(ref), b = read_metrics(other);
  if (a.size() != b.size()) return "metrics: " + std::to_string(a.size()) + " vs " + std::to_string(b.size()) + " rows";
  for (size_t k = 0; k < a.size(); ++k)
    if (a[k] != b[k]) return "metrics row " + std::to_string(k + 1) + ": " + a[k].dump() + " vs " + b[k].dump();
  const mt::SafetensorsFile fa(ref / "final" / "model.safetensors"), fb(other / "final" / "model.safetensors");
  if (fa.tensors().size() != fb.tensors().size()) return "different tensor counts";
  for (const auto& [name, t] : fa.tensors()) {
    const auto it = fb.tensors().find(name);
    if (it == fb.tensors().end()) return "tensor " + name + " missing";
    const mt::StTensor& u = it->second;
    if (t.dtype != u.dtype || t.shape != u.shape || t.nbytes != u.nbytes) return "tensor " + name + ": other shape";
    if (std::memcmp(t.data, u.data, t.nbytes) != 0) return "tensor " + name + ": values differ";
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: mpi_compare_runs REF_DIR OTHER_DIR...\n");
    return 2;
  }
  try {
    for (int i = 2; i < argc; ++i) {
      const std::string diff = compare(argv[1], argv[i]);
      if (!diff.empty()) {
        std::printf("FAIL %s vs %s: %s\n", argv[1], argv[i], diff.c_str());
        return 1;
      }
      std::printf("ok   %s is bitwise %s\n", argv[i], argv[1]);
    }
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  return 0;
}
