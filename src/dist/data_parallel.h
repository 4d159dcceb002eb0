// Data-parallel roles of a job (DESIGN.md §5): on every node the first `per_node` ranks each drive one GPU
// and train on their share of the global batch; every rank of a node updates its slices of the node's store,
// a full replica. Invariants: every node has the same number of ranks; compute ranks are numbered node by node
// in world-rank order (dp rank = node_index · per_node + node_rank); `comm` joins exactly the compute ranks.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <string>

#include "dist/context.h"

namespace mt::dist {

struct DataParallel {
  MPI_Comm comm = MPI_COMM_NULL;  // the compute ranks of every node; MPI_COMM_NULL on the other ranks
  MPI_Comm node_comm = MPI_COMM_NULL;  // this node's compute ranks (its rank 0 leads the node); null elsewhere
  int rank = 0, size = 1;         // among the compute ranks
  int per_node = 1;               // compute ranks (GPUs) per node
  int node_index = 0, nodes = 1;  // this node among the job's nodes
  int device = 0;                 // this compute rank's GPU: its index among the host's compute ranks, modulo
                                  // the visible devices
  bool computes() const { return comm != MPI_COMM_NULL; }
  bool leads_node() const { return computes() && rank % per_node == 0; }  // node rank 0: submits the steps
};

// Collective over the world. `per_node` is world rank 0's (others pass anything); `visible_devices` is this
// rank's count of visible GPUs (0 on CPU). Throws mt::Error on unequal node sizes or per_node > node size.
DataParallel make_data_parallel(int per_node, int visible_devices);

// Every compute rank must report the same `value` of `what` (e.g. the compute backend): throws mt::Error naming
// the first rank, and its host, whose value differs from compute rank 0's. Collective over the compute ranks.
void require_same(const DataParallel& dp, const std::string& what, const std::string& value);

// Sums `n` doubles over the compute ranks, in place (every compute rank gets the same values).
void all_reduce_sum(const DataParallel& dp, double* values, int n);

}  // namespace mt::dist
