// Preflight checks (see preflight.h).
#include "cli/train/preflight.h"

#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/log.h"
#include "plan/pass_batch_advice.h"
#include "plan/step_bound.h"
#include "dist/numa_binding.h"
#include "cli/train/train_plan.h"
#include "model/param_layout.h"
#include "plan/cudnn_attention_plan.h"
#include "plan/sequence_limit.h"
#include "store/shared_memory_check.h"
#include "model/flops.h"
#include "plan/resource_advice.h"
#include "store/tier_layout.h"
#include "store/tier_probe.h"

namespace mt {
namespace {

std::string bytes(int64_t b) { return format_bytes(static_cast<uint64_t>(b)); }

int64_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return -1;
}

// MemFree + FilePages (page cache the kernel can drop) of NUMA node `os_index`; -1 when unreadable.
int64_t numa_node_free(int os_index) {
  std::ifstream in("/sys/devices/system/node/node" + std::to_string(os_index) + "/meminfo");
  std::string line;
  int64_t total = -1;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string node, number, key;
    int64_t kib = 0;
    if (!(words >> node >> number >> key >> kib)) continue;
    if (key == "MemFree:" || key == "FilePages:") total = (total < 0 ? 0 : total) + kib * 1024;
  }
  return total;
}

// The first NUMA domain whose ranks' store slices do not fit its free memory; empty when all fit. Only ranks
// bound to a single domain count (a rank bound to several allocates from any of them; the total check covers it).
std::string numa_shortfall(int64_t store_bytes, int ranks, const MachineLimits& m) {
  if (m.numa_free.size() < 2) return "";
  std::vector<double> need(m.numa_free.size(), 0.0);
  for (int q = 0; q < ranks; ++q) {
    const dist::RankShare share = dist::plan_rank_share(q, ranks, m.numa_cores);
    if (share.domains.size() == 1)
      need[static_cast<size_t>(share.domains.front())] += static_cast<double>(store_bytes) / ranks;
  }
  for (size_t d = 0; d < need.size(); ++d)
    if (m.numa_free[d] >= 0 && need[d] > static_cast<double>(m.numa_free[d]))
      return MT_FORMAT("host RAM of NUMA domain {}: its ranks' slices of the host store need {} but the node has {} "
                       "free (MemFree + FilePages)", m.numa_os_index[d], bytes(static_cast<int64_t>(need[d])),
                       bytes(m.numa_free[d]));
  return "";
}

// The step time the tier's traffic imposes, at the bandwidth a quick probe measures on its paths (64 MiB each at
// most), next to the GPU's model FLOPs at the H200's measured rate.
void log_tier_prediction(const Config& c, const ModelSpec& spec, const RunShape& run, const HostPlan& host, bool gpu) {
  const int64_t probe = std::min<int64_t>(int64_t{64} << 20, host.nvme_bytes / static_cast<int64_t>(c.store.offload_paths.size()));
  const DiskCeiling disk = measure_disk_ceiling(c.store.offload_paths, probe, c.runtime.tier_io);
  Machine m;
  m.nvme_gbs = disk.mixed_gbs();
  const NvmeTiming t = nvme_timing(host, model_flops_per_token(spec, run.seq_len), run.batch_size, run.seq_len,
                                   forward_share(spec, run), m);
  log::info("state tier: {} read and written per step; at the {:.2f} GB/s a probe of the paths measured (write {:.2f}, "
            "read {:.2f}, {}) that is {:.3f} s per step{}", bytes(host.nvme_step_bytes()), disk.mixed_gbs(),
            disk.write_gbs, disk.read_gbs, disk.direct ? "O_DIRECT" : "buffered", t.nvme_seconds,
            gpu ? MT_FORMAT(" against the GPU's {:.3f} s (model FLOPs at {:.0f} TFLOP/s) of which the next forward, "
                            "{:.3f} s, overlaps it: predicted step {:.3f} s; hidden from batch {} × {}",
                            t.gpu_seconds, m.gpu_tflops, t.forward_seconds, t.predicted_seconds, t.hiding_batch,
                            run.seq_len)
                : std::string());
}

}  // namespace

RunShape run_shape(const Config& c, int ranks, int gpus) {
  RunShape r;
  r.runtime = c.runtime;
  r.dtype = dtype_from_name(c.model.dtype);
  r.stream_dtype = stream_dtype_of(c);
  r.seq_len = c.dataset.max_seq_len;
  r.packed = c.dataset.packing;
  r.batch_size = (c.training.batch_size + gpus - 1) / gpus;
  if (c.training.stage == "dpo") r.batch_size *= 2;  // a preference pair is two sequences through the layers
  r.micro_batch_size = c.training.micro_batch_size;
  r.passes = c.training.gradient_accumulation_steps;
  r.checkpoint_interval = c.training.checkpoint_interval;
  if (c.training.recompute_layers >= 0) r.recompute_layers = c.training.recompute_layers;
  if (c.training.moe_keep_layers >= 0) r.moe_keep_layers = c.training.moe_keep_layers;  // auto: plan_step
  r.weight_slots = 2;
  r.ranks = ranks;
  r.offload = offload_mode_from_name(c.store.offload);
  r.checkpoints = checkpoint_placement_from_name(c.training.activation_checkpoints);
  return r;
}

std::string preflight_shortfall(const ModelSpec& spec, const RunShape& run, bool gpu, const MachineLimits& limits) {
  const HostPlan host = plan_memory(spec, run).host;  // with any activation checkpoints placed in host RAM
  const int64_t host_need = gpu ? host.ram_bytes() : cpu_backend_host_bytes(spec, run);
  if (limits.mem_available >= 0 && host_need > limits.mem_available)
    return MT_FORMAT("host RAM: the run needs {} ({} B/parameter × {:.3f} B parameters{}{}{}) but only {} is available "
                     "(MemAvailable)", bytes(host_need), host.bytes_per_parameter(),
                     static_cast<double>(host.parameters) / 1e9, gpu ? "" : " plus CPU-backend activations",
                     host.checkpoint_bytes > 0 ? MT_FORMAT(" plus {} of activation checkpoints", bytes(host.checkpoint_bytes))
                                               : std::string(),
                     host.offload == OffloadMode::none
                         ? std::string()
                         : MT_FORMAT(", with store.offload {} and {} of tier staging", offload_mode_name(host.offload),
                                     bytes(host.staging_bytes)),
                     bytes(limits.mem_available));
  if (const std::string numa = numa_shortfall(host.store_bytes, run.ranks, limits); !numa.empty()) return numa;
  if (limits.shm_free >= 0) {
    const std::string shortage = shared_memory_shortage(limits.shm_dir, static_cast<uint64_t>(host.store_bytes),
                                                        static_cast<uint64_t>(limits.shm_free), run.ranks);
    if (!shortage.empty()) return shortage;
  }
  if (gpu && limits.memlock >= 0 && host.store_bytes > limits.memlock)
    return MT_FORMAT("locked memory: the CUDA backend page-locks the {} host store but RLIMIT_MEMLOCK is {} "
                     "(ulimit -l unlimited, or LimitMEMLOCK / Slurm PropagateResourceLimits)",
                     bytes(host.store_bytes), bytes(limits.memlock));
  if (gpu && limits.gpu_bytes > 0) {
    const GpuPlan g = plan_gpu(spec, run);
    if (g.total() > limits.gpu_bytes)
      return MT_FORMAT("GPU memory: the plan needs {} (weight slots {}, gradient buffers {}, checkpoints {}, "
                       "activations and workspace {}) but the GPU has {}", bytes(g.total()), bytes(g.weight_slots),
                       bytes(g.grad_buffers), bytes(g.checkpoints),
                       bytes(g.segment + g.layer_workspace + g.head + g.batch_arrays + g.gemm_workspace +
                             g.attention_workspace),
                       bytes(limits.gpu_bytes));
  }
  return "";
}

MachineLimits read_machine_limits(const Backend& backend) {
  MachineLimits m;
  m.mem_available = mem_available();
  m.shm_dir = shared_memory_dir();
  struct statvfs fs {};
  if (statvfs(m.shm_dir.c_str(), &fs) == 0) m.shm_free = static_cast<int64_t>(fs.f_bavail * fs.f_frsize);
  struct rlimit rl {};
  if (geteuid() != 0 && getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    m.memlock = static_cast<int64_t>(rl.rlim_cur);
  m.gpu_bytes = backend.device_memory_bytes();
  const char* policy = std::getenv("OMPI_MCA_hwloc_base_binding_policy");
  if (!policy || !*policy || std::string(policy) == "none") {  // megatrain binds: plan_rank_share's mapping
    for (const dist::DomainInfo& d : dist::numa_domain_list()) {
      m.numa_os_index.push_back(d.os_index);
      m.numa_cores.push_back(d.cores);
      m.numa_free.push_back(numa_node_free(d.os_index));
    }
  }
  return m;
}

void require_sequence_fits(const Config& c, const ModelSpec& spec, const RunShape& run, const Backend& backend) {
  std::string why;
  const int64_t positions = model_position_limit(spec, &why);
  MT_REQUIRE(run.seq_len <= positions,
             "{}: dataset.max_seq_len {} exceeds the {} positions of model {} ({}); a rope_scaling that covers it "
             "(yarn or longrope factor, or dynamic, in its config.json) trains longer sequences",
             c.source.string(), run.seq_len, positions, c.model.name, why);
  const int64_t gpu_bytes = backend.device_memory_bytes();
  if (gpu_bytes <= 0 || one_sequence_gpu_bytes(spec, run, run.seq_len) <= usable_gpu_bytes(gpu_bytes)) return;
  const SequenceLimit limit = longest_trainable_sequence(spec, run, Machine{gpu_bytes, 0});
  const bool on_gpu = run.checkpoints == CheckpointPlacement::gpu;
  throw Error(MT_FORMAT(
             "{}: one sequence of dataset.max_seq_len {} tokens of model {} does not fit the GPU's {}: the longest "
             "that fits is {} tokens (batch 1, every layer recomputing, training.activation_checkpoints {}){}",
             c.source.string(), run.seq_len, c.model.name, bytes(gpu_bytes),
             on_gpu ? limit.memory_tokens : limit.host_memory_tokens, checkpoint_placement_name(run.checkpoints),
             on_gpu ? MT_FORMAT("; {} with the checkpoints in host RAM (training.activation_checkpoints host)",
                                limit.host_memory_tokens)
                    : std::string()));
}

RunShape preflight(const Config& c, const ModelSpec& spec, const Backend& backend, int ranks, int gpus,
                   const StepRates& rates, PassChoice* passes) {
  RunShape run = run_shape(c, ranks, gpus);
  // The state tier's paths first: each exists, is writable and has room for every rank's files.
  const std::string tier = tier_path_shortfall(make_param_layout(spec), tier_settings_of(c), ranks);
  MT_REQUIRE(tier.empty(), "{}", tier);
  const bool gpu = backend.device_memory_bytes() > 0;
  run.cudnn_attention = cudnn_attention_for(run.dtype, backend.device_memory_bytes(), run.runtime);
  require_sequence_fits(c, spec, run, backend);
  const StepChoiceInputs weighed{gpus, c.training.optimizer_on_gpu == "auto" && c.training.ref_model.empty(),
                                 c.training.moe_keep_layers, rates};  // as the trainer's Run::plan weighs the rest
  const PassChoice chosen =
      resolve_by_step(spec, run, backend.device_memory_bytes(), c.training.recompute_layers < 0, weighed);
  if (passes) *passes = chosen;
  MachineLimits limits = read_machine_limits(backend);
  // Tier files on a RAM file system (tmpfs, ramfs) take RAM: what is left for the rest is less.
  const int64_t tier_in_ram = tier_bytes_in_memory(make_param_layout(spec), tier_settings_of(c), ranks);
  if (tier_in_ram > 0 && limits.mem_available >= 0) limits.mem_available = std::max<int64_t>(limits.mem_available - tier_in_ram, 0);
  if (run.checkpoints == CheckpointPlacement::host && limits.mem_available >= 0) {
    // Checkpoints in host RAM, asked for or chosen because they do not fit the GPU: named apart from the store.
    const MemoryPlan plan = plan_memory(spec, run);
    const int64_t need = gpu ? plan.host.ram_bytes() : cpu_backend_host_bytes(spec, run);
    MT_REQUIRE(need <= limits.mem_available,
               "{}: training.activation_checkpoints {}: the activation checkpoints in host RAM take {} ({} checkpoints "
               "of {} tokens at checkpoint_interval {}), {} with the rest of the run, but {} of host RAM is available "
               "(MemAvailable)", c.source.string(), c.training.activation_checkpoints == "auto"
                   ? std::string("auto (host: they do not fit the GPU)") : c.training.activation_checkpoints,
               bytes(plan.host.checkpoint_bytes), (spec.num_layers + run.checkpoint_interval - 1) / run.checkpoint_interval,
               run.batch_size / std::max<int64_t>(run.passes, 1) * run.seq_len, run.checkpoint_interval, bytes(need),
               bytes(limits.mem_available));
  }
  const std::string shortfall = preflight_shortfall(spec, run, gpu, limits);
  MT_REQUIRE(shortfall.empty(),
             "{}{}; size the run with `megatrain calc-resource --model {} --seq {} --batch {} --ranks {} "
             "--gpu-mem GiB --ram GiB`", shortfall,
             tier_in_ram > 0 ? MT_FORMAT(" (after the {} of tier files on a RAM file system)", bytes(tier_in_ram))
                             : std::string(),
             c.model.name, run.seq_len, run.batch_size, ranks);
  if (tier_in_ram > 0)
    log::info("state tier: {} of its files are on a RAM file system (tmpfs or ramfs): they count against host RAM",
              bytes(tier_in_ram));
  const MemoryPlan plan = plan_memory(spec, run);
  if (plan.host.offload != OffloadMode::none) log_tier_prediction(c, spec, run, plan.host, gpu);
  log::info("memory plan: host {} ({} B/parameter){}{}; {} pass(es) in micro-batches of {} sequences; {} of {} layers "
            "recompute in backward{}", bytes(plan.host.ram_bytes()), plan.host.bytes_per_parameter(),
            plan.host.offload == OffloadMode::none
                ? std::string()
                : MT_FORMAT(", NVMe {} (store.offload {}: {} B/parameter), {} of state read and written per step",
                            bytes(plan.host.nvme_bytes), offload_mode_name(plan.host.offload),
                            plan.host.nvme_per_parameter, bytes(plan.host.nvme_step_bytes())),
            gpu ? MT_FORMAT(", GPU {} of {}", bytes(plan.gpu.total()), bytes(backend.device_memory_bytes())) : "",
            run.passes, plan.gpu.micro_batch_size, run.recompute_layers, spec.num_layers,
            run.recompute_layers < spec.num_layers
                ? MT_FORMAT(", the others keep their activations ({})", bytes(plan.gpu.saved_layers)) : "");
  if (run.cudnn_attention) log::info("attention plan: {}", CudnnAttentionPlan(run.runtime).describe_plan(plan.gpu));
  if (run.checkpoints == CheckpointPlacement::host && gpu)
    log::info("activation checkpoints in page-locked host RAM: {}, their staging buffers {} on the GPU",
              bytes(plan.gpu.host_checkpoints), bytes(plan.gpu.checkpoints));
  else if (run.checkpoints == CheckpointPlacement::host)
    log::info("activation checkpoints in host slots, copied through two staging buffers of the CPU backend");
  if (count_active_parameters(spec) != plan.host.parameters) {  // mixture of experts: memory on all, FLOPs on active
    const StepBound b = step_bound(spec, run, rates);
    const int64_t pass_tokens = run.batch_size / std::max<int64_t>(run.passes, 1) * run.seq_len;
    log::info("MoE: {:.3f} B parameters in memory, {:.3f} B active per token; at the plan's step rates a pass below {} tokens "
              "waits for PCIe and a step's first pass below {} tokens for the optimizer (this run: {} per pass, the "
              "first waiting about {:.2f} s with every update on the CPU){}",
              static_cast<double>(plan.host.parameters) / 1e9, static_cast<double>(count_active_parameters(spec)) / 1e9,
              b.pcie_bound_tokens, b.optimizer_bound_tokens, pass_tokens, b.first_pass_wait_seconds,
              pass_tokens < std::max(b.pcie_bound_tokens, b.optimizer_bound_tokens)
                  ? MT_FORMAT("; recommended {} sequences a pass",
                              advise_pass_batch(spec, run, backend.device_memory_bytes(), rates).batch)
                  : "");
  }
  return run;
}

}  // namespace mt
