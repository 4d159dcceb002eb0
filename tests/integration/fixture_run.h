// Helpers for the golden-fixture tests: run `train` on a fixture under tests/fixtures/<case>/ and read
// back what it wrote (metrics.jsonl, final/model.safetensors) and what PyTorch recorded (reference.json,
// reference/final.safetensors in fp32 and reference/final_fp64.safetensors, the same run in float64).
#pragma once
#include <filesystem>
#include <map>
#include <optional>
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
  std::vector<double> aux_losses;  // MoE fixtures with the router loss on (reference.json "aux_losses")
  std::optional<bool> fp64_finite;  // reference.json "fp64": {"finite": ...}; absent where the tool wrote none
};
Reference read_reference(const std::string& name);

// A published-style checkpoint in `dir` written as two shards: `text` (each name's shape and values) in fp32 in the
// first, the 1-D `frozen` tensors (a vision tower, an MTP head) in bf16 in the second, and an index naming each one's.
struct ShardTensor {
  std::string name;
  std::vector<int64_t> shape;
  const std::vector<float>* values;
};
void write_two_shard_checkpoint(const std::filesystem::path& dir, const std::vector<ShardTensor>& text,
                                const std::map<std::string, std::vector<float>>& frozen);

struct MetricsRow {
  double loss = 0, grad_norm = 0, lr = 0;
  std::optional<double> aux_loss;  // logged where the router loss is on
};
std::vector<MetricsRow> read_metrics(const std::filesystem::path& output_dir);

// Every tensor of a safetensors file as fp32; as fp64 (F64 exactly, the others widened).
std::map<std::string, std::vector<float>> read_tensors(const std::filesystem::path& file);
std::map<std::string, std::vector<double>> read_tensors_f64(const std::filesystem::path& file);

double relative_difference(const std::vector<float>& ours, const std::vector<float>& ref);

// What the update rule reads of a fixture in `fixture` (a dir laid out as tests/fixtures/<name>/), in fp64: the
// initial weights (model/, for each reference tensor), PyTorch's fp32 and float64 finals. A missing
// final_fp64.safetensors, a tensor missing from it or one it has beyond final.safetensors' names throws mt::Error
// naming the fixture and the tensor.
struct UpdateReferences {
  std::map<std::string, std::vector<double>> initial, fp32, fp64;
};
UpdateReferences read_update_references(const std::string& name, const std::filesystem::path& fixture);

// Every tensor of the reference's final.safetensors is in the run's final/ and passes the update rule
// (update_rule.h) against final_fp64.safetensors; each tensor's distances go to <run output>/update_distances.tsv.
// A fixture whose float64 run was not finite (reference.json says so) keeps the fp32 rule: every final tensor
// within 1e-4 of PyTorch fp32's (‖Δ‖/‖ref‖). A missing fp64 file or tensor fails (read_update_references).
void check_final_tensors(const std::string& name, const TrainSummary& summary);
// Runs the fixture and checks its metrics (check_metrics) and every final tensor (check_final_tensors).
void check_against_reference(const std::string& name, const std::string& run,
                             const std::vector<std::string>& overrides = {});
// Run `run`'s per-step loss and gradient norm (1e-4 relative), learning rate (1e-12) and router loss (1e-4; logged
// exactly where the reference has one) against the fixture's reference.json.
void check_metrics(const std::string& name, const std::string& run);
// Runs the fixture in bfloat16 (run "parity-bf16-<name>") and checks every step's loss within 2e-2 relative of
// PyTorch's fp32 loss.
void check_bf16_losses(const std::string& name);

}  // namespace mt::testing
