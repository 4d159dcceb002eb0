// hwloc binding of ranks to NUMA domains (see numa_binding.h).
#include "dist/numa_binding.h"

#include <hwloc.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "core/log.h"
#include "dist/check.h"

namespace mt::dist {

RankShare plan_rank_share(int rank, int ranks, const std::vector<int>& cores_per_domain) {
  const int D = static_cast<int>(cores_per_domain.size());
  RankShare s;
  if (ranks <= D) {  // each rank owns whole domains
    for (int d = rank * D / ranks; d < (rank + 1) * D / ranks; ++d) {
      s.domains.push_back(d);
      s.core_count += cores_per_domain[static_cast<size_t>(d)];
    }
    return s;
  }
  const int d = rank % D;                        // round-robin over domains
  const int sharing = (ranks - d + D - 1) / D;   // ranks placed on domain d
  const int index = rank / D;                    // this rank among them
  const int cores = cores_per_domain[static_cast<size_t>(d)];
  s.domains = {d};
  if (sharing <= cores) {                        // split the domain's cores
    s.first_core = index * cores / sharing;
    s.core_count = (index + 1) * cores / sharing - s.first_core;
  } else {                                       // more ranks than cores: they share cores
    s.first_core = index % cores;
    s.core_count = 1;
  }
  return s;
}

namespace {

std::optional<Binding> g_binding;

struct Topology {
  hwloc_topology_t t = nullptr;
  Topology() {
    MT_CHECK_HWLOC(hwloc_topology_init(&t));
    MT_CHECK_HWLOC(hwloc_topology_load(t));
  }
  ~Topology() { hwloc_topology_destroy(t); }
};

struct Bitmap {
  hwloc_bitmap_t b = hwloc_bitmap_alloc();
  Bitmap() {
    if (!b) abort_job("hwloc: cannot allocate a bitmap");
  }
  ~Bitmap() { hwloc_bitmap_free(b); }
  Bitmap(const Bitmap&) = delete;
  Bitmap& operator=(const Bitmap&) = delete;
  std::string list() const {
    char* s = nullptr;
    MT_CHECK_HWLOC(hwloc_bitmap_list_asprintf(&s, b));
    std::string r(s);
    std::free(s);
    return r;
  }
};

// NUMA domains that have CPUs, in logical order, with their cores (PUs where hwloc sees no cores).
// Memory-only nodes (HBM, CXL) are left out: those whose CPUs equal or strictly contain another node's.
struct Domain {
  hwloc_obj_t node;
  std::vector<hwloc_obj_t> cores;
};

std::vector<Domain> numa_domains(hwloc_topology_t t) {
  const hwloc_obj_type_t unit = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  std::vector<Domain> out;
  const int n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t node = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    bool far = false;
    for (const Domain& d : out) far = far || hwloc_bitmap_isequal(d.node->cpuset, node->cpuset);
    for (int j = 0; j < n; ++j) {
      hwloc_obj_t other = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(j));
      far = far || (hwloc_bitmap_isincluded(other->cpuset, node->cpuset) &&
                    !hwloc_bitmap_isequal(other->cpuset, node->cpuset));
    }
    if (far) continue;
    Domain d{node, {}};
    for (hwloc_obj_t c = nullptr; (c = hwloc_get_next_obj_inside_cpuset_by_type(t, node->cpuset, unit, c));)
      d.cores.push_back(c);
    if (!d.cores.empty()) out.push_back(std::move(d));
  }
  return out;
}

int cores_intersecting(hwloc_topology_t t, hwloc_const_cpuset_t cpus) {
  const hwloc_obj_type_t unit = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  int n = 0;
  for (hwloc_obj_t c = nullptr; (c = hwloc_get_next_obj_by_type(t, unit, c));) n += hwloc_bitmap_intersects(c->cpuset, cpus);
  return n;
}

}  // namespace

static hwloc_topology_t topology() {
  static Topology loaded;  // once per process
  return loaded.t;
}

std::vector<DomainInfo> numa_domain_list() {
  std::vector<DomainInfo> out;
  for (const Domain& d : numa_domains(topology()))
    out.push_back({static_cast<int>(d.node->os_index), static_cast<int>(d.cores.size())});
  return out;
}

Binding bind_rank(const Context& ctx) {
  hwloc_topology_t t = topology();
  Binding b;
  Bitmap cpus, nodes;
  const char* policy = std::getenv("OMPI_MCA_hwloc_base_binding_policy");
  if (policy && *policy && std::strcmp(policy, "none") != 0) {
    MT_CHECK_HWLOC(hwloc_get_cpubind(t, cpus.b, HWLOC_CPUBIND_PROCESS));
    MT_CHECK_HWLOC(hwloc_cpuset_to_nodeset(t, cpus.b, nodes.b));
    b.cores = cores_intersecting(t, cpus.b);
    b.by = std::string("the launcher (--bind-to ") + policy + ")";
  } else {
    const std::vector<Domain> domains = numa_domains(t);
    if (domains.empty()) abort_job("hwloc: no NUMA domain with CPUs found");
    std::vector<int> cores_per_domain;
    for (const Domain& d : domains) cores_per_domain.push_back(static_cast<int>(d.cores.size()));
    const RankShare share = plan_rank_share(ctx.node_rank, ctx.node_size, cores_per_domain);
    std::vector<hwloc_obj_t> cores;
    for (int d : share.domains) {
      const Domain& domain = domains[static_cast<size_t>(d)];
      cores.insert(cores.end(), domain.cores.begin(), domain.cores.end());
      MT_CHECK_HWLOC(hwloc_bitmap_or(nodes.b, nodes.b, domain.node->nodeset));
    }
    for (int i = share.first_core; i < share.first_core + share.core_count; ++i)
      MT_CHECK_HWLOC(hwloc_bitmap_or(cpus.b, cpus.b, cores[static_cast<size_t>(i)]->cpuset));
    MT_CHECK_HWLOC(hwloc_set_cpubind(t, cpus.b, HWLOC_CPUBIND_PROCESS));
    b.cores = share.core_count;
    b.by = "megatrain";
  }
  // Memory: bound to the one node, interleaved over several. Best effort: containers often refuse memory
  // policies (EPERM without CAP_SYS_NICE), and pages still land where the bound threads first touch them.
  const int node_count = hwloc_bitmap_weight(nodes.b);
  if (hwloc_set_membind(t, nodes.b, node_count > 1 ? HWLOC_MEMBIND_INTERLEAVE : HWLOC_MEMBIND_BIND,
                        HWLOC_MEMBIND_BYNODESET) < 0)
    b.note = "memory binding refused (" + errno_text() + "), pages follow first touch";
  b.numa_nodes = nodes.list();
  if (node_count == 1) b.numa_node = hwloc_bitmap_first(nodes.b);
  b.cpus = cpus.list();
  b.cores = std::max(b.cores, 1);
  const char* omp_env = std::getenv("OMP_NUM_THREADS");
  if (omp_env && *omp_env) {
    b.threads = omp_get_max_threads();
  } else {
    b.threads = b.cores;
    omp_set_num_threads(b.threads);
  }
  g_binding = b;
  return b;
}

int bound_numa_node() { return g_binding ? g_binding->numa_node : -1; }

void log_bindings(const Context& ctx) {
  constexpr int kLine = 512;
  std::string line = fmt::format("rank {} on {}: not bound", ctx.rank, ctx.host);
  if (g_binding) {
    const Binding& b = *g_binding;
    line = fmt::format("rank {} on {}: NUMA node {}, cpus {} ({} core{}), {} OpenMP thread{}{}; bound by {}{}",
                       ctx.rank, ctx.host, b.numa_nodes, b.cpus, b.cores, b.cores == 1 ? "" : "s", b.threads,
                       b.threads == 1 ? "" : "s", std::getenv("OMP_NUM_THREADS") ? " (OMP_NUM_THREADS)" : "", b.by,
                       b.note.empty() ? "" : "; " + b.note);
  }
  line.resize(kLine - 1);
  std::vector<char> all(ctx.is_root() ? static_cast<size_t>(kLine) * static_cast<size_t>(ctx.size) : 0);
  MT_CHECK_MPI(MPI_Gather(line.c_str(), kLine, MPI_CHAR, all.data(), kLine, MPI_CHAR, 0, ctx.world));
  if (!ctx.is_root()) return;
  for (int r = 0; r < ctx.size; ++r) log::info("{}", std::string(all.data() + static_cast<size_t>(r) * kLine));
}

}  // namespace mt::dist
