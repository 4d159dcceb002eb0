// Model sources: resolving a name to a HF directory or config file, filling regions from safetensors or by
// counter-based random init, and exporting a HF directory. Invariant: a filled region has every slot written;
// random values depend only on (seed, tensor name, element index); an export leaves a complete directory or none.
#include "model/model_source.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <numbers>
#include <set>
#include <string_view>

#include "core/error.h"
#include "core/log.h"
#include "io/safetensors.h"
#include "model/fp8_blocks.h"
#include "model/mxfp4.h"

namespace mt {
namespace fs = std::filesystem;
namespace {


// "org/name" or "name": what the hub accepts as a model id, and nothing that reads as a path.
bool looks_like_hub_id(const std::string& name) {
  if (name.empty() || name.front() == '.' || name.front() == '/' || name.back() == '/') return false;
  if (name.find("..") != std::string::npos || std::count(name.begin(), name.end(), '/') > 1) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("-_./", c); });
}

std::vector<fs::path> hub_cache_roots() {
  std::vector<fs::path> roots;
  const auto env = [](const char* key) -> std::string {
    const char* v = std::getenv(key);
    return v ? v : "";
  };
  if (!env("HF_HUB_CACHE").empty()) roots.emplace_back(env("HF_HUB_CACHE"));
  if (!env("HF_HOME").empty()) roots.push_back(fs::path(env("HF_HOME")) / "hub");
  if (!env("HOME").empty()) roots.push_back(fs::path(env("HOME")) / ".cache" / "huggingface" / "hub");
  return roots;
}

// The snapshot refs/main points at, else the newest snapshot holding a config.json; "" if none.
fs::path pick_snapshot(const fs::path& repo) {
  std::ifstream ref(repo / "refs" / "main");
  std::string revision;
  if (ref >> revision && fs::is_regular_file(repo / "snapshots" / revision / "config.json"))
    return repo / "snapshots" / revision;
  fs::path best;
  fs::file_time_type best_time{};
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(repo / "snapshots", ec)) {
    if (!fs::is_regular_file(entry.path() / "config.json")) continue;
    const auto t = fs::last_write_time(entry.path(), ec);
    if (best.empty() || t > best_time) {
      best = entry.path();
      best_time = t;
    }
  }
  return best;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

// Elements 2k and 2k+1 of a N(0, std) tensor keyed by `key`: two uniforms from counter k, then Box–Muller
// (cosine for the even element, sine for the odd one).
void normal_pair(uint64_t key, int64_t k, double std, float* out, bool both) {
  const uint64_t h1 = splitmix64(splitmix64(2 * static_cast<uint64_t>(k)) ^ key);
  const uint64_t h2 = splitmix64(splitmix64(2 * static_cast<uint64_t>(k) + 1) ^ key);
  const double u1 = static_cast<double>((h1 >> 11) + 1) * 0x1p-53;  // (0, 1]
  const double u2 = static_cast<double>(h2 >> 11) * 0x1p-53;        // [0, 1)
  const double radius = std * std::sqrt(-2.0 * std::log(u1)), angle = 2.0 * std::numbers::pi * u2;
  out[0] = static_cast<float>(radius * std::cos(angle));
  if (both) out[1] = static_cast<float>(radius * std::sin(angle));
}

void fsync_path(const fs::path& p, bool directory) {
  const int fd = ::open(p.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  MT_REQUIRE(fd >= 0, "export {}: cannot open to sync", p.string());
  const int rc = ::fsync(fd);
  ::close(fd);
  MT_REQUIRE(rc == 0, "export {}: fsync failed", p.string());
}

// The tensors in shards of at most max_shard_bytes each (in layout order); one shard: model.safetensors.
void write_shards(const fs::path& dir, const std::vector<StWriteTensor>& tensors, DType dtype,
                  int64_t max_shard_bytes) {
  std::vector<std::vector<StWriteTensor>> shards(1);
  int64_t shard_bytes = 0, total_bytes = 0;
  for (const StWriteTensor& t : tensors) {
    const auto bytes = static_cast<int64_t>(t.nbytes(dtype));
    if (!shards.back().empty() && shard_bytes + bytes > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(t);
    shard_bytes += bytes;
    total_bytes += bytes;
  }
  if (shards.size() == 1) {
    write_safetensors(dir / "model.safetensors", tensors, dtype);
    return;
  }
  nlohmann::ordered_json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", nlohmann::ordered_json::object()}};
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name = fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
    write_safetensors(dir / name, shards[i], dtype);
    for (const StWriteTensor& t : shards[i]) index["weight_map"][t.name] = name;
  }
  write_file_durably(dir / "model.safetensors.index.json", index.dump(2) + "\n");
}

void write_export(const fs::path& dir, const ModelSpec& spec, const ParamLayout& layout, const RegionSource& region,
                  DType dtype, const fs::path& tokenizer_from, const std::vector<CarriedTensor>& carried,
                  int64_t max_shard_bytes) {
  nlohmann::ordered_json config;
  try {
    config = nlohmann::ordered_json::parse(spec.config_json);
  } catch (const nlohmann::json::exception& e) {
    MT_REQUIRE(false, "export {}: the model's config.json text is not valid JSON: {}", dir.string(), e.what());
  }
  config["torch_dtype"] = dtype_name(dtype);
  config["dtype"] = dtype_name(dtype);
  // Tensors loaded from MXFP4 or FP8 blocks were dequantised: the export holds them unquantised under their plain
  // names, which transformers loads without quantization_config.
  if (config.contains("quantization_config") && config["quantization_config"].is_object()) {
    const std::string method = config["quantization_config"].value("quant_method", "");
    if (method == "mxfp4" || method == "fp8") config.erase("quantization_config");
  }
  write_file_durably(dir / "config.json", config.dump(2) + "\n");

  // Each tensor is made when its turn comes (regrouped slots back in the HF row order), so the writer asks for the
  // regions in order and holds one tensor at a time.
  std::vector<StWriteTensor> tensors;
  for (size_t r = 0; r < layout.regions.size(); ++r)
    for (const ParamSlot& slot : layout.regions[r].params) {
      auto fill = [&region, &slot, r](float* dst) {
        const float* values = region(r) + slot.offset;
        if (!slot.reordered()) std::copy(values, values + slot.numel, dst);
        else store_rows_to_hf(slot, values, dst);
      };
      tensors.push_back({slot.hf_name, slot.shape, nullptr, nullptr, fill});
    }
  for (const CarriedTensor& c : carried) {
    if (!c.scale_inv) {
      tensors.push_back({c.tensor->name, c.tensor->shape, nullptr, c.tensor});
      continue;
    }
    tensors.push_back({c.tensor->name, c.tensor->shape, nullptr, nullptr,
                       [c](float* dst) { dequantise_fp8_blocks(*c.tensor, *c.scale_inv, dst); }});
  }
  write_shards(dir, tensors, dtype, max_shard_bytes);

  if (tokenizer_from.empty()) return;
  for (const std::string& name : tokenizer_file_names()) {
    if (!fs::is_regular_file(tokenizer_from / name)) continue;
    std::error_code ec;
    fs::copy_file(tokenizer_from / name, dir / name, fs::copy_options::overwrite_existing, ec);
    MT_REQUIRE(!ec, "export {}: cannot copy {}: {}", dir.string(), (tokenizer_from / name).string(), ec.message());
    fsync_path(dir / name, false);
  }
}

// The shape we ship for hub id org/Name: configs/models/<name, lowercase>.json under $MEGATRAIN_HOME, the working
// directory, the binary's directory and its parent, or the installed share/megatrain beside bin/ ("" when none).
fs::path shipped_shape(const std::string& hub_id) {
  std::string stem = hub_id.substr(hub_id.find('/') + 1);
  std::transform(stem.begin(), stem.end(), stem.begin(), [](unsigned char c) { return std::tolower(c); });
  std::vector<fs::path> roots;
  if (const char* home = std::getenv("MEGATRAIN_HOME")) roots.emplace_back(home);
  roots.emplace_back(".");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    roots.insert(roots.end(), {exe.parent_path(), exe.parent_path().parent_path(),
                               exe.parent_path().parent_path() / "share" / "megatrain"});
  for (const fs::path& root : roots) {
    const fs::path file = root / "configs" / "models" / (stem + ".json");
    if (fs::is_regular_file(file)) return file;
  }
  return {};
}

}  // namespace

const std::vector<std::string>& tokenizer_file_names() {
  static const std::vector<std::string> names = {
      "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
      "merges.txt",     "tokenizer.model",       "generation_config.json",  "chat_template.jinja",
  };
  return names;
}

ModelSource resolve_model_source(const std::string& name) {
  const fs::path p(name);
  if (fs::is_directory(p)) {
    MT_REQUIRE(fs::is_regular_file(p / "config.json"), "model dir {}: no config.json", name);
    return {p, p / "config.json"};
  }
  if (p.extension() == ".json") {
    MT_REQUIRE(fs::is_regular_file(p), "model config {}: no such file", name);
    return {fs::path(), p};
  }
  MT_REQUIRE(looks_like_hub_id(name), "model '{}': not a directory, a .json file or a hub id org/name", name);
  std::string repo_dir = "models--" + name;
  for (size_t i = repo_dir.find('/'); i != std::string::npos; i = repo_dir.find('/')) repo_dir.replace(i, 1, "--");
  std::string searched;
  for (const fs::path& root : hub_cache_roots()) {
    searched += (searched.empty() ? "" : ", ") + (root / repo_dir).string();
    if (!fs::is_directory(root / repo_dir)) continue;
    const fs::path snapshot = pick_snapshot(root / repo_dir);
    if (!snapshot.empty()) return {snapshot, snapshot / "config.json"};
  }
  if (const fs::path shape = shipped_shape(name); !shape.empty()) {
    log::info("model '{}': not in the Hugging Face cache; the shape we ship, {} (config only: model.init random)",
              name, shape.string());
    return {fs::path(), shape};
  }
  MT_REQUIRE(false,
             "model '{}': no such directory, no snapshot with config.json in the Hugging Face cache (searched {}), "
             "and no shape of that name in configs/models/",
             name, searched.empty() ? "nothing: HF_HUB_CACHE, HF_HOME and HOME are unset" : searched);
  return {};
}

void load_region(const Region& region, const SafetensorsModel& weights, float* dst, bool fp8_block_weights) {
  for (const ParamSlot& slot : region.params) {
    const StTensor* t = weights.find(slot.hf_name);
    if (t == nullptr && slot.expert_columns.experts > 0 && slot.shape.size() == 3 && has_mxfp4(weights, slot.hf_name)) {
      std::vector<float> hf(static_cast<size_t>(slot.numel));  // GPT-OSS's published experts: dequantised on load
      read_mxfp4(weights, slot.hf_name, slot.shape, hf.data());
      hf_rows_to_store(slot, hf.data(), dst + slot.offset);
      continue;
    }
    MT_REQUIRE(t != nullptr, "model dir {}: tensor '{}' not found", weights.dir().string(), slot.hf_name);
    MT_REQUIRE(t->shape == slot.shape, "model dir {}: tensor '{}' in {} has shape {}, expected {}",
               weights.dir().string(), slot.hf_name, t->file.filename().string(), shape_text(t->shape),
               shape_text(slot.shape));
    if (!slot.reordered()) {
      read_weight_f32(weights, *t, fp8_block_weights, dst + slot.offset);
    } else {  // rows regrouped into the store's order (param_layout.h)
      std::vector<float> hf(static_cast<size_t>(slot.numel));
      read_weight_f32(weights, *t, fp8_block_weights, hf.data());
      hf_rows_to_store(slot, hf.data(), dst + slot.offset);
    }
  }
}

std::vector<CarriedTensor> carried_tensors(const ModelSpec& spec, const ParamLayout& layout,
                                           const SafetensorsModel& weights) {
  std::vector<CarriedTensor> out;
  if (!spec.carries_other_tensors) return out;
  std::set<std::string> held;
  for (const Region& r : layout.regions)
    for (const ParamSlot& slot : r.params) held.insert(slot.hf_name);
  // An F8_E4M3 tensor's scales travel with it (a held one's are spent on load).
  std::set<std::string> scales;
  for (const std::string& name : weights.names())
    if (weights.find(name)->dtype == StDType::F8_E4M3) scales.insert(fp8_scale_name(name));
  for (const std::string& name : weights.names()) {
    if (held.count(name) || scales.count(name)) continue;
    const StTensor* t = weights.find(name);
    out.push_back({t, fp8_scale_of(weights, *t, spec.fp8_block_weights)});
  }
  return out;
}

void init_region_random(const Region& region, double initializer_range, uint64_t seed, float* dst) {
  for (const ParamSlot& slot : region.params) {
    float* out = dst + slot.offset;
    const int64_t n = slot.numel;
    if (slot.init == InitKind::a_log) {  // log(U(0.01, 16)), transformers' Gated DeltaNet A_log
      const uint64_t key = splitmix64(seed ^ splitmix64(fnv1a(slot.hf_name)));
      for (int64_t k = 0; k < n; ++k) {
        const double u = static_cast<double>(splitmix64(key + static_cast<uint64_t>(k)) >> 11) * 0x1.0p-53;
        out[k] = static_cast<float>(std::log(0.01 + u * (16.0 - 0.01)));
      }
      continue;
    }
    if (slot.init != InitKind::normal) {
      std::fill(out, out + n, slot.init == InitKind::ones ? 1.0f : 0.0f);
      continue;
    }
    // Element e of the HF tensor: drawn in HF row order, then regrouped where the store orders rows otherwise.
    std::vector<float> hf_order(!slot.reordered() ? 0 : static_cast<size_t>(n));
    float* values = hf_order.empty() ? out : hf_order.data();
    const uint64_t key = splitmix64(seed ^ splitmix64(fnv1a(slot.hf_name)));
#pragma omp parallel for schedule(static) if (n > (int64_t{1} << 16))
    for (int64_t k = 0; k < (n + 1) / 2; ++k) normal_pair(key, k, initializer_range, values + 2 * k, 2 * k + 1 < n);
    if (!hf_order.empty()) hf_rows_to_store(slot, values, out);
  }
}

void export_hf_directory(const fs::path& out, const ModelSpec& spec, const ParamLayout& layout,
                         const RegionSource& region, DType dtype, const fs::path& tokenizer_from,
                         const std::vector<CarriedTensor>& carried, int64_t max_shard_bytes, Replace replace,
                         const std::function<void(const fs::path& dir)>& add_files) {
  write_owned_directory(out, replace, "export", [&](const fs::path& dir) {
    write_export(dir, spec, layout, region, dtype, tokenizer_from, carried, max_shard_bytes);
    if (add_files) add_files(dir);
  });
}

void export_hf_directory(const fs::path& out, const ModelSpec& spec, const ParamLayout& layout,
                         const std::vector<const float*>& region_data, DType dtype, const fs::path& tokenizer_from,
                         const std::vector<CarriedTensor>& carried, int64_t max_shard_bytes, Replace replace,
                         const std::function<void(const fs::path& dir)>& add_files) {
  MT_ASSERT(region_data.size() == layout.regions.size(), "{} region pointers for {} regions", region_data.size(),
            layout.regions.size());
  export_hf_directory(out, spec, layout, [&](size_t r) { return region_data[r]; }, dtype, tokenizer_from, carried,
                      max_shard_bytes, replace, add_files);
}

}  // namespace mt
