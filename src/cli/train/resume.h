// Resuming `train` from a checkpoint: which file training.resume_from names ("auto": the newest valid one in
// <output_dir>/checkpoints; a path), and whether it fits the run. Invariant: a checkpoint of another model shape
// is refused before anything is created, naming the first mismatching tensor; other differences of the
// configuration are logged, key by key.
#pragma once
#include <optional>

#include "checkpoint/checkpoint_reader.h"
#include "config/config.h"
#include "model/param_layout.h"

namespace mt {

std::optional<CheckpointFile> open_resume_checkpoint(const Config& config);
void check_resume_fits(const CheckpointFile& checkpoint, const Config& config, const ParamLayout& layout);

}  // namespace mt
