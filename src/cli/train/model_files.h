// The files a run's exports need besides the weights — the source model's tokenizer files and generation
// defaults, and the chat files the run's template writes over them (cli/train/chat_export.h) — gathered once when
// training starts and kept in every checkpoint (CheckpointMeta::model_files), so that `export` writes a complete
// directory from the checkpoint alone, from any working directory, after the model directory or the data moved.
// Invariant: the map holds exactly what write_owned_directory's export of the run would have written beside
// config.json and the weights (file name -> bytes), nothing from elsewhere.
#pragma once
#include <filesystem>
#include <map>
#include <string>

#include "config/config.h"
#include "model/model_source.h"

namespace mt {

using ModelFiles = std::map<std::string, std::string>;

// Empty for a model without a directory (a bare config.json).
ModelFiles gather_model_files(const Config& config, const ModelSource& source, const std::string& model_family);

// Writes each file into `dir` (an export's temporary directory), durably.
void write_model_files(const std::filesystem::path& dir, const ModelFiles& files);

}  // namespace mt
