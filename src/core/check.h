// The check macro family for library calls — CUDA, cuBLAS, NCCL, MPI, hwloc — built on one macro, MT_CHECK_CALL:
// a failed call is reported in one line, "<library> call failed at <file>:<line>: `<statement>`: <the library's
// message>". How it then ends: `throw` raises mt::Error (the job's handler turns it into the job-wide error line
// and ends every rank); `abort` ends the job where it stands (MPI and hwloc: a rank left waiting in a collective
// would hang) through the handler src/dist installs, which names the rank and calls MPI_Abort.
// Invariant: a check never returns after a failure; the message names the library, the call and its place.
#pragma once
#include <string>

namespace mt {

enum class CheckFailure { throw_error, abort_job };

[[noreturn]] void check_failed(CheckFailure failure, const char* library, const char* statement, const char* file,
                               int line, const std::string& detail);

// What `abort_job` failures call (src/dist installs dist::abort_job); until then: the line on stderr, exit 1.
using JobAbortHandler = void (*)(const std::string& message);
void set_job_abort_handler(JobAbortHandler handler);

}  // namespace mt

// MT_CHECK_CALL(throw_error | abort_job, "LIB", statement, ok, detail): `ok` and `detail` may read the statement's
// result as mt_rc_.
#define MT_CHECK_CALL(failure, library, stmt, ok, detail)                                                     \
  do {                                                                                                        \
    const auto mt_rc_ = (stmt);                                                                               \
    if (!(ok)) ::mt::check_failed(::mt::CheckFailure::failure, library, #stmt, __FILE__, __LINE__, (detail)); \
  } while (0)
