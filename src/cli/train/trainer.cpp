// Training driver (see trainer.h).
#include "cli/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "backend/backend.h"
#include "cli/train/metrics_log.h"
#include "core/error.h"
#include "core/log.h"
#include "data/dataset.h"
#include "engine/engine.h"
#include "io/safetensors.h"
#include "model/model_source.h"
#include "model/param_layout.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "store/host_store.h"

namespace mt {
namespace {

// Keys the schema accepts whose effect arrives with later capabilities: refuse what would silently
// change the meaning of a run, note the rest.
void check_supported(const Config& c) {
  MT_REQUIRE(c.training.resume_from.empty(),
             "training.resume_from: '{}': resuming needs HDF5 checkpoints, which this build does not write yet",
             c.training.resume_from);
  MT_REQUIRE(!c.dataset.packing, "dataset.packing: true is not supported yet; set it to false");
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

  DatasetStats stats;
  std::vector<Example> examples = load_datasets(c.dataset, spec.vocab_size, &stats);

  HostStore store(layout, dtype);
  fill_master_weights(c, source, spec, store);
  log::info("host store: {:.1f} MiB, {} bytes per parameter ({} streaming copy)",
            static_cast<double>(store.total_bytes()) / (1 << 20), store.bytes_per_parameter(), dtype_name(dtype));

  std::unique_ptr<Backend> backend = make_cpu_backend();
  EngineOptions eo;
  eo.checkpoint_interval = c.training.checkpoint_interval;
  eo.micro_batch_size = c.training.micro_batch_size;
  eo.passes = c.training.gradient_accumulation_steps;
  eo.max_positions = std::max(spec.max_position_embeddings, c.dataset.max_seq_len);
  Engine engine(*backend, spec, store, eo);

  OptimizerSettings os;
  os.beta1 = c.optimizer.beta1;
  os.beta2 = c.optimizer.beta2;
  os.eps = c.optimizer.eps;
  os.weight_decay = c.training.weight_decay;
  os.max_grad_norm = c.training.max_grad_norm;
  Optimizer optimizer(store, os);
  const LrSchedule schedule{c.training.lr_scheduler, c.training.learning_rate, c.training.warmup_steps,
                            c.training.num_steps, c.training.min_lr_ratio};
  Batcher batcher(std::move(examples), c.training.batch_size, c.dataset.shuffle, c.training.seed);

  const std::filesystem::path out = c.training.output_dir;
  std::filesystem::create_directories(out);
  MetricsLog metrics(out / "metrics.jsonl");
  log::info("training on the {} backend: {} steps of {} sequences ({} pass(es), checkpoint every {} layers)",
            backend->name(), c.training.num_steps, c.training.batch_size, eo.passes, eo.checkpoint_interval);

  TrainSummary summary;
  int64_t tokens_seen = 0;
  for (int64_t step = 1; step <= c.training.num_steps; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    const Batch batch = batcher.next();
    const StepLoss loss = engine.forward_backward(batch);
    const double lr = lr_at(schedule, step);
    const OptimizerReport report = optimizer.step(lr);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    tokens_seen += batch.num_tokens;
    summary.losses.push_back(loss.mean());
    summary.steps = step;

    StepRecord r{step, loss.mean(), report.grad_norm, lr, batch.num_tokens, batch.num_target_tokens, tokens_seen,
                 seconds, static_cast<double>(batch.num_tokens) / seconds, report.skipped};
    if (report.skipped) log::warn("step {}: gradient norm is not finite; update skipped", step);
    if (step % c.training.logging_steps == 0 || step == c.training.num_steps) {
      metrics.append(r);
      log::info("step {:>5}/{} | loss {:.4f} | grad_norm {:.4f} | lr {:.3e} | {:.0f} tokens/s | {:.3f} s", step,
                c.training.num_steps, r.loss, r.grad_norm, lr, r.tokens_per_s, seconds);
    }
  }

  std::vector<const float*> regions;
  for (int64_t r = 0; r < store.num_regions(); ++r) regions.push_back(store.master(r));
  summary.final_dir = out / "final";
  export_hf_directory(summary.final_dir, spec, layout, regions, dtype, source.dir);
  log::info("saved the final model ({}) to {}", dtype_name(dtype), summary.final_dir.string());
  return summary;
}

}  // namespace mt
