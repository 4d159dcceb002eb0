// Names of the checkpoint placements (see checkpoint_placement.h).
#include "engine/checkpoint_placement.h"

#include "core/error.h"

namespace mt {

CheckpointPlacement checkpoint_placement_from_name(const std::string& name) {
  if (name == "auto") return CheckpointPlacement::automatic;
  if (name == "gpu") return CheckpointPlacement::gpu;
  MT_REQUIRE(name == "host", "activation checkpoints: '{}' is not auto, gpu or host", name);
  return CheckpointPlacement::host;
}

const char* checkpoint_placement_name(CheckpointPlacement placement) {
  switch (placement) {
    case CheckpointPlacement::automatic: return "auto";
    case CheckpointPlacement::gpu: return "gpu";
    case CheckpointPlacement::host: return "host";
  }
  return "?";
}

}  // namespace mt
