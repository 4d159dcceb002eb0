// Training driver (see trainer.h).
#include "cli/train/trainer.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "backend/backend.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_writer.h"
#include "cli/runtime/backend_select.h"
#include "cli/runtime/data_parallel_step.h"
#include "cli/runtime/optimizer_service.h"
#include "cli/train/checkpoint_saver.h"
#include "cli/train/example_broadcast.h"
#include "cli/train/metrics_log.h"
#include "cli/train/preflight.h"
#include "cli/train/resume.h"
#include "cli/train/train_plan.h"
#include "cli/train/training_data.h"
#include "core/error.h"
#include "core/log.h"
#include "data/dataset.h"
#include "data/prefetcher.h"
#include "dist/check.h"
#include "dist/context.h"
#include "engine/engine.h"
#include "io/safetensors.h"
#include "model/model_source.h"
#include "model/flops.h"
#include "model/model_spec.h"
#include "model/param_layout.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "store/host_store.h"
#include "store/shared_memory_check.h"

namespace mt {
namespace {

// model.name naming a checkpoint file (*.h5): the model comes from its /meta and /params.
bool names_checkpoint(const std::string& name) {
  return name.ends_with(".h5") && std::filesystem::is_regular_file(name);
}

// The model source of a checkpoint: its config.json text, and the model directory it was saved from (tokenizer
// files) where that still exists.
ModelSource checkpoint_model_source(const CheckpointFile& checkpoint) {
  ModelSource source;
  source.config_json = checkpoint.path();
  const std::filesystem::path saved_from = checkpoint.meta().model_name;
  if (std::filesystem::is_regular_file(saved_from / "config.json")) source.dir = saved_from;
  return source;
}

void fill_master_weights(const Config& c, const ModelSpec& spec, const std::optional<CheckpointFile>& init_from,
                         const SafetensorsModel* weights, HostStore& store) {
  const ParamLayout& layout = store.layout();
  if (init_from) {
    for (int64_t r = 0; r < store.num_regions(); ++r)
      for (const ParamSlot& slot : layout.regions[static_cast<size_t>(r)].params)
        init_from->read_into("params", slot.hf_name, slot.shape, store.master(r) + slot.offset);
    log::info("initialised the weights from checkpoint {} (step {}); optimizer state starts fresh",
              init_from->path().string(), init_from->meta().step);
  } else if (c.model.init == "random") {
    for (int64_t r = 0; r < store.num_regions(); ++r)
      init_region_random(layout.regions[static_cast<size_t>(r)], spec.initializer_range, c.training.seed,
                         store.master(r));
  } else {
    for (int64_t r = 0; r < store.num_regions(); ++r)
      load_region(layout.regions[static_cast<size_t>(r)], *weights, store.master(r));
  }
  for (int64_t r = 0; r < store.num_regions(); ++r) store.refresh_stream_copy(r);
}

void require_batch_splits(const Config& c, const dist::DataParallel& dp, int64_t passes) {
  MT_REQUIRE(c.training.batch_size >= dp.size * passes,
             "{}: training.batch_size: {} sequences do not split into {} data-parallel GPU ranks × {} gradient "
             "accumulation passes; raise batch_size to at least {}", c.source.string(), c.training.batch_size, dp.size,
             passes, dp.size * passes);
}

OptimizerSettings optimizer_settings(const Config& c) {
  OptimizerSettings os;
  os.passes = update_passes();
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
  log::info("host store: {} in one shared window on {} rank(s), {} bytes per parameter ({}); per rank: {}",
            format_bytes(static_cast<uint64_t>(store.window_bytes())), store.ranks(), store.bytes_per_parameter(),
            store.stream_dtype() == DType::bf16 ? "with a bf16 streaming copy" : "the fp32 master streams", per_rank);
}

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  MT_REQUIRE(in.good(), "{}: cannot read", file.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// "1h02m03s", "4m05s", "12s".
std::string format_duration(double seconds) {
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02}m{:02}s", s / 3600, s % 3600 / 60, s % 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

}  // namespace

TrainSummary run_training(const Config& c) {
  return run_training(c, dist::make_data_parallel(gpus_per_node(c.training.gpus_per_node), visible_gpu_numa_nodes()));
}

TrainSummary run_training(const Config& c, const dist::DataParallel& dp) {
  const dist::Context& ctx = dist::context();
  const bool root = ctx.is_root(), leads = dp.leads_node();
  require_batch_splits(c, dp, std::max<int64_t>(c.training.gradient_accumulation_steps, 1));
  std::optional<CheckpointFile> init_from;
  if (names_checkpoint(c.model.name)) init_from.emplace(c.model.name);
  const ModelSource source = init_from ? checkpoint_model_source(*init_from) : resolve_model_source(c.model.name);
  ModelSpec spec = init_from ? parse_model_spec(nlohmann::json::parse(init_from->meta().model_config_json),
                                                c.model.name, c.model.trust_remote_code)
                             : load_model_spec(source.config_json, c.model.trust_remote_code);
  // The model's safetensors (mapped for the run where they give the weights or carry frozen tensors), and the
  // names its tensors go by.
  std::optional<SafetensorsModel> weights;
  const bool pretrained = !init_from && c.model.init != "random";
  if (pretrained) {
    MT_REQUIRE(!source.dir.empty(),
               "model.name: '{}' is a config file without weights; use a model directory or set model.init: random",
               c.model.name);
    weights.emplace(source.dir);
    match_tensor_names(spec, [&](const std::string& name) { return weights->find(name) != nullptr; });
  } else if (init_from) {
    const std::vector<std::string> saved = init_from->tensor_names("params");
    match_tensor_names(spec, [&](const std::string& name) { return std::binary_search(saved.begin(), saved.end(), name); });
    if (spec.carries_other_tensors && !source.dir.empty()) weights.emplace(source.dir);
  }
  MT_REQUIRE(!spec.carries_other_tensors || weights,
             "model.name: '{}' ({}) holds more than the text model; its other tensors (vision tower, projector) come "
             "from the model directory, so it cannot start from random weights or a checkpoint whose model "
             "directory is gone",
             c.model.name, spec.architecture);
  const ParamLayout layout = make_param_layout(spec);
  const std::vector<const StTensor*> carried = weights ? carried_tensors(spec, layout, *weights)
                                                       : std::vector<const StTensor*>{};
  const DType dtype = dtype_from_name(c.model.dtype);
  std::string banner;
  for (size_t at = 0; at < c.yaml_text.size();) {
    const size_t end = std::min(c.yaml_text.find('\n', at), c.yaml_text.size());
    banner += "\n    " + c.yaml_text.substr(at, end - at);
    at = end + 1;
  }
  if (root) log::info("megatrain {} train, configuration {}:{}", MEGATRAIN_VERSION,
            c.source.empty() ? std::string("(built in)") : c.source.string(), banner);
  if (root) log::info("model {} ({}): {} layers ({}), hidden {}, vocab {}, {:.3f} M parameters", c.model.name,
                      spec.architecture, spec.num_layers, describe_layers(spec), spec.hidden_size, spec.vocab_size,
                      static_cast<double>(layout.total_numel) / 1e6);
  if (root && !carried.empty()) {
    int64_t frozen = 0;
    std::set<std::string> groups;
    for (const StTensor* t : carried) {
      frozen += t->numel();
      groups.insert(t->name.substr(0, t->name.find('.', t->name.find('.') + 1)));
    }
    log::info("left frozen and carried through export unchanged: {} tensors, {:.3f} M parameters ({})", carried.size(),
              static_cast<double>(frozen) / 1e6, fmt::format("{}", fmt::join(groups, ", ")));
  }

  // The node's leading GPU rank reads and tokenizes the data; the node's other GPU ranks receive its examples.
  TrainingData data;
  if (leads) data = load_training_data(c.dataset, source, spec, true);
  broadcast_examples(data.examples, dp.node_comm);
  const std::optional<CheckpointFile> resume = open_resume_checkpoint(c);
  if (resume) check_resume_fits(*resume, c, layout);
  const int64_t start_step = resume ? resume->meta().step : 0;

  // Every input is valid: the other ranks of the node join (training_worker.cpp), building the same store
  // and optimizer, and every rank updates its own slices. Every node holds a replica; every compute rank
  // (dist/data_parallel.h) runs this function on its share of each batch.
  std::unique_ptr<Backend> backend = select_backend(dtype, dp.device);
  dist::require_same(dp, "compute backend", backend->name());  // NCCL and MPI sums cannot mix
  const std::string gpu_ranks = dp.size > 1 && !backend->host_memory() ? dist::describe_gpu_ranks(dp) : "";
  // Before the store and the output directory exist.
  const RunShape run = preflight(c, spec, *backend, ctx.node_size, dp.size);
  require_batch_splits(c, dp, run.passes);  // auto passes are known now
  const OptimizerSettings os = optimizer_settings(c);
  const int64_t updates_applied = resume ? resume->meta().updates_applied : 0;
  if (leads)
    broadcast_train_plan({layout, stream_dtype_of(c), os, updates_applied});
  else
    receive_train_plan();  // the node's rank 0 validated the same inputs
  HostStore store(layout, stream_dtype_of(c));
  // A compute rank other than the node's rank 0 takes part in checkpoints from its optimizer thread.
  std::optional<CheckpointSaver> saver;
  OptimizerService optimizer(store, os, true,
                             leads ? std::function<void()>{} : [&saver] { saver->save({}, {}, 0); });
  saver.emplace(store);
  optimizer.set_updates_applied(updates_applied);
  if (leads && resume) {  // the node's rank 0 fills the store
    const auto t_load = std::chrono::steady_clock::now();
    restore_store(*resume, store);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
    log::info("restored master weights and optimizer state from {} in {:.3f} s ({:.2f} GB/s)",
              resume->path().string(), s, static_cast<double>(layout.total_numel) * 12 / 1e9 / s);
  } else if (leads) {
    fill_master_weights(c, spec, init_from, weights ? &*weights : nullptr, store);
  }
  MT_CHECK_MPI(MPI_Barrier(ctx.node));  // the store is filled before any rank of the node streams it
  if (root) log_store(store);
  if (root && dp.size > 1)
    log::info("data parallel: {} GPU rank(s) on each of {} node(s), each node a replica of the host store; "
              "gradients summed on the {}", dp.per_node, dp.nodes,
              backend->host_memory() ? "host (MPI)" : "GPUs (NCCL where the build has it, else MPI)");
  if (root && !gpu_ranks.empty()) log::info("GPU ranks: {}", gpu_ranks);

  EngineOptions eo;
  eo.checkpoint_interval = c.training.checkpoint_interval;
  eo.recompute_layers = run.recompute_layers;
  eo.micro_batch_size = run.micro_batch_size;
  eo.passes = run.passes;
  eo.max_positions = std::max(spec.max_position_embeddings, c.dataset.max_seq_len);
  set_moe_aux_options(spec, c.training.moe_aux_loss_coef, eo);
  if (root && eo.moe_aux_loss) log::info("MoE router load-balancing loss on, coefficient {}", eo.moe_aux_coef);
  Engine engine(*backend, spec, store, eo, make_engine_transfers(*backend, store, 2, dp, dtype));

  const LrSchedule schedule{c.training.lr_scheduler, c.training.learning_rate, c.training.warmup_steps,
                            c.training.num_steps, c.training.min_lr_ratio};
  Batcher batcher(std::move(data.examples), c.training.batch_size, c.dataset.shuffle, c.training.seed);
  if (resume) batcher.seek({resume->meta().data_epoch, resume->meta().data_index});
  Prefetcher prefetcher(batcher, c.dataset.num_workers);

  const std::filesystem::path out = c.training.output_dir;
  if (root) std::filesystem::create_directories(out);
  std::optional<MetricsLog> metrics;
  if (root) metrics.emplace(out / "metrics.jsonl", start_step);
  const std::string model_config_json = init_from ? init_from->meta().model_config_json : read_text(source.config_json);
  int64_t tokens_seen = resume ? resume->meta().tokens_seen : 0;
  const auto save = [&](int64_t step, bool last) {
    const std::filesystem::path file = checkpoint_path(out / "checkpoints", step);
    optimizer.checkpoint([&] {  // every rank idle: the store holds exactly `step` updates
      CheckpointMeta m;
      m.step = step;
      m.tokens_seen = tokens_seen;
      m.updates_applied = optimizer.updates_applied();
      m.data_epoch = prefetcher.cursor().epoch;
      m.data_index = prefetcher.cursor().index;
      m.seed = static_cast<int64_t>(c.training.seed);
      m.shuffle = c.dataset.shuffle ? 1 : 0;
      m.model_name = c.model.name;
      m.config_yaml = c.yaml_text;
      m.model_config_json = model_config_json;
      // A snapshot, then training goes on while it is written (or a synchronous save: the last one, or no room).
      saver->save(file, m, c.training.save_total_limit, !last);
    });
  };
  if (root) log::info("training on the {} backend: {} steps of {} sequences ({} pass(es), checkpoint every {} layers)",
            backend->name(), c.training.num_steps, c.training.batch_size, eo.passes, eo.checkpoint_interval);

  TrainSummary summary;
  summary.steps = start_step;
  double elapsed = 0;  // seconds in the steps of this run, for the ETA
  for (int64_t step = start_step + 1; step <= c.training.num_steps; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    const double waited_before = store.waited_seconds();
    const Batch batch = prefetcher.next();
    if (!leads) optimizer.expect_updates(step - 1 - start_step);  // the node's rank 0 submitted step - 1
    const StepLoss loss = forward_backward_share(engine, dp, batch, eo.passes);
    tokens_seen += batch.num_tokens;
    summary.steps = step;
    if (!leads) continue;
    const double lr = lr_at(schedule, step);
    optimizer.submit(step - start_step, lr, engine.gradient_sum_of_squares());  // every rank updates its slices while the next forward starts
    const OptimizerReport report = optimizer.report();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double waited = store.waited_seconds() - waited_before;  // the previous update the forward did not hide
    const double previous_update = optimizer.last_update_seconds();
    summary.losses.push_back(loss.mean());
    if (!root) continue;  // other nodes' ranks 0: a replica, neither logged nor saved

    StepRecord r{step, loss.mean(), report.grad_norm, lr, batch.num_tokens, batch.num_target_tokens, tokens_seen,
                 seconds, static_cast<double>(batch.num_tokens) / seconds, report.skipped};
    if (eo.moe_aux_loss) r.aux_loss = loss.aux_loss;
    if (report.skipped) log::warn("step {}: gradient norm is not finite; update skipped", step);
    elapsed += seconds;
    const StepFlops flops = step_flops(spec, layout, batch.num_tokens, batch.seq_len);
    const double tflops = flops.six_n / seconds / 1e12, model_tflops = flops.model / seconds / 1e12;
    const std::string eta = format_duration(elapsed / static_cast<double>(step - start_step) *
                                            static_cast<double>(c.training.num_steps - step));
    if (step % c.training.logging_steps == 0 || step == c.training.num_steps) {
      metrics->append(r);
      log::info("step {:>5}/{} | loss {:.4f} | grad_norm {:.4f} | lr {:.3e} | {:.0f} tokens/s | {:.2f} TFLOP/s (6N) "
                "{:.2f} (model) | {:.3f} s | ETA {} | optimizer: norm {:.3f} s, previous update {:.3f} s of which the "
                "forward waited {:.3f} s",
                step, c.training.num_steps, r.loss, r.grad_norm, lr, r.tokens_per_s, tflops, model_tflops, seconds, eta,
                report.norm_seconds, previous_update, waited);
    }
    log::status(fmt::format("step {}/{} | loss {:.4f} | {:.0f} tokens/s | {:.2f} TFLOP/s | ETA {}", step,
                            c.training.num_steps, r.loss, r.tokens_per_s, tflops, eta));
    if (c.training.save_steps > 0 && step % c.training.save_steps == 0 && step != c.training.num_steps)
      save(step, false);
  }
  if (!leads) {
    optimizer.wait_finished();  // every checkpoint message has been served
    return summary;
  }
  if (root && (summary.steps > start_step || !resume)) save(summary.steps, true);

  optimizer.finish();
  saver->wait();
  if (!root) return summary;
  std::vector<const float*> regions;
  for (int64_t r = 0; r < store.num_regions(); ++r) regions.push_back(store.master(r));
  summary.final_dir = out / "final";
  export_hf_directory(summary.final_dir, spec, layout, regions, dtype, source.dir, carried);
  log::info("saved the final model ({}) to {}", dtype_name(dtype), summary.final_dir.string());
  return summary;
}

}  // namespace mt
