// Helpers for the golden-fixture tests: run `train` on a fixture under tests/fixtures/<case>/ and read
// back what it wrote (metrics.jsonl, final/model.safetensors) and what PyTorch recorded (reference.json).
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cli/train/trainer.h"

namespace mt::testing {

std::filesystem::path fixture_dir(const std::string& name);
std::filesystem::path scratch_dir(const std::string& name);        // under the build tree
std::filesystem::path fresh_scratch_dir(const std::string& name);  // the same, emptied

// Runs the fixture's train.yaml with its paths made absolute, output in scratch_dir(run), plus `overrides`.
TrainSummary run_fixture(const std::string& name, const std::string& run, std::vector<std::string> overrides = {});

struct Reference {
  std::vector<double> losses, grad_norms, lrs;
};
Reference read_reference(const std::string& name);

struct MetricsRow {
  double loss = 0, grad_norm = 0, lr = 0;
};
std::vector<MetricsRow> read_metrics(const std::filesystem::path& output_dir);

// Every tensor of a safetensors file as fp32.
std::map<std::string, std::vector<float>> read_tensors(const std::filesystem::path& file);

double relative_difference(const std::vector<float>& ours, const std::vector<float>& ref);

}  // namespace mt::testing
