// The space check of the filesystem that backs the node's MPI-3 shared windows (Open MPI's
// osc_sm_backing_directory, /dev/shm by default). Invariant: runs before the window exists, so a store
// that does not fit fails with a message naming the limit and the size needed, never with a SIGBUS later.
#pragma once
#include <cstdint>
#include <string>

namespace mt {

std::string shared_memory_dir();   // $OMPI_MCA_osc_sm_backing_directory, else /dev/shm
// The error line when `needed` bytes do not fit in `available` ones; empty when they fit.
std::string shared_memory_shortage(const std::string& dir, uint64_t needed, uint64_t available, int ranks);
// statvfs(shared_memory_dir()) against `needed`; throws mt::Error with shared_memory_shortage's line.
void require_shared_memory(uint64_t needed, int ranks);
std::string format_bytes(uint64_t bytes);   // "512 B", "1.5 MiB", "2.00 GiB"

}  // namespace mt
