// The compute-bound thresholds of plan/step_bound.h: transfer bytes follow the acquisition order (each region once
// forward, once backward, once more where backward rebuilds a segment's inputs), the thresholds are the transfer
// time and three times the host's parameters pass (the forward's share of the step) at the GPU's token rate, and an
// MoE model needs far more tokens per pass than a dense one of its active size.
#include <cmath>

#include "catch.h"
#include "model/model_spec.h"
#include "model/param_layout.h"
#include "plan/step_bound.h"

namespace {

mt::ModelSpec shape(const char* file) {
  return mt::load_model_spec(std::string(MEGATRAIN_SOURCE_DIR "/configs/models/") + file + ".json");
}

}  // namespace

TEST_CASE("step bound: bytes per pass, thresholds from the rates, MoE against dense", "[plan][moe]") {
  mt::RunShape run;
  run.seq_len = 4096;
  run.stream_dtype = mt::DType::f32;
  run.checkpoint_interval = 1;
  run.recompute_layers = 0;  // every layer saves: each region streams twice (forward, backward)
  const mt::ModelSpec moe = shape("qwen3-30b-a3b");
  const mt::StepBound b = mt::step_bound(moe, run);
  const auto total = static_cast<double>(mt::count_parameters(moe));
  const mt::ParamLayout layout = mt::make_param_layout(moe);
  // Embedding and head once each forward, the head's backward fused; layers twice.
  const double layers = total - static_cast<double>(layout.embedding().numel + layout.head_region().numel);
  CHECK(b.h2d_bytes_per_pass == Approx(4.0 * (2 * layers + layout.embedding().numel + layout.head_region().numel)));
  CHECK(b.d2h_bytes_per_pass == Approx(4.0 * total));
  const mt::StepRates rates;
  CHECK(b.pcie_bound_tokens == static_cast<int64_t>(std::ceil(b.h2d_bytes_per_pass / rates.pcie_bytes *
                                                              rates.gpu_flops / b.flops_per_token)));
  // The parameters pass over every region; nothing computes before the embedding and layer 0 (the embedding has no
  // matmul FLOPs), so their update and copy are waited for at any batch; past optimizer_bound_tokens the rest is
  // hidden behind the forward.
  CHECK(b.parameters_pass_seconds == Approx(total / rates.parameters_pass_params));
  const double emb = static_cast<double>(layout.regions[0].numel), l0 = static_cast<double>(layout.regions[1].numel);
  CHECK(b.unhidden_wait_seconds == Approx((emb + l0) / rates.parameters_pass_params + l0 * 4.0 / rates.pcie_bytes));
  REQUIRE(b.optimizer_bound_tokens > 0);
  mt::RunShape at = run;
  at.batch_size = (b.optimizer_bound_tokens + run.seq_len - 1) / run.seq_len;
  at.passes = 1;
  CHECK(mt::step_bound(moe, at).first_pass_wait_seconds == Approx(b.unhidden_wait_seconds));
  at.batch_size /= 2;
  CHECK(mt::step_bound(moe, at).first_pass_wait_seconds > b.unhidden_wait_seconds + 0.1);
  // Two passes: only the first waits, with half the tokens to hide it.
  at.batch_size *= 2;
  at.passes = 2;
  CHECK(mt::step_bound(moe, at).first_pass_wait_seconds > b.unhidden_wait_seconds + 0.1);
  // The embedding and layer 0 on the GPU: nothing is waited for at any batch, and less at the same batch.
  mt::RunShape resident = run;
  resident.resident_regions = 2;
  const mt::StepBound r = mt::step_bound(moe, resident);
  CHECK(r.unhidden_wait_seconds == 0);
  CHECK(r.parameters_pass_seconds == Approx((total - emb - l0) / rates.parameters_pass_params));
  CHECK(r.first_pass_wait_seconds < b.first_pass_wait_seconds - 0.1);
  // Two ranks (NUMA domains) each update their slice: half the pass.
  mt::RunShape two = run;
  two.ranks = 2;
  CHECK(mt::step_bound(moe, two).parameters_pass_seconds == Approx(b.parameters_pass_seconds / 2));
  // A dense model (Qwen2.5-3B, about Qwen3-30B-A3B's 3.35 B active) is compute-bound from far fewer tokens.
  const mt::StepBound dense = mt::step_bound(shape("qwen2.5-3b"), run);
  CHECK(b.pcie_bound_tokens > 5 * dense.pcie_bound_tokens);
  // Segments of 4 recomputing layers: the first three of each stream a third time to rebuild the inputs.
  run.recompute_layers = moe.num_layers;
  CHECK(mt::step_bound(moe, run).h2d_bytes_per_pass == Approx(b.h2d_bytes_per_pass));  // interval 1: nothing to rebuild
  run.checkpoint_interval = 4;
  CHECK(mt::step_bound(moe, run).h2d_bytes_per_pass > 1.3 * b.h2d_bytes_per_pass);
}
