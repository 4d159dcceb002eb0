// The `train` command: config → model, data, host store, engine, optimizer → steps → metrics and the
// final Hugging Face directory. Invariant: every input (config, model files, data) is validated before
// anything is created in output_dir.
#pragma once
#include <cstdint>
#include <filesystem>
#include <vector>

#include "config/config.h"

namespace mt {

struct TrainSummary {
  int64_t steps = 0;
  std::vector<double> losses;         // per step
  std::filesystem::path final_dir;
};

TrainSummary run_training(const Config& config);

}  // namespace mt
