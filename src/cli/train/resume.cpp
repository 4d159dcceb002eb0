// Choosing and checking the checkpoint a run resumes from (see resume.h).
#include "cli/train/resume.h"

#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <vector>
#include <string>

#include "cli/train/hf_checkpoints.h"
#include "config/yaml_depth.h"
#include "core/error.h"
#include "core/log.h"

namespace mt {
namespace {

void flatten(const YAML::Node& node, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (node.IsMap()) {
    for (const auto& kv : node) flatten(kv.second, prefix.empty() ? kv.first.as<std::string>() : prefix + "." + kv.first.as<std::string>(), out);
  } else if (node.IsScalar()) {
    out[prefix] = node.as<std::string>();
  } else {
    out[prefix] = YAML::Dump(node);
  }
}

std::map<std::string, std::string> flat_yaml(const std::string& text) {
  std::map<std::string, std::string> out;
  flatten(load_yaml_bounded(text, "the configuration saved in the checkpoint"), "", out);
  return out;
}

std::filesystem::path checkpoints_dir(const Config& c) {
  return std::filesystem::path(c.training.output_dir) / "checkpoints";
}

// The step-*.h5 files of `dir`, oldest first (zero-padded steps: name order is step order).
std::vector<std::filesystem::path> checkpoint_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.starts_with("step-") && n.ends_with(".h5")) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

void require_output_dir_resumed_or_overwritten(const Config& c) {
  if (!c.training.resume_from.empty() || c.training.overwrite_output_dir) return;
  const std::vector<std::filesystem::path> earlier = checkpoint_files(checkpoints_dir(c));
  MT_REQUIRE(earlier.empty(), "training.output_dir {} holds an earlier run's checkpoints ({}, the newest of {}); set "
             "training.resume_from: auto to resume it (LLaMA-Factory: resume_from_checkpoint: true) or "
             "training.overwrite_output_dir: true to start over", c.training.output_dir, earlier.back().string(),
             earlier.size());
}

void remove_overwritten_checkpoints(const Config& c) {
  if (!c.training.resume_from.empty() || !c.training.overwrite_output_dir) return;
  const std::vector<std::filesystem::path> earlier = checkpoint_files(checkpoints_dir(c));
  for (const std::filesystem::path& file : earlier) std::filesystem::remove(file);
  const std::vector<std::filesystem::path> hf_dirs = hf_checkpoint_dirs(c.training.output_dir);
  for (const std::filesystem::path& dir : hf_dirs) std::filesystem::remove_all(dir);
  if (!earlier.empty() || !hf_dirs.empty())
    log::info("training.overwrite_output_dir: removed the earlier run's {} checkpoint(s) from {}{}", earlier.size(),
              checkpoints_dir(c).string(),
              hf_dirs.empty() ? std::string() : fmt::format(" and its {} checkpoint-N directories", hf_dirs.size()));
}

std::optional<CheckpointFile> open_resume_checkpoint(const Config& c) {
  const std::string& from = c.training.resume_from;
  if (from.empty()) return std::nullopt;
  if (from == "auto") {
    const std::filesystem::path dir = checkpoints_dir(c);
    const auto latest = find_latest_checkpoint(dir);
    if (!latest) {
      log::info("training.resume_from: auto: no checkpoint in {}; starting from step 0", dir.string());
      return std::nullopt;
    }
    return CheckpointFile(*latest);
  }
  // A checkpoint-<step>/ directory (LLaMA-Factory's layout, hf_checkpoints.h): the HDF5 checkpoint of that step beside
  // it, which holds the optimizer state.
  const std::filesystem::path given = std::filesystem::path(from).lexically_normal();
  const std::string leaf = (given.has_filename() ? given : given.parent_path()).filename().string();
  if (std::filesystem::is_directory(from) && leaf.starts_with("checkpoint-") && leaf.size() > 11 &&
      leaf.find_first_not_of("0123456789", 11) == std::string::npos && leaf.size() <= 29) {
    const std::filesystem::path h5 =
        checkpoint_path((given.has_filename() ? given : given.parent_path()).parent_path() / "checkpoints",
                        std::stoll(leaf.substr(11)));
    MT_REQUIRE(std::filesystem::is_regular_file(h5), "no checkpoint to resume from: training.resume_from: {} is a "
               "Hugging Face checkpoint directory and {}, the HDF5 checkpoint of its step (weights and optimizer "
               "state), does not exist", from, h5.string());
    return CheckpointFile(h5);
  }
  if (std::filesystem::is_directory(from)) {  // an output_dir, its checkpoints/, or a directory of checkpoints
    const std::filesystem::path dir =
        std::filesystem::is_directory(std::filesystem::path(from) / "checkpoints") ? std::filesystem::path(from) / "checkpoints"
                                                                                   : std::filesystem::path(from);
    const auto latest = find_latest_checkpoint(dir);
    MT_REQUIRE(latest, "no checkpoint to resume from: training.resume_from: {} is a directory without a valid "
               "step-*.h5 (looked in {})", from, dir.string());
    return CheckpointFile(*latest);
  }
  return CheckpointFile(from);
}

void check_resume_fits(const CheckpointFile& checkpoint, const Config& c, const ParamLayout& layout) {
  const std::string file = checkpoint.path().string();
  for (const Region& region : layout.regions)
    for (const ParamSlot& slot : region.params) {
      std::vector<int64_t> shape;
      try {
        shape = checkpoint.shape("params", slot.hf_name);
      } catch (const Error&) {
        MT_REQUIRE(false, "{}: has no tensor {}: a checkpoint of another model than '{}' (saved from '{}')", file,
                   slot.hf_name, c.model.name, checkpoint.meta().model_name);
      }
      MT_REQUIRE(shape == slot.shape,
                 "{}: tensor {} has shape [{}], the model '{}' has [{}]: a checkpoint of another model (saved from "
                 "'{}')",
                 file, slot.hf_name, fmt::join(shape, ", "), c.model.name, fmt::join(slot.shape, ", "),
                 checkpoint.meta().model_name);
    }
  const auto saved = flat_yaml(checkpoint.meta().config_yaml), now = flat_yaml(c.yaml_text);
  for (const auto& [key, value] : now) {
    const auto it = saved.find(key);
    if (key == "training.resume_from" || (it != saved.end() && it->second == value)) continue;
    log::info("resume: {} changed from '{}' to '{}'", key, it == saved.end() ? "" : it->second, value);
  }
  log::info("resuming from {} at step {} ({} tokens seen, {} optimizer updates, data epoch {} index {})", file,
            checkpoint.meta().step, checkpoint.meta().tokens_seen, checkpoint.meta().updates_applied,
            checkpoint.meta().data_epoch, checkpoint.meta().data_index);
}

}  // namespace mt
