// Golden-fixture helpers (see fixture_run.h).
#include "integration/fixture_run.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "catch.h"
#include "config/config.h"
#include "core/error.h"
#include "integration/update_rule.h"
#include "io/safetensors.h"
#include "model/mxfp4.h"

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
  Reference ref{j.at("losses").get<std::vector<double>>(), j.at("grad_norms").get<std::vector<double>>(),
                j.at("lrs").get<std::vector<double>>(), j.value("aux_losses", std::vector<double>{}), std::nullopt};
  if (j.contains("fp64")) ref.fp64_finite = j.at("fp64").at("finite").get<bool>();
  return ref;
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

namespace {

// Every tensor of `file` read by read_as (read_as_f32 or read_as_f64).
template <typename T>
std::map<std::string, std::vector<T>> read_all(const std::filesystem::path& file,
                                               void (*read_as)(const StTensor&, T*)) {
  const SafetensorsFile st(file);
  std::map<std::string, std::vector<T>> out;
  for (const auto& [name, t] : st.tensors()) {
    std::vector<T> v(static_cast<size_t>(t.numel()));
    read_as(t, v.data());
    out.emplace(name, std::move(v));
  }
  return out;
}

}  // namespace

std::map<std::string, std::vector<float>> read_tensors(const std::filesystem::path& file) {
  return read_all(file, read_as_f32);
}

std::map<std::string, std::vector<double>> read_tensors_f64(const std::filesystem::path& file) {
  return read_all(file, read_as_f64);
}

double relative_difference(const std::vector<float>& ours, const std::vector<float>& ref) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff += (double(ours[i]) - ref[i]) * (double(ours[i]) - ref[i]);
    norm += double(ref[i]) * ref[i];
  }
  return std::sqrt(diff) / std::sqrt(norm);
}

namespace {

// The fixture's initial value of each tensor of `reference` (its names and shapes), from model/ (MXFP4 experts
// dequantised as the loader does).
std::map<std::string, std::vector<double>> initial_tensors(const std::string& name,
                                                           const std::filesystem::path& fixture,
                                                           const SafetensorsFile& reference) {
  const SafetensorsModel model(fixture / "model");
  std::map<std::string, std::vector<double>> out;
  for (const auto& [tensor, t] : reference.tensors()) {
    std::vector<double> v(static_cast<size_t>(t.numel()));
    if (const StTensor* stored = model.find(tensor)) {
      MT_REQUIRE(stored->numel() == t.numel(), "fixture {}: tensor {} has {} elements in model/, {} in the reference",
                 name, tensor, stored->numel(), t.numel());
      read_as_f64(*stored, v.data());
    } else {
      MT_REQUIRE(has_mxfp4(model, tensor), "fixture {}: tensor {} missing from model/", name, tensor);
      std::vector<float> dequantised(v.size());
      read_mxfp4(model, tensor, t.shape, dequantised.data());
      std::copy(dequantised.begin(), dequantised.end(), v.begin());
    }
    out.emplace(tensor, std::move(v));
  }
  return out;
}

// The fp32 rule of fixtures without a finite float64 run: every final tensor within 1e-4 of PyTorch fp32's.
void check_final_values(const std::string& name, const std::map<std::string, std::vector<float>>& ours,
                        const std::map<std::string, std::vector<float>>& fp32) {
  for (const auto& [tensor, values] : fp32) {
    INFO("fixture " << name << " tensor " << tensor << " (fp32 rule: reference.json says its fp64 run is not finite)");
    CHECK(relative_difference(ours.at(tensor), values) <= 1e-4);
  }
}

}  // namespace

UpdateReferences read_update_references(const std::string& name, const std::filesystem::path& fixture) {
  const auto fp32_file = fixture / "reference" / "final.safetensors";
  const auto fp64_file = fixture / "reference" / "final_fp64.safetensors";
  MT_REQUIRE(std::filesystem::exists(fp64_file), "fixture {}: reference/final_fp64.safetensors missing", name);
  UpdateReferences refs{{}, read_tensors_f64(fp32_file), read_tensors_f64(fp64_file)};
  for (const auto& [tensor, values] : refs.fp32) {
    MT_REQUIRE(refs.fp64.count(tensor), "fixture {}: tensor {} missing from reference/final_fp64.safetensors", name,
               tensor);
    MT_REQUIRE(refs.fp64.at(tensor).size() == values.size(),
               "fixture {}: tensor {} has {} elements in reference/final_fp64.safetensors, {} in final.safetensors",
               name, tensor, refs.fp64.at(tensor).size(), values.size());
  }
  for (const auto& [tensor, values] : refs.fp64)
    MT_REQUIRE(refs.fp32.count(tensor),
               "fixture {}: tensor {} of reference/final_fp64.safetensors is not in reference/final.safetensors", name,
               tensor);
  refs.initial = initial_tensors(name, fixture, SafetensorsFile(fp32_file));
  return refs;
}

void check_final_tensors(const std::string& name, const TrainSummary& summary) {
  const auto ours_file = summary.final_dir / "model.safetensors";
  const auto fp32_file = fixture_dir(name) / "reference" / "final.safetensors";
  {
    const SafetensorsFile ours_st(ours_file), fp32_st(fp32_file);
    for (const auto& [tensor, t] : fp32_st.tensors())
      MT_REQUIRE(ours_st.tensors().count(tensor), "fixture {}: tensor {} missing from the run's final/", name, tensor);
    for (const auto& [tensor, t] : ours_st.tensors())
      MT_REQUIRE(fp32_st.tensors().count(tensor), "fixture {}: the run's tensor {} is not in reference/final.safetensors",
                 name, tensor);
  }
  if (read_reference(name).fp64_finite == false)
    return check_final_values(name, read_tensors(ours_file), read_tensors(fp32_file));
  const UpdateReferences refs = read_update_references(name, fixture_dir(name));
  const auto ours = read_tensors_f64(ours_file);
  std::ofstream table(summary.final_dir.parent_path() / "update_distances.tsv");
  table << "tensor\tupdate_norm\tours_fp32\tours_fp64\tfp32_fp64\tpasses\n";
  for (const auto& [tensor, values] : refs.fp32) {
    const UpdateDistances d = update_distances(refs.initial.at(tensor), ours.at(tensor), values, refs.fp64.at(tensor));
    table << tensor << '\t' << d.update_norm << '\t' << d.to_fp32 << '\t' << d.ours_to_fp64 << '\t' << d.fp32_to_fp64
          << '\t' << d.passes() << '\n';
    INFO("fixture " << name << " tensor " << tensor << ": " << d.describe());
    CHECK(d.passes());
  }
}

void check_against_reference(const std::string& name, const std::string& run,
                             const std::vector<std::string>& overrides) {
  const auto summary = run_fixture(name, run, overrides);
  check_metrics(name, run);
  check_final_tensors(name, summary);
}

void check_metrics(const std::string& name, const std::string& run) {
  constexpr double kTolerance = 1e-4;  // relative: per-step loss and grad norm
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

void check_bf16_losses(const std::string& name) {
  const std::string run = "parity-bf16-" + name;
  run_fixture(name, run, {"model.dtype=bfloat16"});
  const Reference ref = read_reference(name);
  const auto rows = read_metrics(scratch_dir(run));
  REQUIRE(rows.size() == ref.losses.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    INFO(name << " step " << k + 1);
    CHECK(std::abs(rows[k].loss - ref.losses[k]) <= 2e-2 * ref.losses[k]);
  }
}

}  // namespace mt::testing
