// `megatrain export --checkpoint FILE --out DIR [--dtype bfloat16|float32] [--overwrite]`: a checkpoint's master weights as a
// Hugging Face directory (config.json from the checkpoint, safetensors, the run's tokenizer and chat files that the
// checkpoint keeps — cli/train/model_files.h — or, for a checkpoint without them, those of the saved model directory
// when it still exists). Invariant: every parameter of the checkpoint's model is exported exactly once,
// from /params, or nothing is written; frozen tensors of a multimodal checkpoint come from its model directory.
// An existing non-empty DIR is replaced only with --overwrite, a file never (io/owned_directory.h).
#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_reader.h"
#include "cli/command.h"
#include "cli/train/chat_export.h"
#include "cli/train/model_files.h"
#include "config/config.h"
#include "core/log.h"
#include "io/safetensors.h"
#include "model/model_source.h"
#include "model/model_spec.h"
#include "model/param_layout.h"

namespace mt {
namespace {

void export_checkpoint(const std::string& file, const std::string& out, const std::string& dtype_name_arg,
                       bool overwrite) {
  const Replace replace = overwrite ? Replace::any : Replace::none;
  require_replaceable(out, replace, "export");  // before reading the checkpoint
  const CheckpointFile ckpt(file);
  ModelSpec spec = parse_model_spec(nlohmann::json::parse(ckpt.meta().model_config_json), file,
                                    true);  // accepted by the run that wrote the checkpoint
  const std::vector<std::string> saved = ckpt.tensor_names("params");
  match_tensor_names(spec, [&](const std::string& name) { return std::binary_search(saved.begin(), saved.end(), name); });
  const ParamLayout layout = make_param_layout(spec);
  // Frozen tensors (a vision tower) are not in the checkpoint: they come from the model directory it trained.
  std::optional<SafetensorsModel> weights;
  if (spec.carries_other_tensors) {
    MT_REQUIRE(std::filesystem::is_directory(ckpt.meta().model_name),
               "export {}: {} keeps its frozen tensors (vision tower, projector) in the model directory '{}', which "
               "no longer exists",
               file, spec.architecture, ckpt.meta().model_name);
    weights.emplace(ckpt.meta().model_name);
  }
  const std::vector<CarriedTensor> carried = weights ? carried_tensors(spec, layout, *weights)
                                                     : std::vector<CarriedTensor>{};
  // One region at a time from the checkpoint: the export holds one region's fp32 values, not the model's.
  std::vector<float> buffer;
  int64_t buffered = -1;
  const RegionSource region_data = [&](size_t r) -> const float* {
    if (static_cast<int64_t>(r) != buffered) {
      const Region& region = layout.regions[r];
      buffer.resize(static_cast<size_t>(region.numel));
      for (const ParamSlot& slot : region.params)
        ckpt.read_into("params", slot.hf_name, slot.shape, buffer.data() + slot.offset);
      buffered = static_cast<int64_t>(r);
    }
    return buffer.data();
  };
  // The run's tokenizer and chat files from the checkpoint; a checkpoint written without them: from its model
  // directory where that still exists.
  const ModelFiles model_files = ckpt.model_files();
  std::filesystem::path tokenizer_from;
  if (model_files.empty() && std::filesystem::is_directory(ckpt.meta().model_name)) tokenizer_from = ckpt.meta().model_name;
  if (model_files.empty() && tokenizer_from.empty())
    log::warn("export {}: no tokenizer files, chat template or generation_config.json written: the checkpoint holds "
              "none and its model directory '{}' does not exist here", out, ckpt.meta().model_name);
  const auto chat_files = [&](const std::filesystem::path& dir) {
    if (!model_files.empty()) write_model_files(dir, model_files);
    else if (!tokenizer_from.empty()) write_chat_files(dir, parse_config(ckpt.meta().config_yaml, file), spec.family);
  };
  export_hf_directory(out, spec, layout, region_data, dtype_from_name(dtype_name_arg), tokenizer_from, carried,
                      kMaxShardBytes, replace, chat_files);
  log::info("exported {} (step {}) as {} to {}", file, ckpt.meta().step, dtype_name_arg, out);
}

}  // namespace

void add_export_command(CLI::App& root, std::vector<Command>& commands) {
  auto file = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto dtype = std::make_shared<std::string>("bfloat16");
  auto overwrite = std::make_shared<bool>(false);
  CLI::App* app = root.add_subcommand("export", "write a checkpoint's weights as a Hugging Face directory");
  app->add_option("--checkpoint", *file, "checkpoint file (.h5)")->required();
  app->add_option("--out", *out, "output directory")->required();
  app->add_option("--dtype", *dtype, "bfloat16 (default) or float32")->check(CLI::IsMember({"bfloat16", "float32"}));
  app->add_flag("--overwrite", *overwrite, "replace an existing non-empty output directory (never a file)");
  commands.push_back({app, [=] { export_checkpoint(*file, *out, *dtype, *overwrite); }});
}

}  // namespace mt
