// Agreeing on the step to stop after (see graceful_stop.h).
#include "cli/train/graceful_stop.h"

#include <mpi.h>

#include "core/stop_signal.h"
#include "dist/check.h"

namespace mt {

bool stop_agreed(const dist::DataParallel& dp) {
  int mine = stop_signal::requested() != 0 ? 1 : 0, any = mine;
  if (dp.size > 1) MT_CHECK_MPI(MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, dp.comm));
  return any != 0;
}

}  // namespace mt
