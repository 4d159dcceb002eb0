// Data-parallel roles (see data_parallel.h).
#include "dist/data_parallel.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "dist/check.h"
#include "dist/numa_binding.h"

namespace mt::dist {
namespace {

// Every rank's `mine`, in rank order, on every rank of comm.
std::vector<std::string> all_gather_strings(const std::string& mine, MPI_Comm comm) {
  int size = 1;
  MT_CHECK_MPI(MPI_Comm_size(comm, &size));
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<size_t>(size)), offsets(static_cast<size_t>(size), 0);
  MT_CHECK_MPI(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm));
  for (int r = 1; r < size; ++r) offsets[static_cast<size_t>(r)] = offsets[static_cast<size_t>(r) - 1] + lengths[static_cast<size_t>(r) - 1];
  std::string all(static_cast<size_t>(offsets.back() + lengths.back()), '\0');
  MT_CHECK_MPI(MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, comm));
  std::vector<std::string> out;
  for (int r = 0; r < size; ++r)
    out.push_back(all.substr(static_cast<size_t>(offsets[static_cast<size_t>(r)]), static_cast<size_t>(lengths[static_cast<size_t>(r)])));
  return out;
}

}  // namespace

std::vector<int> assign_devices(const std::vector<int>& rank_numa_nodes, const std::vector<int>& gpu_numa_nodes) {
  const size_t ranks = rank_numa_nodes.size(), gpus = gpu_numa_nodes.size();
  std::vector<int> device(ranks, -1);
  const bool known = std::none_of(rank_numa_nodes.begin(), rank_numa_nodes.end(), [](int n) { return n < 0; }) &&
                     std::none_of(gpu_numa_nodes.begin(), gpu_numa_nodes.end(), [](int n) { return n < 0; });
  if (gpus == 0) return std::vector<int>(ranks, 0);
  if (!known || ranks > gpus) {
    for (size_t r = 0; r < ranks; ++r) device[r] = static_cast<int>(r % gpus);
    return device;
  }
  std::vector<bool> taken(gpus, false);
  for (size_t r = 0; r < ranks; ++r)
    for (size_t g = 0; g < gpus; ++g)
      if (!taken[g] && gpu_numa_nodes[g] == rank_numa_nodes[r]) {
        device[r] = static_cast<int>(g);
        taken[g] = true;
        break;
      }
  for (size_t r = 0; r < ranks; ++r)
    for (size_t g = 0; g < gpus && device[r] < 0; ++g)
      if (!taken[g]) {
        device[r] = static_cast<int>(g);
        taken[g] = true;
      }
  return device;
}

DataParallel make_data_parallel(int per_node, const std::vector<int>& gpu_numa_nodes) {
  const Context& ctx = context();
  MT_CHECK_MPI(MPI_Bcast(&per_node, 1, MPI_INT, 0, ctx.world));
  int sizes[2] = {ctx.node_size, -ctx.node_size}, extremes[2] = {};
  MT_CHECK_MPI(MPI_Allreduce(sizes, extremes, 2, MPI_INT, MPI_MAX, ctx.world));
  MT_REQUIRE(extremes[0] == -extremes[1],
             "the job's nodes have unequal numbers of ranks (from {} to {}); launch the same number of ranks on "
             "every node (e.g. mpirun --map-by ppr:N:node)", -extremes[1], extremes[0]);
  MT_REQUIRE(per_node >= 1 && per_node <= ctx.node_size,
             "training.gpus_per_node: {} GPU rank(s) per node, but the node {} runs {} rank(s); launch at least one "
             "rank per GPU", per_node, ctx.host, ctx.node_size);
  DataParallel dp;
  dp.per_node = per_node;
  dp.nodes = ctx.size / ctx.node_size;
  // Node index: the rank of the node's rank 0 among the nodes' first ranks, told to the rest of the node.
  MPI_Comm leaders = MPI_COMM_NULL;
  MT_CHECK_MPI(MPI_Comm_split(ctx.world, ctx.node_rank == 0 ? 0 : MPI_UNDEFINED, ctx.rank, &leaders));
  if (leaders != MPI_COMM_NULL) {
    MT_CHECK_MPI(MPI_Comm_rank(leaders, &dp.node_index));
    MT_CHECK_MPI(MPI_Comm_free(&leaders));
  }
  MT_CHECK_MPI(MPI_Bcast(&dp.node_index, 1, MPI_INT, 0, ctx.node));
  const bool computes = ctx.node_rank < per_node;
  MT_CHECK_MPI(MPI_Comm_split(ctx.world, computes ? 0 : MPI_UNDEFINED, dp.node_index * per_node + ctx.node_rank,
                              &dp.comm));
  MT_CHECK_MPI(MPI_Comm_split(ctx.node, computes ? 0 : MPI_UNDEFINED, ctx.node_rank, &dp.node_comm));
  if (computes) {
    MT_CHECK_MPI(MPI_Comm_rank(dp.comm, &dp.rank));
    MT_CHECK_MPI(MPI_Comm_size(dp.comm, &dp.size));
    MT_CHECK_MPI(MPI_Comm_set_errhandler(dp.comm, MPI_ERRORS_RETURN));
  } else {
    dp.rank = -1;
    dp.size = per_node * dp.nodes;
  }
  // The compute ranks of one host (which may hold several simulated nodes) share out its GPUs by NUMA node.
  MPI_Comm host = MPI_COMM_NULL, host_computes = MPI_COMM_NULL;
  MT_CHECK_MPI(MPI_Comm_split_type(ctx.world, MPI_COMM_TYPE_SHARED, ctx.rank, MPI_INFO_NULL, &host));
  MT_CHECK_MPI(MPI_Comm_split(host, computes ? 0 : 1, ctx.rank, &host_computes));
  int host_index = 0, host_ranks = 1;
  MT_CHECK_MPI(MPI_Comm_rank(host_computes, &host_index));
  MT_CHECK_MPI(MPI_Comm_size(host_computes, &host_ranks));
  std::vector<int> rank_nodes(static_cast<size_t>(host_ranks));
  const int mine = bound_numa_node();
  MT_CHECK_MPI(MPI_Allgather(&mine, 1, MPI_INT, rank_nodes.data(), 1, MPI_INT, host_computes));
  MT_CHECK_MPI(MPI_Comm_free(&host_computes));
  MT_CHECK_MPI(MPI_Comm_free(&host));
  dp.numa_node = mine;
  dp.device = gpu_numa_nodes.empty() ? 0 : assign_devices(rank_nodes, gpu_numa_nodes)[static_cast<size_t>(host_index)];
  return dp;
}

void require_same(const DataParallel& dp, const std::string& what, const std::string& value) {
  if (dp.size <= 1) return;
  const std::vector<std::string> values = all_gather_strings(value, dp.comm);
  const std::vector<std::string> hosts = all_gather_strings(context().host, dp.comm);
  for (int r = 1; r < dp.size; ++r)
    MT_REQUIRE(values[static_cast<size_t>(r)] == values[0],
               "data-parallel GPU rank {} on {} has {} '{}' while rank 0 on {} has '{}': every GPU rank needs the same "
               "(a node without a usable GPU, or a different build?)", r, hosts[static_cast<size_t>(r)], what,
               values[static_cast<size_t>(r)], hosts[0], values[0]);
}

std::string describe_gpu_ranks(const DataParallel& dp) {
  const std::string mine = context().host + ": GPU " + std::to_string(dp.device) +
                           (dp.numa_node >= 0 ? " (NUMA node " + std::to_string(dp.numa_node) + ")" : "");
  const std::vector<std::string> all = all_gather_strings(mine, dp.comm);
  std::string out;
  for (size_t r = 0; dp.rank == 0 && r < all.size(); ++r)
    out += (r ? ", " : "") + std::string("rank ") + std::to_string(r) + " on " + all[r];
  return out;
}

void all_reduce_sum(const DataParallel& dp, double* values, int n) {
  if (dp.size <= 1) return;
  MT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, values, n, MPI_DOUBLE, MPI_SUM, dp.comm));
}

std::vector<double> all_gather(const DataParallel& dp, const std::vector<double>& mine) {
  if (dp.size <= 1) return mine;
  std::vector<int> counts(static_cast<size_t>(dp.size)), offsets(static_cast<size_t>(dp.size), 0);
  const int count = static_cast<int>(mine.size());
  MT_CHECK_MPI(MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, dp.comm));
  for (size_t r = 1; r < counts.size(); ++r) offsets[r] = offsets[r - 1] + counts[r - 1];
  std::vector<double> all(static_cast<size_t>(offsets.back() + counts.back()));
  MT_CHECK_MPI(MPI_Allgatherv(mine.data(), count, MPI_DOUBLE, all.data(), counts.data(), offsets.data(), MPI_DOUBLE,
                              dp.comm));
  return all;
}

}  // namespace mt::dist
