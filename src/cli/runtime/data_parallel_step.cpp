// One data-parallel forward and backward (see data_parallel_step.h).
#include "cli/runtime/data_parallel_step.h"

#include "data/batch_share.h"

namespace mt {

StepLoss forward_backward_share(Engine& engine, const dist::DataParallel& dp, const Batch& global, int64_t passes) {
  if (dp.size <= 1) return engine.forward_backward(global);
  const Batch share = batch_share(global, dp.size, dp.rank, passes);
  StepLoss loss = engine.forward_backward(share, global.num_target_tokens, 1.0 / static_cast<double>(dp.size));
  dist::all_reduce_sum(dp, &loss.loss_sum, 1);
  dist::all_reduce_sum(dp, &loss.aux_loss, 1);  // each rank's router loss over its share, averaged
  loss.aux_loss /= static_cast<double>(dp.size);
  loss.target_tokens = global.num_target_tokens;
  return loss;
}

}  // namespace mt
