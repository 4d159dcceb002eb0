// Training driver (see trainer.h).
#include "cli/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "backend/backend.h"
#include "cli/train/backend_select.h"
#include "cli/train/metrics_log.h"
#include "cli/train/optimizer_service.h"
#include "cli/train/train_plan.h"
#include "cli/train/training_data.h"
#include "core/error.h"
#include "core/log.h"
#include "data/dataset.h"
#include "data/prefetcher.h"
#include "dist/context.h"
#include "engine/engine.h"
#include "io/safetensors.h"
#include "model/model_source.h"
#include "model/param_layout.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "store/host_store.h"
#include "store/shared_memory_check.h"

namespace mt {
namespace {

// Keys the schema accepts whose effect arrives with later capabilities: refuse what would silently
// change the meaning of a run, note the rest.
void check_supported(const Config& c) {
  MT_REQUIRE(c.training.resume_from.empty(),
             "training.resume_from: '{}': resuming needs HDF5 checkpoints, which this build does not write yet",
             c.training.resume_from);
  if (c.training.save_steps > 0)
    log::warn("training.save_steps = {}: intermediate checkpoints are not written by this build; "
              "the final model is exported to {}/final",
              c.training.save_steps, c.training.output_dir);
}

void fill_master_weights(const Config& c, const ModelSource& source, const ModelSpec& spec, HostStore& store) {
  const ParamLayout& layout = store.layout();
  if (c.model.init == "random") {
    for (int64_t r = 0; r < store.num_regions(); ++r)
      init_region_random(layout.regions[static_cast<size_t>(r)], spec.initializer_range, c.training.seed,
                         store.master(r));
  } else {
    MT_REQUIRE(!source.dir.empty(),
               "model.name: '{}' is a config file without weights; use a model directory or set model.init: random",
               c.model.name);
    const SafetensorsModel weights(source.dir);
    for (int64_t r = 0; r < store.num_regions(); ++r)
      load_region(layout.regions[static_cast<size_t>(r)], weights, store.master(r));
  }
  for (int64_t r = 0; r < store.num_regions(); ++r) store.refresh_stream_copy(r);
}

OptimizerSettings optimizer_settings(const Config& c) {
  OptimizerSettings os;
  os.beta1 = c.optimizer.beta1;
  os.beta2 = c.optimizer.beta2;
  os.eps = c.optimizer.eps;
  os.weight_decay = c.training.weight_decay;
  os.max_grad_norm = c.training.max_grad_norm;
  return os;
}

void log_store(const HostStore& store) {
  std::string per_rank;
  for (int q = 0; q < store.ranks(); ++q) per_rank += (q ? ", " : "") + format_bytes(static_cast<uint64_t>(store.rank_bytes(q)));
  log::info("host store: {} in one shared window on {} rank(s), {} bytes per parameter ({} streaming copy); "
            "per rank: {}",
            format_bytes(static_cast<uint64_t>(store.window_bytes())), store.ranks(), store.bytes_per_parameter(),
            dtype_name(store.stream_dtype()), per_rank);
}

}  // namespace

TrainSummary run_training(const Config& c) {
  check_supported(c);
  const ModelSource source = resolve_model_source(c.model.name);
  const ModelSpec spec = load_model_spec(source.config_json);
  const ParamLayout layout = make_param_layout(spec);
  const DType dtype = dtype_from_name(c.model.dtype);
  log::info("model {} ({}): {} layers, hidden {}, {} heads / {} kv heads, vocab {}, {:.3f} M parameters",
            c.model.name, spec.architecture, spec.num_layers, spec.hidden_size, spec.num_heads, spec.num_kv_heads,
            spec.vocab_size, static_cast<double>(layout.total_numel) / 1e6);

  TrainingData data = load_training_data(c.dataset, source, spec, true);

  // Every input is valid: the other ranks of the node join (training_worker.cpp), building the same store
  // and optimizer, and every rank updates its own slices.
  const dist::Context& ctx = dist::context();
  MT_REQUIRE(ctx.size == ctx.node_size,
             "the job's {} ranks span several nodes ({} on {}); this build trains on one node (multi-node data "
             "parallelism arrives with NCCL)", ctx.size, ctx.node_size, ctx.host);
  const OptimizerSettings os = optimizer_settings(c);
  broadcast_train_plan({layout, dtype, os});
  HostStore store(layout, dtype);
  OptimizerService optimizer(store, os);
  fill_master_weights(c, source, spec, store);
  log_store(store);

  std::unique_ptr<Backend> backend = select_backend(dtype);
  EngineOptions eo;
  eo.checkpoint_interval = c.training.checkpoint_interval;
  eo.micro_batch_size = c.training.micro_batch_size;
  eo.passes = c.training.gradient_accumulation_steps;
  eo.max_positions = std::max(spec.max_position_embeddings, c.dataset.max_seq_len);
  Engine engine(*backend, spec, store, eo, make_engine_transfers(*backend, store, 2));

  const LrSchedule schedule{c.training.lr_scheduler, c.training.learning_rate, c.training.warmup_steps,
                            c.training.num_steps, c.training.min_lr_ratio};
  Batcher batcher(std::move(data.examples), c.training.batch_size, c.dataset.shuffle, c.training.seed);
  Prefetcher prefetcher(batcher, c.dataset.num_workers);

  const std::filesystem::path out = c.training.output_dir;
  std::filesystem::create_directories(out);
  MetricsLog metrics(out / "metrics.jsonl");
  log::info("training on the {} backend: {} steps of {} sequences ({} pass(es), checkpoint every {} layers)",
            backend->name(), c.training.num_steps, c.training.batch_size, eo.passes, eo.checkpoint_interval);

  TrainSummary summary;
  int64_t tokens_seen = 0;
  for (int64_t step = 1; step <= c.training.num_steps; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    const double waited_before = store.waited_seconds();
    const Batch batch = prefetcher.next();
    const StepLoss loss = engine.forward_backward(batch);
    const double lr = lr_at(schedule, step);
    optimizer.submit(step, lr);  // every rank updates its slices while the next forward starts
    const OptimizerReport report = optimizer.report();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double waited = store.waited_seconds() - waited_before;  // the previous update the forward did not hide
    const double previous_update = optimizer.last_update_seconds();
    tokens_seen += batch.num_tokens;
    summary.losses.push_back(loss.mean());
    summary.steps = step;

    StepRecord r{step, loss.mean(), report.grad_norm, lr, batch.num_tokens, batch.num_target_tokens, tokens_seen,
                 seconds, static_cast<double>(batch.num_tokens) / seconds, report.skipped};
    if (report.skipped) log::warn("step {}: gradient norm is not finite; update skipped", step);
    if (step % c.training.logging_steps == 0 || step == c.training.num_steps) {
      metrics.append(r);
      log::info("step {:>5}/{} | loss {:.4f} | grad_norm {:.4f} | lr {:.3e} | {:.0f} tokens/s | {:.3f} s | "
                "optimizer: norm {:.3f} s, previous update {:.3f} s of which the forward waited {:.3f} s",
                step, c.training.num_steps, r.loss, r.grad_norm, lr, r.tokens_per_s, seconds, report.norm_seconds,
                previous_update, waited);
    }
  }

  optimizer.finish();
  std::vector<const float*> regions;
  for (int64_t r = 0; r < store.num_regions(); ++r) regions.push_back(store.master(r));
  summary.final_dir = out / "final";
  export_hf_directory(summary.final_dir, spec, layout, regions, dtype, source.dir);
  log::info("saved the final model ({}) to {}", dtype_name(dtype), summary.final_dir.string());
  return summary;
}

}  // namespace mt
