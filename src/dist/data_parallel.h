// Data-parallel roles of a job (DESIGN.md §5): on every node the first `per_node` ranks each drive one GPU
// and train on their share of the global batch; every rank of a node updates its slices of the node's store,
// a full replica. Invariants: every node has the same number of ranks; compute ranks are numbered node by node
// in world-rank order (dp rank = node_index · per_node + node_rank); `comm` joins exactly the compute ranks.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "dist/context.h"

namespace mt::dist {

struct DataParallel {
  MPI_Comm comm = MPI_COMM_NULL;  // the compute ranks of every node; MPI_COMM_NULL on the other ranks
  MPI_Comm node_comm = MPI_COMM_NULL;  // this node's compute ranks (its rank 0 leads the node); null elsewhere
  int rank = 0, size = 1;         // among the compute ranks
  int per_node = 1;               // compute ranks (GPUs) per node
  int node_index = 0, nodes = 1;  // this node among the job's nodes
  int device = 0;                 // this compute rank's GPU among the visible ones (assign_devices)
  int numa_node = -1;             // the NUMA node this rank is bound to (-1: several or unbound)
  bool computes() const { return comm != MPI_COMM_NULL; }
  bool leads_node() const { return computes() && rank % per_node == 0; }  // node rank 0: submits the steps
};

// Collective over the world. `per_node` is world rank 0's (others pass anything); `gpu_numa_nodes` has one entry
// per GPU this rank sees (none on CPU): the NUMA node each is attached to (-1 unknown). Throws mt::Error on
// unequal node sizes or per_node > node size.
DataParallel make_data_parallel(int per_node, const std::vector<int>& gpu_numa_nodes);

// The GPU of each compute rank of one host, in their order, from each rank's NUMA node (-1 unknown) and each GPU's:
// a rank takes the next free GPU of its own node, then the ranks left take the free GPUs in order; with more ranks
// than GPUs, or anything unknown, rank i takes GPU i mod n.
std::vector<int> assign_devices(const std::vector<int>& rank_numa_nodes, const std::vector<int>& gpu_numa_nodes);

// Every compute rank must report the same `value` of `what` (e.g. the compute backend): throws mt::Error naming
// the first rank, and its host, whose value differs from compute rank 0's. Collective over the compute ranks.
void require_same(const DataParallel& dp, const std::string& what, const std::string& value);

// "rank 0 on host: GPU 0 (NUMA node 0), ..." for every compute rank, on compute rank 0 (empty elsewhere).
// Collective over the compute ranks.
std::string describe_gpu_ranks(const DataParallel& dp);

// Sums `n` doubles over the compute ranks, in place (every compute rank gets the same values).
void all_reduce_sum(const DataParallel& dp, double* values, int n);

// Every compute rank's `mine` laid end to end in compute-rank order, on every compute rank (any lengths).
std::vector<double> all_gather(const DataParallel& dp, const std::vector<double>& mine);

}  // namespace mt::dist
