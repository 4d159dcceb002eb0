// The fatal error path and the check macros' reporting (see check.h).
#include "dist/check.h"

#include <mpi.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/exit_cleanup.h"
#include "dist/context.h"

namespace mt::dist {
namespace {

// Several ranks: the error line names the rank and host that saw the error.
bool several_ranks() { return initialized() && context().size > 1; }

void print_error(const std::string& message) {
  std::string line = "megatrain: error: ";
  if (several_ranks()) line += "[rank " + std::to_string(context().rank) + " on " + context().host + "] ";
  line += message + "\n";
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace

void abort_job(const std::string& message) {
  print_error(message);
  exit_cleanup::remove_registered();  // what the failed run created and unwinding would have removed
  if (several_ranks()) MPI_Abort(MPI_COMM_WORLD, 1);
  std::fflush(stdout);
  std::_Exit(1);
}

int end_job_with_error(const std::string& message) {
  if (several_ranks()) abort_job(message);
  print_error(message);
  return 1;
}

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace mt::dist
