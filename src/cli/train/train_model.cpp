// The model of a train run, in and out (see train_model.h).
#include "cli/train/train_model.h"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>
#include <string>

#include "core/error.h"
#include "core/log.h"
#include "model/param_layout.h"

namespace mt {
namespace {

// model.name naming a checkpoint file (*.h5): the model comes from its /meta and /params.
bool names_checkpoint(const std::string& name) {
  return name.ends_with(".h5") && std::filesystem::is_regular_file(name);
}

// The model source of a checkpoint: its config.json text, and the model directory it was saved from (tokenizer
// files) where that still exists.
ModelSource checkpoint_model_source(const CheckpointFile& checkpoint) {
  ModelSource source;
  source.config_json = checkpoint.path();
  const std::filesystem::path saved_from = checkpoint.meta().model_name;
  if (std::filesystem::is_regular_file(saved_from / "config.json")) source.dir = saved_from;
  return source;
}

}  // namespace

TrainModel read_train_model(const Config& c) {
  TrainModel m;
  std::optional<CheckpointFile>& init_from = m.init_from;
  if (names_checkpoint(c.model.name)) init_from.emplace(c.model.name);
  const ModelSource& source = m.source =
      init_from ? checkpoint_model_source(*init_from) : resolve_model_source(c.model.name);
  ModelSpec& parsed = m.spec = init_from ? parse_model_spec(nlohmann::json::parse(init_from->meta().model_config_json),
                                                            c.model.name, c.model.trust_remote_code)
                                         : load_model_spec(source.config_json, c.model.trust_remote_code);
  // The model's safetensors (mapped for the run where they give the weights or carry frozen tensors), and the
  // names its tensors go by.
  std::optional<SafetensorsModel>& weights = m.weights;
  const bool pretrained = !init_from && c.model.init != "random";
  if (pretrained) {
    MT_REQUIRE(!source.dir.empty(),
               "model.name: '{}' is a config file without weights; use a model directory or set model.init: random",
               c.model.name);
    weights.emplace(source.dir);
    match_tensor_names(parsed, [&](const std::string& name) { return weights->find(name) != nullptr; });
  } else if (init_from) {
    const std::vector<std::string> saved = init_from->tensor_names("params");
    match_tensor_names(parsed, [&](const std::string& name) { return std::binary_search(saved.begin(), saved.end(), name); });
    if (parsed.carries_other_tensors && !source.dir.empty()) weights.emplace(source.dir);
  }
  MT_REQUIRE(!parsed.carries_other_tensors || weights,
             "model.name: '{}' ({}) holds more than the text model; its other tensors (vision tower, projector) come "
             "from the model directory, so it cannot start from random weights or a checkpoint whose model "
             "directory is gone",
             c.model.name, parsed.architecture);
  return m;
}

void fill_master_weights(const Config& c, const ModelSpec& spec, const std::optional<CheckpointFile>& init_from,
                         const SafetensorsModel* weights, HostStore& store) {
  const ParamLayout& layout = store.layout();
  // Each region straight into the store's master, or through one region-sized buffer where the master is on the
  // state tier (the Adam moments there start as the tier's zeros).
  std::vector<float> staged(store.in_ram(StateKind::master) ? 0 : static_cast<size_t>(layout.largest_region_numel));
  for (int64_t r = 0; r < store.num_regions(); ++r) {
    const Region& region = layout.regions[static_cast<size_t>(r)];
    float* master = staged.empty() ? store.master(r) : staged.data();
    if (init_from) {
      for (const ParamSlot& slot : region.params)
        init_from->read_into("params", slot.hf_name, slot.shape, master + slot.offset);
    } else if (c.model.init == "random") {
      init_region_random(region, spec.initializer_range, c.training.seed, master);
    } else {
      load_region(region, *weights, master, spec.fp8_block_weights);
    }
    if (!staged.empty()) store.write_region_state(r, StateKind::master, master);
    store.refresh_stream_copy(r, master);
  }
  if (init_from)
    log::info("initialised the weights from checkpoint {} (step {}); optimizer state starts fresh",
              init_from->path().string(), init_from->meta().step);
}

void log_train_model(const Config& c, const ModelSpec& spec, const ParamLayout& layout,
                     const std::vector<CarriedTensor>& carried) {
  std::string banner;
  for (size_t at = 0; at < c.yaml_text.size();) {
    const size_t end = std::min(c.yaml_text.find('\n', at), c.yaml_text.size());
    banner += "\n    " + c.yaml_text.substr(at, end - at);
    at = end + 1;
  }
  log::info("megatrain {} train, configuration {}:{}", MEGATRAIN_VERSION,
            c.source.empty() ? std::string("(built in)") : c.source.string(), banner);
  log::info("model {} ({}): {} layers ({}), hidden {}, vocab {}, {:.3f} M parameters", c.model.name,
            spec.architecture, spec.num_layers, describe_layers(spec), spec.hidden_size, spec.vocab_size,
            static_cast<double>(layout.total_numel) / 1e6);
  if (!carried.empty()) {
    int64_t frozen = 0, fp8 = 0;
    std::set<std::string> groups;
    for (const CarriedTensor& c : carried) {
      frozen += c.tensor->numel();
      fp8 += c.scale_inv != nullptr;
      groups.insert(c.tensor->name.substr(0, c.tensor->name.find('.', c.tensor->name.find('.') + 1)));
    }
    log::info("left frozen and carried through export unchanged: {} tensors, {:.3f} M parameters ({}){}",
              carried.size(), static_cast<double>(frozen) / 1e6, fmt::format("{}", fmt::join(groups, ", ")),
              fp8 ? fmt::format("; {} of them FP8 blocks, exported dequantised", fp8) : "");
  }
}

void export_master_weights(const std::filesystem::path& target, HostStore& store, const ModelSpec& spec, DType dtype,
                           const std::vector<CarriedTensor>& carried, const ModelFiles& model_files) {
  store.sync_resident();
  std::vector<float> tier_region;
  int64_t tier_region_index = -1;
  const RegionSource region = [&](size_t r) -> const float* {
    const auto i = static_cast<int64_t>(r);
    if (store.in_ram(StateKind::master)) return store.master(i);
    if (i != tier_region_index) {
      tier_region.resize(static_cast<size_t>(store.numel(i)));
      store.read_region_state(i, StateKind::master, tier_region.data());
      tier_region_index = i;
    }
    return tier_region.data();
  };
  export_hf_directory(target, spec, store.layout(), region, dtype, {}, carried, kMaxShardBytes, Replace::ours,
                      [&](const std::filesystem::path& dir) { write_model_files(dir, model_files); });
}

}  // namespace mt
