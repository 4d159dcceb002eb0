// MPI start-up and shutdown (see context.h).
#include "dist/context.h"

#include <cstdlib>

#include "core/fault_hooks.h"
#include "dist/check.h"

namespace mt::dist {
namespace {

Context g_context;
bool g_initialized = false;

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (g_context.node != MPI_COMM_NULL) MPI_Comm_free(&g_context.node);
  MPI_Finalize();
}

}  // namespace

void init(int* argc, char*** argv) {
  if (g_initialized) return;
  set_job_abort_handler(abort_job);  // MPI and hwloc check failures end every rank
  int provided = 0;
  // MULTIPLE: a checkpoint written in the background makes its collective calls (world/node) on its own
  // thread while data-parallel training reduces losses and host gradients on its own communicator.
  MT_CHECK_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
  g_initialized = true;
  std::atexit(finalize_at_exit);
  // Failures return to the caller, so MT_CHECK_MPI names them and aborts the job itself.
  MT_CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  Context& c = g_context;
  c.world = MPI_COMM_WORLD;
  MT_CHECK_MPI(MPI_Comm_rank(c.world, &c.rank));
  MT_CHECK_MPI(MPI_Comm_size(c.world, &c.size));
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MT_CHECK_MPI(MPI_Get_processor_name(name, &len));
  c.host.assign(name, static_cast<size_t>(len));
  if (provided < MPI_THREAD_MULTIPLE)
    abort_job("the MPI library grants thread level " + std::to_string(provided) +
              "; megatrain needs MPI_THREAD_MULTIPLE (" + std::to_string(MPI_THREAD_MULTIPLE) +
              "): use an MPI built with thread support (Open MPI 4 and MPICH 4 have it)");
  // Test hook (core/fault_hooks.h): every k consecutive ranks one "node" (a sub-communicator of the shared-memory
  // one), so multi-node replicas are testable on one machine.
  if (const int per_node = fault_hooks().ranks_per_node; per_node > 0)
    MT_CHECK_MPI(MPI_Comm_split(c.world, c.rank / per_node, c.rank, &c.node));
  else
    MT_CHECK_MPI(MPI_Comm_split_type(c.world, MPI_COMM_TYPE_SHARED, c.rank, MPI_INFO_NULL, &c.node));
  MT_CHECK_MPI(MPI_Comm_rank(c.node, &c.node_rank));
  MT_CHECK_MPI(MPI_Comm_size(c.node, &c.node_size));
}

const Context& context() {
  if (!g_initialized) init(nullptr, nullptr);
  return g_context;
}

bool initialized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return g_initialized && !finalized;
}

}  // namespace mt::dist
