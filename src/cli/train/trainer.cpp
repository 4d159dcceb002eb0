// Training driver (see trainer.h): a Trainer per run, its parts from cli/runtime/run.h.
#include "cli/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>

#include "backend/backend.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_writer.h"
#include "cli/runtime/backend_select.h"
#include "cli/runtime/data_parallel_step.h"
#include "cli/runtime/optimizer_service.h"
#include "cli/runtime/run.h"
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
#include "cli/train/train_model.h"
#include "cli/train/train_plan.h"
#include "cli/train/training_data.h"
#include "config/yaml_fields.h"
#include "core/error.h"
#include "core/log.h"
#include "core/median.h"
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
#include "plan/step_plan.h"
#include "plan/resident_plan.h"
#include "plan/step_time.h"
#include "store/host_store.h"
#include "store/shared_memory_check.h"
#include "store/tier_log.h"

namespace mt {
namespace {

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

// One `train` run on a compute rank, its parts as members: built in the constructor, in the order every rank of the
// node follows (model, data, backend and plan, the train plan for the workers, store and optimizer, engine, the
// reference pass of a preference stage, the data stream, the output directory), then trained by train().
class Trainer {
 public:
  Trainer(const Config& c, const dist::DataParallel& dp);
  TrainSummary train();

 private:
  void load_data();
  void plan_and_fill_store();
  void start_engine();
  void attach_reference();
  void prepare_steps();
  void step(int64_t step);
  void save(int64_t step, bool last);
  void evaluate_after(int64_t step);
  double epochs_done() const;  // of the training examples (whole passes only, for a stream of unknown length)
  TrainSummary finish();

  const Config& c_;
  const dist::DataParallel& dp_;
  const RunRoles roles_;
  TrainModel model_;  // its spec moves into run_; its source, weights and checkpoint stay here
  std::optional<OutputDirLock> output_lock_;  // world rank 0: held until the store and its tier files are gone
  Run run_;
  const std::vector<CarriedTensor> carried_;
  const DType dtype_;
  TrainingData data_;
  RunLength length_;
  std::optional<CheckpointFile> resume_;
  int64_t start_step_ = 0;
  ModelFiles model_files_;  // what every checkpoint keeps for a complete export: tokenizer and chat files
  std::string model_name_;  // where the model came from, as checkpoints record it
  // A compute rank other than the node's rank 0 takes part in checkpoints from its optimizer thread; destroyed
  // before the run's store (its background write reads the snapshot, then ends).
  std::optional<CheckpointSaver> saver_;
  Engine* engine_ = nullptr;
  const bool kto_, preference_;
  const PreferenceOptions preference_opts_;
  const KtoOptions kto_opts_;
  LrSchedule schedule_;
  std::optional<Evaluation> evaluation_;
  double num_examples_ = 0;  // 0: a stream
  std::unique_ptr<BatchSource> batches_;
  std::optional<Prefetcher> prefetcher_;
  std::filesystem::path out_;
  std::optional<RunReport> reports_;
  RunTotals totals_;
  LossWindow window_;  // the logged loss: the mean over the steps since the last logged one
  std::string model_config_json_;
  int64_t tokens_seen_ = 0;
  TrainSummary summary_;
  double elapsed_ = 0;  // seconds in the steps of this run, for the ETA
  std::vector<double> parameters_passes_;  // rank 0's parameters pass of each finished update (root), seconds
  std::chrono::steady_clock::time_point run_start_;
  int64_t skipped_in_a_row_ = 0;  // steps whose update was skipped for a non-finite gradient norm, up to this one
  bool stopping_ = false;  // a stop signal: this step is the last one (graceful_stop.h)
};

// The model of a run whose batch splits over the ranks and whose output directory may be written.
TrainModel checked_train_model(const Config& c, const dist::DataParallel& dp, const RunRoles& roles) {
  require_batch_splits(c, dp, std::max<int64_t>(c.training.gradient_accumulation_steps, 1));
  if (roles.root) require_output_dir_resumed_or_overwritten(c);
  return read_train_model(c);
}

Trainer::Trainer(const Config& c, const dist::DataParallel& dp)
    : c_(c),
      dp_(dp),
      roles_(run_roles(dp)),
      model_(checked_train_model(c, dp, roles_)),
      run_(std::move(model_.spec), dp),
      carried_(model_.weights ? carried_tensors(run_.spec(), run_.layout(), *model_.weights)
                              : std::vector<CarriedTensor>{}),
      dtype_(dtype_from_name(c.model.dtype)),
      kto_(c.training.stage == "kto"),
      preference_(c.training.stage == "dpo" || kto_),
      preference_opts_(preference_options(c.training)),
      kto_opts_(kto_options(c.training)) {
  if (roles_.root) log_train_model(c_, run_.spec(), run_.layout(), carried_);
  load_data();
  plan_and_fill_store();
  start_engine();
  if (preference_) attach_reference();
  prepare_steps();
}

// The node's leading GPU rank reads and tokenizes the data; the node's other GPU ranks receive its examples.
void Trainer::load_data() {
  if (roles_.leads_node) data_ = load_training_data(c_, model_.source, run_.spec(), true);
  broadcast_examples(data_.examples, dp_.node_comm);
  broadcast_examples(data_.eval_examples, dp_.node_comm);
  length_ = resolve_run_length(c_.training, static_cast<int64_t>(data_.examples.size()));
  resume_ = open_resume_checkpoint(c_);
  if (resume_) check_resume_fits(*resume_, c_, run_.layout());
  start_step_ = resume_ ? resume_->meta().step : 0;
}

// Every input is valid: the other ranks of the node join (training_worker.cpp), building the same store and
// optimizer, and every rank updates its own slices. Every node holds a replica; every compute rank
// (dist/data_parallel.h) trains on its share of each batch.
void Trainer::plan_and_fill_store() {
  const bool root = roles_.root, leads = roles_.leads_node;
  Backend& backend = run_.select_backend(dtype_, c_.runtime);
  const std::string gpu_ranks = dp_.size > 1 && !backend.host_memory() ? dist::describe_gpu_ranks(dp_) : "";
  // Before the store and the output directory exist.
  PassChoice passes;
  const RunShape planned =
      preflight(c_, run_.spec(), backend, dist::context().node_size, dp_.size, run_.rates(), &passes);
  // Every input is checked: the run takes its output directory before anything of it is written (the state tier's
  // files, named after it, among them).
  if (root) output_lock_.emplace(c_.training.output_dir);
  const std::optional<CheckpointFile>& init_from = model_.init_from;
  if (root && init_from) model_files_ = init_from->model_files();
  if (root && model_files_.empty()) model_files_ = gather_model_files(c_, model_.source, run_.spec().family);
  std::error_code absolute_error;
  model_name_ = std::filesystem::exists(c_.model.name)
                    ? std::filesystem::absolute(c_.model.name, absolute_error).lexically_normal().string()
                    : c_.model.name;
  // The MoE layers that keep their expert activations and (auto) the layers that recompute, chosen with the resident
  // optimizer state by the predicted step.
  const RunShape& shape = run_.plan(planned,
                                    c_.training.optimizer_on_gpu == "auto" &&
                                        c_.training.ref_model.empty(),  // ref_model refills the master
                                    c_.training.moe_keep_layers, c_.training.recompute_layers < 0, passes);
  require_batch_splits(c_, dp_, shape.passes);  // auto passes are known now
  const OptimizerSettings os = optimizer_settings(c_);
  const int64_t updates_applied = resume_ ? resume_->meta().updates_applied : 0;
  if (leads)
    broadcast_train_plan({run_.layout(), stream_dtype_of(c_), os, updates_applied, tier_settings_of(c_)});
  else
    receive_train_plan();  // the node's rank 0 validated the same inputs
  run_.open_store(stream_dtype_of(c_), tier_settings_of(c_), os,
                  leads ? std::function<void()>{} : [this] { saver_->save({}, {}, 0); });
  HostStore& store = run_.store();
  saver_.emplace(store);
  run_.optimizer().set_updates_applied(updates_applied);
  if (leads && resume_) {  // the node's rank 0 fills the store
    const auto t_load = std::chrono::steady_clock::now();
    restore_store(*resume_, store);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
    log::info("restored master weights and optimizer state from {} in {:.3f} s ({:.2f} GB/s)",
              resume_->path().string(), s, static_cast<double>(run_.layout().total_numel) * 12 / 1e9 / s);
  } else if (leads) {
    fill_master_weights(c_, run_.spec(), init_from, model_.weights ? &*model_.weights : nullptr, store);
  }
  run_.store_filled();
  if (root) log_store(store);
  if (root && dp_.size > 1)
    log::info("data parallel: {} GPU rank(s) on each of {} node(s), each node a replica of the host store; "
              "gradients summed on the {}", dp_.per_node, dp_.nodes,
              backend.host_memory() ? "host (MPI)" : "GPUs (NCCL where the build has it, else MPI)");
  if (root && !gpu_ranks.empty()) log::info("GPU ranks: {}", gpu_ranks);
}

void Trainer::start_engine() {
  engine_ = &run_.start_engine(c_.training.checkpoint_interval,
                               std::max(run_.spec().max_position_embeddings, c_.dataset.max_seq_len), 2,
                               c_.training.moe_aux_loss_coef);
  const EngineOptions& eo = run_.engine_options();
  if (!roles_.root) return;
  if (eo.moe_aux_loss) log::info("MoE router load-balancing loss on, coefficient {}", eo.moe_aux_coef);
  if (run_.resident().regions > 0) log::info("{}", describe_resident(run_.resident(), run_.layout()));
  if (run_.step_plan().moe_layers > 0)
    log::info("MoE: {}", describe_step_plan(run_.step_plan()));
  else if (run_.backend().device_memory_bytes() > 0)  // the step the plan was chosen by (plan/step_time.h)
    log::info("plan: {} at the step rates", describe_step_time(run_.step_plan().step));
}

// The preference stages' reference log-probabilities. training.ref_model: its weights fill the store for the
// reference pass, then the starting weights again.
void Trainer::attach_reference() {
  const ModelSpec& spec = run_.spec();
  const ParamLayout& layout = run_.layout();
  HostStore& store = run_.store();
  const bool leads = roles_.leads_node;
  std::optional<SafetensorsModel> ref_weights;
  const auto use_ref_model = [&] {
    const ModelSource ref_source = resolve_model_source(c_.training.ref_model);
    ModelSpec ref_spec = load_model_spec(ref_source.config_json, c_.model.trust_remote_code);
    MT_REQUIRE(ref_spec.architecture == spec.architecture && ref_spec.vocab_size == spec.vocab_size &&
                   make_param_layout(ref_spec).total_numel == layout.total_numel,
               "{}: training.ref_model: '{}' is {} with vocab {} and {} parameters; the model is {} with vocab {} and "
               "{} parameters", c_.source.string(), c_.training.ref_model, ref_spec.architecture, ref_spec.vocab_size,
               make_param_layout(ref_spec).total_numel, spec.architecture, spec.vocab_size, layout.total_numel);
    MT_REQUIRE(!ref_source.dir.empty(), "{}: training.ref_model: '{}' has no weights", c_.source.string(),
               c_.training.ref_model);
    ref_weights.emplace(ref_source.dir);
    Config ref_config = c_;
    ref_config.model.init = "pretrained";
    if (leads) fill_master_weights(ref_config, spec, std::nullopt, &*ref_weights, store);
    MT_CHECK_MPI(MPI_Barrier(dp_.node_comm));  // the node's store holds them before any of its ranks streams it
  };
  const auto use_starting_weights = [&] {
    MT_CHECK_MPI(MPI_Barrier(dp_.node_comm));  // every rank of the node has finished its reference batches
    ref_weights.reset();
    if (leads) fill_master_weights(c_, spec, model_.init_from, model_.weights ? &*model_.weights : nullptr, store);
    MT_CHECK_MPI(MPI_Barrier(dp_.node_comm));
  };
  attach_reference_logps(c_, *engine_, data_.examples, data_.eval_examples, resume_.has_value(), dp_,
                         c_.training.ref_model.empty() ? std::function<void()>{} : use_ref_model,
                         c_.training.ref_model.empty() ? std::function<void()>{} : use_starting_weights);
}

// The schedule, the evaluation, the batches and the output directory.
void Trainer::prepare_steps() {
  const bool root = roles_.root;
  schedule_ = {c_.training.lr_scheduler, c_.training.learning_rate, length_.warmup_steps, length_.steps,
               c_.training.min_lr_ratio};
  if (root) log_run_length(c_.training, length_, static_cast<int64_t>(data_.examples.size()));
  if (root) log_mapped_choices(c_);
  evaluation_.emplace(std::move(data_.eval_examples), c_.training.eval_steps, length_.steps, c_.training.batch_size,
                      dp_,
                      [this](int64_t step) {
                        if (!roles_.leads_node) run_.optimizer().expect_updates(step - start_step_);  // else submit
                      },
                      preference_ && !kto_ ? std::optional<PreferenceOptions>(preference_opts_) : std::nullopt,
                      kto_ ? std::optional<KtoOptions>(kto_opts_) : std::nullopt);
  num_examples_ = static_cast<double>(data_.examples.size());
  batches_ = make_batch_source(c_, model_.source, run_.spec(), std::move(data_.examples));
  if (resume_) batches_->seek({resume_->meta().data_epoch, resume_->meta().data_index});
  prefetcher_.emplace(*batches_, c_.dataset.num_workers);

  out_ = c_.training.output_dir;
  if (root) require_replaceable(out_ / "final", Replace::ours, "final model");  // before hours of training
  if (root) remove_overwritten_checkpoints(c_);
  if (root) warn_if_no_room_for_checkpoint(out_, run_.layout().total_numel * 12);
  if (root) std::filesystem::create_directories(out_);
  if (root) reports_.emplace(c_.training, out_, start_step_);
  model_config_json_ = model_.init_from ? model_.init_from->meta().model_config_json
                                        : read_text(model_.source.config_json);
  tokens_seen_ = resume_ ? resume_->meta().tokens_seen : 0;
  if (root) log::info("training on the {} backend: {} steps of {} {} ({} pass(es), checkpoint every {} layers)",
            run_.backend().name(), length_.steps, c_.training.batch_size,
            kto_ ? "KTO examples (and their KL sequences)" : preference_ ? "preference pairs" : "sequences",
            run_.engine_options().passes, run_.engine_options().checkpoint_interval);
}

double Trainer::epochs_done() const {
  const DataCursor at = prefetcher_->cursor();
  return static_cast<double>(at.epoch) + (num_examples_ > 0 ? static_cast<double>(at.index) / num_examples_ : 0.0);
}

void Trainer::save(int64_t step, bool last) {
  const std::filesystem::path file = checkpoint_path(out_ / "checkpoints", step);
  OptimizerService& optimizer = run_.optimizer();
  optimizer.checkpoint([&] {  // every rank idle: the store holds exactly `step` updates
    CheckpointMeta m;
    m.step = step;
    m.tokens_seen = tokens_seen_;
    m.updates_applied = optimizer.updates_applied();
    m.data_epoch = prefetcher_->cursor().epoch;
    m.data_index = prefetcher_->cursor().index;
    m.seed = static_cast<int64_t>(c_.training.seed);
    m.shuffle = c_.dataset.shuffle ? 1 : 0;
    m.model_name = model_.init_from ? model_.init_from->meta().model_name : model_name_;
    m.model_files = model_files_;
    m.config_yaml = c_.yaml_text;
    m.model_config_json = model_config_json_;
    // A snapshot, then training goes on while it is written (or a synchronous save: the last one, or no room).
    saver_->save(file, m, c_.training.save_total_limit, !last);
    if (c_.training.save_hf_checkpoints) {  // LLaMA-Factory's layout too (hf_checkpoints.h)
      export_master_weights(hf_checkpoint_dir(out_, step), run_.store(), run_.spec(), dtype_, carried_, model_files_);
      prune_hf_checkpoints(out_, c_.training.save_total_limit);
      log::info("saved checkpoint {} (step {}) as a Hugging Face directory", hf_checkpoint_dir(out_, step).string(),
                step);
    }
  });
}

// The evaluation after `step` (every compute rank takes part; the root reports it).
void Trainer::evaluate_after(int64_t step) {
  if (step <= start_step_) return;
  const std::optional<EvalResult> result = evaluation_->after_step(*engine_, step);
  if (!result || !roles_.root) return;
  reports_->eval(*result, std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start_).count());
  log::info("step {:>5}/{} | eval_loss {:.4f} over {} examples ({} target tokens) | {:.3f} s", step, length_.steps,
            result->loss, result->examples, result->target_tokens, result->seconds);
}

TrainSummary Trainer::train() {
  summary_.steps = start_step_;
  run_start_ = std::chrono::steady_clock::now();
  for (int64_t s = start_step_ + 1; s <= length_.steps && !stopping_; ++s) step(s);
  return finish();
}

void Trainer::step(int64_t step) {
  const bool root = roles_.root, leads = roles_.leads_node;
  const int64_t num_steps = length_.steps;
  Engine& engine = *engine_;
  HostStore& store = run_.store();
  OptimizerService& optimizer = run_.optimizer();
  const EngineOptions& eo = run_.engine_options();
  evaluate_after(step - 1);
  const auto t0 = std::chrono::steady_clock::now();
  const double waited_before = store.waited_seconds();
  const Batch batch = prefetcher_->next();
  if (!leads) optimizer.expect_updates(step - 1 - start_step_);  // the node's rank 0 submitted step - 1
  std::optional<PreferenceStepResult> pair_step;
  std::optional<KtoStepResult> kto_step;
  if (preference_ && !kto_) pair_step = preference_forward_backward(engine, dp_, batch, preference_opts_, eo.passes);
  if (kto_) kto_step = kto_forward_backward(engine, dp_, batch, kto_opts_, eo.passes);
  const StepLoss loss = kto_step    ? kto_step->loss
                        : pair_step ? pair_step->loss
                                    : forward_backward_share(engine, dp_, batch, eo.passes);
  const double step_loss = kto_step ? kto_step->metrics.loss() : pair_step ? pair_step->metrics.loss() : loss.mean();
  stopping_ = stop_agreed(dp_) && step < num_steps;
  tokens_seen_ += batch.num_tokens;
  summary_.steps = step;
  if (!leads) return;
  const double lr = lr_at(schedule_, step);
  optimizer.submit(step - start_step_, lr, engine.gradient_sum_of_squares());  // every rank updates its slices while the next forward starts
  const OptimizerReport report = optimizer.report();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double waited = store.waited_seconds() - waited_before;  // the previous update the forward did not hide
  const double previous_update = optimizer.last_update_seconds();
  summary_.losses.push_back(step_loss);
  if (!root) return;  // other nodes' ranks 0: a replica, neither logged nor saved
  if (previous_update > 0) parameters_passes_.push_back(previous_update);

  window_.add(step_loss);
  StepRecord r{step, step_loss, report.grad_norm, lr, batch.num_tokens, batch.num_target_tokens, tokens_seen_,
               seconds, static_cast<double>(batch.num_tokens) / seconds, report.skipped};
  totals_.steps += 1;
  totals_.sequences += batch.num_seqs;
  totals_.tokens += batch.num_tokens;
  totals_.seconds += seconds;
  r.epoch = epochs_done();
  r.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start_).count();
  if (eo.moe_aux_loss) r.extra.emplace_back("aux_loss", loss.aux_loss);
  if (pair_step) r.extra = preference_metric_values(preference_opts_, pair_step->metrics, "");
  if (kto_step) r.extra = kto_metric_values(kto_opts_, kto_step->metrics, "");
  if (report.skipped) log::warn("step {}: gradient norm is not finite; update skipped", step);
  elapsed_ += seconds;
  const StepFlops flops = step_flops(run_.spec(), run_.layout(), batch.num_tokens, batch.seq_len);
  const double tflops = flops.six_n / seconds / 1e12, model_tflops = flops.model / seconds / 1e12;
  const std::string eta = format_duration(elapsed_ / static_cast<double>(step - start_step_) *
                                          static_cast<double>(num_steps - step));
  if (step % c_.training.logging_steps == 0 || step == num_steps) {
    r.loss = window_.take();
    reports_->step(r, tflops);
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
  skipped_in_a_row_ = report.skipped ? skipped_in_a_row_ + 1 : 0;
  const int64_t limit = c_.training.max_consecutive_skipped_steps;
  MT_REQUIRE(limit == 0 || skipped_in_a_row_ < limit,
             "non-finite gradient norm in {} steps in a row (steps {} to {}), every update skipped: training stopped "
             "(training.max_consecutive_skipped_steps: {}); the weights, the data or the learning rate make the loss "
             "non-finite; no final model is written", skipped_in_a_row_, step - skipped_in_a_row_ + 1, step, limit);
  log::status(fmt::format("step {}/{} | loss {:.4f} | {:.0f} tokens/s | {:.2f} TFLOP/s | ETA {}", step,
                          num_steps, r.loss, r.tokens_per_s, tflops, eta));
  if (c_.training.save_steps > 0 && step % c_.training.save_steps == 0 && step != num_steps && !stopping_)
    save(step, false);
}

// After the last step: the final evaluation, the last checkpoint, and world rank 0's export and reports.
TrainSummary Trainer::finish() {
  const bool root = roles_.root;
  OptimizerService& optimizer = run_.optimizer();
  if (stopping_) stop_signal::mark_stopped();  // after the checkpoint below, the process exits for a requeue
  else evaluate_after(summary_.steps);
  if (!roles_.leads_node) {
    optimizer.wait_finished();  // every checkpoint message has been served
    return summary_;
  }
  if (root && (summary_.steps > start_step_ || !resume_)) save(summary_.steps, true);

  optimizer.finish();
  saver_->wait();
  if (!root) return summary_;
  if (stopping_) {
    log::info("stopped by signal {} after step {} of {}; checkpoint written, exiting with status {} for a requeue",
              stop_signal::requested(), summary_.steps, length_.steps, stop_signal::kExitStoppedForRequeue);
    return summary_;
  }
  if (tier_settings_of(c_).mode == OffloadMode::none)  // the NVMe tier's is its own; none measured: nothing kept
    run_.keep_parameters_pass(median(parameters_passes_));
  summary_.final_dir = out_ / "final";
  export_master_weights(summary_.final_dir, run_.store(), run_.spec(), dtype_, carried_, model_files_);
  totals_.epoch = epochs_done();
  for (const std::filesystem::path& file : reports_->finish(totals_)) log::info("wrote {}", file.string());
  log::info("saved the final model ({}) to {}", dtype_name(dtype_), summary_.final_dir.string());
  return summary_;
}

}  // namespace

TrainSummary run_training(const Config& c) {
  return run_training(c, dist::make_data_parallel(gpus_per_node(c.training.gpus_per_node), visible_gpu_numa_nodes()));
}

// Every compute rank of dp; world rank 0 logs, saves and exports.
TrainSummary run_training(const Config& c, const dist::DataParallel& dp) { return Trainer(c, dp).train(); }

}  // namespace mt
