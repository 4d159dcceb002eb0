// FP8 block-quantised checkpoints (model/fp8_blocks.h) against tools/make_fp8_fixture.py's deepseek_v3_fp8: e4m3fn
// decoding of all 256 codes as torch decodes them, the loaded masters bit for bit torch's dequantisation (partial
// edge blocks, subnormal codes, rows regrouped by the layout), the model sized without its scales, the MTP tensor
// carried with its scales, and every quantization_config we do not read refused in one line.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "catch.h"
#include "io/safetensors.h"
#include "model/fp8_blocks.h"
#include "model/model_source.h"
#include "model/model_spec.h"
#include "model/param_layout.h"

namespace fs = std::filesystem;

namespace {

const fs::path kFixture = fs::path(MEGATRAIN_SOURCE_DIR) / "tests" / "fixtures" / "deepseek_v3_fp8";

nlohmann::json fixture_config() {
  std::ifstream in(kFixture / "model" / "config.json");
  return nlohmann::json::parse(in);
}

mt::ModelSpec parse(const nlohmann::json& j) { return mt::parse_model_spec(j, "cfg.json"); }

uint32_t bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

}  // namespace

TEST_CASE("e4m3fn decoding equals torch's for all 256 codes", "[fp8]") {
  const mt::SafetensorsFile table(kFixture / "reference" / "e4m3fn.safetensors");
  const mt::StTensor& codes = table.tensors().at("codes");
  REQUIRE(codes.dtype == mt::StDType::F8_E4M3);
  REQUIRE(codes.numel() == 256);
  std::vector<float> torch_values(256);
  mt::read_as_f32(table.tensors().at("values"), torch_values.data());
  int nans = 0, subnormals = 0;
  for (int i = 0; i < 256; ++i) {
    const auto code = static_cast<uint8_t>(codes.data[i]);
    REQUIRE(code == i);
    const float ours = mt::e4m3fn_to_f32(code);
    INFO("code 0x" << std::hex << i);
    if (std::isnan(torch_values[static_cast<size_t>(i)])) {
      CHECK(std::isnan(ours));
      ++nans;
      continue;
    }
    CHECK(bits(ours) == bits(torch_values[static_cast<size_t>(i)]));  // ±0 included
    subnormals += (i & 0x78) == 0 && (i & 0x07) != 0;
  }
  CHECK(nans == 2);  // 0x7f and 0xff
  CHECK(subnormals == 14);
  CHECK(mt::e4m3fn_to_f32(0x7e) == 448.0f);
  CHECK(mt::e4m3fn_to_f32(0x01) == std::ldexp(1.0f, -9));
}

TEST_CASE("FP8 masters equal torch's dequantisation bit for bit", "[fp8]") {
  mt::ModelSpec spec = mt::load_model_spec(kFixture / "model" / "config.json");
  REQUIRE(spec.fp8_block_weights);
  const mt::SafetensorsModel weights(kFixture / "model");
  const mt::ParamLayout layout = mt::make_param_layout(spec);
  const mt::SafetensorsFile reference(kFixture / "reference" / "dequantised.safetensors");
  size_t compared = 0, partial = 0;
  bool regrouped = false;
  for (const mt::Region& region : layout.regions) {
    std::vector<float> master(static_cast<size_t>(region.numel));
    mt::load_region(region, weights, master.data(), spec.fp8_block_weights);
    for (const mt::ParamSlot& slot : region.params) {
      const auto ref = reference.tensors().find(slot.hf_name);
      std::vector<float> hf(static_cast<size_t>(slot.numel));
      const float* store = master.data() + slot.offset;
      if (slot.reordered()) mt::store_rows_to_hf(slot, store, hf.data());
      else std::copy(store, store + slot.numel, hf.begin());
      if (ref == reference.tensors().end()) {  // stored unquantised (bf16 or fp32): read as it is
        CHECK(weights.find(slot.hf_name)->dtype != mt::StDType::F8_E4M3);
        continue;
      }
      INFO(slot.hf_name);
      std::vector<float> expected(hf.size());
      mt::read_as_f32(ref->second, expected.data());
      CHECK(std::memcmp(hf.data(), expected.data(), hf.size() * 4) == 0);
      ++compared;
      partial += slot.shape[0] % mt::kFp8BlockSize != 0 && slot.shape[1] % mt::kFp8BlockSize != 0;
      regrouped = regrouped || slot.reordered();
    }
  }
  CHECK(compared == reference.tensors().size() - 1);  // all but the MTP layer's tensor, which is carried
  CHECK(partial == compared);  // every quantised tensor has a partial block in both dimensions
  CHECK(regrouped);            // kv_b_proj's rows regrouped after dequantisation
}

TEST_CASE("an FP8 model is sized without its scales, as its unquantised config", "[fp8]") {
  const nlohmann::json config = fixture_config();
  const mt::ModelSpec spec = mt::parse_model_spec(config, "cfg.json");
  nlohmann::json plain = config;
  plain.erase("quantization_config");
  const mt::ModelSpec unquantised = mt::parse_model_spec(plain, "cfg.json");
  CHECK(!unquantised.fp8_block_weights);
  CHECK(mt::count_parameters(spec) == mt::count_parameters(unquantised));
  CHECK(mt::count_active_parameters(spec) == mt::count_active_parameters(unquantised));

  // Parameters counted once: the checkpoint's tensors less the scales and the carried MTP layer's.
  const mt::SafetensorsModel weights(kFixture / "model");
  const mt::ParamLayout layout = mt::make_param_layout(spec);
  const std::vector<mt::CarriedTensor> carried = mt::carried_tensors(spec, layout, weights);
  int64_t stored = 0, scales = 0;
  for (const std::string& name : weights.names()) {
    const int64_t n = weights.find(name)->numel();
    (name.ends_with("_scale_inv") ? scales : stored) += n;
  }
  REQUIRE(carried.size() == 1);
  CHECK(carried[0].tensor->name == "model.layers.2.self_attn.kv_a_proj_with_mqa.weight");
  REQUIRE(carried[0].scale_inv != nullptr);
  CHECK(carried[0].scale_inv->name == "model.layers.2.self_attn.kv_a_proj_with_mqa.weight_scale_inv");
  CHECK(scales > 0);
  CHECK(mt::count_parameters(spec) == stored - carried[0].tensor->numel());
}

TEST_CASE("quantization_config fp8 that we do not read exactly is refused in one line", "[fp8]") {
  const auto with = [](const char* key, const nlohmann::json& value) {
    nlohmann::json j = fixture_config();
    j["quantization_config"][key] = value;
    return j;
  };
  CHECK(parse(fixture_config()).fp8_block_weights);
  CHECK(parse(with("fmt", "float8_e4m3fn")).fp8_block_weights);
  CHECK(parse(with("modules_to_not_convert", {"lm_head", "model.layers.0.mlp.gate"})).fp8_block_weights);
  CHECK_THROWS_WITH(parse(with("fmt", "e5m2")), "model config cfg.json: key 'quantization_config.fmt' is 'e5m2'; FP8 "
                                                "weights are read as e4m3 (fmt e4m3)");
  CHECK_THROWS_WITH(parse(with("weight_block_size", {64, 64})),
                    "model config cfg.json: key 'quantization_config.weight_block_size' is [64,64]; FP8 weights are "
                    "read in blocks of [128, 128]");
  CHECK_THROWS_WITH(parse(with("weight_block_size", nullptr)),
                    mt_test::contains("key 'quantization_config.weight_block_size' is null (one scale per tensor)"));
  CHECK_THROWS_WITH(parse(with("activation_scheme", "static")),
                    mt_test::contains("cfg.json: key 'quantization_config.activation_scheme' is 'static'; "));
  CHECK_THROWS_WITH(parse(with("scale_fmt", "ue8m0")),
                    mt_test::contains("cfg.json: key 'quantization_config.scale_fmt' is 'ue8m0'"));
  CHECK_THROWS_WITH(parse(with("expert_dtype", "fp4")),
                    mt_test::contains("cfg.json: key 'quantization_config.expert_dtype' is 'fp4'"));
  CHECK_THROWS_WITH(parse(with("modules_to_convert", {"model.embed_tokens"})),
                    mt_test::contains("cfg.json: key 'quantization_config.modules_to_convert' is "
                                      "[\"model.embed_tokens\"]"));
  CHECK_THROWS_WITH(parse(with("modules_to_not_convert", "lm_head")),
                    mt_test::contains("cfg.json: key 'quantization_config.modules_to_not_convert' must be a list of "
                                      "module names, got \"lm_head\""));
  CHECK_THROWS_WITH(parse(with("fmt", 3)), mt_test::contains("key 'quantization_config.fmt' must be a string, got 3"));
}

TEST_CASE("any family reads quantization_config fp8", "[fp8]") {
  const nlohmann::json llama = {{"architectures", {"LlamaForCausalLM"}}, {"vocab_size", 64}, {"hidden_size", 32},
                                {"intermediate_size", 64}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
                                {"num_key_value_heads", 2}, {"max_position_embeddings", 64},
                                {"quantization_config", {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}}}};
  CHECK(parse(llama).fp8_block_weights);
  nlohmann::json bad = llama;
  bad["quantization_config"]["activation_scheme"] = "static";
  CHECK_THROWS_WITH(parse(bad), mt_test::contains("key 'quantization_config.activation_scheme' is 'static'"));
}

namespace {

struct TempDir {
  fs::path path;
  TempDir() : path(fs::temp_directory_path() / ("mt_test_fp8_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

// An in-memory tensor handed to write_safetensors as raw bytes of its own dtype.
mt::StTensor raw_tensor(const std::string& name, mt::StDType dtype, std::vector<int64_t> shape,
                        const std::vector<std::byte>& bytes) {
  mt::StTensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = bytes.data();
  t.nbytes = bytes.size();
  return t;
}

template <typename T>
std::vector<std::byte> as_bytes(const std::vector<T>& v) {
  std::vector<std::byte> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

}  // namespace

TEST_CASE("FP8 blocks of a stacked tensor: each matrix its own scales, partial blocks in both dimensions", "[fp8]") {
  TempDir tmp;
  const int64_t E = 2, rows = 130, cols = 129;  // blocks of 128 and 2, 128 and 1
  std::vector<uint8_t> codes(static_cast<size_t>(E * rows * cols));
  for (size_t k = 0; k < codes.size(); ++k) {  // every code but the two NaNs
    const auto c = static_cast<uint8_t>((k * 37 + 11) % 256);
    codes[k] = (c & 0x7f) == 0x7f ? static_cast<uint8_t>(c - 1) : c;
  }
  const std::vector<float> scales = {0.5f, 3.0f, 1e-3f, 7.25f, -2.0f, 0.1f, 1e30f, 6e-8f};  // [2, 2, 2]
  const auto code_bytes = as_bytes(codes), scale_bytes = as_bytes(scales);
  const mt::StTensor w = raw_tensor("w", mt::StDType::F8_E4M3, {E, rows, cols}, code_bytes);
  const mt::StTensor s = raw_tensor("w_scale_inv", mt::StDType::F32, {E, 2, 2}, scale_bytes);
  mt::write_safetensors(tmp.path / "model.safetensors",
                        {{w.name, w.shape, nullptr, &w}, {s.name, s.shape, nullptr, &s}}, mt::DType::f32);
  const mt::SafetensorsModel weights(tmp.path);
  std::vector<float> dst(codes.size());
  mt::read_weight_f32(weights, *weights.find("w"), true, dst.data());
  size_t mismatched = 0;
  for (int64_t e = 0; e < E; ++e)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const size_t k = static_cast<size_t>((e * rows + i) * cols + j);
        const size_t block = static_cast<size_t>((e * 2 + i / 128) * 2 + j / 128);
        const float expected = mt::e4m3fn_to_f32(codes[k]) * scales[block];
        mismatched += bits(dst[k]) != bits(expected);
      }
  CHECK(mismatched == 0);
}

TEST_CASE("FP8 tensors the loader cannot read exactly are refused in one line", "[fp8]") {
  TempDir tmp;
  const std::vector<uint16_t> bf16(4, 0x3f80);  // 1.0
  const std::vector<float> scale = {2.0f};
  const auto bf16_bytes = as_bytes(bf16), scale_bytes = as_bytes(scale);
  const mt::StTensor w = raw_tensor("w.weight", mt::StDType::BF16, {2, 2}, bf16_bytes);
  const mt::StTensor s = raw_tensor("w.weight_scale_inv", mt::StDType::F32, {1, 1}, scale_bytes);
  mt::write_safetensors(tmp.path / "model.safetensors",
                        {{w.name, w.shape, nullptr, &w}, {s.name, s.shape, nullptr, &s}}, mt::DType::f32);
  const mt::SafetensorsModel weights(tmp.path);
  std::vector<float> dst(4);
  // A scale beside a BF16 weight: transformers would multiply it in; we refuse rather than guess.
  CHECK_THROWS_WITH(mt::read_weight_f32(weights, *weights.find("w.weight"), true, dst.data()),
                    "model dir " + tmp.path.string() + ": tensor 'w.weight' in model.safetensors has block scales "
                    "'w.weight_scale_inv' but is BF16, not F8_E4M3");
  mt::read_weight_f32(weights, *weights.find("w.weight"), false, dst.data());  // not an FP8 model: read as it is
  CHECK(dst == std::vector<float>(4, 1.0f));
}
