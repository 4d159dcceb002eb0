// Resuming `train` from a checkpoint: which file training.resume_from names ("auto": the newest valid one in
// <output_dir>/checkpoints; a file; a checkpoint-<step>/ directory: the HDF5 checkpoint of that step beside it; another
// directory: its newest valid one), whether it fits the run, and what becomes of
// an output_dir that holds an earlier run's checkpoints (LLaMA-Factory's rule: resume it, or overwrite_output_dir).
// Invariants: a checkpoint of another model shape is refused before anything is created, naming the first
// mismatching tensor; other differences of the configuration are logged, key by key; an earlier run's checkpoints
// are never replaced or removed unless the config resumes or says training.overwrite_output_dir: true.
#pragma once
#include <optional>

#include "checkpoint/checkpoint_reader.h"
#include "config/config.h"
#include "model/param_layout.h"

namespace mt {

std::optional<CheckpointFile> open_resume_checkpoint(const Config& config);
// Throws one line naming the newest of them when output_dir holds an earlier run's checkpoints and the config
// neither resumes nor overwrites.
void require_output_dir_resumed_or_overwritten(const Config& config);
// With training.overwrite_output_dir and no resume: removes the earlier run's checkpoints, HDF5 and checkpoint-N/
// (logged), so that neither save_total_limit nor a later resume_from: auto takes them for this run's.
void remove_overwritten_checkpoints(const Config& config);
void check_resume_fits(const CheckpointFile& checkpoint, const Config& config, const ParamLayout& layout);

}  // namespace mt
