// The node's host store and optimizer service (see node_store.h).
#include "cli/runtime/node_store.h"

#include <mpi.h>

#include <utility>

#include "dist/check.h"
#include "dist/context.h"

namespace mt {

NodeStore::NodeStore(const ParamLayout& layout, DType stream, const TierSettings& tier,
                     const OptimizerSettings& optimizer, bool computes, std::function<void()> on_checkpoint)
    : store_(layout, stream, tier), optimizer_(store_, optimizer, computes, std::move(on_checkpoint)) {}

void NodeStore::filled() const {
  MT_CHECK_MPI(MPI_Barrier(dist::context().node));  // the store is filled before any rank of the node streams it
}

}  // namespace mt
