// `megatrain calc-resource`: sizes a run for a machine from the memory plan that train's preflight uses
// (plan/resource_advice.h). Flags, or prompts when run on a terminal without any flag; --json for machines. Every
// figure comes from the plan and the given hardware (--gpu-tflops, --pcie-gbs, --nvme-gbs); the recommended
// micro-batch is the plan's; a run that does not fit gets every shortfall and the settings that fix each, found by
// planning the run again with them.
// Invariant: without a terminal every missing required input is an error naming its flag, never a prompt.
#include <unistd.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "cli/command.h"
#include "core/error.h"
#include "model/model_source.h"
#include "model/model_spec.h"
#include "plan/cudnn_attention_plan.h"
#include "plan/step_plan.h"
#include "plan/pass_batch_advice.h"
#include "plan/resident_plan.h"
#include "model/flops.h"
#include "plan/resource_advice.h"
#include "plan/sequence_limit.h"
#include "plan/step_bound.h"
#include "plan/step_rates.h"
#include "plan/step_time.h"
#include "store/shared_memory_check.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Inputs {
  std::optional<double> gpu_gib, ram_gib;
  std::optional<std::string> model;
  std::optional<int64_t> seq;
  int64_t batch = 8, micro_batch = 0, passes = 0, interval = 0, slots = 2, ranks = 1, recompute = -1;
  std::string dtype = "bfloat16";
  std::string stream_dtype = "float32";
  std::string offload = "none";
  std::string checkpoints = "auto";  // training.activation_checkpoints
  double nvme_gb = -1, nvme_gbs = 0, gpu_tflops = 450, pcie_gbs = 55;
  bool json = false;
  bool packing = false;  // dataset.packing
};

// Known names: configs/models/<name>.json under $MEGATRAIN_HOME, the working directory, the binary's parent
// directories, then the source tree the binary was built from. A hub id (org/Name, as the hub writes it) is its
// snapshot in the local Hugging Face cache, else the shape we ship under the lowercase Name
// (Qwen/Qwen2.5-7B -> qwen2.5-7b).
fs::path find_model(const std::string& given) {
  if (fs::is_regular_file(given)) return given;
  if (fs::is_directory(given) && fs::is_regular_file(fs::path(given) / "config.json"))
    return fs::path(given) / "config.json";
  std::string name = given;
  const size_t slash = given.find('/');
  if (slash != std::string::npos && slash > 0 && given.find('/', slash + 1) == std::string::npos) {
    try {
      return resolve_model_source(given).config_json;
    } catch (const Error&) {  // not in the cache: a shape we ship, by name
      name = given.substr(slash + 1);
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    }
  }
  std::vector<fs::path> roots;
  if (const char* home = std::getenv("MEGATRAIN_HOME")) roots.emplace_back(home);
  roots.emplace_back(".");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) roots.insert(roots.end(), {exe.parent_path().parent_path(), exe.parent_path()});
  roots.emplace_back(MEGATRAIN_SOURCE_DIR);
  std::set<std::string> known;
  for (const fs::path& root : roots) {
    const fs::path file = root / "configs" / "models" / (name + ".json");
    if (fs::is_regular_file(file)) return file;
    if (known.empty() && fs::is_directory(root / "configs" / "models"))
      for (const auto& e : fs::directory_iterator(root / "configs" / "models"))
        if (e.path().extension() == ".json") known.insert(e.path().stem().string());
  }
  throw Error(MT_FORMAT("calc-resource: --model '{}' is neither a known model ({}) nor a config.json path, nor a hub "
                        "id in the local Hugging Face cache", given,
                        known.empty() ? "configs/models/ not found" : fmt::format("{}", fmt::join(known, ", "))));
}

template <typename T>
void ask(std::optional<T>& value, const char* flag, const std::string& question, bool tty) {
  if (value) return;
  MT_REQUIRE(tty, "calc-resource: {} is missing (stdin is not a terminal, so nothing is asked)", flag);
  std::cout << question << ": " << std::flush;
  std::string line;
  MT_REQUIRE(static_cast<bool>(std::getline(std::cin, line)), "calc-resource: no answer for {}", flag);
  if constexpr (std::is_same_v<T, std::string>) {
    value = line;
  } else {
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(line, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    MT_REQUIRE(used > 0 && line.find_first_not_of(' ', used) == std::string::npos,
               "calc-resource: {}: '{}' is not a number", flag, line);
    value = static_cast<T>(v);
  }
}

void validate(const Inputs& in) {
  MT_REQUIRE(std::isfinite(*in.gpu_gib) && *in.gpu_gib > 0, "calc-resource: --gpu-mem must be a positive number of GiB, not {}", *in.gpu_gib);
  MT_REQUIRE(std::isfinite(*in.ram_gib) && *in.ram_gib > 0, "calc-resource: --ram must be a positive number of GiB, not {}", *in.ram_gib);
  MT_REQUIRE(*in.seq > 0, "calc-resource: --seq must be positive, not {}", *in.seq);
  MT_REQUIRE(in.batch > 0, "calc-resource: --batch must be positive, not {}", in.batch);
  MT_REQUIRE(in.micro_batch >= 0, "calc-resource: --micro-batch must be positive (0 = auto), not {}", in.micro_batch);
  MT_REQUIRE(in.passes >= 0 && (in.passes == 0 || in.batch % in.passes == 0),
             "calc-resource: --passes must divide --batch {} (0 = auto), not {}", in.batch, in.passes);
  MT_REQUIRE(in.interval >= 0, "calc-resource: --checkpoint-interval must be positive (0 = choose), not {}", in.interval);
  MT_REQUIRE(in.recompute >= -1, "calc-resource: --recompute-layers must be -1 (auto) or a layer count, not {}",
             in.recompute);
  MT_REQUIRE(in.slots >= 2, "calc-resource: --slots must be at least 2, not {}", in.slots);
  MT_REQUIRE(in.ranks > 0 && in.ranks <= 1024, "calc-resource: --ranks must be in 1..1024, not {}", in.ranks);
  MT_REQUIRE(in.offload == "none" || in.offload == "optimizer" || in.offload == "optimizer+master",
             "calc-resource: --offload must be none, optimizer or optimizer+master, not '{}'", in.offload);
  MT_REQUIRE(in.checkpoints == "auto" || in.checkpoints == "gpu" || in.checkpoints == "host",
             "calc-resource: --activation-checkpoints must be auto, gpu or host, not '{}'", in.checkpoints);
  MT_REQUIRE(std::isfinite(in.nvme_gb) && (in.nvme_gb > 0 || in.nvme_gb == -1),
             "calc-resource: --nvme-gb must be a positive number of GB, not {}", in.nvme_gb);
  MT_REQUIRE(std::isfinite(in.nvme_gbs) && in.nvme_gbs >= 0, "calc-resource: --nvme-gbs must be a positive GB/s, not {}",
             in.nvme_gbs);
  MT_REQUIRE(std::isfinite(in.gpu_tflops) && in.gpu_tflops > 0,
             "calc-resource: --gpu-tflops must be a positive TFLOP/s, not {}", in.gpu_tflops);
  MT_REQUIRE(std::isfinite(in.pcie_gbs) && in.pcie_gbs > 0, "calc-resource: --pcie-gbs must be a positive GB/s, not {}",
             in.pcie_gbs);
}

// The step bound's rates: the GPU's and PCIe's as given (--gpu-tflops, --pcie-gbs), the host's parameters pass as
// measured (StepRates).
StepRates rates_of(const Machine& m, double pcie_gbs) {
  StepRates r;
  r.gpu_flops = m.gpu_tflops * 1e12;
  r.pcie_bytes = pcie_gbs * 1e9;
  return r;
}

json step_bound_json(const ModelSpec& spec, const RunShape& run, const StepRates& rates, const PassBatchAdvice& advice) {
  const StepBound b = step_bound(spec, run, rates);
  return {{"flops_per_token", b.flops_per_token}, {"h2d_bytes_per_pass", b.h2d_bytes_per_pass},
          {"d2h_bytes_per_pass", b.d2h_bytes_per_pass}, {"parameters_pass_seconds", b.parameters_pass_seconds},
          {"unhidden_wait_seconds", b.unhidden_wait_seconds}, {"first_pass_wait_seconds", b.first_pass_wait_seconds},
          {"pcie_bound_tokens_per_pass", b.pcie_bound_tokens}, {"optimizer_bound_tokens", b.optimizer_bound_tokens},
          {"recommended_pass_batch_size", advice.batch}};
}

// The predicted step's parts (plan/step_time.h), seconds.
json step_time_json(const StepTime& t) {
  return {{"step_seconds", t.step_s}, {"compute_seconds", t.compute_s}, {"dense_seconds", t.dense_s},
          {"head_seconds", t.head_s}, {"attention_seconds", t.attention_s}, {"experts_seconds", t.experts_s},
          {"recompute_seconds", t.recompute_s}, {"resident_update_seconds", t.resident_update_s},
          {"stream_wait_seconds", t.stream_wait_s}, {"optimizer_wait_seconds", t.optimizer_wait_s}};
}

// What does not fit, one entry per resource.
std::vector<std::string> shortfalls(const ResourceAdvice& a, const Machine& m) {
  const auto b = [](int64_t v) { return format_bytes(static_cast<uint64_t>(v)); };
  std::vector<std::string> out;
  if (!a.host_fits)
    out.push_back(MT_FORMAT("host RAM: the store takes {} of {} usable", b(a.plan.host.ram_bytes()), b(a.host_usable_bytes)));
  if (!a.gpu_fits)
    out.push_back(MT_FORMAT("GPU memory: the plan takes {} of {}", b(a.plan.gpu.total()), b(m.gpu_bytes)));
  if (!a.nvme_fits)
    out.push_back(MT_FORMAT("NVMe: the tier takes {} of {}", b(a.plan.host.nvme_bytes), b(m.nvme_bytes)));
  return out;
}

// A change of settings that the run was planned with again: what it fixes, and whether everything then fits.
struct Remedy {
  std::string settings;
  std::vector<std::string> fixes;  // "host RAM", "GPU memory", "NVMe"
  std::vector<std::string> still;  // what does not fit with it (its own shortfalls)
  bool fits() const { return still.empty(); }
};

// Each single change (and the GPU's pair stream dtype + host checkpoints) that fixes at least one shortfall,
// checked by planning the run with it (advise, as the run itself).
std::vector<Remedy> remedies(const ModelSpec& spec, const RunShape& run, const Machine& m, bool choose_recompute,
                             const ResourceAdvice& a, const SequenceLimit& seq) {
  using Change = std::pair<std::string, std::function<void(RunShape&)>>;
  std::vector<Change> changes;
  const bool bf16_stream = run.stream_dtype == DType::bf16;
  if (!bf16_stream && run.dtype == DType::bf16)
    changes.push_back({"model.stream_dtype: bfloat16", [](RunShape& r) { r.stream_dtype = DType::bf16; }});
  if (run.offload == OffloadMode::none)
    changes.push_back({"store.offload: optimizer", [](RunShape& r) { r.offload = OffloadMode::optimizer; }});
  if (run.offload != OffloadMode::optimizer_master && run.dtype == DType::bf16)
    changes.push_back({"store.offload: optimizer+master", [](RunShape& r) {
                         r.offload = OffloadMode::optimizer_master;
                         r.stream_dtype = DType::bf16;
                       }});
  if (run.checkpoints != CheckpointPlacement::host)
    changes.push_back({"training.activation_checkpoints: host",
                       [](RunShape& r) { r.checkpoints = CheckpointPlacement::host; }});
  if (!bf16_stream && run.dtype == DType::bf16 && run.checkpoints != CheckpointPlacement::host)
    changes.push_back({"model.stream_dtype: bfloat16 with training.activation_checkpoints: host", [](RunShape& r) {
                         r.stream_dtype = DType::bf16;
                         r.checkpoints = CheckpointPlacement::host;
                       }});
  if (run.micro_batch_size != 1)
    changes.push_back({"training.micro_batch_size: 1", [](RunShape& r) { r.micro_batch_size = 1; }});
  if (run.checkpoint_interval != 0)
    changes.push_back({"training.checkpoint_interval: chosen by the plan", [](RunShape& r) { r.checkpoint_interval = 0; }});
  const int64_t longest = std::max(seq.memory_tokens, seq.host_memory_tokens);
  if (longest > 0 && longest < run.seq_len)
    changes.push_back({MT_FORMAT("dataset.max_seq_len: {}", longest), [longest](RunShape& r) { r.seq_len = longest; }});
  // Each change alone; where none makes the run fit, each pair of them too.
  std::vector<Remedy> out;
  const auto plan_with = [&](const std::string& settings, const std::vector<const Change*>& applied) {
    RunShape changed = run;
    for (const Change* c : applied) c->second(changed);
    ResourceAdvice b;
    try {
      b = advise(spec, changed, m, choose_recompute);
    } catch (const Error&) {
      return;  // a shape the plan refuses outright fixes nothing
    }
    Remedy r{settings, {}, shortfalls(b, m)};
    if (!a.host_fits && b.host_fits) r.fixes.push_back("host RAM");
    if (!a.gpu_fits && b.gpu_fits) r.fixes.push_back("GPU memory");
    if (!a.nvme_fits && b.nvme_fits) r.fixes.push_back("NVMe");
    if (!r.fixes.empty() && (applied.size() == 1 || r.fits())) out.push_back(std::move(r));
  };
  for (const Change& c : changes) plan_with(c.first, {&c});
  if (std::none_of(out.begin(), out.end(), [](const Remedy& r) { return r.fits(); }))
    for (size_t i = 0; i < changes.size(); ++i)
      for (size_t j = i + 1; j < changes.size(); ++j)
        plan_with(changes[i].first + " with " + changes[j].first, {&changes[i], &changes[j]});
  return out;
}

std::string describe_remedies(const std::vector<Remedy>& list) {
  if (list.empty()) return "no single setting fixes it: a larger machine, or a smaller model";
  std::string text = "fixes, each planned again: ";
  for (size_t i = 0; i < list.size(); ++i)
    text += MT_FORMAT("{}{} (fixes {}{})", i ? "; " : "", list[i].settings, fmt::join(list[i].fixes, " and "),
                      list[i].fits() ? ": then it fits" : MT_FORMAT("; then {}", fmt::join(list[i].still, "; ")));
  return text;
}

json to_json(const std::string& model, const ModelSpec& spec, const Machine& m, const ResourceAdvice& a,
             const SequenceLimit& seq, const StepRates& rates, const std::vector<Remedy>& fixes, bool choose_recompute) {
  const HostPlan& h = a.plan.host;
  const GpuPlan& g = a.plan.gpu;
  // training.optimizer_on_gpu and moe_keep_layers auto, on one GPU rank: the keeping MoE layers, the resident prefix
  // and the run beside them (its cuDNN calls; with --recompute-layers auto, the layers train recomputes).
  const StepPlan keep = plan_step(spec, a.run, m.gpu_bytes, 1, true, -1, rates, choose_recompute);
  const ResidentPlan& r = keep.resident;
  const RunShape beside_run = with_step_plan(a.run, keep);
  const json positions = seq.position_tokens == kNoPositionLimit ? json(nullptr) : json(seq.position_tokens);
  json j = {{"model", model},
          {"longest_sequence", {{"tokens", seq.longest()}, {"gpu_memory_tokens", seq.memory_tokens},
                                {"checkpoint_interval", seq.checkpoint_interval}, {"gpu_bytes", seq.gpu_bytes},
                                {"cudnn_backward_tokens", seq.cudnn_backward_tokens},
                                {"host_fits", seq.host_fits}, {"position_limit", positions},
                                {"position_source", seq.position_source},
                                {"host_checkpoints", {{"tokens", seq.longest_with_host_checkpoints()},
                                                      {"memory_tokens", seq.host_memory_tokens},
                                                      {"checkpoint_interval", seq.host_checkpoint_interval},
                                                      {"gpu_bytes", seq.host_gpu_bytes},
                                                      {"checkpoint_bytes", seq.host_checkpoint_bytes}}}}},
          {"architecture", spec.architecture},
          {"parameters", h.parameters},
          {"host", {{"bytes_per_parameter", h.bytes_per_parameter()},
                    {"per_parameter", {{"master_fp32", h.master}, {"adam_m", h.exp_avg}, {"adam_v", h.exp_avg_sq},
                                       {"gradient_fp32", h.grad}, {"streaming_copy", h.stream_copy}}},
                    {"store_bytes", h.store_bytes}, {"per_rank_bytes", h.rank_bytes}, {"ram_bytes", m.ram_bytes},
                    {"activation_checkpoint_bytes", h.checkpoint_bytes},
                    {"usable_bytes", a.host_usable_bytes}, {"fits", a.host_fits}}},
          {"gpu", {{"gradient_accumulation_steps", a.run.passes},
                   {"checkpoint_interval", a.run.checkpoint_interval}, {"micro_batch_size", g.micro_batch_size},
                   {"recompute_layers", a.run.recompute_layers},
                   {"weight_slots", g.weight_slots}, {"gradient_buffers", g.grad_buffers},
                   {"activation_checkpoints", checkpoint_placement_name(a.run.checkpoints)},
                   {"checkpoints", g.checkpoints}, {"segment_activations", g.segment},
                   {"saved_layer_activations", g.saved_layers},
                   {"layer_workspace", g.layer_workspace}, {"head_logits", g.head}, {"batch_arrays", g.batch_arrays},
                   {"gemm_workspace", g.gemm_workspace}, {"attention_workspace", g.attention_workspace},
                   {"cudnn_backward", g.cudnn_backward}, {"cudnn_backward_need", g.cudnn_backward_need},
                   {"cudnn_backward_tile", g.cudnn_backward_tile},
                   {"total", g.total()}, {"gpu_bytes", m.gpu_bytes},
                   {"optimizer_on_gpu", [&] {
                      const GpuPlan beside = plan_gpu(spec, beside_run);
                      return json{{"regions", r.regions}, {"parameters", r.parameters}, {"bytes", r.bytes},
                                  {"weight_slots", beside.weight_slots}, {"gradient_buffers", beside.grad_buffers},
                                  {"cudnn_call_batch", beside.cudnn_call_batch}, {"plan_total", beside.total()}};
                    }()},
                   {"fits", a.gpu_fits}}},
          {"nvme", {{"offload", offload_mode_name(h.offload)}, {"bytes_per_parameter", h.nvme_per_parameter},
                    {"bytes", h.nvme_bytes}, {"capacity_bytes", m.nvme_bytes}, {"staging_ram_bytes", h.staging_bytes},
                    {"step_traffic_bytes", h.nvme_step_bytes()}, {"bandwidth_gbs", m.nvme_gbs},
                    {"nvme_step_seconds", a.nvme.nvme_seconds}, {"gpu_step_seconds", a.nvme.gpu_seconds},
                    {"gpu_forward_seconds", a.nvme.forward_seconds}, {"predicted_step_seconds", a.nvme.predicted_seconds},
                    {"gpu_tflops", m.gpu_tflops}, {"hiding_batch_size", a.nvme.hiding_batch}, {"fits", a.nvme_fits}}},
          {"largest_by_offload", [&] {
             json j = json::object();
             for (const OffloadCapacity& c : a.capacities)
               j[offload_mode_name(c.mode)] = {{"ram_bytes_per_parameter", c.ram_per_parameter},
                                               {"nvme_bytes_per_parameter", c.nvme_per_parameter},
                                               {"largest_parameters", c.largest_parameters}};
             return j;
           }()},
          {"largest_trainable_parameters", a.largest_parameters},
          {"largest_micro_batch", a.largest_micro_batch},
          {"recommended", {{"batch_size", a.run.batch_size}, {"gradient_accumulation_steps", a.run.passes},
                           {"micro_batch_size", g.micro_batch_size},
                           {"checkpoint_interval", a.recommended_interval},
                           {"recompute_layers", beside_run.recompute_layers}}},
          {"verdict", a.fits() ? "fits" : a.shortfall}};
  if (m.gpu_bytes > 0) j["predicted_step"] = step_time_json(predict_step_time(spec, beside_run, rates));
  if (!a.fits()) {
    j["shortfalls"] = shortfalls(a, m);
    json list = json::array();
    for (const Remedy& r : fixes)
      list.push_back({{"settings", r.settings}, {"fixes", r.fixes}, {"fits", r.fits()}, {"still", r.still}});
    j["remedies"] = list;
  }
  if (count_active_parameters(spec) != h.parameters) {  // mixture of experts
    j["active_parameters"] = count_active_parameters(spec);
    j["step_bound"] = step_bound_json(spec, beside_run, rates, advise_pass_batch(spec, a.run, m.gpu_bytes, rates));
    j["moe_keep"] = {{"layers", keep.layers}, {"moe_layers", keep.moe_layers}, {"bytes", keep.kept_bytes},
                     {"predicted_step_seconds_by_layers", keep.steps_by_count}};
  }
  return j;
}

void print_text(const std::string& model, const ModelSpec& spec, const Machine& m, const ResourceAdvice& a,
                const SequenceLimit& seq, const StepRates& rates, const std::vector<Remedy>& fixes,
                bool choose_recompute) {
  const auto b = [](int64_t v) { return format_bytes(static_cast<uint64_t>(v)); };
  const HostPlan& h = a.plan.host;
  const GpuPlan& g = a.plan.gpu;
  const StepPlan keep = plan_step(spec, a.run, m.gpu_bytes, 1, true, -1, rates, choose_recompute);  // as to_json
  const ResidentPlan& r = keep.resident;
  const RunShape beside_run = with_step_plan(a.run, keep);
  std::cout << MT_FORMAT("model {}: {:.3f} B parameters\n", model, static_cast<double>(h.parameters) / 1e9)
            << MT_FORMAT("step rates: {} (--gpu-tflops and --pcie-gbs, their defaults the H200's, and the H200 node's "
                         "parameters pass: calc-resource runs without a GPU and measures nothing; train and bench "
                         "probe their machine)\n",
                         describe_step_rates(rates))
            << MT_FORMAT("host: {} B/parameter (master {}, Adam m {}, Adam v {}, gradient {}, streaming copy {}) = {}"
                         " of {} usable ({} RAM)\n", h.bytes_per_parameter(), h.master, h.exp_avg, h.exp_avg_sq, h.grad,
                         h.stream_copy, b(h.store_bytes), b(a.host_usable_bytes), b(m.ram_bytes));
  if (h.checkpoint_bytes > 0)
    std::cout << MT_FORMAT("  activation checkpoints in host RAM (page-locked): {}, {} with the store\n",
                           b(h.checkpoint_bytes), b(h.ram_bytes()));
  if (h.offload != OffloadMode::none) {
    std::cout << MT_FORMAT("NVMe (store.offload {}): {} B/parameter = {}{}; tier staging {} of RAM\n",
                           offload_mode_name(h.offload), h.nvme_per_parameter, b(h.nvme_bytes),
                           m.nvme_bytes >= 0 ? MT_FORMAT(" of {}", b(m.nvme_bytes)) : std::string(" (capacity not given)"),
                           b(h.staging_bytes));
    if (m.nvme_gbs > 0)
      std::cout << MT_FORMAT("  state traffic {} per step: {:.2f} s at {:.1f} GB/s, against the GPU's {:.2f} s "
                             "(model FLOPs at {:.0f} TFLOP/s, batch {} × {}) of which the next forward ({:.2f} s) "
                             "overlaps it: predicted step {:.2f} s; hidden from batch {} × {}\n",
                             b(h.nvme_step_bytes()), a.nvme.nvme_seconds, m.nvme_gbs, a.nvme.gpu_seconds, m.gpu_tflops,
                             a.run.batch_size, a.run.seq_len, a.nvme.forward_seconds, a.nvme.predicted_seconds,
                             a.nvme.hiding_batch, a.run.seq_len);
    else
      std::cout << MT_FORMAT("  state traffic {} per step (give --nvme-gbs for the step time it imposes)\n",
                             b(h.nvme_step_bytes()));
  }
  for (size_t q = 0; q < h.rank_bytes.size(); ++q) std::cout << MT_FORMAT("  rank {}: {}\n", q, b(h.rank_bytes[q]));
  const int64_t recompute = a.run.recompute_layers;
  std::cout << MT_FORMAT("GPU ({} pass(es), checkpoint_interval {}, micro_batch_size {}, {} of {} layers recompute): "
                         "{} of {}\n", a.run.passes, a.run.checkpoint_interval, g.micro_batch_size, recompute,
                         spec.num_layers, b(g.total()), b(m.gpu_bytes))
            << (describe_pass_choice(a.passes).empty() ? std::string()
                                                       : MT_FORMAT("  {}\n", describe_pass_choice(a.passes)))
            << MT_FORMAT("  weight slots {} | gradient buffers {} | checkpoints {}{} | segment activations {}\n",
                         b(g.weight_slots), b(g.grad_buffers), b(g.checkpoints),
                         a.run.checkpoints == CheckpointPlacement::host ? " (staging; the checkpoints in host RAM)" : "",
                         b(g.segment))
            << MT_FORMAT("  saved activations of {} layers {}\n", spec.num_layers - recompute, b(g.saved_layers))
            << MT_FORMAT("  layer workspace {} | head logits {} | batch arrays {} | cuBLASLt workspace {}\n",
                         b(g.layer_workspace), b(g.head), b(g.batch_arrays), b(g.gemm_workspace))
            << (a.run.cudnn_attention ? MT_FORMAT("  attention: {} (cuDNN workspace {})\n", CudnnAttentionPlan(a.run.runtime).describe_plan(g),
                                                  b(g.attention_workspace))
                                      : std::string())
            << [&] {  // training.optimizer_on_gpu auto, on one GPU rank
                 const GpuPlan beside = plan_gpu(spec, beside_run);
                 return r.regions > 0 ? MT_FORMAT("  training.optimizer_on_gpu auto: {}; beside it the plan takes {} "
                                                  "(weight slots {}, gradient buffers {}: the regions that stream{})\n",
                                                  describe_resident(r, make_param_layout(spec)), b(beside.total()),
                                                  b(beside.weight_slots), b(beside.grad_buffers),
                                                  beside.cudnn_backward && beside.cudnn_call_batch < g.cudnn_call_batch
                                                      ? MT_FORMAT("; cuDNN's backward in calls of {} sequence(s), "
                                                                  "{} of workspace", beside.cudnn_call_batch,
                                                                  b(beside.attention_workspace))
                                                      : std::string())
                                      : std::string("  training.optimizer_on_gpu auto: nothing fits beside the plan, "
                                                    "every update on the CPU\n");
               }()
            << (m.gpu_bytes > 0 ? MT_FORMAT("  at the step rates, batch {} × {}: {}\n", a.run.batch_size,
                                             a.run.seq_len, describe_step_time(predict_step_time(spec, beside_run, rates)))
                                : std::string())
            << MT_FORMAT("largest trainable model for this RAM: {:.2f} B parameters\n",
                         static_cast<double>(a.largest_parameters) / 1e9);
  std::cout << "largest model by store.offload:";
  for (const OffloadCapacity& c : a.capacities) {
    // This model's NVMe traffic in that mode, hidden from which batch (with --nvme-gbs).
    const HostPlan mode_host = plan_host(spec, offloads_master(c.mode) ? DType::bf16 : a.run.stream_dtype,
                                         a.run.ranks, c.mode);
    const NvmeTiming t = nvme_timing(mode_host, model_flops_per_token(spec, a.run.seq_len), a.run.batch_size,
                                     a.run.seq_len, forward_share(spec, a.run), m);
    std::cout << MT_FORMAT(" {} {:.2f} B ({} B/parameter RAM{}{})", offload_mode_name(c.mode),
                           static_cast<double>(c.largest_parameters) / 1e9, c.ram_per_parameter,
                           c.nvme_per_parameter ? MT_FORMAT(", {} NVMe", c.nvme_per_parameter) : std::string(),
                           t.hiding_batch ? MT_FORMAT("; this model's NVMe traffic hidden from batch {} × {}",
                                                      t.hiding_batch, a.run.seq_len)
                                          : std::string())
              << (c.mode == OffloadMode::optimizer_master ? "\n" : ";");
  }
  if (a.recommended_interval)
    std::cout << MT_FORMAT("recommended: batch_size {}, gradient_accumulation_steps {}, micro_batch_size {}, "
                           "checkpoint_interval {}, recompute_layers {} (the plan's; micro-batches up to {} fit)\n",
                           a.run.batch_size, a.run.passes, g.micro_batch_size, a.recommended_interval,
                           beside_run.recompute_layers, a.largest_micro_batch);
  const int64_t active = count_active_parameters(spec);
  const StepBound sb = step_bound(spec, beside_run, rates);
  if (active != h.parameters) {
    const PassBatchAdvice advice = advise_pass_batch(spec, a.run, m.gpu_bytes, rates);
    std::cout << MT_FORMAT("mixture of experts: {:.3f} B parameters in memory, {:.3f} B active per token (FLOPs)\n",
                           static_cast<double>(h.parameters) / 1e9, static_cast<double>(active) / 1e9)
              << MT_FORMAT("  training.moe_keep_layers auto: {}\n", describe_step_plan(keep))
              << MT_FORMAT("compute-bound from: {} tokens per pass for PCIe ({} in, {} out per pass at {:.0f} GB/s) and {} "
                         "for the optimizer (a step's first pass waits for its parameters pass, {:.2f} s at {:.1f} G "
                         "parameters/s a rank, region by region), at {:.0f} TFLOP/s of {:.3g} FLOPs per token; this "
                         "run's first pass waits {:.2f} s ({:.2f} s at any batch: the update and copy of the host "
                         "regions before any compute)\n",
                         sb.pcie_bound_tokens, b(static_cast<int64_t>(sb.h2d_bytes_per_pass)),
                         b(static_cast<int64_t>(sb.d2h_bytes_per_pass)), rates.pcie_bytes / 1e9,
                         sb.optimizer_bound_tokens, sb.parameters_pass_seconds, rates.parameters_pass_params / 1e9,
                         rates.gpu_flops / 1e12, sb.flops_per_token, sb.first_pass_wait_seconds,
                         sb.unhidden_wait_seconds)
              << (advice.batch > 0 ? MT_FORMAT("recommended {} sequences of {} a pass: from there the predicted step "
                                               "is {:.0f} % compute ({})\n", advice.batch, a.run.seq_len,
                                               100.0 * advice.step.compute_s / advice.step.step_s,
                                               describe_step_time(advice.step))
                                   : std::string("no batch a pass up to 4096 sequences makes the predicted step "
                                                 "compute-bound\n"));
  }
  std::cout << MT_FORMAT("longest trainable sequence (batch 1, every layer recomputing): {} tokens; GPU memory holds {}"
                         "{} and the model's positions are {} ({})\n", seq.longest(), seq.memory_tokens,
                         seq.memory_tokens ? MT_FORMAT(" at checkpoint_interval {} ({})", seq.checkpoint_interval,
                                                       b(seq.gpu_bytes)) : "",
                         seq.position_tokens == kNoPositionLimit ? std::string("unlimited")
                                                                 : std::to_string(seq.position_tokens),
                         seq.position_source);
  std::cout << MT_FORMAT("  with the activation checkpoints in host RAM: {} tokens; GPU memory and host RAM hold {}{}\n",
                         seq.longest_with_host_checkpoints(), seq.host_memory_tokens,
                         seq.host_memory_tokens ? MT_FORMAT(" at checkpoint_interval {} ({} on the GPU, {} of "
                                                            "checkpoints in host RAM)", seq.host_checkpoint_interval,
                                                            b(seq.host_gpu_bytes), b(seq.host_checkpoint_bytes))
                                                : "");
  if (a.run.cudnn_attention && seq.memory_tokens > 0)
    std::cout << MT_FORMAT(
        "  cuDNN's attention {} fits up to {} tokens{}\n", CudnnAttentionPlan(a.run.runtime).backward_name(), seq.cudnn_backward_tokens,
        seq.cudnn_backward_tokens < seq.memory_tokens ? "; longer sequences plan (and run) our attention backward"
                                                      : "");
  std::cout << "verdict: "
            << (a.fits() ? std::string("fits")
                         : MT_FORMAT("does not fit: {}; {}", fmt::join(shortfalls(a, m), "; "), describe_remedies(fixes)))
            << "\n";
}

void run_calc_resource(Inputs in, bool interactive_allowed) {
  const bool tty = interactive_allowed && isatty(STDIN_FILENO);
  ask(in.gpu_gib, "--gpu-mem", "GPU memory (GiB)", tty);
  ask(in.ram_gib, "--ram", "host RAM (GiB)", tty);
  ask(in.model, "--model", "model (a hub id such as Qwen/Qwen2.5-7B, a known name such as qwen2.5-7b, or a config.json "
      "path)", tty);
  ask(in.seq, "--seq", "sequence length (tokens)", tty);
  validate(in);
  const ModelSpec spec = load_model_spec(find_model(*in.model), true);  // sizes only: no modeling code runs
  RunShape run;
  run.runtime = environment_switches();  // calc-resource reads no config: the variables alone
  run.dtype = dtype_from_name(in.dtype);
  run.stream_dtype = dtype_from_name(in.stream_dtype);
  MT_REQUIRE(!(run.dtype == DType::f32 && run.stream_dtype == DType::bf16),
             "--stream-dtype bfloat16 cannot feed --dtype float32");
  run.seq_len = *in.seq;
  run.batch_size = in.batch;
  run.micro_batch_size = in.micro_batch;
  run.passes = in.passes;
  run.checkpoint_interval = in.interval;
  run.weight_slots = in.slots;
  run.ranks = static_cast<int>(in.ranks);
  run.offload = offload_mode_from_name(in.offload);
  if (offloads_master(run.offload)) run.stream_dtype = DType::bf16;  // the GPU streams the bf16 copy
  if (in.recompute >= 0) run.recompute_layers = in.recompute;
  run.checkpoints = checkpoint_placement_from_name(in.checkpoints);
  run.packed = in.packing;
  run.cudnn_attention = cudnn_attention_for(run.dtype, static_cast<int64_t>(*in.gpu_gib * (1 << 30)), run.runtime);
  const Machine m{static_cast<int64_t>(*in.gpu_gib * (1 << 30)), static_cast<int64_t>(*in.ram_gib * (1 << 30)),
                  in.nvme_gb > 0 ? static_cast<int64_t>(in.nvme_gb * 1e9) : -1, in.nvme_gbs, in.gpu_tflops};
  const SequenceLimit seq = longest_trainable_sequence(spec, run, m);
  MT_REQUIRE(run.seq_len <= seq.position_tokens, "calc-resource: --seq {} exceeds the {} positions of model {} ({})",
             run.seq_len, seq.position_tokens, *in.model, seq.position_source);
  const StepRates rates = rates_of(m, in.pcie_gbs);
  ResourceAdvice a = advise(spec, run, m, in.recompute < 0, &rates);
  a.capacities = offload_capacities(dtype_from_name(in.stream_dtype), m);  // none and optimizer as asked
  const std::vector<Remedy> fixes = a.fits() ? std::vector<Remedy>{} : remedies(spec, run, m, in.recompute < 0, a, seq);
  if (in.json)
    std::cout << to_json(*in.model, spec, m, a, seq, rates, fixes, in.recompute < 0).dump(2) << "\n";
  else
    print_text(*in.model, spec, m, a, seq, rates, fixes, in.recompute < 0);
  std::cout << std::flush;
  MT_REQUIRE(a.fits(), "calc-resource: {} does not fit: {}{}; {}", *in.model, a.shortfall,
             a.host_fits && one_sequence_gpu_bytes(spec, run, run.seq_len) > usable_gpu_bytes(m.gpu_bytes)
                 ? MT_FORMAT("; one sequence of {} tokens does not fit: the longest that fits is {} tokens ({} with the "
                             "activation checkpoints in host RAM)", run.seq_len, seq.memory_tokens, seq.host_memory_tokens)
                 : "", describe_remedies(fixes));
}

}  // namespace

void add_calc_resource_command(CLI::App& root, std::vector<Command>& commands) {
  auto in = std::make_shared<Inputs>();
  auto gpu = std::make_shared<double>(), ram = std::make_shared<double>();
  auto model = std::make_shared<std::string>();
  auto seq = std::make_shared<int64_t>();
  CLI::App* app = root.add_subcommand("calc-resource", "size a run for a machine: host and GPU memory plan");
  CLI::Option* o_gpu = app->add_option("--gpu-mem", *gpu, "GPU memory, GiB");
  CLI::Option* o_ram = app->add_option("--ram", *ram, "host RAM, GiB");
  CLI::Option* o_model = app->add_option("--model", *model, "known model name or config.json path");
  CLI::Option* o_seq = app->add_option("--seq", *seq, "sequence length, tokens");
  app->add_option("--batch", in->batch, "sequences per optimizer step (default 8)");
  app->add_option("--micro-batch", in->micro_batch, "sequences per micro-batch (default 0 = auto)");
  app->add_option("--passes", in->passes,
                  "gradient accumulation passes per step (default 0 = auto: of the counts leaving passes of at least "
                  "65 536 tokens, the shortest predicted step)");
  app->add_option("--checkpoint-interval", in->interval, "layers per checkpoint (default 0 = choose)");
  app->add_option("--recompute-layers", in->recompute,
                  "layers that recompute their activations in backward, the first ones (default -1 = as train's "
                  "auto: as few as the GPU's memory allows, or more for resident optimizer state where the step is "
                  "shorter)");
  app->add_option("--activation-checkpoints", in->checkpoints,
                  "training.activation_checkpoints: auto (default: in host RAM where they do not fit the GPU), gpu or "
                  "host");
  app->add_option("--slots", in->slots, "GPU weight slots (default 2)");
  app->add_option("--ranks,--numa", in->ranks, "ranks (NUMA domains) sharing the host store (default 1)");
  app->add_option("--dtype", in->dtype, "bfloat16 or float32 (default bfloat16)");
  app->add_option("--stream-dtype", in->stream_dtype,
                  "weights in host RAM that cross PCIe: float32 (the fp32 master, default) or bfloat16 (a bf16 copy, "
                  "2 B/parameter more)");
  app->add_option("--offload", in->offload,
                  "store.offload: none (default), optimizer (Adam m, v on NVMe) or optimizer+master (also the fp32 "
                  "master; the bf16 copy streams)");
  app->add_option("--nvme-gb", in->nvme_gb, "capacity of the NVMe tier's paths together, GB (default: not checked)");
  app->add_option("--nvme-gbs", in->nvme_gbs,
                  "bandwidth of the NVMe tier's paths together, GB/s of reads and writes (for the step time it imposes)");
  app->add_option("--gpu-tflops", in->gpu_tflops,
                  "the GPU's sustained training rate in model TFLOP/s (matmuls and attention; default 450: H200)");
  app->add_option("--pcie-gbs", in->pcie_gbs,
                  "page-locked host-to-GPU bandwidth each way, GB/s (default 55: PCIe Gen5 x16 as measured on the H200)");
  app->add_flag("--packing", in->packing,
                "dataset.packing: examples packed into each sequence (the cuDNN reserve also holds one segment as long "
                "as the sequence, as train's preflight plans it)");
  app->add_flag("--json", in->json, "print the plan as JSON");
  commands.push_back({app, [=] {
                        Inputs given = *in;
                        if (*o_gpu) given.gpu_gib = *gpu;
                        if (*o_ram) given.ram_gib = *ram;
                        if (*o_model) given.model = *model;
                        if (*o_seq) given.seq = *seq;
                        // Prompts only when no flag was given at all, on a terminal.
                        size_t flags = 0;
                        for (const CLI::Option* o : app->get_options()) flags += o->count();
                        run_calc_resource(given, flags == 0);
                      }});
}

}  // namespace mt
