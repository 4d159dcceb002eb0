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
#include "dist/numa_binding.h"
#include "plan/sequence_limit.h"
#include "store/shared_memory_check.h"

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

}  // namespace

RunShape run_shape(const Config& c, int ranks, int gpus) {
  RunShape r;
  r.dtype = dtype_from_name(c.model.dtype);
  r.stream_dtype = stream_dtype_of(c);
  r.seq_len = c.dataset.max_seq_len;
  r.batch_size = (c.training.batch_size + gpus - 1) / gpus;
  r.micro_batch_size = c.training.micro_batch_size;
  r.passes = c.training.gradient_accumulation_steps;
  r.checkpoint_interval = c.training.checkpoint_interval;
  if (c.training.recompute_layers >= 0) r.recompute_layers = c.training.recompute_layers;
  r.weight_slots = 2;
  r.ranks = ranks;
  return r;
}

std::string preflight_shortfall(const ModelSpec& spec, const RunShape& run, bool gpu, const MachineLimits& limits) {
  const HostPlan host = plan_host(spec, run.stream_dtype, run.ranks);
  const int64_t host_need = gpu ? host.store_bytes : cpu_backend_host_bytes(spec, run);
  if (limits.mem_available >= 0 && host_need > limits.mem_available)
    return MT_FORMAT("host RAM: the run needs {} ({} B/parameter × {:.3f} B parameters{}) but only {} is available "
                     "(MemAvailable)", bytes(host_need), host.bytes_per_parameter(),
                     static_cast<double>(host.parameters) / 1e9, gpu ? "" : " plus CPU-backend activations",
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
                       bytes(g.segment + g.layer_workspace + g.head + g.batch_arrays + g.gemm_workspace),
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
  throw Error(MT_FORMAT(
             "{}: one sequence of dataset.max_seq_len {} tokens of model {} does not fit the GPU's {}: the longest "
             "that fits is {} tokens (batch 1, every layer recomputing)", c.source.string(), run.seq_len,
             c.model.name, bytes(gpu_bytes), limit.memory_tokens));
}

RunShape preflight(const Config& c, const ModelSpec& spec, const Backend& backend, int ranks, int gpus) {
  RunShape run = run_shape(c, ranks, gpus);
  const bool gpu = backend.device_memory_bytes() > 0;
  require_sequence_fits(c, spec, run, backend);
  resolve_auto(spec, run, backend.device_memory_bytes(), c.training.recompute_layers < 0);
  const std::string shortfall = preflight_shortfall(spec, run, gpu, read_machine_limits(backend));
  MT_REQUIRE(shortfall.empty(),
             "{}; size the run with `megatrain calc-resource --model {} --seq {} --batch {} --ranks {} "
             "--gpu-mem GiB --ram GiB`", shortfall, c.model.name, run.seq_len, run.batch_size, ranks);
  const MemoryPlan plan = plan_memory(spec, run);
  log::info("memory plan: host {} ({} B/parameter){}; {} pass(es) in micro-batches of {} sequences; {} of {} layers "
            "recompute in backward{}", bytes(plan.host.store_bytes), plan.host.bytes_per_parameter(),
            gpu ? MT_FORMAT(", GPU {} of {}", bytes(plan.gpu.total()), bytes(backend.device_memory_bytes())) : "",
            run.passes, plan.gpu.micro_batch_size, run.recompute_layers, spec.num_layers,
            run.recompute_layers < spec.num_layers
                ? MT_FORMAT(", the others keep their activations ({})", bytes(plan.gpu.saved_layers)) : "");
  return run;
}

}  // namespace mt
