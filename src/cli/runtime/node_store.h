// NodeStore: the node's host store and the optimizer service over it, as every rank of the node opens them — compute
// ranks through Run::open_store, the training worker (a rank without an engine) from the TrainPlan it receives.
// Invariants: every rank of the node constructs one, in the same order relative to its other node-collective calls
// (the store and the service are collective); no rank streams the store before filled() has returned on every rank.
#pragma once
#include <functional>

#include "cli/runtime/optimizer_service.h"
#include "core/dtype.h"
#include "model/param_layout.h"
#include "optim/optimizer.h"
#include "store/host_store.h"
#include "store/tier_layout.h"

namespace mt {

class NodeStore {
 public:
  // computes: this rank runs an engine (its optimizer loop then runs on a thread; OptimizerService); on_checkpoint:
  // what a rank other than the node's rank 0 runs for each checkpoint.
  NodeStore(const ParamLayout& layout, DType stream, const TierSettings& tier, const OptimizerSettings& optimizer,
            bool computes, std::function<void()> on_checkpoint = {});
  NodeStore(const NodeStore&) = delete;
  NodeStore& operator=(const NodeStore&) = delete;

  HostStore& store() { return store_; }
  OptimizerService& optimizer() { return optimizer_; }
  // Collective over the node: the node's rank 0 has filled the store; from here any rank may stream it.
  void filled() const;

 private:
  HostStore store_;
  OptimizerService optimizer_;
};

}  // namespace mt
