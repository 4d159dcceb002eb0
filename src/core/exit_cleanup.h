// Files a failed run created and must not leave behind (the state tier's files: gigabytes on an NVMe drive) when
// the job ends on an error path that does not unwind (dist::abort_job: another thread's error, MPI_Abort).
// Their owner registers each file when it creates it and unregisters it when it removes it; abort_job removes
// whatever is still registered before the process ends. Invariant: thread-safe; removal never throws.
#pragma once
#include <string>

namespace mt::exit_cleanup {

void remove_on_abort(const std::string& path);
void forget(const std::string& path);
// Removes every registered file (abort_job, once, on the way out).
void remove_registered();

}  // namespace mt::exit_cleanup
