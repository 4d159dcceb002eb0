// NUMA binding of this rank with hwloc: one rank per NUMA domain (a rank of a node with more domains than
// ranks gets several, round-robin sharing of a domain's cores when there are more ranks than domains),
// CPU and memory binding, and the OpenMP thread count. Invariant: runs before the first OpenMP region,
// so every thread of the rank (OpenMP, OpenBLAS, the optimizer thread) inherits the binding.
#pragma once
#include <string>
#include <vector>

#include "dist/context.h"

namespace mt::dist {

struct Binding {
  std::string numa_nodes;   // OS indexes, list form: "0", "0-1"
  std::string cpus;         // OS indexes of the processing units, list form
  int cores = 0;
  int threads = 1;          // OpenMP threads of this rank
  std::string by;           // who chose the binding: "megatrain", or the launcher's explicit policy
  std::string note;         // anything that did not apply (empty when all did)
  int numa_node = -1;       // OS index of the one NUMA node the rank is bound to; -1 when several
};

// The launcher's explicit binding (mpirun --bind-to numa|socket|core...) is kept; otherwise, and with
// --bind-to none, this rank binds itself as plan_rank_share says. OMP_NUM_THREADS, when set, wins over
// the core count.
Binding bind_rank(const Context& ctx);

// The NUMA node (OS index) this rank is bound to, once bind_rank has run; -1 when unbound or bound to several.
int bound_numa_node();

// Logs every rank's binding (bind_rank's, or "not bound") from rank 0, in rank order; collective over the world.
void log_bindings(const Context& ctx);

// The NUMA domains of a node (by their cores) that node rank `rank` of `ranks` uses, and the range of
// their cores (indexes into the concatenated core lists of those domains) that it binds to.
struct RankShare {
  std::vector<int> domains;
  int first_core = 0, core_count = 0;
};
RankShare plan_rank_share(int rank, int ranks, const std::vector<int>& cores_per_domain);

// This node's NUMA domains with CPUs, in the order plan_rank_share numbers them.
struct DomainInfo {
  int os_index = 0;   // the kernel's node number (/sys/devices/system/node/node<os_index>)
  int cores = 0;
};
std::vector<DomainInfo> numa_domain_list();

}  // namespace mt::dist
