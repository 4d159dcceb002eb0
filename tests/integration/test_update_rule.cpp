// The parity tests' update rule (update_rule.h) on made-up updates, and its references' bad input: a fixture
// without reference/final_fp64.safetensors, or with other tensor names in it, is refused naming the fixture and the
// file or tensor.
#include <filesystem>

#include "catch.h"
#include "core/error.h"
#include "integration/fixture_run.h"
#include "integration/update_rule.h"
#include "io/safetensors.h"

using namespace mt::testing;

TEST_CASE("the update rule: within 1e-3 of PyTorch fp32's update, or within 3x its distance from float64",
          "[parity][update_rule]") {
  const std::vector<double> initial = {1.0, 2.0, 3.0, 4.0};
  const std::vector<double> fp64 = {1.001, 1.999, 3.001, 3.999};   // the exact update: ±1e-3
  const std::vector<double> fp32 = {1.0010005, 1.999, 3.001, 3.999};  // PyTorch fp32: 5e-7 off in one element
  // Ours 1e-3 × ‖Δfp32‖ from PyTorch fp32 (and 2.5× its distance from float64): passes on either clause.
  CHECK(update_distances(initial, {1.0010015, 1.999, 3.001, 3.999}, fp32, fp64).passes());
  // 5e-3 × ‖Δ‖ from both: 10× PyTorch fp32's distance from float64, fails.
  const UpdateDistances far = update_distances(initial, {1.0010100, 1.999, 3.001, 3.999}, fp32, fp64);
  CHECK_FALSE(far.passes());
  CHECK(far.describe().find("ratio 20.00") != std::string::npos);
  // An ill-conditioned tensor: PyTorch fp32's update is half wrong; ours as far off the other way still passes,
  // three and a half times as far does not.
  const std::vector<double> noisy = {1.0015, 1.999, 3.001, 3.999};
  CHECK(update_distances(initial, {1.0005, 1.999, 3.001, 3.999}, noisy, fp64).passes());
  CHECK_FALSE(update_distances(initial, {0.99925, 1.999, 3.001, 3.999}, noisy, fp64).passes());
}

TEST_CASE("a fixture without its float64 final, or with other names in it, is refused naming fixture and tensor",
          "[parity][update_rule]") {
  const std::filesystem::path dir = fresh_scratch_dir("update-rule-refs") / "fixture";
  std::filesystem::create_directories(dir);
  std::filesystem::copy(fixture_dir("qwen3_5_chunk"), dir, std::filesystem::copy_options::recursive);
  const auto fp64_file = dir / "reference" / "final_fp64.safetensors";
  const UpdateReferences whole = read_update_references("copy", dir);
  CHECK(whole.fp64.size() == whole.fp32.size());
  CHECK(whole.initial.size() == whole.fp32.size());

  const auto fp64 = read_tensors(fp64_file);
  const mt::SafetensorsFile shapes(fixture_dir("qwen3_5_chunk") / "reference" / "final_fp64.safetensors");
  const auto write_fp64 = [&](const std::string& renamed) {  // the file with `renamed` stored as renamed + ".x"
    std::vector<mt::StWriteTensor> out;
    std::vector<std::string> names;
    for (const auto& [name, values] : fp64) names.push_back(name == renamed ? name + ".x" : name);
    size_t k = 0;
    for (const auto& [name, values] : fp64) out.push_back({names[k++], shapes.tensors().at(name).shape, values.data()});
    mt::write_safetensors(fp64_file, out, mt::DType::f32);
  };
  const std::string renamed = "model.layers.0.linear_attn.dt_bias";
  write_fp64(renamed);
  CHECK_THROWS_WITH(read_update_references("copy", dir),
                    "fixture copy: tensor " + renamed + " missing from reference/final_fp64.safetensors");

  std::filesystem::remove(fp64_file);
  CHECK_THROWS_WITH(read_update_references("copy", dir), "fixture copy: reference/final_fp64.safetensors missing");
}
