// Run: one training run's parts as `train` (cli/train/trainer.cpp, its evaluation) and `bench` (cli/bench/bench.cpp)
// both build them, once each, in one order: the rank's roles, the model (spec and layout), the compute backend, the
// plan (the shape the command resolved, the MoE layers that keep their expert activations and the GPU-resident
// optimizer state, the attention workspace it reserves), the node's host store with the optimizer service over it,
// and the engine. The commands keep what is theirs: how the model is read and the shape resolved (train's config and
// preflight, bench's flags), the data, the loop and the reports.
// Invariants: rank roles are decided here alone (run_roles); only compute ranks hold a backend, a plan and an engine;
// every rank of the node opens the store and the optimizer service in the same order (node-collective), and the
// engine is built from the plan the backend was given.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "backend/backend.h"
#include "cli/runtime/plan_rates.h"
#include "cli/runtime/node_store.h"
#include "core/runtime_switches.h"
#include "dist/data_parallel.h"
#include "engine/engine.h"
#include "model/model_spec.h"
#include "model/param_layout.h"
#include "plan/memory_plan.h"
#include "plan/step_plan.h"
#include "plan/pass_choice.h"
#include "store/host_store.h"

namespace mt {

// What this rank does in a run (dist/data_parallel.h's layout of the job).
struct RunRoles {
  bool root = false;        // world rank 0: logs, saves, exports and reports
  bool leads_node = false;  // the node's compute rank 0: reads the data, fills the store, submits each update
  bool computes = false;    // runs an engine on its share of each batch (else: updates its slices only)
};
RunRoles run_roles(const dist::DataParallel& dp);

class Run {
 public:
  Run(ModelSpec spec, const dist::DataParallel& dp);
  ~Run();
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  const RunRoles& roles() const { return roles_; }
  const dist::DataParallel& dp() const { return dp_; }
  const ModelSpec& spec() const { return spec_; }
  const ParamLayout& layout() const { return layout_; }

  // Compute ranks: the backend for `dtype` (select_backend), the same kind on every compute rank (collective), and
  // the rates the plan takes on it (plan_rates: cached or probed as switches.step_rates says; logged), each the
  // slowest data-parallel rank's (collective), so that every rank makes the same plan.
  Backend& select_backend(DType dtype, const RuntimeSwitches& switches);
  Backend& backend() { return *backend_; }
  const StepRates& rates() const { return planned_rates_.rates; }
  // The root rank, after steps on a GPU whose rates came from the machine's cache file: training's parameters pass
  // (the median seconds of rank 0's slices over the steps) into that file, for the next runs' plans (logged), where
  // the host held at least kKeptPassMinParameters: a smaller pass runs on fewer threads (H100 node, thirtieth session:
  // Qwen2.5-3B's head alone, 0.15 B parameters, 3.78 G/s, where passes over 0.3-4.7 B ran 4.2-6.4).
  static constexpr double kKeptPassMinParameters = 0.25e9;
  void keep_parameters_pass(double parameters_pass_s);

  // Compute ranks, after select_backend: the plan of the shape the command resolved (train: preflight; bench:
  // resolve_auto), with the MoE layers that keep (moe_keep_layers >= 0 forces the count) and the optimizer state the
  // GPU keeps where resident_allowed, and more layers recomputing where choose_recompute (the run's count is auto) and
  // the predicted step is shorter (plan_step, at rates()); the backend takes the attention workspace the plan reserves.
  // `passes`: how the command chose the pass count (resolve_by_step), logged where the step chose it.
  const RunShape& plan(const RunShape& resolved, bool resident_allowed, int64_t moe_keep_layers, bool choose_recompute,
                       const PassChoice& passes = {});
  const RunShape& shape() const { return shape_; }
  const GpuPlan& gpu_plan() const { return gpu_plan_; }
  const StepPlan& step_plan() const { return step_plan_; }
  // The layers that recompute because memory asks it, before the plan weighed more (RunShape::recompute_layers of
  // the shape plan() was given).
  int64_t memory_recompute_layers() const { return memory_recompute_layers_; }
  const PassChoice& pass_choice() const { return pass_choice_; }
  const ResidentPlan& resident() const { return step_plan_.resident; }

  // Every rank of the node (collective): the host store and the optimizer service over it; on_checkpoint: what a
  // compute rank other than the node's rank 0 runs for each checkpoint (OptimizerService).
  void open_store(DType stream, const TierSettings& tier, const OptimizerSettings& optimizer,
                  std::function<void()> on_checkpoint = {});
  HostStore& store() { return node_store_->store(); }
  OptimizerService& optimizer() { return node_store_->optimizer(); }
  // Every rank of the node (collective): the node's rank 0 has filled the store; from here any rank may stream it.
  void store_filled() const;

  // Compute ranks, after plan and open_store: the engine of the plan with `slots` GPU weight slots; moe_aux_loss_coef
  // set: the router loss as the run config asks for it (set_moe_aux_options).
  Engine& start_engine(int64_t checkpoint_interval, int64_t max_positions, int64_t slots,
                       std::optional<double> moe_aux_loss_coef = std::nullopt);
  Engine& engine() { return *engine_; }
  const EngineOptions& engine_options() const { return engine_options_; }

 private:
  void plan_on_slowest_rates();  // planned_rates_.rates: each the slowest data-parallel rank's

  ModelSpec spec_;
  ParamLayout layout_;
  const dist::DataParallel& dp_;
  RunRoles roles_;
  DType dtype_ = DType::f32;
  std::unique_ptr<Backend> backend_;
  PlanRates planned_rates_;
  RunShape shape_;
  int64_t memory_recompute_layers_ = 0;
  PassChoice pass_choice_;
  GpuPlan gpu_plan_;
  StepPlan step_plan_;
  std::unique_ptr<NodeStore> node_store_;
  EngineOptions engine_options_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace mt
