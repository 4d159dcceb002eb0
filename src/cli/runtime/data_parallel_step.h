// A compute rank's forward and backward of one global batch under data parallelism: its token-balanced share
// (data/batch_share.h), gradients normalised by the global batch's target tokens so that the ranks' sums
// (ReducingGradientSink) are the global mean's, and the loss summed over the compute ranks.
// Invariant: every compute rank calls it with the same global batch, in the same step order.
#pragma once
#include "data/batch.h"
#include "dist/data_parallel.h"
#include "engine/engine.h"

namespace mt {

// The returned loss is the global batch's (loss_sum over every rank's share, the global target count).
StepLoss forward_backward_share(Engine& engine, const dist::DataParallel& dp, const Batch& global, int64_t passes);

}  // namespace mt
