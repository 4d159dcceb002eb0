// Where a run's activation checkpoints (the hidden states at every checkpoint_interval-th layer boundary) live:
// in GPU memory, or in host memory (page-locked on CUDA) with two staging buffers on the GPU
// (engine/checkpoint_store.h). training.activation_checkpoints chooses it; automatic is the memory plan's to
// resolve (plan/memory_plan.h resolve_auto: host exactly when the plan with them on the GPU does not fit and the one
// with them on the host does) before an engine sees it. Invariant: the placement changes where bytes are kept,
// never a number the engine computes (training is bitwise identical either way).
#pragma once
#include <string>

namespace mt {

enum class CheckpointPlacement { automatic, gpu, host };

CheckpointPlacement checkpoint_placement_from_name(const std::string& name);  // "auto" | "gpu" | "host"
const char* checkpoint_placement_name(CheckpointPlacement placement);          // "auto" | "gpu" | "host"

}  // namespace mt
