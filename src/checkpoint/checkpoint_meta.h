// CheckpointMeta: the /meta attributes of a checkpoint file (DESIGN.md §6) — everything besides the tensors
// that a bitwise resume needs (step, tokens, Adam's update count, data cursor, seed and shuffle, the configs),
// and the versions that wrote it. Invariant: to_json/from_json round-trip every field; format_version changes
// whenever the file layout does.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace mt {

inline constexpr int64_t kCheckpointFormatVersion = 1;

struct CheckpointMeta {
  int64_t format_version = kCheckpointFormatVersion;
  int64_t step = 0;               // optimizer steps submitted (the last completed step)
  int64_t tokens_seen = 0;
  int64_t updates_applied = 0;    // AdamW's bias-correction step count (skipped steps do not count)
  int64_t data_epoch = 0, data_index = 0;  // the Batcher's cursor after `step` batches
  int64_t seed = 0;               // training.seed: random init and every epoch's shuffle derive from it
  int64_t shuffle = 0;            // dataset.shuffle
  std::string model_name;         // model.name when saved
  std::string config_yaml;        // the effective configuration
  std::string model_config_json;  // the model's config.json
  std::string versions;           // "megatrain X, HDF5 a.b.c, MPI ..." (filled by the writer)
  // The run's model files (cli/train/model_files.h), name -> bytes, stored as /model_files/<name> (uint8); not in
  // to_json (bytes, not text): the writer takes them from world rank 0 alone.
  std::map<std::string, std::string> model_files;
};

nlohmann::json to_json(const CheckpointMeta& m);
CheckpointMeta meta_from_json(const nlohmann::json& j);

// "<dir>/step-000123.h5"
std::filesystem::path checkpoint_path(const std::filesystem::path& dir, int64_t step);

}  // namespace mt
