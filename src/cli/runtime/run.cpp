// A run's parts, built once (see run.h).
#include "cli/runtime/run.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "cli/runtime/backend_select.h"
#include "cli/runtime/plan_rates.h"
#include "core/error.h"
#include "core/log.h"
#include "dist/context.h"
#include "plan/resident_plan.h"
#include "plan/step_rates.h"

namespace mt {

RunRoles run_roles(const dist::DataParallel& dp) {
  return {dist::context().is_root(), dp.leads_node(), dp.computes()};
}

Run::Run(ModelSpec spec, const dist::DataParallel& dp)
    : spec_(std::move(spec)), layout_(make_param_layout(spec_)), dp_(dp), roles_(run_roles(dp)) {}

Run::~Run() = default;

Backend& Run::select_backend(DType dtype, const RuntimeSwitches& switches) {
  MT_ASSERT(roles_.computes && !backend_, "a backend is selected once, on compute ranks");
  dtype_ = dtype;
  backend_ = mt::select_backend(dtype, dp_.device, switches);
  dist::require_same(dp_, "compute backend", backend_->name());  // NCCL and MPI sums cannot mix
  planned_rates_ = plan_rates(*backend_, switches.step_rates, step_rates_cache_dir());
  log::info("{}", planned_rates_.source);
  plan_on_slowest_rates();
  return *backend_;
}

void Run::plan_on_slowest_rates() {
  if (dp_.size <= 1) return;
  const StepRates& mine = planned_rates_.rates;
  const std::vector<double> all =
      dist::all_gather(dp_, {mine.gpu_flops, mine.pcie_bytes, mine.parameters_pass_params});
  std::vector<StepRates> ranks;
  for (size_t i = 0; i + 2 < all.size(); i += 3) ranks.push_back({all[i], all[i + 1], all[i + 2]});
  const StepRates slowest = slowest_rates(ranks);
  if (slowest != mine)
    log::info("step rates: the plan takes the slowest data-parallel rank's, {}", describe_step_rates(slowest));
  planned_rates_.rates = slowest;
}

const RunShape& Run::plan(const RunShape& resolved, bool resident_allowed, int64_t moe_keep_layers,
                          bool choose_recompute, const PassChoice& passes) {
  MT_ASSERT(backend_, "the plan is made for the selected backend");
  pass_choice_ = passes;
  if (const std::string why = describe_pass_choice(passes); !why.empty()) log::info("plan: {}", why);
  step_plan_ = plan_step(spec_, resolved, backend_->device_memory_bytes(), dp_.size, resident_allowed, moe_keep_layers,
                         rates(), choose_recompute);
  shape_ = with_step_plan(resolved, step_plan_);
  memory_recompute_layers_ = resolved.recompute_layers;
  if (shape_.recompute_layers > resolved.recompute_layers)
    log::info("plan: {} of {} layers recompute in backward, not the {} that fit, to hold more on the GPU ({} regions' "
              "optimizer state, {} MoE layers keeping): predicted step {:.3f} s against {:.3f} s",
              shape_.recompute_layers, spec_.num_layers, resolved.recompute_layers, step_plan_.resident.regions,
              step_plan_.layers, step_plan_.step.step_s, step_plan_.memory_recompute_step_s);
  gpu_plan_ = plan_gpu(spec_, shape_);
  backend_->set_attention_workspace(gpu_plan_.attention_workspace);  // what the plan reserved for cuDNN
  return shape_;
}

void Run::keep_parameters_pass(double parameters_pass_s) {
  if (!roles_.root || planned_rates_.cache_path.empty() || parameters_pass_s <= 0) return;
  const double host_parameters = static_cast<double>(layout_.total_numel - resident().parameters);
  if (host_parameters < kKeptPassMinParameters) return;
  const double per_rank = host_parameters / store().ranks() / parameters_pass_s;
  log::info("{}", record_training_pass_rate(planned_rates_.cache_path, planned_rates_.device, planned_rates_.host,
                                            per_rank));
}

void Run::open_store(DType stream, const TierSettings& tier, const OptimizerSettings& optimizer,
                     std::function<void()> on_checkpoint) {
  node_store_ = std::make_unique<NodeStore>(layout_, stream, tier, optimizer, roles_.computes, std::move(on_checkpoint));
}

void Run::store_filled() const { node_store_->filled(); }

Engine& Run::start_engine(int64_t checkpoint_interval, int64_t max_positions, int64_t slots,
                          std::optional<double> moe_aux_loss_coef) {
  MT_ASSERT(backend_ && node_store_ && !engine_, "one engine, after the plan and the store");
  EngineOptions& eo = engine_options_;
  eo.checkpoint_interval = checkpoint_interval;
  eo.recompute_layers = shape_.recompute_layers;
  eo.moe_keep_layers = shape_.moe_keep_layers;
  eo.checkpoints = shape_.checkpoints;
  eo.micro_batch_size = shape_.micro_batch_size;
  eo.passes = shape_.passes;
  eo.max_positions = max_positions;
  if (moe_aux_loss_coef) set_moe_aux_options(spec_, *moe_aux_loss_coef, eo);
  engine_ = std::make_unique<Engine>(
      *backend_, spec_, node_store_->store(), eo,
      make_engine_transfers(*backend_, node_store_->store(), slots, dp_, dtype_, eo.checkpoints, step_plan_.resident.regions));
  return *engine_;
}

}  // namespace mt
