// The check macro family for MPI and hwloc calls, and the job-wide fatal error path.
// Invariant: a failed check, or an error that ends the job, prints exactly one line
// "megatrain: error: [rank R on HOST] ..." (the tag only when several ranks run) and ends every rank:
// MPI_Abort(MPI_COMM_WORLD, 1) with several ranks, exit status 1 with one. No rank ever ends alone.
#pragma once
#include <string>

namespace mt::dist {

// Prints the error line and ends the whole job; callable from any thread, before or after MPI_Init.
[[noreturn]] void abort_job(const std::string& message);

// main()'s handler: with several ranks the same as abort_job; with one, prints the line and returns 1.
int end_job_with_error(const std::string& message);

[[noreturn]] void fail_call(const char* library, const char* statement, const char* file, int line,
                            const std::string& detail);
std::string mpi_error_text(int code);
std::string errno_text();

}  // namespace mt::dist

// MT_CHECK_MPI(MPI_Barrier(comm)): any return other than MPI_SUCCESS ends the job, naming the call.
#define MT_CHECK_MPI(stmt)                                                                                   \
  do {                                                                                                       \
    const int mt_mpi_rc_ = (stmt);                                                                           \
    if (mt_mpi_rc_ != MPI_SUCCESS)                                                                           \
      ::mt::dist::fail_call("MPI", #stmt, __FILE__, __LINE__, ::mt::dist::mpi_error_text(mt_mpi_rc_));       \
  } while (0)

// MT_CHECK_HWLOC(hwloc_topology_load(t)): a negative return ends the job, naming the call and errno.
#define MT_CHECK_HWLOC(stmt)                                                                                 \
  do {                                                                                                       \
    if ((stmt) < 0) ::mt::dist::fail_call("hwloc", #stmt, __FILE__, __LINE__, ::mt::dist::errno_text());    \
  } while (0)
