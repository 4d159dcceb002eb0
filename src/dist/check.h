// The MPI and hwloc members of the check macro family (src/core/check.h), and the job-wide fatal error path.
// Invariant: a failed check, or an error that ends the job, prints exactly one line
// "megatrain: error: [rank R on HOST] ..." (the tag only when several ranks run) and ends every rank:
// MPI_Abort(MPI_COMM_WORLD, 1) with several ranks, exit status 1 with one. No rank ever ends alone.
#pragma once
#include <string>

#include "core/check.h"

namespace mt::dist {

// Prints the error line and ends the whole job; callable from any thread, before or after MPI_Init.
[[noreturn]] void abort_job(const std::string& message);

// main()'s handler: with several ranks the same as abort_job; with one, prints the line and returns 1.
int end_job_with_error(const std::string& message);

std::string mpi_error_text(int code);
std::string errno_text();

}  // namespace mt::dist

// MT_CHECK_MPI(MPI_Barrier(comm)): any return other than MPI_SUCCESS ends the job, naming the call.
#define MT_CHECK_MPI(stmt) \
  MT_CHECK_CALL(abort_job, "MPI", stmt, mt_rc_ == MPI_SUCCESS, ::mt::dist::mpi_error_text(mt_rc_))

// MT_CHECK_HWLOC(hwloc_topology_load(t)): a negative return ends the job, naming the call and errno.
#define MT_CHECK_HWLOC(stmt) MT_CHECK_CALL(abort_job, "hwloc", stmt, mt_rc_ >= 0, ::mt::dist::errno_text())
