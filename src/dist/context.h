// The MPI runtime of this process: MPI_Init_thread, the world and node communicators, rank roles, and
// MPI_Finalize at exit. Invariant: MPI is initialised once per process, before any other MPI use (main()
// calls init first; library tests get it from the first context() call); world rank 0 logs and writes
// checkpoints, the first ranks of each node drive its GPUs (dist/data_parallel.h), and every rank of the node
// runs the optimizer on its own slices of the node's host store.
#pragma once
#include <mpi.h>

#include <string>

namespace mt::dist {

struct Context {
  MPI_Comm world = MPI_COMM_NULL;
  MPI_Comm node = MPI_COMM_NULL;   // the ranks that share memory with this one (MPI_COMM_TYPE_SHARED)
  int rank = 0, size = 1;          // in world
  int node_rank = 0, node_size = 1;
  std::string host;
  bool is_root() const { return rank == 0; }
};

// MPI_THREAD_MULTIPLE: the main thread makes the training's MPI calls, a background checkpoint's thread its
// own collectives on other communicators; optimizer threads only ever call MPI_Abort (and a follower's
// checkpoint collectives, see cli/runtime/optimizer_service.h). Registers MPI_Finalize to run at exit.
void init(int* argc, char*** argv);
const Context& context();          // initialises MPI on first use when main() did not
bool initialized();                // init has run and MPI is not finalized yet

}  // namespace mt::dist
