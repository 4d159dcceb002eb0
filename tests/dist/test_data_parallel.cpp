// Data-parallel roles and collectives (dist/data_parallel.h). Under one process: one compute rank, sums are
// identities. Under `mpiexec -np 4` with MEGATRAIN_TEST_RANKS_PER_NODE=2 (ctest mpi.data_parallel_roles): two
// simulated nodes of two ranks, one GPU rank each — roles, node indices, sums and the same-backend check.
#include <string>
#include <vector>

#include "catch.h"
#include "core/error.h"
#include "dist/context.h"
#include "dist/data_parallel.h"

TEST_CASE("data-parallel roles: node ranks 0..per_node-1 compute, numbered node by node", "[dist][data-parallel]") {
  const mt::dist::Context& ctx = mt::dist::context();
  const mt::dist::DataParallel dp = mt::dist::make_data_parallel(1, {});
  CHECK(dp.per_node == 1);
  CHECK(dp.nodes == ctx.size / ctx.node_size);
  CHECK(dp.size == dp.nodes);
  CHECK(dp.computes() == (ctx.node_rank == 0));
  CHECK(dp.device == 0);
  if (dp.computes()) {
    CHECK(dp.rank == dp.node_index);
    CHECK(dp.leads_node());
    double v[2] = {1.0, static_cast<double>(dp.rank)};
    mt::dist::all_reduce_sum(dp, v, 2);
    CHECK(v[0] == dp.size);
    CHECK(v[1] == dp.size * (dp.size - 1) / 2.0);
    const std::string described = mt::dist::describe_gpu_ranks(dp);
    if (dp.rank == 0)
      CHECK_THAT(described, mt_test::contains("rank 0 on " + ctx.host + ": GPU 0") &&
                                mt_test::contains("rank " + std::to_string(dp.size - 1) + " on " + ctx.host));
    else
      CHECK(described.empty());
    mt::dist::require_same(dp, "compute backend", "cpu");  // the same everywhere: no error
    if (dp.size > 1)
      CHECK_THROWS_WITH(mt::dist::require_same(dp, "compute backend", dp.rank == 0 ? "cuda" : "cpu"),
                        mt_test::contains("data-parallel GPU rank 1 on " + ctx.host +
                                          " has compute backend 'cpu' while rank 0 on"));
  }
}

TEST_CASE("more GPU ranks per node than ranks is refused", "[dist][data-parallel]") {
  const mt::dist::Context& ctx = mt::dist::context();
  CHECK_THROWS_WITH(mt::dist::make_data_parallel(ctx.node_size + 1, {}),
                    mt_test::contains("training.gpus_per_node: " + std::to_string(ctx.node_size + 1) +
                                      " GPU rank(s) per node, but the node"));
}

TEST_CASE("GPUs go to the ranks of their own NUMA node", "[dist][gpu-mapping]") {
  using mt::dist::assign_devices;
  // A dual-socket node, GPUs 0-3 on node 0 and 4-7 on node 1, ranks alternating over the nodes (round-robin binding).
  CHECK(assign_devices({0, 1, 0, 1, 0, 1, 0, 1}, {0, 0, 0, 0, 1, 1, 1, 1}) == std::vector<int>{0, 4, 1, 5, 2, 6, 3, 7});
  // Two GPUs on node 0, ranks on nodes 0 and 1: the second rank takes the GPU left.
  CHECK(assign_devices({0, 1}, {0, 0}) == std::vector<int>{0, 1});
  CHECK(assign_devices({1, 0}, {0, 0}) == std::vector<int>{1, 0});
  // Fewer ranks than GPUs: each takes its own node's first.
  CHECK(assign_devices({1, 0}, {0, 0, 1, 1}) == std::vector<int>{2, 0});
  // Anything unknown, or more ranks than GPUs (one visible GPU per task under srun --gpus-per-task): in turn.
  CHECK(assign_devices({-1, 0}, {0, 1}) == std::vector<int>{0, 1});
  CHECK(assign_devices({0, 1}, {-1, 0}) == std::vector<int>{0, 1});
  CHECK(assign_devices({0, 1, 0}, {0}) == std::vector<int>{0, 0, 0});
  CHECK(assign_devices({0, 1}, {}) == std::vector<int>{0, 0});
}
