// The `train` command: config → model, data, host store, engine, optimizer → steps → metrics and the
// final Hugging Face directory. Invariant: every input (config, model files, data) is validated before
// anything is created in output_dir.
#pragma once
#include <cstdint>
#include <filesystem>
#include <vector>

#include "config/config.h"
#include "dist/data_parallel.h"

namespace mt {

struct TrainSummary {
  int64_t steps = 0;
  std::vector<double> losses;         // per step
  std::filesystem::path final_dir;
};

// Every compute rank of `dp` (world rank 0 logs, saves and exports; the others return their losses).
TrainSummary run_training(const Config& config, const dist::DataParallel& dp);
// A single-process run (tests): make_data_parallel, then the above.
TrainSummary run_training(const Config& config);

}  // namespace mt
