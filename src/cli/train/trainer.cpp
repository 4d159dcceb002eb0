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
#include "cli/train/evaluation.h"
#include "cli/train/example_broadcast.h"
#include "cli/train/graceful_stop.h"
#include "cli/train/hf_checkpoints.h"
#include "cli/train/metrics_log.h"
#include "cli/train/model_files.h"
#include "cli/train/output_lock.h"
#include "cli/train/output_room.h"
#include "cli/train/preflight.h"
#include "cli/train/kto_step.h"
#include "cli/train/preference_run.h"
#include "cli/train/resume.h"
#include "cli/train/run_length.h"
#include "cli/train/run_report.h"
#include "cli/train/train_plan.h"
#include "cli/train/training_data.h"
#include "config/yaml_fields.h"
#include "core/error.h"
#include "core/log.h"
#include "core/stop_signal.h"
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
#include "plan/moe_keep_plan.h"
#include "plan/resident_plan.h"
#include "store/host_store.h"
#include "store/shared_memory_check.h"
#include "store/tier_log.h"

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
  // Each region straight into the store's master, or through one region-sized buffer where the master is on the
  // state tier (the Adam moments there start as the tier's zeros).
  std::vector<float> staged(store.in_ram(StateKind::master) ? 0 : static_cast<size_t>(layout.largest_region_numel));
  for (int64_t r = 0; r < store.num_regions(); ++r) {
    const Region& region = layout.regions[static_cast<size_t>(r)];
    float* master = staged.empty() ? store.master(r) : staged.data();
    if (init_from) {
      for (const ParamSlot& slot : region.params)
        init_from->read_into("params", slot.hf_name, slot.shape, master + slot.offset);
    } else if (c.model.init == "random") {
      init_region_random(region, spec.initializer_range, c.training.seed, master);
    } else {
      load_region(region, *weights, master, spec.fp8_block_weights);
    }
    if (!staged.empty()) store.write_region_state(r, StateKind::master, master);
    store.refresh_stream_copy(r, master);
  }
  if (init_from)
    log::info("initialised the weights from checkpoint {} (step {}); optimizer state starts fresh",
              init_from->path().string(), init_from->meta().step);
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
  if (const StateTier* tier = store.tier()) log_state_tier(*tier);
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

// The mean of the step losses since the last logged step, as transformers' Trainer (and so LLaMA-Factory) logs
// its loss.
struct LossWindow {
  double sum = 0.0;
  int64_t steps = 0;
  void add(double loss) {
    sum += loss;
    ++steps;
  }
  double take() {
    const double mean = sum / static_cast<double>(steps);
    sum = 0.0;
    steps = 0;
    return mean;
  }
};

// How the run's length and warmup were resolved, where the config asks for epochs or a warmup ratio.
void log_run_length(const TrainingConfig& t, const RunLength& length, int64_t examples) {
  if (t.num_train_epochs > 0.0)
    log::info("training.num_train_epochs {}: {} steps ({} per epoch of {} examples in batches of {}); "
              "training.num_steps is not used", real_to_text(t.num_train_epochs), length.steps, length.steps_per_epoch,
              examples, t.batch_size);
  if (t.warmup_ratio > 0.0)
    log::info("training.warmup_ratio {}: {} warmup steps of {}", real_to_text(t.warmup_ratio), length.warmup_steps,
              length.steps);
}

// What the keys that name another framework's choice run here.
void log_mapped_choices(const Config& c) {
  log::info("model.attn_implementation {} and optimizer.type {} name other frameworks' choices; here attention runs "
            "MegaTrain's own kernels and the optimizer is MegaTrain's exact AdamW (torch.optim.AdamW's update) on the "
            "host store, whatever they say", c.model.attn_implementation, c.optimizer.type);
}

}  // namespace

TrainSummary run_training(const Config& c) {
  return run_training(c, dist::make_data_parallel(gpus_per_node(c.training.gpus_per_node), visible_gpu_numa_nodes()));
}

TrainSummary run_training(const Config& c, const dist::DataParallel& dp) {
  const dist::Context& ctx = dist::context();
  const bool root = ctx.is_root(), leads = dp.leads_node();
  require_batch_splits(c, dp, std::max<int64_t>(c.training.gradient_accumulation_steps, 1));
  if (root) require_output_dir_resumed_or_overwritten(c);
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
  const std::vector<CarriedTensor> carried = weights ? carried_tensors(spec, layout, *weights)
                                                     : std::vector<CarriedTensor>{};
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
    int64_t frozen = 0, fp8 = 0;
    std::set<std::string> groups;
    for (const CarriedTensor& c : carried) {
      frozen += c.tensor->numel();
      fp8 += c.scale_inv != nullptr;
      groups.insert(c.tensor->name.substr(0, c.tensor->name.find('.', c.tensor->name.find('.') + 1)));
    }
    log::info("left frozen and carried through export unchanged: {} tensors, {:.3f} M parameters ({}){}",
              carried.size(), static_cast<double>(frozen) / 1e6, fmt::format("{}", fmt::join(groups, ", ")),
              fp8 ? fmt::format("; {} of them FP8 blocks, exported dequantised", fp8) : "");
  }

  // The node's leading GPU rank reads and tokenizes the data; the node's other GPU ranks receive its examples.
  TrainingData data;
  if (leads) data = load_training_data(c, source, spec, true);
  broadcast_examples(data.examples, dp.node_comm);
  broadcast_examples(data.eval_examples, dp.node_comm);
  const RunLength length = resolve_run_length(c.training, static_cast<int64_t>(data.examples.size()));
  const int64_t num_steps = length.steps;
  const std::optional<CheckpointFile> resume = open_resume_checkpoint(c);
  if (resume) check_resume_fits(*resume, c, layout);
  const int64_t start_step = resume ? resume->meta().step : 0;

  // Every input is valid: the other ranks of the node join (training_worker.cpp), building the same store
  // and optimizer, and every rank updates its own slices. Every node holds a replica; every compute rank
  // (dist/data_parallel.h) runs this function on its share of each batch.
  std::unique_ptr<Backend> backend = select_backend(dtype, dp.device, c.runtime);
  dist::require_same(dp, "compute backend", backend->name());  // NCCL and MPI sums cannot mix
  const std::string gpu_ranks = dp.size > 1 && !backend->host_memory() ? dist::describe_gpu_ranks(dp) : "";
  // Before the store and the output directory exist.
  const RunShape planned = preflight(c, spec, *backend, ctx.node_size, dp.size);
  // Every input is checked: the run takes its output directory before anything of it is written (the state tier's
  // files, named after it, among them).
  std::optional<OutputDirLock> output_lock;
  if (root) output_lock.emplace(c.training.output_dir);
  // What every checkpoint keeps for a complete export: the tokenizer and chat files, and where the model came from.
  ModelFiles model_files;
  if (root && init_from) model_files = init_from->model_files();
  if (root && model_files.empty()) model_files = gather_model_files(c, source, spec.family);
  std::error_code absolute_error;
  const std::string model_name = std::filesystem::exists(c.model.name)
                                     ? std::filesystem::absolute(c.model.name, absolute_error).lexically_normal().string()
                                     : c.model.name;
  // The MoE layers that keep their expert activations, chosen with the resident optimizer state.
  const MoeKeepPlan moe_keep = plan_moe_keep(spec, planned, backend->device_memory_bytes(), dp.size,
                                             c.training.optimizer_on_gpu == "auto" &&
                                                 c.training.ref_model.empty(),  // ref_model refills the master
                                             c.training.moe_keep_layers);
  const ResidentPlan& resident = moe_keep.resident;
  const RunShape run = with_moe_keep(planned, moe_keep);
  backend->set_attention_workspace(plan_gpu(spec, run).attention_workspace);  // what the plan reserved for cuDNN
  require_batch_splits(c, dp, run.passes);  // auto passes are known now
  const OptimizerSettings os = optimizer_settings(c);
  const int64_t updates_applied = resume ? resume->meta().updates_applied : 0;
  if (leads)
    broadcast_train_plan({layout, stream_dtype_of(c), os, updates_applied, tier_settings_of(c)});
  else
    receive_train_plan();  // the node's rank 0 validated the same inputs
  HostStore store(layout, stream_dtype_of(c), tier_settings_of(c));
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
  eo.moe_keep_layers = run.moe_keep_layers;
  eo.checkpoints = run.checkpoints;
  eo.micro_batch_size = run.micro_batch_size;
  eo.passes = run.passes;
  eo.max_positions = std::max(spec.max_position_embeddings, c.dataset.max_seq_len);
  set_moe_aux_options(spec, c.training.moe_aux_loss_coef, eo);
  if (root && eo.moe_aux_loss) log::info("MoE router load-balancing loss on, coefficient {}", eo.moe_aux_coef);
  if (root && resident.regions > 0) log::info("{}", describe_resident(resident, layout));
  if (root && moe_keep.moe_layers > 0) log::info("MoE: {}", describe_moe_keep(moe_keep));
  Engine engine(*backend, spec, store, eo,
                make_engine_transfers(*backend, store, 2, dp, dtype, eo.checkpoints, resident.regions));
  const bool kto = c.training.stage == "kto", preference = c.training.stage == "dpo" || kto;
  const PreferenceOptions preference_opts = preference_options(c.training);
  const KtoOptions kto_opts = kto_options(c.training);
  if (preference) {
    // training.ref_model: its weights fill the store for the reference pass, then the starting weights again.
    std::optional<SafetensorsModel> ref_weights;
    const auto use_ref_model = [&] {
      const ModelSource ref_source = resolve_model_source(c.training.ref_model);
      ModelSpec ref_spec = load_model_spec(ref_source.config_json, c.model.trust_remote_code);
      MT_REQUIRE(ref_spec.architecture == spec.architecture && ref_spec.vocab_size == spec.vocab_size &&
                     make_param_layout(ref_spec).total_numel == layout.total_numel,
                 "{}: training.ref_model: '{}' is {} with vocab {} and {} parameters; the model is {} with vocab {} and "
                 "{} parameters", c.source.string(), c.training.ref_model, ref_spec.architecture, ref_spec.vocab_size,
                 make_param_layout(ref_spec).total_numel, spec.architecture, spec.vocab_size, layout.total_numel);
      MT_REQUIRE(!ref_source.dir.empty(), "{}: training.ref_model: '{}' has no weights", c.source.string(),
                 c.training.ref_model);
      ref_weights.emplace(ref_source.dir);
      Config ref_config = c;
      ref_config.model.init = "pretrained";
      if (leads) fill_master_weights(ref_config, spec, std::nullopt, &*ref_weights, store);
      MT_CHECK_MPI(MPI_Barrier(dp.node_comm));  // the node's store holds them before any of its ranks streams it
    };
    const auto use_starting_weights = [&] {
      MT_CHECK_MPI(MPI_Barrier(dp.node_comm));  // every rank of the node has finished its reference batches
      ref_weights.reset();
      if (leads) fill_master_weights(c, spec, init_from, weights ? &*weights : nullptr, store);
      MT_CHECK_MPI(MPI_Barrier(dp.node_comm));
    };
    attach_reference_logps(c, engine, data.examples, data.eval_examples, resume.has_value(), dp,
                           c.training.ref_model.empty() ? std::function<void()>{} : use_ref_model,
                           c.training.ref_model.empty() ? std::function<void()>{} : use_starting_weights);
  }

  const LrSchedule schedule{c.training.lr_scheduler, c.training.learning_rate, length.warmup_steps, num_steps,
                            c.training.min_lr_ratio};
  if (root) log_run_length(c.training, length, static_cast<int64_t>(data.examples.size()));
  if (root) log_mapped_choices(c);
  Evaluation evaluation(std::move(data.eval_examples), c.training.eval_steps, num_steps, c.training.batch_size, dp,
                        [&](int64_t step) {
                          if (!leads) optimizer.expect_updates(step - start_step);  // else submit has set it
                        },
                        preference && !kto ? std::optional<PreferenceOptions>(preference_opts) : std::nullopt,
                        kto ? std::optional<KtoOptions>(kto_opts) : std::nullopt);
  const auto num_examples = static_cast<double>(data.examples.size());  // 0: a stream
  const std::unique_ptr<BatchSource> batches = make_batch_source(c, source, spec, std::move(data.examples));
  if (resume) batches->seek({resume->meta().data_epoch, resume->meta().data_index});
  Prefetcher prefetcher(*batches, c.dataset.num_workers);
  // Epochs of the training examples consumed (whole passes only, for a stream of unknown length).
  const auto epochs_done = [&] {
    const DataCursor at = prefetcher.cursor();
    return static_cast<double>(at.epoch) + (num_examples > 0 ? static_cast<double>(at.index) / num_examples : 0.0);
  };

  const std::filesystem::path out = c.training.output_dir;
  if (root) require_replaceable(out / "final", Replace::ours, "final model");  // before hours of training
  if (root) remove_overwritten_checkpoints(c);
  if (root) warn_if_no_room_for_checkpoint(out, layout.total_numel * 12);
  if (root) std::filesystem::create_directories(out);
  std::optional<RunReport> reports;
  if (root) reports.emplace(c.training, out, start_step);
  RunTotals totals;
  LossWindow window;  // the logged loss: the mean over the steps since the last logged one
  const std::string model_config_json = init_from ? init_from->meta().model_config_json : read_text(source.config_json);
  int64_t tokens_seen = resume ? resume->meta().tokens_seen : 0;
  // The master weights as a Hugging Face directory (final/, checkpoint-N/) with the run's model files. The master
  // in RAM is read in place (GPU-resident regions' written back first); on the state tier (optimizer+master) one
  // region at a time is read into one region's buffer, so the export adds no more than that to the run's RAM.
  const auto export_model = [&](const std::filesystem::path& target) {
    store.sync_resident();
    std::vector<float> tier_region;
    int64_t tier_region_index = -1;
    const RegionSource region = [&](size_t r) -> const float* {
      const auto i = static_cast<int64_t>(r);
      if (store.in_ram(StateKind::master)) return store.master(i);
      if (i != tier_region_index) {
        tier_region.resize(static_cast<size_t>(store.numel(i)));
        store.read_region_state(i, StateKind::master, tier_region.data());
        tier_region_index = i;
      }
      return tier_region.data();
    };
    export_hf_directory(target, spec, layout, region, dtype, {}, carried, kMaxShardBytes, Replace::ours,
                        [&](const std::filesystem::path& dir) { write_model_files(dir, model_files); });
  };
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
      m.model_name = init_from ? init_from->meta().model_name : model_name;
      m.model_files = model_files;
      m.config_yaml = c.yaml_text;
      m.model_config_json = model_config_json;
      // A snapshot, then training goes on while it is written (or a synchronous save: the last one, or no room).
      saver->save(file, m, c.training.save_total_limit, !last);
      if (c.training.save_hf_checkpoints) {  // LLaMA-Factory's layout too (hf_checkpoints.h)
        export_model(hf_checkpoint_dir(out, step));
        prune_hf_checkpoints(out, c.training.save_total_limit);
        log::info("saved checkpoint {} (step {}) as a Hugging Face directory", hf_checkpoint_dir(out, step).string(),
                  step);
      }
    });
  };
  if (root) log::info("training on the {} backend: {} steps of {} {} ({} pass(es), checkpoint every {} layers)",
            backend->name(), num_steps, c.training.batch_size,
            kto ? "KTO examples (and their KL sequences)" : preference ? "preference pairs" : "sequences",
            eo.passes, eo.checkpoint_interval);

  TrainSummary summary;
  summary.steps = start_step;
  double elapsed = 0;  // seconds in the steps of this run, for the ETA
  const auto run_start = std::chrono::steady_clock::now();
  // The evaluation after `step` (every compute rank takes part; the root reports it).
  const auto evaluate_after = [&](int64_t step) {
    if (step <= start_step) return;
    const std::optional<EvalResult> result = evaluation.after_step(engine, step);
    if (!result || !root) return;
    reports->eval(*result, std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count());
    log::info("step {:>5}/{} | eval_loss {:.4f} over {} examples ({} target tokens) | {:.3f} s", step, num_steps,
              result->loss, result->examples, result->target_tokens, result->seconds);
  };
  int64_t skipped_in_a_row = 0;  // steps whose update was skipped for a non-finite gradient norm, up to this one
  bool stopping = false;  // a stop signal: this step is the last one (graceful_stop.h)
  for (int64_t step = start_step + 1; step <= num_steps && !stopping; ++step) {
    evaluate_after(step - 1);
    const auto t0 = std::chrono::steady_clock::now();
    const double waited_before = store.waited_seconds();
    const Batch batch = prefetcher.next();
    if (!leads) optimizer.expect_updates(step - 1 - start_step);  // the node's rank 0 submitted step - 1
    std::optional<PreferenceStepResult> pair_step;
    std::optional<KtoStepResult> kto_step;
    if (preference && !kto) pair_step = preference_forward_backward(engine, dp, batch, preference_opts, eo.passes);
    if (kto) kto_step = kto_forward_backward(engine, dp, batch, kto_opts, eo.passes);
    const StepLoss loss = kto_step    ? kto_step->loss
                          : pair_step ? pair_step->loss
                                      : forward_backward_share(engine, dp, batch, eo.passes);
    const double step_loss = kto_step ? kto_step->metrics.loss() : pair_step ? pair_step->metrics.loss() : loss.mean();
    stopping = stop_agreed(dp) && step < num_steps;
    tokens_seen += batch.num_tokens;
    summary.steps = step;
    if (!leads) continue;
    const double lr = lr_at(schedule, step);
    optimizer.submit(step - start_step, lr, engine.gradient_sum_of_squares());  // every rank updates its slices while the next forward starts
    const OptimizerReport report = optimizer.report();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double waited = store.waited_seconds() - waited_before;  // the previous update the forward did not hide
    const double previous_update = optimizer.last_update_seconds();
    summary.losses.push_back(step_loss);
    if (!root) continue;  // other nodes' ranks 0: a replica, neither logged nor saved

    window.add(step_loss);
    StepRecord r{step, step_loss, report.grad_norm, lr, batch.num_tokens, batch.num_target_tokens, tokens_seen,
                 seconds, static_cast<double>(batch.num_tokens) / seconds, report.skipped};
    totals.steps += 1;
    totals.sequences += batch.num_seqs;
    totals.tokens += batch.num_tokens;
    totals.seconds += seconds;
    r.epoch = epochs_done();
    r.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
    if (eo.moe_aux_loss) r.extra.emplace_back("aux_loss", loss.aux_loss);
    if (pair_step) r.extra = preference_metric_values(preference_opts, pair_step->metrics, "");
    if (kto_step) r.extra = kto_metric_values(kto_opts, kto_step->metrics, "");
    if (report.skipped) log::warn("step {}: gradient norm is not finite; update skipped", step);
    elapsed += seconds;
    const StepFlops flops = step_flops(spec, layout, batch.num_tokens, batch.seq_len);
    const double tflops = flops.six_n / seconds / 1e12, model_tflops = flops.model / seconds / 1e12;
    const std::string eta = format_duration(elapsed / static_cast<double>(step - start_step) *
                                            static_cast<double>(num_steps - step));
    if (step % c.training.logging_steps == 0 || step == num_steps) {
      r.loss = window.take();
      reports->step(r, tflops);
      log::info("step {:>5}/{} | loss {:.4f} | grad_norm {:.4f} | lr {:.3e}{} | {:.0f} tokens/s | {:.2f} TFLOP/s "
                "(6N) {:.2f} (model) | {:.3f} s | ETA {} | optimizer: norm {:.3f} s, previous update {:.3f} s of which "
                "the forward waited {:.3f} s",
                step, num_steps, r.loss, r.grad_norm, lr,
                pair_step  ? fmt::format(" | rewards/accuracies {:.3f} margins {:.4f}",
                                         pair_step->metrics.rewards_accuracies(), pair_step->metrics.rewards_margins())
                : kto_step ? fmt::format(" | kl {:.4f} rewards/chosen {:.4f} rejected {:.4f}", kto_step->metrics.kl(),
                                         kto_step->metrics.rewards_chosen(), kto_step->metrics.rewards_rejected())
                           : std::string(),
                r.tokens_per_s, tflops, model_tflops, seconds, eta, report.norm_seconds, previous_update, waited);
    }
    // After the step is logged (metrics.jsonl holds it), before any save of it.
    skipped_in_a_row = report.skipped ? skipped_in_a_row + 1 : 0;
    const int64_t limit = c.training.max_consecutive_skipped_steps;
    MT_REQUIRE(limit == 0 || skipped_in_a_row < limit,
               "non-finite gradient norm in {} steps in a row (steps {} to {}), every update skipped: training stopped "
               "(training.max_consecutive_skipped_steps: {}); the weights, the data or the learning rate make the loss "
               "non-finite; no final model is written", skipped_in_a_row, step - skipped_in_a_row + 1, step, limit);
    log::status(fmt::format("step {}/{} | loss {:.4f} | {:.0f} tokens/s | {:.2f} TFLOP/s | ETA {}", step,
                            num_steps, r.loss, r.tokens_per_s, tflops, eta));
    if (c.training.save_steps > 0 && step % c.training.save_steps == 0 && step != num_steps && !stopping)
      save(step, false);
  }
  if (stopping) stop_signal::mark_stopped();  // after the checkpoint below, the process exits for a requeue
  else evaluate_after(summary.steps);
  if (!leads) {
    optimizer.wait_finished();  // every checkpoint message has been served
    return summary;
  }
  if (root && (summary.steps > start_step || !resume)) save(summary.steps, true);

  optimizer.finish();
  saver->wait();
  if (!root) return summary;
  if (stopping) {
    log::info("stopped by signal {} after step {} of {}; checkpoint written, exiting with status {} for a requeue",
              stop_signal::requested(), summary.steps, num_steps, stop_signal::kExitStoppedForRequeue);
    return summary;
  }
  summary.final_dir = out / "final";
  export_model(summary.final_dir);
  totals.epoch = epochs_done();
  for (const std::filesystem::path& file : reports->finish(totals)) log::info("wrote {}", file.string());
  log::info("saved the final model ({}) to {}", dtype_name(dtype), summary.final_dir.string());
  return summary;
}

}  // namespace mt
