// TrainPlan: what the ranks without data need to take part in training — the parameter layout, the
// streaming dtype and the optimizer settings — broadcast once over the node by its rank 0 after it has validated
// every input, as JSON whose every member (every region offset and parameter slot field among them) goes by name,
// through one table per struct (io/json_fields.h) that writing and reading share.
// Invariants: every rank of the node builds its HostStore and Optimizer from the same plan, in the same order;
// parse_train_plan(serialise_train_plan(p)) == p, and a plan with a key missing or unknown is refused naming it.
#pragma once
#include <cstdint>
#include <string>

#include "config/config.h"
#include "core/dtype.h"
#include "model/param_layout.h"
#include "optim/optimizer.h"
#include "store/tier_layout.h"

namespace mt {

struct TrainPlan {
  ParamLayout layout;
  DType dtype = DType::f32;
  OptimizerSettings optimizer;
  int64_t updates_applied = 0;  // AdamW's step count restored from a checkpoint (0 for a fresh run)
  TierSettings tier;            // store.offload and its paths
  bool operator==(const TrainPlan&) const = default;
};

// store.offload and store.offload_paths; the files' tag names the run by its output directory (a restart of the
// same run finds, and replaces, the files a crash left).
TierSettings tier_settings_of(const Config& c);

std::string serialise_train_plan(const TrainPlan& plan);
TrainPlan parse_train_plan(const std::string& text);

void broadcast_train_plan(const TrainPlan& plan);  // node rank 0
TrainPlan receive_train_plan();                    // every other rank of the node

}  // namespace mt
