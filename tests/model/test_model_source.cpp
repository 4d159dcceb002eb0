// Model sources: resolving names (directory, .json file, fake HF cache), load_region's messages, the
// counter-based random init, and the exported HF directory.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "catch.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "model/model_source.h"

namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    static int counter = 0;
    path = fs::temp_directory_path() / ("mt_test_src_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

// Sets an environment variable for the scope, restoring the previous value.
struct ScopedEnv {
  std::string key;
  std::optional<std::string> old;
  ScopedEnv(const char* k, const std::string& value) : key(k) {
    if (const char* v = std::getenv(k)) old = v;
    ::setenv(k, value.c_str(), 1);
  }
  ~ScopedEnv() { old ? ::setenv(key.c_str(), old->c_str(), 1) : ::unsetenv(key.c_str()); }
};

void write_text(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const mt::Error& e) {
    return e.what();
  }
  return "(no error)";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

const char* kConfig = R"({
  "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 16, "hidden_size": 8,
  "intermediate_size": 12, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
  "max_position_embeddings": 32, "tie_word_embeddings": false, "dtype": "bfloat16", "zzz_custom": 7
})";

mt::ModelSpec tiny_spec() {
  mt::ModelSpec s = mt::parse_model_spec(nlohmann::json::parse(kConfig), "tiny");
  s.config_json = kConfig;
  return s;
}

// Every region of `layout` filled with distinct values.
std::vector<std::vector<float>> distinct_values(const mt::ParamLayout& layout) {
  std::vector<std::vector<float>> data;
  float x = 0.0f;
  for (const mt::Region& r : layout.regions) {
    data.emplace_back(static_cast<size_t>(r.numel));
    for (float& v : data.back()) v = (x += 0.37f) - 100.0f;
  }
  return data;
}

std::vector<const float*> pointers(const std::vector<std::vector<float>>& data) {
  std::vector<const float*> out;
  for (const auto& d : data) out.push_back(d.data());
  return out;
}

}  // namespace

TEST_CASE("resolve: a directory, a bare .json, or a hub id in the HF cache", "[model_source]") {
  TempDir tmp;
  write_text(tmp.path / "local" / "config.json", "{}");
  write_text(tmp.path / "shape.json", "{}");

  const mt::ModelSource local = mt::resolve_model_source((tmp.path / "local").string());
  CHECK(local.dir == tmp.path / "local");
  CHECK(local.config_json == tmp.path / "local" / "config.json");
  const mt::ModelSource bare = mt::resolve_model_source((tmp.path / "shape.json").string());
  CHECK(bare.dir.empty());
  CHECK(bare.config_json == tmp.path / "shape.json");
  CHECK(has(error_of([&] { mt::resolve_model_source((tmp.path / "absent.json").string()); }), "absent.json"));

  const fs::path cache = tmp.path / "hub_cache", home = tmp.path / "hf_home", user = tmp.path / "user";
  const ScopedEnv e1("HF_HUB_CACHE", cache.string()), e2("HF_HOME", home.string()), e3("HOME", user.string());

  SECTION("refs/main picks the snapshot") {
    const fs::path repo = cache / "models--acme--tiny-lm";
    write_text(repo / "refs" / "main", "abc123\n");
    write_text(repo / "snapshots" / "abc123" / "config.json", "{}");
    write_text(repo / "snapshots" / "zzz999" / "config.json", "{}");
    const mt::ModelSource s = mt::resolve_model_source("acme/tiny-lm");
    CHECK(s.dir == repo / "snapshots" / "abc123");
    CHECK(s.config_json == repo / "snapshots" / "abc123" / "config.json");
  }
  SECTION("without refs/main the newest snapshot, looked up under HF_HOME/hub") {
    const fs::path repo = home / "hub" / "models--acme--tiny-lm";
    write_text(repo / "snapshots" / "old" / "config.json", "{}");
    write_text(repo / "snapshots" / "new" / "config.json", "{}");
    fs::last_write_time(repo / "snapshots" / "old", fs::file_time_type::clock::now() - std::chrono::hours(1));
    CHECK(mt::resolve_model_source("acme/tiny-lm").dir == repo / "snapshots" / "new");
  }
  SECTION("the default cache under HOME") {
    const fs::path repo = user / ".cache" / "huggingface" / "hub" / "models--acme--tiny-lm";
    write_text(repo / "snapshots" / "only" / "config.json", "{}");
    CHECK(mt::resolve_model_source("acme/tiny-lm").dir == repo / "snapshots" / "only");
  }
  SECTION("not in the cache: the shape we ship under the lowercase name") {
    write_text(tmp.path / "home" / "configs" / "models" / "tiny-lm-7b.json", "{}");
    const ScopedEnv e4("MEGATRAIN_HOME", (tmp.path / "home").string());
    const mt::ModelSource s = mt::resolve_model_source("Acme/Tiny-LM-7B");
    CHECK(s.dir.empty());
    CHECK(s.config_json == tmp.path / "home" / "configs" / "models" / "tiny-lm-7b.json");
  }
  SECTION("not found names the id and every place searched") {
    const std::string msg = error_of([] { mt::resolve_model_source("acme/absent"); });
    CHECK(has(msg, "acme/absent"));
    CHECK(has(msg, (cache / "models--acme--absent").string()));
    CHECK(has(msg, (home / "hub" / "models--acme--absent").string()));
    CHECK(has(msg, (user / ".cache" / "huggingface" / "hub" / "models--acme--absent").string()));
  }
}

TEST_CASE("load_region names the missing or mis-shaped tensor", "[model_source]") {
  TempDir tmp;
  const mt::ParamLayout layout = mt::make_param_layout(tiny_spec());
  const mt::Region& layer = layout.layer(0);
  std::vector<std::vector<float>> values;
  std::vector<mt::StWriteTensor> tensors;
  for (const mt::ParamSlot& p : layer.params) {
    values.emplace_back(static_cast<size_t>(p.numel), static_cast<float>(values.size()));
    tensors.push_back({p.hf_name, p.shape, values.back().data()});
  }
  std::vector<float> dst(static_cast<size_t>(layer.numel), -1.0f);

  SECTION("complete: every slot lands at its offset") {
    mt::write_safetensors(tmp.path / "model.safetensors", tensors, mt::DType::f32);
    mt::load_region(layer, mt::SafetensorsModel(tmp.path), dst.data());
    for (size_t i = 0; i < layer.params.size(); ++i) CHECK(dst[static_cast<size_t>(layer.params[i].offset)] == i);
  }
  SECTION("missing") {
    tensors.erase(tensors.begin() + 10);  // mlp.up_proj.weight
    mt::write_safetensors(tmp.path / "model.safetensors", tensors, mt::DType::f32);
    const std::string msg = error_of([&] { mt::load_region(layer, mt::SafetensorsModel(tmp.path), dst.data()); });
    CHECK(msg == "model dir " + tmp.path.string() + ": tensor 'model.layers.0.mlp.up_proj.weight' not found");
  }
  SECTION("wrong shape") {
    tensors[1].shape = {4, 16};  // q_proj.weight should be [8, 8]
    mt::write_safetensors(tmp.path / "model.safetensors", tensors, mt::DType::bf16);
    const std::string msg = error_of([&] { mt::load_region(layer, mt::SafetensorsModel(tmp.path), dst.data()); });
    CHECK(has(msg, "'model.layers.0.self_attn.q_proj.weight'"));
    CHECK(has(msg, "model.safetensors"));
    CHECK(has(msg, "has shape [4, 16], expected [8, 8]"));
  }
}

TEST_CASE("random init: deterministic per (seed, name, element), normal(0, range)", "[model_source]") {
  mt::Region r;
  r.params = {{"a.weight", {256, 256}, 0, 65536, true, mt::InitKind::normal, {}},
              {"b.weight", {256, 256}, 65536, 65536, true, mt::InitKind::normal, {}},
              {"n.weight", {8}, 131072, 8, false, mt::InitKind::ones, {}},
              {"c.bias", {8}, 131080, 8, false, mt::InitKind::zeros, {}}};
  r.numel = 131088;
  std::vector<float> x(static_cast<size_t>(r.numel)), y(x.size()), z(x.size());
  mt::init_region_random(r, 0.02, 42, x.data());
  mt::init_region_random(r, 0.02, 42, y.data());
  mt::init_region_random(r, 0.02, 43, z.data());
  CHECK(x == y);

  // Same name at another offset: same values (the position in the region plays no part).
  mt::Region moved;
  moved.params = {{"b.weight", {256, 256}, 0, 65536, true, mt::InitKind::normal, {}}};
  moved.numel = 65536;
  std::vector<float> b(65536);
  mt::init_region_random(moved, 0.02, 42, b.data());
  CHECK(std::equal(b.begin(), b.end(), x.begin() + 65536));

  int64_t same_name = 0, same_seed = 0;
  double sum = 0.0, sum_sq = 0.0;
  for (size_t i = 0; i < 65536; ++i) {
    same_name += x[i] == x[i + 65536];
    same_seed += x[i] == z[i];
    sum += x[i];
    sum_sq += static_cast<double>(x[i]) * x[i];
  }
  CHECK(same_name < 10);
  CHECK(same_seed < 10);
  const double mean = sum / 65536, std = std::sqrt(sum_sq / 65536 - mean * mean);
  CHECK(std::abs(mean) < 0.02 * 5 / 256);  // 5 standard errors
  CHECK(std::abs(std - 0.02) < 0.02 * 0.02);
  for (size_t i = 131072; i < 131080; ++i) CHECK(x[i] == 1.0f);
  for (size_t i = 131080; i < 131088; ++i) CHECK(x[i] == 0.0f);
}

TEST_CASE("export writes a complete HF directory and replaces an old one", "[model_source]") {
  TempDir tmp;
  const mt::ModelSpec spec = tiny_spec();
  const mt::ParamLayout layout = mt::make_param_layout(spec);
  const auto data = distinct_values(layout);
  const fs::path tok = tmp.path / "tok", out = tmp.path / "export";
  write_text(tok / "tokenizer.json", "{\"model\": {}}");
  write_text(tok / "merges.txt", "a b\n");
  write_text(tok / "unrelated.bin", "x");
  write_text(out / "stale.txt", "not ours");
  // A directory holding a file megatrain did not write is refused, untouched; one of ours is replaced.
  CHECK_THROWS_WITH(mt::export_hf_directory(out, spec, layout, pointers(data), mt::DType::f32, tok),
                    mt_test::contains("holds 'stale.txt', which megatrain did not write"));
  CHECK(read_text(out / "stale.txt") == "not ours");
  fs::remove(out / "stale.txt");

  for (const auto dtype : {mt::DType::f32, mt::DType::bf16}) {
    mt::export_hf_directory(out, spec, layout, pointers(data), dtype, tok);
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(out)) files.push_back(e.path().filename().string());
    std::sort(files.begin(), files.end());
    CHECK(files == std::vector<std::string>{"config.json", "megatrain_manifest.json", "merges.txt",
                                            "model.safetensors", "tokenizer.json"});
    CHECK(read_text(out / "merges.txt") == "a b\n");
    std::vector<std::string> siblings;
    for (const auto& e : fs::directory_iterator(tmp.path)) siblings.push_back(e.path().filename().string());
    std::sort(siblings.begin(), siblings.end());
    CHECK(siblings == std::vector<std::string>{"export", "tok"});  // no temporary or old directory left

    const auto config = nlohmann::json::parse(read_text(out / "config.json"));
    CHECK(config["torch_dtype"] == std::string(mt::dtype_name(dtype)));
    CHECK(config["dtype"] == std::string(mt::dtype_name(dtype)));
    CHECK(config["zzz_custom"] == 7);
    CHECK(mt::load_model_spec(out / "config.json").num_layers == 2);

    const mt::SafetensorsModel weights(out);
    CHECK(weights.names().size() == 1 + 2 * 12 + 2);
    for (size_t r = 0; r < layout.regions.size(); ++r) {
      std::vector<float> back(data[r].size());
      mt::load_region(layout.regions[r], weights, back.data());
      for (size_t i = 0; i < back.size(); ++i)
        REQUIRE(back[i] == (dtype == mt::DType::f32 ? data[r][i] : mt::round_to_bf16(data[r][i])));
    }
  }
}

TEST_CASE("export of a tied model has no lm_head", "[model_source]") {
  TempDir tmp;
  mt::ModelSpec spec = tiny_spec();
  spec.tie_word_embeddings = true;
  const mt::ParamLayout layout = mt::make_param_layout(spec);
  const auto data = distinct_values(layout);
  mt::export_hf_directory(tmp.path / "out", spec, layout, pointers(data), mt::DType::f32, fs::path());
  const mt::SafetensorsModel weights(tmp.path / "out");
  CHECK(weights.find("lm_head.weight") == nullptr);
  CHECK(weights.find("model.norm.weight") != nullptr);
  CHECK_FALSE(fs::exists(tmp.path / "out" / "tokenizer.json"));
}

TEST_CASE("export from a region source asks for the regions in order, through one buffer", "[model_source]") {
  // As the trainer exports a master that lives on the state tier: one region's buffer, overwritten per region.
  TempDir tmp;
  const mt::ModelSpec spec = tiny_spec();
  const mt::ParamLayout layout = mt::make_param_layout(spec);
  const auto data = distinct_values(layout);
  std::vector<float> buffer;
  std::vector<size_t> loaded;  // the regions copied into the buffer, in order
  const mt::RegionSource source = [&](size_t r) -> const float* {
    if (loaded.empty() || loaded.back() != r) {
      buffer.assign(data[r].begin(), data[r].end());
      loaded.push_back(r);
    }
    return buffer.data();
  };
  const int64_t shard_bytes = layout.total_numel * 2 / 3;  // across shard files too
  mt::export_hf_directory(tmp.path / "out", spec, layout, source, mt::DType::bf16, fs::path(), {}, shard_bytes,
                          mt::Replace::ours);
  std::vector<size_t> expected(layout.regions.size());
  for (size_t r = 0; r < expected.size(); ++r) expected[r] = r;
  CHECK(loaded == expected);  // each region read once
  const mt::SafetensorsModel weights(tmp.path / "out");
  for (size_t r = 0; r < layout.regions.size(); ++r) {
    std::vector<float> back(data[r].size());
    mt::load_region(layout.regions[r], weights, back.data());
    for (size_t i = 0; i < back.size(); ++i) REQUIRE(back[i] == mt::round_to_bf16(data[r][i]));
  }
}

TEST_CASE("export above the shard size writes shards and an index", "[model_source]") {
  TempDir tmp;
  const mt::ModelSpec spec = tiny_spec();
  const mt::ParamLayout layout = mt::make_param_layout(spec);
  const auto data = distinct_values(layout);
  const int64_t shard_bytes = layout.total_numel * 2 / 3;  // fp32: at least two shards
  mt::export_hf_directory(tmp.path / "out", spec, layout, pointers(data), mt::DType::f32, fs::path(), {}, shard_bytes);
  CHECK_FALSE(fs::exists(tmp.path / "out" / "model.safetensors"));
  const auto index = nlohmann::json::parse(read_text(tmp.path / "out" / "model.safetensors.index.json"));
  CHECK(index["metadata"]["total_size"] == layout.total_numel * 4);
  std::set<std::string> shards;
  for (const auto& [name, file] : index["weight_map"].items()) shards.insert(file.get<std::string>());
  CHECK(shards.size() >= 2);
  for (const auto& s : shards) {
    CHECK(fs::exists(tmp.path / "out" / s));
    CHECK(static_cast<int64_t>(fs::file_size(tmp.path / "out" / s)) <= shard_bytes + 4096);  // + header
  }
  const mt::SafetensorsModel weights(tmp.path / "out");
  for (size_t r = 0; r < layout.regions.size(); ++r) {
    std::vector<float> back(data[r].size());
    mt::load_region(layout.regions[r], weights, back.data());
    CHECK(back == data[r]);
  }
}

TEST_CASE("export writes a kv-grouped tensor in the HF row order; load_region regroups it", "[model_source]") {
  TempDir tmp;
  nlohmann::json config = nlohmann::json::parse(kConfig);
  config["num_attention_heads"] = 4;  // head_dim 2, 2 query heads per kv head
  config["num_key_value_heads"] = 2;
  mt::ModelSpec spec = mt::parse_model_spec(config, "grouped");
  spec.names.qkv = "attention.wqkv";  // InternLM2: per kv head its q heads, its k, its v
  spec.names.qkv_grouped = true;
  const mt::ParamLayout layout = mt::make_param_layout(spec);
  REQUIRE(layout.layer(0).params[1].hf_name == "model.layers.0.attention.wqkv.weight");
  REQUIRE_FALSE(layout.layer(0).params[1].rows.parts.empty());
  const auto data = distinct_values(layout);
  mt::export_hf_directory(tmp.path / "out", spec, layout, pointers(data), mt::DType::f32, fs::path());
  const mt::SafetensorsModel weights(tmp.path / "out");
  for (int64_t i = 0; i < 2; ++i) {
    INFO("layer " << i);
    const mt::Region& region = layout.layer(i);
    const std::vector<float>& stored = data[static_cast<size_t>(i) + 1];
    // The file holds the HF order: read it through a copy of the region without the regrouping.
    mt::Region as_saved = region;
    for (mt::ParamSlot& p : as_saved.params) p.rows = {};
    std::vector<float> file(stored.size()), back(stored.size());
    mt::load_region(as_saved, weights, file.data());
    for (const mt::ParamSlot& p : region.params) {
      INFO(p.hf_name);
      std::vector<float> hf(static_cast<size_t>(p.numel));
      mt::store_rows_to_hf(p, stored.data() + p.offset, hf.data());
      CHECK(std::equal(hf.begin(), hf.end(), file.begin() + p.offset));
      if (!p.rows.parts.empty()) CHECK_FALSE(std::equal(hf.begin(), hf.end(), stored.begin() + p.offset));
    }
    mt::load_region(region, weights, back.data());
    CHECK(back == stored);
  }
}

TEST_CASE("random init of a regrouped slot draws element e of the HF tensor, then regroups", "[model_source]") {
  mt::Region plain, grouped;
  mt::ParamSlot slot;
  slot.hf_name = "model.layers.0.attention.wqkv.weight";
  slot.shape = {8, 3};  // 2 kv groups of [q 2 rows, k 1, v 1]
  slot.numel = 24;
  slot.weight_decay = true;
  plain.params.push_back(slot);
  plain.numel = 24;
  slot.rows = {2, {2, 1, 1}};
  grouped.params.push_back(slot);
  grouped.numel = 24;
  std::vector<float> hf(24), store(24), expected(24);
  mt::init_region_random(plain, 0.02, 7, hf.data());
  mt::init_region_random(grouped, 0.02, 7, store.data());
  mt::hf_rows_to_store(grouped.params[0], hf.data(), expected.data());
  CHECK(store == expected);
  CHECK(store != hf);
}
