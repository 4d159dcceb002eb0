// The check family's failure path (see check.h).
#include "core/check.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"

namespace mt {
namespace {

void default_abort(const std::string& message) {
  std::fputs(("megatrain: error: " + message + "\n").c_str(), stderr);
  std::fflush(stderr);
  std::_Exit(1);
}

std::atomic<JobAbortHandler> g_abort{default_abort};

}  // namespace

void set_job_abort_handler(JobAbortHandler handler) { g_abort.store(handler ? handler : default_abort); }

void check_failed(CheckFailure failure, const char* library, const char* statement, const char* file, int line,
                  const std::string& detail) {
  const std::string message = std::string(library) + " call failed at " + file + ":" + std::to_string(line) + ": `" +
                              statement + "`" + (detail.empty() ? "" : ": " + detail);
  if (failure == CheckFailure::throw_error) throw Error(message);
  g_abort.load()(message);
  std::_Exit(1);  // a handler that returned
}

}  // namespace mt
