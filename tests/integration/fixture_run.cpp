// Golden-fixture helpers (see fixture_run.h).
#include "integration/fixture_run.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "catch.h"
#include "config/config.h"
#include "io/safetensors.h"

namespace mt::testing {

namespace {

// Build-time locations, overridable by the environment so a bundled test binary runs on another machine.
std::filesystem::path location(const char* variable, const char* built_in) {
  const char* env = std::getenv(variable);
  return env && *env ? env : built_in;
}

}  // namespace

std::filesystem::path fixture_dir(const std::string& name) {
  return location("MEGATRAIN_SOURCE_DIR", MEGATRAIN_SOURCE_DIR) / "tests" / "fixtures" / name;
}

std::filesystem::path scratch_dir(const std::string& name) {
  return location("MEGATRAIN_BINARY_DIR", MEGATRAIN_BINARY_DIR) / "test-scratch" / name;
}

std::filesystem::path fresh_scratch_dir(const std::string& name) {
  auto dir = scratch_dir(name);
  std::filesystem::remove_all(dir);
  return dir;
}

TrainSummary run_fixture(const std::string& name, const std::string& run, std::vector<std::string> overrides) {
  const auto dir = fixture_dir(name);
  std::vector<std::string> all = {"model.name=" + (dir / "model").string(),
                                  "dataset.dataset_dir=" + (dir / "data").string(),
                                  "training.output_dir=" + fresh_scratch_dir(run).string()};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return run_training(load_config(dir / "train.yaml", all));
}

Reference read_reference(const std::string& name) {
  std::ifstream in(fixture_dir(name) / "reference.json");
  const auto j = nlohmann::json::parse(in);
  return {j.at("losses").get<std::vector<double>>(), j.at("grad_norms").get<std::vector<double>>(),
          j.at("lrs").get<std::vector<double>>(), j.value("aux_losses", std::vector<double>{})};
}

std::vector<MetricsRow> read_metrics(const std::filesystem::path& output_dir) {
  std::ifstream in(output_dir / "metrics.jsonl");
  std::vector<MetricsRow> rows;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (!j.contains("loss")) continue;  // an evaluation line
    rows.push_back({j.at("loss").get<double>(), j.at("grad_norm").get<double>(), j.at("lr").get<double>(),
                    j.contains("aux_loss") ? std::optional<double>(j.at("aux_loss").get<double>()) : std::nullopt});
  }
  return rows;
}

std::map<std::string, std::vector<float>> read_tensors(const std::filesystem::path& file) {
  const SafetensorsFile st(file);
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, t] : st.tensors()) {
    std::vector<float> v(static_cast<size_t>(t.numel()));
    read_as_f32(t, v.data());
    out.emplace(name, std::move(v));
  }
  return out;
}

double relative_difference(const std::vector<float>& ours, const std::vector<float>& ref) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff += (double(ours[i]) - ref[i]) * (double(ours[i]) - ref[i]);
    norm += double(ref[i]) * ref[i];
  }
  return std::sqrt(diff) / std::sqrt(norm);
}

void check_final_tensors(const std::string& name, const TrainSummary& summary, double tolerance) {
  const auto ours = read_tensors(summary.final_dir / "model.safetensors");
  const auto theirs = read_tensors(fixture_dir(name) / "reference" / "final.safetensors");
  REQUIRE(ours.size() == theirs.size());
  for (const auto& [tensor, values] : theirs) {
    INFO(name << " tensor " << tensor);
    REQUIRE(ours.count(tensor) == 1);
    CHECK(relative_difference(ours.at(tensor), values) <= tolerance);
  }
}

void check_against_reference(const std::string& name, const std::string& run,
                             const std::vector<std::string>& overrides) {
  constexpr double kTolerance = 1e-4;  // relative: per-step loss and grad norm; per-tensor final parameters
  const auto summary = run_fixture(name, run, overrides);
  const Reference ref = read_reference(name);
  const auto rows = read_metrics(scratch_dir(run));
  REQUIRE(rows.size() == ref.losses.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    INFO(name << " step " << k + 1);
    CHECK(std::abs(rows[k].loss - ref.losses[k]) <= kTolerance * ref.losses[k]);
    CHECK(std::abs(rows[k].grad_norm - ref.grad_norms[k]) <= kTolerance * ref.grad_norms[k]);
    CHECK(std::abs(rows[k].lr - ref.lrs[k]) <= 1e-12);
    REQUIRE(rows[k].aux_loss.has_value() == !ref.aux_losses.empty());
    if (rows[k].aux_loss) CHECK(std::abs(*rows[k].aux_loss - ref.aux_losses[k]) <= kTolerance * ref.aux_losses[k]);
  }
  check_final_tensors(name, summary, kTolerance);
}

void write_two_shard_checkpoint(const std::filesystem::path& dir, const std::vector<ShardTensor>& text,
                                const std::map<std::string, std::vector<float>>& frozen) {
  std::vector<StWriteTensor> text_out, frozen_out;
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  for (const ShardTensor& t : text) {
    text_out.push_back({t.name, t.shape, t.values->data(), nullptr});
    index["weight_map"][t.name] = "model-00001-of-00002.safetensors";
  }
  for (const auto& [name, values] : frozen) {
    frozen_out.push_back({name, {static_cast<int64_t>(values.size())}, values.data(), nullptr});
    index["weight_map"][name] = "model-00002-of-00002.safetensors";
  }
  write_safetensors(dir / "model-00001-of-00002.safetensors", text_out, DType::f32);
  write_safetensors(dir / "model-00002-of-00002.safetensors", frozen_out, DType::bf16);
  std::ofstream(dir / "model.safetensors.index.json") << index.dump(2);
}

}  // namespace mt::testing
